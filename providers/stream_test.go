package providers

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

// TestStreamToBudget: StreamTo derives no budget of its own from a context
// that already ends within the client's (the runtime's call context), and
// keeps the client's budget for one that ends later: a stalled stream is
// cut at whichever ends first.
func TestStreamToBudget(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	cfg := formats(srv)[0]
	stall := func() {
		srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStall, After: 1, Stall: 30 * time.Second, Reply: &llmtest.Reply{Deltas: []string{"a", "b"}}}})
	}
	cases := []struct {
		name           string
		budget, caller time.Duration
	}{
		{"caller ends first", time.Hour, 200 * time.Millisecond},
		{"budget ends first", 200 * time.Millisecond, time.Hour},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stall()
			c := newClient(t, cfg, WithTimeout(tc.budget), WithIdleTimeout(0))
			ctx, cancel := context.WithTimeout(context.Background(), tc.caller)
			defer cancel()
			start := time.Now()
			events := 0
			res, err := c.StreamTo(ctx, hello(), func(llm.Event) bool { events++; return true })
			var se *llm.StreamError
			if !errors.As(err, &se) || !errors.Is(err, context.DeadlineExceeded) || events == 0 || res == nil {
				t.Fatalf("stalled stream: %d events, %v", events, err)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Fatalf("a stall cut at 200ms ran %v", d)
			}
		})
	}
}

// TestGrowStack: growStack leaves the goroutine with the 8 KiB stack a
// stream's call needs (the compiler kept its frame).
func TestGrowStack(t *testing.T) {
	// The rest of the process may free stacks meanwhile: the best of three
	// measurements counts.
	best := int64(0)
	for range 3 {
		best = max(best, stackPerGoroutine(500, growStack))
	}
	// 8 KiB each; without growStack a goroutine here holds 2 KiB.
	if best < 6<<10 {
		t.Fatalf("%d B of stack per goroutine after growStack, want 8 KiB", best)
	}
}

// stackPerGoroutine starts n goroutines that call f and wait, and returns
// the stack the process gained per goroutine.
func stackPerGoroutine(n int, f func()) int64 {
	release := make(chan struct{})
	var ready, done sync.WaitGroup
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ready.Add(n)
	done.Add(n)
	for range n {
		go func() {
			defer done.Done()
			f()
			ready.Done()
			<-release
		}()
	}
	ready.Wait()
	runtime.ReadMemStats(&after)
	close(release)
	done.Wait()
	return (int64(after.StackInuse) - int64(before.StackInuse)) / int64(n)
}
