package cache_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/chorusrt/chorus/cache"
	"github.com/chorusrt/chorus/cache/sqlitecache"
	"github.com/chorusrt/chorus/llm"
)

// benchRequest is a typical request: a system prompt, a question, a tool.
func benchRequest() *llm.ChatRequest {
	return &llm.ChatRequest{Model: "openai/gpt-4o-mini", MaxTokens: 512, Temperature: llm.Ptr(0.2),
		Messages: []llm.Message{llm.SystemText("You are a careful classifier. Answer with one label."), llm.UserText("Is this review positive? 'The soup was cold and the waiter rude.'")},
		Tools:    []llm.Tool{{Name: "label", Parameters: json.RawMessage(`{"type":"object","properties":{"label":{"type":"string","enum":["positive","negative"]}}}`)}}}
}

// BenchmarkKey is the canonical key of a typical request: what every
// cached call pays before it looks anything up.
func BenchmarkKey(b *testing.B) {
	r := benchRequest()
	b.ReportAllocs()
	for b.Loop() {
		_ = cache.Key("openai/gpt-4o-mini", r)
	}
}

func benchGet(b *testing.B, s cache.Store) {
	c, _ := cache.New(s, cache.Options{})
	defer c.Close()
	ctx := context.Background()
	c.Put(ctx, "n", "k", &llm.ChatResult{Content: "negative", FinishReason: llm.FinishStop, Usage: llm.Usage{PromptTokens: 40, CompletionTokens: 2}})
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := c.Get(ctx, "n", "k"); !ok {
			b.Fatal("miss")
		}
	}
}

// BenchmarkGetMemory and BenchmarkGetSQLite read a stored answer.
func BenchmarkGetMemory(b *testing.B) {
	s, _ := cache.NewMemory(cache.Limits{})
	benchGet(b, s)
}

func BenchmarkGetSQLite(b *testing.B) {
	s, err := sqlitecache.Open(filepath.Join(b.TempDir(), "c.db"), cache.Limits{})
	if err != nil {
		b.Fatal(err)
	}
	benchGet(b, s)
}
