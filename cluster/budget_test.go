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

// Two nodes share one key against a server enforcing its limit: together
// they stay inside it once it is known (429s only in the first window, when
// nothing is known yet), and every call succeeds.
func TestSharedBudgetKeepsTheKeysLimit(t *testing.T) {
	const window = 800 * time.Millisecond
	srv := llmtest.NewServer(llmtest.WithRateLimit(llmtest.RateLimit{Requests: 8, Window: window}))
	defer srv.Close()
	rec := newRecorder(srv.URL)
	defer rec.Close()
	addrs := freeAddrs(t, 2)
	nodes := joinAll(t, "budget", addrs, func(i int, c *Config) {
		c.Runtime = append(c.Runtime,
			runtime.WithProvider(providers.Config{ID: "fake", Format: providers.FormatOpenAI, BaseURL: rec.URL + "/v1", APIKey: "sk-shared"}),
			runtime.WithTimeout(30*time.Second))
	})
	defer closeAll(t, nodes)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const perNode = 16
	var wg sync.WaitGroup
	errs := make(chan error, 2*perNode)
	for _, n := range nodes {
		for range perNode {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := n.Runtime().Chat(ctx, &llm.ChatRequest{Model: "fake/m", Messages: []llm.Message{llm.UserText("hi")}})
				errs <- err
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("call failed: %v", err)
		}
	}
	n429, last, total := rec.limited()
	t.Logf("%d answers, %d 429s, last 429 at %v", total, n429, last)
	if n429 > 0 && last > window {
		t.Fatalf("a 429 came %v after the first answer, past the first window (%v): the nodes overran the shared limit", last, window)
	}
	if total-n429 != 2*perNode {
		t.Fatalf("%d successful answers, want %d", total-n429, 2*perNode)
	}
	// Both nodes see the one owner's view of the key (the last reports
	// travel on their own: give them a moment).
	var a, b []runtime.Stats
	for range 50 {
		a, b = nodes[0].Runtime().Stats(), nodes[1].Runtime().Stats()
		if len(a) == 1 && len(b) == 1 && a[0].Requests == int64(2*perNode) && b[0].Requests == a[0].Requests {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(a) != 1 || len(b) != 1 || a[0].Requests != int64(2*perNode) || b[0].Requests != a[0].Requests {
		t.Fatalf("stats: node 0 %+v, node 1 %+v: want both to count the %d requests of the cluster", a, b, 2*perNode)
	}
}
