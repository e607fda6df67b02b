package providers

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/llm"
)

const testKey = "sk-test-SECRET-0123456789abcdef"

func TestFromEnv(t *testing.T) {
	env := map[string]string{
		"OPENAI_API_KEY":    "k1, k2,k1",
		"GOOGLE_API_KEY":    "g1",
		"ANTHROPIC_API_KEY": "",
		"DEEPSEEK_BASE_URL": "http://127.0.0.1:9/",
		"DEEPSEEK_API_KEY":  "d1",
		"OLLAMA_BASE_URL":   "http://127.0.0.1:11434/v1",
	}
	cfgs := FromEnvFunc(func(k string) string { return env[k] })
	var got []string
	for _, c := range cfgs {
		got = append(got, c.ID+"="+string(c.APIKey)+"@"+c.BaseURL)
	}
	want := []string{
		"openai=k1@https://api.openai.com/v1",
		"openai=k2@https://api.openai.com/v1",
		"gemini=g1@https://generativelanguage.googleapis.com",
		"deepseek=d1@http://127.0.0.1:9",
		"ollama=@http://127.0.0.1:11434/v1",
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("FromEnv =\n%v\nwant\n%v", got, want)
	}
	for _, c := range cfgs {
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", c.ID, err)
		}
	}
}

func TestBuiltinQuirksAreExplicit(t *testing.T) {
	ds, _ := Builtin("deepseek")
	if !ds.Quirks.ThinkingObject || !ds.Quirks.EchoReasoningWithTools || !ds.Quirks.NoJSONSchema {
		t.Errorf("deepseek quirks = %+v", ds.Quirks)
	}
	oa, _ := Builtin("openai")
	if !oa.Quirks.MaxCompletionTokens || oa.Quirks.ThinkingObject {
		t.Errorf("openai quirks = %+v", oa.Quirks)
	}
	// A compatible endpoint inherits no quirks, whatever its URL says.
	c := Compatible("mine", "https://api.deepseek.com/", "k")
	if c.Quirks != (Quirks{}) || c.BaseURL != "https://api.deepseek.com" {
		t.Errorf("compatible = %+v", c)
	}
	if len(IDs()) != 8 {
		t.Errorf("IDs = %v", IDs())
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		cfg   Config
		field string
	}{
		{Config{Format: FormatOpenAI, BaseURL: "http://x", APIKey: "k"}, "id"},
		{Config{ID: "a", Format: "soap", BaseURL: "http://x", APIKey: "k"}, "format"},
		{Config{ID: "a", Format: FormatOpenAI, BaseURL: "ftp://x", APIKey: "k"}, "base_url"},
		{Config{ID: "a", Format: FormatOpenAI, BaseURL: "http://x"}, "api_key"},
	}
	for _, c := range cases {
		err := c.cfg.Validate()
		var ce *llm.ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("%+v: got %v, want ConfigError on %s", c.cfg, err, c.field)
		}
	}
}

// TestInvariant02_KeysNeverPrinted: every way of printing a Config, a
// Client or a Secret hides the key.
func TestInvariant02_KeysNeverPrinted(t *testing.T) {
	cfg := Compatible("gw", "http://127.0.0.1:1/v1", testKey)
	cl, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(cfg)
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("cfg", "cfg", cfg, "key", cfg.APIKey)
	outs := []string{
		fmt.Sprint(cfg), fmt.Sprintf("%v %+v %#v %s %q", cfg, cfg, cfg, cfg.APIKey, cfg.APIKey),
		fmt.Sprintf("%v %+v %#v", cl, cl.Config(), &cfg), cfg.String(), cl.String(), string(js), logged.String(),
	}
	for _, o := range outs {
		if strings.Contains(o, testKey) || strings.Contains(o, "SECRET") {
			t.Fatalf("key leaked: %s", o)
		}
	}
	if !strings.Contains(fmt.Sprint(cfg.APIKey), "REDACTED") {
		t.Fatalf("secret not marked redacted")
	}
}
