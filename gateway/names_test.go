package gateway_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/gateway"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
)

// A client that only changed its SDK's base URL names models bare: each
// route serves them on the provider whose API it speaks, and the answer
// names the model as the client asked.
func TestBareModelNamesMeanTheFormatsProvider(t *testing.T) {
	fx := newFixture(t, gateway.Options{})
	cases := []struct {
		name, path, body, model, served string
		format                          llmtest.Format
	}{
		{"openai chat", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`, "gpt-4o-mini", "openai/gpt-4o-mini", llmtest.FormatOpenAI},
		{"anthropic", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, "claude-sonnet-4-5", "anthropic/claude-sonnet-4-5", llmtest.FormatAnthropic},
		{"gemini", "/v1beta/models/gemini-2.5-flash:generateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, "gemini-2.5-flash", "gemini/gemini-2.5-flash", llmtest.FormatGemini},
		{"responses", "/v1/responses", `{"model":"gpt-4.1","input":"hi"}`, "gpt-4.1", "openai/gpt-4.1", llmtest.FormatOpenAI},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fx.up.Push(llmtest.Text("ok"))
			n := fx.up.Count()
			a := fx.do(t, "POST", c.path, c.body)
			if a.status != 200 {
				t.Fatalf("status %d: %s", a.status, a.body)
			}
			if got := a.header.Get("x-chorus-model"); got != c.served {
				t.Errorf("x-chorus-model %q, want %q", got, c.served)
			}
			reqs := fx.up.Requests()
			if len(reqs) != n+1 {
				t.Fatalf("upstream saw %d requests, want %d", len(reqs), n+1)
			}
			last := reqs[len(reqs)-1]
			want := strings.TrimPrefix(c.served, strings.SplitN(c.served, "/", 2)[0]+"/")
			if last.Format != c.format || last.Model != want {
				t.Errorf("upstream got %s model %q, want %s %q", last.Format, last.Model, c.format, want)
			}
			if c.format != llmtest.FormatGemini && !strings.Contains(string(a.body), `"model":"`+c.model+`"`) {
				t.Errorf("the answer does not name the model as asked (%q): %s", c.model, a.body)
			}
		})
	}
}

// A bare name with no provider to serve it is a 404 in the client's
// format that says how to name it; DefaultProviders can take the bare
// names of a format away, or give them to another provider.
func TestBareModelNamesWithoutAProvider(t *testing.T) {
	fx := newFixture(t, gateway.Options{DefaultProviders: map[string]string{"anthropic": "", "openai": "anthropic"}})
	a := fx.do(t, "POST", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`)
	if a.status != 404 || !strings.Contains(string(a.body), `"type":"not_found_error"`) || !strings.Contains(string(a.body), "provider/model") {
		t.Fatalf("a bare name with no default provider: %d %s", a.status, a.body)
	}
	if fx.up.Count() != 0 {
		t.Fatalf("the upstream was called %d times", fx.up.Count())
	}
	fx.up.Push(llmtest.Text("ok"))
	a = fx.do(t, "POST", "/v1/chat/completions", `{"model":"claude-haiku-4-5","messages":[{"role":"user","content":"hi"}]}`)
	if a.status != 200 || a.header.Get("x-chorus-model") != "anthropic/claude-haiku-4-5" {
		t.Fatalf("OpenAI route's bare names on anthropic: %d %s %s", a.status, a.header.Get("x-chorus-model"), a.body)
	}
	// provider/model and aliases are unchanged.
	fx.up.Push(llmtest.Text("ok"))
	if a = fx.do(t, "POST", "/v1/chat/completions", `{"model":"fast","messages":[{"role":"user","content":"hi"}]}`); a.status != 200 || a.header.Get("x-chorus-model") != "openai/gpt-4.1-mini" {
		t.Fatalf("alias: %d %s", a.status, a.header.Get("x-chorus-model"))
	}
}

// Without an openai provider, an OpenAI client's bare name is a 404 in
// OpenAI's format naming the model and how to name it.
func TestBareModelNameNotServedIsOpenAI404(t *testing.T) {
	up := llmtest.NewServer()
	defer up.Close()
	_, h, closeH := newHandler(t, gateway.Options{}, runtime.WithProvider(providers.Config{ID: "local", Format: providers.FormatOpenAI, BaseURL: up.OpenAIBaseURL(), APIKey: providerKey}))
	defer closeH()
	gw := httptest.NewServer(h)
	defer gw.Close()
	srv := &fixture{up: up, h: h, gw: gw, url: gw.URL}
	a := srv.do(t, "POST", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`)
	if a.status != 404 || !strings.Contains(string(a.body), `"code":"model_not_found"`) || !strings.Contains(string(a.body), `gpt-4o-mini`) || !strings.Contains(string(a.body), "local") {
		t.Fatalf("got %d %s", a.status, a.body)
	}
}

// Model patterns route bare names by the operator's rule, before the
// format's default provider.
func TestModelPatternsRouteBareNames(t *testing.T) {
	fx := newFixture(t, gateway.Options{}, runtime.WithModelPattern("claude-*", "anthropic"))
	fx.up.Push(llmtest.Text("ok"))
	a := fx.do(t, "POST", "/v1/chat/completions", `{"model":"claude-haiku-4-5","messages":[{"role":"user","content":"hi"}]}`)
	if a.status != 200 || a.header.Get("x-chorus-model") != "anthropic/claude-haiku-4-5" {
		t.Fatalf("pattern: %d %s %s", a.status, a.header.Get("x-chorus-model"), a.body)
	}
	fx.up.Push(llmtest.Text("ok"))
	if a = fx.do(t, "POST", "/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`); a.header.Get("x-chorus-model") != "openai/gpt-4o" {
		t.Fatalf("no pattern: %d %s", a.status, a.header.Get("x-chorus-model"))
	}
	if _, err := runtime.New(runtime.WithProvider(providers.Config{ID: "openai", Format: providers.FormatOpenAI, BaseURL: fx.up.OpenAIBaseURL(), APIKey: providerKey}), runtime.WithModelPattern("x-*", "nope")); err == nil || !strings.Contains(err.Error(), `"nope" is not registered`) {
		t.Fatalf("a pattern naming an unregistered provider: %v", err)
	}
	if _, err := runtime.New(runtime.WithModelPattern("[", "openai")); err == nil || !strings.Contains(err.Error(), "glob") {
		t.Fatalf("a malformed pattern: %v", err)
	}
}

// /{provider}/v1/... serves the same endpoints with every model name the
// provider's own, slashes included.
func TestProviderScopedRoutes(t *testing.T) {
	fx := newFixture(t, gateway.Options{})
	for _, c := range []struct{ path, body, served string }{
		{"/anthropic/v1/chat/completions", `{"model":"claude-haiku-4-5","messages":[{"role":"user","content":"hi"}]}`, "anthropic/claude-haiku-4-5"},
		{"/openai/v1/chat/completions", `{"model":"anthropic/claude-x","messages":[{"role":"user","content":"hi"}]}`, "openai/anthropic/claude-x"},
		{"/openai/v1/messages", `{"model":"gpt-4o","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, "openai/gpt-4o"},
		{"/anthropic/v1beta/models/claude-x:generateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, "anthropic/claude-x"},
		{"/gemini/v1/chat/completions", `{"model":"fast","messages":[{"role":"user","content":"hi"}]}`, "openai/gpt-4.1-mini"},
	} {
		fx.up.Push(llmtest.Text("ok"))
		a := fx.do(t, "POST", c.path, c.body)
		if a.status != 200 || a.header.Get("x-chorus-model") != c.served {
			t.Errorf("%s: %d %q, want %q: %s", c.path, a.status, a.header.Get("x-chorus-model"), c.served, a.body)
		}
	}
	if a := fx.do(t, "POST", "/nope/v1/chat/completions", `{"model":"x","messages":[{"role":"user","content":"hi"}]}`); a.status != 404 {
		t.Errorf("an unregistered provider's scope: %d %s", a.status, a.body)
	}
}

func runtimeAlias(name string, targets ...string) runtime.Option {
	return runtime.WithAlias(name, targets...)
}
