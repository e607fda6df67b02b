package gateway

import (
	"context"
	"net/http"
	"strings"
)

// Model names (drop-in).
//
// A client that only changes its SDK's base URL names models the way its
// provider does ("gpt-4o-mini", "claude-sonnet-4-5", "gemini-2.5-flash").
// Such a bare name (neither provider/model with a registered provider nor
// an alias) means the provider whose API the client speaks: on the OpenAI
// routes provider "openai", on /v1/messages "anthropic", on /v1beta/...
// "gemini", when that provider is registered (Options.DefaultProviders
// changes or removes each). A runtime model pattern
// (runtime.WithModelPattern, chorus.yaml model_patterns) comes first:
// "gpt-*" may name another OpenAI-compatible provider.
//
// The provider-scoped routes make the provider explicit for clients that
// cannot rename models: /{provider}/v1/... and /{provider}/v1beta/... for
// any registered provider serve the same endpoints as /v1/... and
// /v1beta/..., with every model name taken as that provider's own
// ("/openrouter/v1/chat/completions" with "openai/gpt-4o" calls
// openrouter/openai/gpt-4o). An alias is still an alias there.
//
// A bare name that nothing serves is a 404 in the client's format saying
// how to name it. The answer names the model as the client asked for it;
// x-chorus-model names what served it.

type scopeKey struct{}

// scoped returns r with the provider scope of a /{provider}/v1... path
// taken off its path, or r itself when its path has none.
func (h *Handler) scoped(r *http.Request) *http.Request {
	p := r.URL.Path
	if len(p) < 2 || strings.HasPrefix(p, "/v1") {
		return r // the common case costs one prefix check
	}
	id, rest, ok := strings.Cut(p[1:], "/")
	if !ok || !h.providers[id] || !strings.HasPrefix(rest, "v1") {
		return r
	}
	r2 := r.WithContext(context.WithValue(r.Context(), scopeKey{}, id))
	u := *r.URL
	u.Path, u.RawPath = "/"+rest, ""
	r2.URL = &u
	return r2
}

// defaultProvider is the provider of a bare model name for format f.
func (h *Handler) defaultProvider(f format) string {
	name := [...]string{formatOpenAI: "openai", formatAnthropic: "anthropic", formatGemini: "gemini"}[f]
	if p, ok := h.opts.DefaultProviders[name]; ok {
		return p
	}
	return name
}

// resolve returns the model the runtime serves a client's name by.
func (h *Handler) resolve(r *http.Request, f format, model string) (string, error) {
	if id, ok := r.Context().Value(scopeKey{}).(string); ok {
		if _, alias := h.aliases[model]; !alias && model != "" {
			return id + "/" + model, nil
		}
	}
	return h.rt.Resolve(model, h.defaultProvider(f))
}
