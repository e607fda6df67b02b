package providers

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/llm"
)

func cacheClient(t *testing.T, id string) *Client {
	t.Helper()
	cfg, ok := Builtin(id)
	if !ok {
		t.Fatalf("no builtin %s", id)
	}
	cfg.APIKey = "k"
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func cachedRequest() *llm.ChatRequest {
	return &llm.ChatRequest{
		Model: "m",
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: "a long system prompt", Cache: &llm.CacheMark{TTL: llm.CacheTTL1h}},
			{Role: llm.RoleUser, Content: "a long document", Cache: &llm.CacheMark{}},
			llm.UserText("the question"),
		},
		Tools: []llm.Tool{{Name: "a"}, {Name: "b", Cache: &llm.CacheMark{TTL: llm.CacheTTL5m}}},
		Cache: &llm.PromptCache{Key: "tenant-7", Retention: "24h", CachedContent: "cachedContents/abc"},
	}
}

// TestPromptCacheBodies: each format carries the request's cache marks
// its own way, and ignores the others: Anthropic cache_control (with its
// TTL) on the marked system block, message block and tool; OpenAI
// prompt_cache_key and prompt_cache_retention (to provider openai only);
// Gemini cachedContent.
func TestPromptCacheBodies(t *testing.T) {
	body := func(id string) map[string]any {
		t.Helper()
		_, b, err := cacheClient(t, id).EncodeChat(cachedRequest())
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	an := body("anthropic")
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	if got := js(an["system"]); got != `[{"cache_control":{"ttl":"1h","type":"ephemeral"},"text":"a long system prompt","type":"text"}]` {
		t.Errorf("anthropic system: %s", got)
	}
	msgs := an["messages"].([]any)
	if got := js(msgs[0]); !strings.Contains(got, `"cache_control":{"type":"ephemeral"}`) {
		t.Errorf("anthropic marked message: %s", got)
	}
	if got := js(msgs); strings.Count(got, "cache_control") != 1 {
		t.Errorf("anthropic messages carry %d marks, want 1: %s", strings.Count(got, "cache_control"), got)
	}
	tools := an["tools"].([]any)
	if js(tools[0]) != `{"input_schema":{"type":"object"},"name":"a"}` || !strings.Contains(js(tools[1]), `"cache_control":{"ttl":"5m","type":"ephemeral"}`) {
		t.Errorf("anthropic tools: %s", js(tools))
	}
	if strings.Contains(js(an), "tenant-7") || strings.Contains(js(an), "cachedContents") {
		t.Errorf("anthropic got other formats' fields: %s", js(an))
	}

	oa := body("openai")
	if oa["prompt_cache_key"] != "tenant-7" || oa["prompt_cache_retention"] != "24h" || strings.Contains(js(oa), "cache_control") || strings.Contains(js(oa), "cachedContent") {
		t.Errorf("openai: %s", js(oa))
	}
	if ds := body("deepseek"); strings.Contains(js(ds), "prompt_cache") {
		t.Errorf("deepseek got OpenAI's cache fields: %s", js(ds))
	}

	gm := body("gemini")
	if gm["cachedContent"] != "cachedContents/abc" || strings.Contains(js(gm), "cache_control") || strings.Contains(js(gm), "tenant-7") {
		t.Errorf("gemini: %s", js(gm))
	}

	// Without marks, no format sends anything about caching.
	plain := &llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("hi")}}
	for _, id := range []string{"anthropic", "openai", "gemini"} {
		_, b, err := cacheClient(t, id).EncodeChat(plain)
		if err != nil || strings.Contains(string(b), "cache") {
			t.Errorf("%s without marks: %v %s", id, err, b)
		}
	}
}

// TestPromptCacheRefusals: an unknown TTL or retention, and more than four
// Anthropic breakpoints, are refused before anything is sent.
func TestPromptCacheRefusals(t *testing.T) {
	bad := cachedRequest()
	bad.Messages[0].Cache.TTL = "2h"
	var ce *llm.ConfigError
	if _, _, err := cacheClient(t, "anthropic").EncodeChat(bad); !errors.As(err, &ce) || ce.Field != "messages[0].cache.ttl" {
		t.Errorf("TTL 2h: %v", err)
	}
	bad = cachedRequest()
	bad.Cache.Retention = "forever"
	if _, _, err := cacheClient(t, "openai").EncodeChat(bad); !errors.As(err, &ce) || ce.Field != "cache.retention" {
		t.Errorf("retention: %v", err)
	}
	many := cachedRequest()
	for range 3 {
		many.Messages = append(many.Messages, llm.Message{Role: llm.RoleUser, Content: "x", Cache: &llm.CacheMark{}})
	}
	if _, _, err := cacheClient(t, "anthropic").EncodeChat(many); !errors.As(err, &ce) || !strings.Contains(ce.Msg, "at most 4") {
		t.Errorf("7 breakpoints: %v", err)
	}
	if _, _, err := cacheClient(t, "gemini").EncodeChat(many); err != nil {
		t.Errorf("gemini ignores breakpoints, got %v", err)
	}
}
