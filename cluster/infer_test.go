package cluster

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
)

// A headerless provider's limit (Gemini's: no limit headers, a per-minute
// 429 naming its quota and retry delay) is inferred on the key's budget
// owner from every node's acceptances and refusals: two nodes sharing one
// Gemini key under a fixed window of 20 requests per 500ms finish 100
// requests with at most two 429s per window after the first, as one node
// does (runtime's pacing matrix). Acceptances and quota refusals that
// stayed on the node that made the request left the owner blind: a 429
// burst every window.
func TestHeaderlessLimitInferredAcrossNodes(t *testing.T) {
	const (
		limit  = 20
		window = 500 * time.Millisecond
		total  = 160
	)
	srv := llmtest.NewServer(llmtest.WithRateLimit(llmtest.RateLimit{Requests: limit, Window: window, Model: llmtest.FixedWindow}))
	defer srv.Close()
	gemini := runtime.WithProvider(providers.Config{ID: "gemini", Format: providers.FormatGemini, BaseURL: srv.GeminiBaseURL(), APIKey: providers.Secret("gk-infer")})
	addrs := freeAddrs(t, 2)
	nodes := joinAll(t, "infer", addrs, func(i int, c *Config) { c.Runtime = append(c.Runtime, gemini) })
	defer closeAll(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	start := time.Now()
	failed := chatAcross(ctx, t, nodes, "gemini/m", total)
	elapsed := time.Since(start)
	later := 0
	all := srv.RateLimitedAt()
	for _, at := range all {
		if at.Sub(start) > window {
			later++
		}
	}
	windows := int(elapsed/window) + 1
	t.Logf("429s %d (after the first window %d) in %v (%d windows)", len(all), later, elapsed.Round(time.Millisecond), windows)
	if failed > 0 {
		t.Fatalf("%d of %d requests failed", failed, total)
	}
	if later > 2*windows {
		t.Fatalf("%d 429s after the first window in %d windows: the owner did not infer the limit from both nodes", later, windows)
	}
}

// chatAcross makes total calls of model, split evenly over the nodes, 8 at
// a time on each, and returns how many failed (each is reported).
func chatAcross(ctx context.Context, t *testing.T, nodes []*Node, model string, total int) int {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	for i, n := range nodes {
		sem := make(chan struct{}, 8)
		for j := range total / len(nodes) {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				req := &llm.ChatRequest{Model: model, Messages: []llm.Message{llm.UserText("hi")}}
				if _, err := n.Runtime().Chat(ctx, req); err != nil {
					mu.Lock()
					failed++
					mu.Unlock()
					t.Errorf("node %d request %d: %v", i, j, err)
				}
			}()
		}
	}
	wg.Wait()
	return failed
}
