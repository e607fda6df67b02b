package pgcache_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/cache"
	"github.com/chorusrt/chorus/cache/pgcache"
	"github.com/chorusrt/chorus/gateway"
	"github.com/chorusrt/chorus/internal/pgtest"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
)

// TestGatewayFleet: three gateway replicas, each with its own runtime and
// store on one PostgreSQL database, share entries: a request answered on
// one is a hit on the others, and the provider is asked once.
func TestGatewayFleet(t *testing.T) {
	dsn := pgtest.SchemaDSN(t)
	up := llmtest.NewServer(llmtest.WithDefault(llmtest.Reply{Text: "fleet answer", Usage: &llm.Usage{PromptTokens: 5, CompletionTokens: 2}}))
	defer up.Close()
	var urls []string
	for range 3 {
		s, err := pgcache.Open(t.Context(), dsn, cache.Limits{MaxEntries: 100})
		if err != nil {
			t.Fatal(err)
		}
		c, err := cache.New(s, cache.Options{TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		rt, err := runtime.New(
			runtime.WithProvider(providers.Config{ID: "openai", Format: providers.FormatOpenAI, BaseURL: up.OpenAIBaseURL(), APIKey: "sk-fleet"}),
			runtime.WithCache(c, runtime.CacheOptions{}),
			runtime.WithClientOptions(providers.WithIdleTimeout(2*time.Second)),
		)
		if err != nil {
			t.Fatal(err)
		}
		h, err := gateway.New(rt, gateway.Options{Keys: []gateway.Key{{Name: "team", SHA256: gateway.HashKey("gk-team")}}})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		t.Cleanup(func() {
			srv.CloseClientConnections()
			srv.Close()
			h.Close(context.Background())
			rt.Close(context.Background())
			c.Close()
		})
		urls = append(urls, srv.URL)
	}
	body := `{"model":"openai/gpt-4o-mini","messages":[{"role":"user","content":"shared?"}]}`
	for i, want := range []string{"miss", "hit", "hit", "hit"} {
		req, _ := http.NewRequest("POST", urls[i%3]+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer gk-team")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("x-chorus-cache") != want {
			t.Fatalf("replica %d: status %d, x-chorus-cache %q; want %s", i%3, resp.StatusCode, resp.Header.Get("x-chorus-cache"), want)
		}
	}
	if up.Count() != 1 {
		t.Fatalf("upstream requests = %d, want 1", up.Count())
	}
	http.DefaultClient.CloseIdleConnections()
}
