package providers

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// Format is a wire format.
type Format string

// The three wire formats.
const (
	FormatOpenAI    Format = "openai"    // Chat Completions and every compatible endpoint
	FormatAnthropic Format = "anthropic" // Messages
	FormatGemini    Format = "gemini"    // generateContent
)

// Quirks are the explicit differences between providers that share a wire
// format. They are set in the registry (or by the caller for a custom
// provider), never sniffed from a URL or a model name.
type Quirks = wire.Quirks

// Secret is an API key. Every way of printing it (String, %v, %+v, %#v, %s,
// %q, JSON, text marshalling) shows "[REDACTED]", so a Config can be logged.
type Secret string

const redacted = "[REDACTED]"

// String redacts the key.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString redacts the key.
func (s Secret) GoString() string { return `"` + s.String() + `"` }

// Format redacts the key for every verb.
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'q' {
		fmt.Fprintf(f, "%q", s.String())
		return
	}
	fmt.Fprint(f, s.String())
}

// MarshalText redacts the key.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Config is one provider credential: a provider id, its wire format, base
// URL, key and quirks. Several Configs may share an ID (one per key).
type Config struct {
	ID      string
	Format  Format
	BaseURL string
	APIKey  Secret
	Quirks  Quirks
	// Headers are static headers sent with every request.
	Headers map[string]string
	// KeyOptional marks providers that need no key (a local Ollama).
	KeyOptional bool
	// Models holds per-model capabilities by exact model name (Responses
	// marks a model served by the OpenAI Responses API). Do not modify it
	// after New.
	Models map[string]ModelCaps
}

// String describes the credential without its key.
func (c Config) String() string {
	key := "no key"
	if c.APIKey != "" {
		key = "key " + redacted
	}
	return fmt.Sprintf("%s (%s, %s, %s)", c.ID, c.Format, c.BaseURL, key)
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.ID == "":
		return configErr("id", "is empty")
	case c.Format != FormatOpenAI && c.Format != FormatAnthropic && c.Format != FormatGemini:
		return configErr("format", fmt.Sprintf("unknown format %q for provider %s", c.Format, c.ID))
	case c.BaseURL == "":
		return configErr("base_url", "is empty for provider "+c.ID)
	case !strings.HasPrefix(c.BaseURL, "http://") && !strings.HasPrefix(c.BaseURL, "https://"):
		return configErr("base_url", fmt.Sprintf("%q for provider %s is not an http(s) URL", c.BaseURL, c.ID))
	case c.APIKey == "" && !c.KeyOptional:
		return configErr("api_key", "is empty for provider "+c.ID)
	}
	return nil
}

type builtin struct {
	cfg     Config
	envKeys []string
}

// The built-in registry, in a stable order.
var builtins = []builtin{
	{Config{ID: "openai", Format: FormatOpenAI, BaseURL: "https://api.openai.com/v1",
		Quirks: Quirks{ReasoningEffort: true, MaxCompletionTokens: true}}, []string{"OPENAI_API_KEY"}},
	{Config{ID: "anthropic", Format: FormatAnthropic, BaseURL: "https://api.anthropic.com",
		Quirks: Quirks{AnthropicVersion: "2023-06-01"}}, []string{"ANTHROPIC_API_KEY"}},
	{Config{ID: "gemini", Format: FormatGemini, BaseURL: "https://generativelanguage.googleapis.com"},
		[]string{"GEMINI_API_KEY", "GOOGLE_API_KEY"}},
	{Config{ID: "deepseek", Format: FormatOpenAI, BaseURL: "https://api.deepseek.com",
		Quirks: Quirks{ThinkingObject: true, EchoReasoningWithTools: true, NoJSONSchema: true}}, []string{"DEEPSEEK_API_KEY"}},
	{Config{ID: "zai", Format: FormatOpenAI, BaseURL: "https://api.z.ai/api/paas/v4",
		Quirks: Quirks{ThinkingObject: true, ReasoningEffort: true}}, []string{"ZAI_API_KEY"}},
	{Config{ID: "kimi", Format: FormatOpenAI, BaseURL: "https://api.moonshot.ai/v1"},
		[]string{"MOONSHOT_API_KEY", "KIMI_API_KEY"}},
	{Config{ID: "openrouter", Format: FormatOpenAI, BaseURL: "https://openrouter.ai/api/v1",
		Quirks: Quirks{IncludeReasoning: true}}, []string{"OPENROUTER_API_KEY"}},
	{Config{ID: "ollama", Format: FormatOpenAI, BaseURL: "http://127.0.0.1:11434/v1", KeyOptional: true}, nil},
}

// IDs returns the built-in provider ids in registry order.
func IDs() []string {
	ids := make([]string, len(builtins))
	for i, b := range builtins {
		ids[i] = b.cfg.ID
	}
	return ids
}

// Builtin returns the configuration of a built-in provider, without a key.
func Builtin(id string) (Config, bool) {
	for _, b := range builtins {
		if b.cfg.ID == id {
			c := b.cfg
			return c, true
		}
	}
	return Config{}, false
}

// EnvKeys returns the environment variables that hold a built-in provider's
// key, in the order they are consulted.
func EnvKeys(id string) []string {
	for _, b := range builtins {
		if b.cfg.ID == id {
			return append([]string(nil), b.envKeys...)
		}
	}
	return nil
}

// Compatible returns the configuration of an OpenAI-compatible endpoint
// registered under a name of the caller's choosing. It inherits no quirks.
func Compatible(id, baseURL string, key Secret) Config {
	return Config{ID: id, Format: FormatOpenAI, BaseURL: strings.TrimRight(baseURL, "/"), APIKey: key, KeyOptional: key == ""}
}

// Getenv is how FromEnv reads the environment; tests may replace it.
type Getenv func(string) string

// FromEnv returns one Config per credential found in the environment: for
// each built-in provider, the first of its key variables that is set (a
// comma-separated value gives one credential per key) and <ID>_BASE_URL to
// override the base URL. Ollama is included only when OLLAMA_BASE_URL is set.
func FromEnv() []Config { return FromEnvFunc(os.Getenv) }

// FromEnvFunc is FromEnv over a custom lookup.
func FromEnvFunc(getenv Getenv) []Config {
	var out []Config
	for _, b := range builtins {
		cfg := b.cfg
		base := strings.TrimSpace(getenv(strings.ToUpper(cfg.ID) + "_BASE_URL"))
		if base != "" {
			cfg.BaseURL = strings.TrimRight(base, "/")
		}
		if cfg.KeyOptional {
			if base != "" {
				out = append(out, cfg)
			}
			continue
		}
		var raw string
		for _, k := range b.envKeys {
			if v := strings.TrimSpace(getenv(k)); v != "" {
				raw = v
				break
			}
		}
		for _, k := range splitKeys(raw) {
			c := cfg
			c.APIKey = Secret(k)
			out = append(out, c)
		}
	}
	return out
}

func splitKeys(raw string) []string {
	var keys []string
	seen := map[string]bool{}
	for _, k := range strings.Split(raw, ",") {
		k = strings.TrimSpace(k)
		if k != "" && !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	return keys
}

// EnvVars lists every environment variable the registry reads, sorted.
func EnvVars() []string {
	var v []string
	for _, b := range builtins {
		v = append(v, b.envKeys...)
		v = append(v, strings.ToUpper(b.cfg.ID)+"_BASE_URL")
	}
	sort.Strings(v)
	return v
}

func configErr(field, msg string) error { return &llm.ConfigError{Field: field, Msg: msg} }
