package runtime

import (
	"fmt"
	"path"
	"strings"

	"github.com/chorusrt/chorus/llm"
)

// Model names.
//
// A model is named provider/model ("openai/gpt-4.1-mini"), by an alias
// (WithAlias), or bare ("gpt-4.1-mini"), the way a provider's own SDK names
// it. A name with a '/' is provider/model, split at its first '/'; a name
// without one is bare. A model whose own name holds a slash
// ("meta-llama/Llama-3.3-70B") is named with its provider
// ("openrouter/meta-llama/Llama-3.3-70B"), matched by a pattern
// ("meta-llama/*"), or sent on the gateway's provider-scoped routes.
//
// A bare name is served by the provider of the first WithModelPattern whose
// pattern it matches, and otherwise only where the caller names a default
// provider (Resolve): the gateway names the provider whose API the client
// speaks, a batch file in OpenAI's format names "openai". Chorus never
// guesses a provider from how a model is spelled: only a pattern the
// operator configured does that.

// modelPattern routes bare names matching a glob to a provider.
type modelPattern struct {
	pattern  string
	provider string
}

// WithModelPattern serves bare model names (neither provider/model nor an
// alias) that match pattern, a path.Match glob ("gpt-*", "claude-*"), on
// provider: "gpt-4o-mini" becomes provider + "/gpt-4o-mini". Patterns are
// tried in the order given; the first that matches wins. An unregistered
// provider or a malformed pattern fails New.
func WithModelPattern(pattern, provider string) Option {
	return func(o *options) {
		if _, err := path.Match(pattern, ""); err != nil || pattern == "" {
			o.err = &llm.ConfigError{Field: "model pattern", Msg: fmt.Sprintf("%q is not a glob pattern", pattern)}
			return
		}
		if provider == "" || strings.Contains(provider, "/") {
			o.err = &llm.ConfigError{Field: "model pattern " + pattern, Msg: fmt.Sprintf("%q is not a provider id", provider)}
			return
		}
		o.patterns = append(o.patterns, modelPattern{pattern: pattern, provider: provider})
	}
}

// ModelNotFoundError is a model name nothing serves: not an alias, not
// provider/model with a registered provider, and a bare name no pattern
// and no default provider takes. Its message says how to name a model.
type ModelNotFoundError struct {
	Model string
	// Registered are the registered providers, in registration order.
	Registered []string
	// Default is the default provider asked for, when it is not registered.
	Default string
}

func (e *ModelNotFoundError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "model %q is not served: ", e.Model)
	if id, _, ok := strings.Cut(e.Model, "/"); ok {
		fmt.Fprintf(&b, "provider %q is not registered (registered: %s); name a model provider/model, by an alias, or bare where a model pattern or the client's format names its provider", id, strings.Join(e.Registered, ", "))
		return b.String()
	}
	b.WriteString("a bare model name needs ")
	if e.Default != "" {
		fmt.Fprintf(&b, "provider %q (not registered) or ", e.Default)
	}
	fmt.Fprintf(&b, "a model pattern; name it provider/model (registered: %s) or an alias", strings.Join(e.Registered, ", "))
	return b.String()
}

// Resolve returns the name the runtime serves model by: an alias or
// provider/model as it is; a bare name through the model patterns, else on
// bareProvider when that is registered ("" for none). A name nothing
// serves is a *ModelNotFoundError. Resolve does not check that the
// provider has the model: the provider answers that.
func (rt *Runtime) Resolve(model, bareProvider string) (string, error) {
	if model == "" {
		return "", &llm.ConfigError{Field: "model", Msg: "is empty"}
	}
	if _, ok := rt.aliases[model]; ok {
		return model, nil
	}
	if id, m, ok := strings.Cut(model, "/"); ok && m != "" && rt.groups[id] != nil {
		return model, nil
	}
	for _, p := range rt.opts.patterns {
		if ok, _ := path.Match(p.pattern, model); ok {
			return p.provider + "/" + model, nil
		}
	}
	if strings.Contains(model, "/") {
		// provider/model with a provider that is not registered: never
		// taken for a bare name (a mistyped provider id would otherwise
		// reach the default provider).
		return "", &ModelNotFoundError{Model: model, Registered: rt.Providers()}
	}
	if bareProvider != "" && rt.groups[bareProvider] != nil {
		return bareProvider + "/" + model, nil
	}
	e := &ModelNotFoundError{Model: model, Registered: rt.Providers()}
	if bareProvider != "" {
		e.Default = bareProvider
	}
	return "", e
}
