package cache_test

import (
	"context"
	"fmt"
	"time"

	"github.com/chorusrt/chorus/cache"
	"github.com/chorusrt/chorus/llm"
)

// A cache in front of any call that returns a ChatResult: the second
// identical request is answered from the store.
func Example() {
	store, _ := cache.NewMemory(cache.Limits{MaxEntries: 1000})
	c, _ := cache.New(store, cache.Options{TTL: time.Hour})
	defer c.Close()
	req := &llm.ChatRequest{Messages: []llm.Message{llm.UserText("2+2?")}}
	key := cache.Key("openai/gpt-4.1-mini", req)
	ask := func(context.Context) (*llm.ChatResult, error) {
		return &llm.ChatResult{Content: "4", FinishReason: llm.FinishStop, Usage: llm.Usage{PromptTokens: 5, CompletionTokens: 1}}, nil
	}
	for range 2 {
		res, outcome, _ := c.Do(context.Background(), cache.On, "team-a", key, ask)
		fmt.Println(res.Content, outcome)
	}
	// Output:
	// 4 miss
	// 4 hit
}
