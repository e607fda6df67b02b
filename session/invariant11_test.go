package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/store"
)

// TestInvariant11_JournalDurableBeforeSideEffect asserts invariant 11
// directly: at the moment a tool function starts (its side effect), the
// journal record of that very attempt (tool_started, with its attempt
// number and idempotency key) is committed, readable through a second,
// independent handle on the journal file. Every effect class is covered,
// and every retry attempt. TestCrashSuite proves the consequence under
// SIGKILL (no side effect without a recorded start).
func TestInvariant11_JournalDurableBeforeSideEffect(t *testing.T) {
	cases := []struct {
		effect   Effect
		attempts int // the handler fails until this attempt
		key      bool
	}{
		{EffectRead, 3, false},
		{EffectIdempotentWrite, 3, true},
		{EffectNonIdempotentWrite, 1, false},
		{EffectUnclassified, 1, false},
	}
	for _, tc := range cases {
		t.Run(string(tc.effect), func(t *testing.T) {
			var (
				h        *harness
				other    *store.SQLite
				seen     atomic.Int32
				mu       sync.Mutex
				problems []string
			)
			fn := func(ctx context.Context, c Call) (Result, error) {
				n := seen.Add(1)
				// What a separate process would read right now.
				recs, err := other.Read(ctx, c.Session, 1)
				found := false
				for _, r := range recs {
					if r.Kind != recToolStarted {
						continue
					}
					var s recToolStart
					if json.Unmarshal(r.Data, &s) == nil && s.Call == c.ID && s.Attempt == c.Attempt && s.Turn == c.Turn {
						found = true
						if s.Key != c.IdempotencyKey {
							mu.Lock()
							problems = append(problems, fmt.Sprintf("attempt %d: journal key %q, handler key %q", c.Attempt, s.Key, c.IdempotencyKey))
							mu.Unlock()
						}
					}
				}
				if err != nil || !found {
					mu.Lock()
					problems = append(problems, fmt.Sprintf("attempt %d started without its tool_started record on disk (read err %v, %d records: %v)", c.Attempt, err, len(recs), kinds(recs)))
					mu.Unlock()
				}
				if int(n) < tc.attempts {
					return Result{}, errors.New("transient")
				}
				return Result{Content: "ok"}, nil
			}
			h = newHarness(t, Options{
				Tools:  []Tool{tool(nil, "op", tc.effect, fn)},
				Policy: map[string]ToolPolicy{"op": {RequireApproval: Bool(false)}},
			})
			var err error
			if other, err = store.OpenSQLite(h.path); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = other.Close() })
			h.srv.Push(llmtest.ToolCalls(call("c1", "op", `{}`)), llmtest.Text("done"))
			h.send("s1", "go")
			if r := h.wait("s1"); r.Status != TurnCompleted {
				t.Fatalf("turn = %+v", r)
			}
			if int(seen.Load()) != tc.attempts {
				t.Fatalf("handler ran %d times, want %d", seen.Load(), tc.attempts)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, p := range problems {
				t.Error(p)
			}
		})
	}
}
