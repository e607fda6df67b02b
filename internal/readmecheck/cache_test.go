package readmecheck

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/chorusrt/chorus/cache"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/runtime"
)

var (
	_ = guideCache
	_ = guideCacheContext
)

// guideCache is the cache guide's first block.
func guideCache(ctx context.Context) {
	store, err := cache.NewMemory(cache.Limits{MaxEntries: 10_000})
	if err != nil {
		log.Fatal(err)
	}
	c, err := cache.New(store, cache.Options{TTL: 24 * time.Hour})
	if err != nil {
		log.Fatal(err) // a *llm.ConfigError naming the option: a negative TTL, say
	}
	defer c.Close()
	rt, err := runtime.New(runtime.FromEnv(), runtime.WithCache(c, runtime.CacheOptions{Namespace: "team-a"}))
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(context.Background())
	var rep runtime.CallReport
	res, err := rt.Chat(runtime.WithCallReport(ctx, &rep), &llm.ChatRequest{Model: "openai/gpt-4.1-mini",
		Messages: []llm.Message{llm.UserText("Is 'cold soup, rude waiter' positive or negative?")}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Content, rep.Cache, rep.Cost) // the second time: "hit" and 0
}

// guideCacheContext is the cache guide's per-call block.
func guideCacheContext(ctx context.Context) context.Context {
	ctx = runtime.WithCacheMode(ctx, cache.WriteOnly)  // ask the provider, refresh the entry
	ctx = runtime.WithCacheNamespace(ctx, "tenant-42") // read and write tenant-42's entries only
	return ctx
}
