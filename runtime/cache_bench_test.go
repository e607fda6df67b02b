package runtime

import (
	"context"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/chorusrt/chorus/cache"
	"github.com/chorusrt/chorus/cache/sqlitecache"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers"
)

// benchCacheRT is the in-process runtime of BenchmarkMemChatRuntime (an
// http.RoundTripper answers from memory) over a cache on s; nil s: none.
func benchCacheRT(b *testing.B, s cache.Store) *Runtime {
	opts := []Option{WithProvider(memCfg()), WithClientOptions(providers.WithHTTPClient(&http.Client{Transport: memJSON{}})), WithQueueSize(1 << 16)}
	if s != nil {
		c, err := cache.New(s, cache.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		opts = append(opts, WithCache(c, CacheOptions{}))
	}
	rt, err := New(opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rt.Close(context.Background()) })
	return rt
}

func benchHit(b *testing.B, s cache.Store) {
	rt := benchCacheRT(b, s)
	r := inprocRequest("openai/m")
	ctx := context.Background()
	if _, err := rt.Chat(ctx, r); err != nil { // the one miss
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		res, err := rt.Chat(ctx, r)
		if err != nil || res.Content == "" {
			b.Fatal(res, err)
		}
	}
	if st, _ := rt.CacheStats(); st.Hits < int64(b.N) {
		b.Fatalf("%d hits for %d calls", st.Hits, b.N)
	}
}

// BenchmarkCacheHitMemory is a Chat answered from the in-memory cache.
func BenchmarkCacheHitMemory(b *testing.B) {
	s, _ := cache.NewMemory(cache.Limits{MaxEntries: 1000})
	benchHit(b, s)
}

// BenchmarkCacheHitSQLite is a Chat answered from a SQLite cache file.
func BenchmarkCacheHitSQLite(b *testing.B) {
	s, err := sqlitecache.Open(filepath.Join(b.TempDir(), "c.db"), cache.Limits{MaxEntries: 1000})
	if err != nil {
		b.Fatal(err)
	}
	benchHit(b, s)
}

// benchMiss asks a new question each call: with a cache, each is a
// lookup that misses, the provider's answer and a write.
func benchMiss(b *testing.B, s cache.Store) {
	rt := benchCacheRT(b, s)
	ctx := context.Background()
	reqs := make([]*llm.ChatRequest, 4096)
	for i := range reqs {
		reqs[i] = &llm.ChatRequest{Model: "openai/m", Messages: []llm.Message{llm.UserText("Say hi " + strconv.Itoa(i))}, MaxTokens: 1024}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		// Past 4096 calls the questions repeat; WriteOnly keeps them misses.
		if _, err := rt.Chat(WithCacheMode(ctx, cache.WriteOnly), reqs[i%len(reqs)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkCacheMissNone is the miss benchmarks' baseline: no cache.
func BenchmarkCacheMissNone(b *testing.B) { benchMiss(b, nil) }

// BenchmarkCacheMissMemory is a miss with the in-memory cache: the key,
// the write and the eviction added to the provider's call.
func BenchmarkCacheMissMemory(b *testing.B) {
	s, _ := cache.NewMemory(cache.Limits{MaxEntries: 1000})
	benchMiss(b, s)
}

// BenchmarkCacheMissSQLite is a miss with a SQLite cache file.
func BenchmarkCacheMissSQLite(b *testing.B) {
	s, err := sqlitecache.Open(filepath.Join(b.TempDir(), "c.db"), cache.Limits{MaxEntries: 1000})
	if err != nil {
		b.Fatal(err)
	}
	benchMiss(b, s)
}
