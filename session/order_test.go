package session

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/store"
)

// trail records, in order, when handlers begin and end.
type trail struct {
	mu  sync.Mutex
	evs []string
}

func (tr *trail) add(s string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.evs = append(tr.evs, s)
}

func (tr *trail) has(s string) bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Contains(tr.evs, s)
}

func (tr *trail) index(s string) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Index(tr.evs, s)
}

// heldCall is a handler that records its start in tr, waits for release (or
// its context) and then succeeds.
func heldCall(tr *trail, release <-chan struct{}) func(context.Context, Call) (Result, error) {
	return func(ctx context.Context, c Call) (Result, error) {
		tr.add("begin " + c.ID)
		defer tr.add("end " + c.ID)
		select {
		case <-release:
		case <-ctx.Done():
			return Result{}, ctx.Err()
		}
		return Result{Content: `{"ok":"` + c.ID + `"}`}, nil
	}
}

// marked is a handler that records its start and end in tr and succeeds.
func marked(tr *trail) func(context.Context, Call) (Result, error) {
	return func(_ context.Context, c Call) (Result, error) {
		tr.add("begin " + c.ID)
		tr.add("end " + c.ID)
		return Result{Content: `{"ok":"` + c.ID + `"}`}, nil
	}
}

// journalOrder returns the journal's tool_started and tool_finished
// records as "started <call>" / "finished <call> <status>", in order.
func journalOrder(t *testing.T, recs []store.Record) []string {
	t.Helper()
	var out []string
	for _, r := range recs {
		var err error
		switch r.Kind {
		case recToolStarted:
			err = decoded(r.Data, func(p recToolStart) { out = append(out, "started "+p.Call) })
		case recToolFinished:
			err = decoded(r.Data, func(p recToolEnd) { out = append(out, "finished "+p.Call+" "+string(p.Status)) })
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestWritesRunInOrder: of a response with two writes and a read, the read
// runs beside the first write, and the second write starts only once the
// first ended, in the journal (tool_started after the first's
// tool_finished) and in the handlers.
func TestWritesRunInOrder(t *testing.T) {
	var l ledger
	var tr trail
	release := make(chan struct{})
	h := newHarness(t, Options{Tools: []Tool{
		tool(&l, "reserve", EffectIdempotentWrite, heldCall(&tr, release)),
		tool(&l, "lookup", EffectRead, heldCall(&tr, release)),
		tool(&l, "refund", EffectNonIdempotentWrite, marked(&tr)),
	}, Policy: map[string]ToolPolicy{"refund": {RequireApproval: Bool(false)}}})
	h.srv.Push(llmtest.ToolCalls(call("w1", "reserve", `{}`), call("r1", "lookup", `{}`), call("w2", "refund", `{}`)), llmtest.Text("done"))
	h.send("s", "refund order 7")
	until(t, "the first write and the read run together", func() bool { return tr.has("begin w1") && tr.has("begin r1") })
	// Give the session every chance to start the second write too early.
	time.Sleep(50 * time.Millisecond)
	if tr.has("begin w2") {
		t.Fatal("the second write started while the first ran")
	}
	if s := h.snap("s"); s.Step != StepCallTool {
		t.Fatalf("step %s while the first write runs", s.Step)
	}
	close(release)
	if r := h.wait("s"); r.Status != TurnCompleted || r.Answer != "done" {
		t.Fatalf("turn %+v", r)
	}
	if tr.index("begin w2") < tr.index("end w1") {
		t.Fatalf("handlers ran %v", tr.evs)
	}
	for _, id := range []string{"w1", "r1", "w2"} {
		if n := len(l.of(id)); n != 1 {
			t.Errorf("%s ran %d times", id, n)
		}
	}
	order := journalOrder(t, h.records("s"))
	if slices.Index(order, "started w2") < slices.Index(order, "finished w1 succeeded") {
		t.Fatalf("journal order %v", order)
	}
	if slices.Index(order, "started r1") > slices.Index(order, "finished w1 succeeded") {
		t.Fatalf("the read did not start beside the first write: %v", order)
	}
	// The records' history: one RunModel, then one CallTool per call (the
	// steps numbered in the model's order), then the answer.
	s := h.snap("s")
	if len(s.Tools) != 3 || s.Tools[0].Step != 2 || s.Tools[1].Step != 3 || s.Tools[2].Step != 4 {
		t.Fatalf("records %+v", s.Tools)
	}
	for _, r := range s.Tools {
		if r.Status != StatusSucceeded || r.Skipped {
			t.Errorf("%s: %s skipped=%v", r.ID, r.Status, r.Skipped)
		}
	}
}

// TestFailedWriteSkipsLaterWrites: a write that ends failed,
// outcome_unknown or rejected makes the later writes of its response end
// failed, skipped, without their handlers running; a read after it still
// runs; the model sees the skip in the next RunModel.
func TestFailedWriteSkipsLaterWrites(t *testing.T) {
	cases := []struct {
		name     string
		effect   Effect
		fn       func(context.Context, Call) (Result, error)
		approval bool
		reject   bool
		status   ToolStatus
	}{
		{"tool error", EffectIdempotentWrite, func(context.Context, Call) (Result, error) {
			return Result{}, ToolErrorf("card declined")
		}, false, false, StatusFailed},
		{"single attempt fails", EffectNonIdempotentWrite, func(context.Context, Call) (Result, error) {
			return Result{}, context.DeadlineExceeded
		}, false, false, StatusOutcomeUnknown},
		{"rejected", EffectNonIdempotentWrite, ok("refunded"), true, true, StatusRejected},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var l ledger
			h := newHarness(t, Options{Tools: []Tool{
				tool(&l, "refund", tc.effect, tc.fn),
				tool(&l, "email", EffectUnclassified, ok("sent")),
				tool(&l, "tag", EffectIdempotentWrite, ok("tagged")),
				tool(&l, "lookup", EffectRead, ok("order 7")),
			}, Policy: map[string]ToolPolicy{
				"refund": {RequireApproval: Bool(tc.approval)},
				"email":  {RequireApproval: Bool(false)},
			}})
			h.srv.Push(llmtest.ToolCalls(call("w1", "refund", `{}`), call("w2", "email", `{}`), call("r1", "lookup", `{}`), call("w3", "tag", `{}`)), llmtest.Text("sorry"))
			evs := collect(h.m, "s")
			h.send("s", "refund order 7, then email me")
			if tc.approval {
				p := h.pending("s", 1)
				if err := h.m.Resolve(ctx10(t), "s", p[0].ID, !tc.reject, "no refunds"); err != nil {
					t.Fatal(err)
				}
			}
			if r := h.wait("s"); r.Status != TurnCompleted || r.Answer != "sorry" {
				t.Fatalf("turn %+v", r)
			}
			if n := len(l.of("w2")) + len(l.of("w3")); n != 0 {
				t.Fatalf("a skipped write ran (%d times)", n)
			}
			if n := len(l.of("r1")); n != 1 {
				t.Fatalf("the read ran %d times", n)
			}
			byID := map[string]ToolRecord{}
			for _, r := range h.snap("s").Tools {
				byID[r.ID] = r
			}
			if r := byID["w1"]; r.Status != tc.status || r.Skipped {
				t.Fatalf("w1 %+v", r)
			}
			if r := byID["r1"]; r.Status != StatusSucceeded {
				t.Fatalf("r1 %+v", r)
			}
			for _, id := range []string{"w2", "w3"} {
				r := byID[id]
				if r.Status != StatusFailed || !r.Skipped || r.Attempts != 0 || !strings.HasPrefix(r.Error, "skipped: ") || !strings.Contains(r.Error, "refund (call w1), ended "+string(tc.status)) {
					t.Fatalf("%s %+v", id, r)
				}
				resp, found := toolResponse(h.lastRequest(), id)
				if !found || !strings.Contains(resp, "The tool call failed: skipped: an earlier write of this response") {
					t.Fatalf("%s: the model saw %q", id, resp)
				}
			}
			for _, r := range h.records("s") {
				if r.Kind != recToolStarted {
					continue
				}
				if err := decoded(r.Data, func(p recToolStart) {
					if p.Call == "w2" || p.Call == "w3" {
						t.Errorf("tool_started for skipped %s", p.Call)
					}
				}); err != nil {
					t.Fatal(err)
				}
			}
			skipped := 0
			for _, ev := range evs.close() {
				if ev.Type == EventToolCallFinished && (ev.CallID == "w2" || ev.CallID == "w3") {
					skipped++
					if ev.ToolStatus != StatusFailed || !strings.HasPrefix(ev.Text, "skipped: ") {
						t.Errorf("event %+v", ev)
					}
				}
			}
			if skipped != 2 {
				t.Errorf("%d tool_call_finished events for the skipped writes", skipped)
			}
		})
	}
}

// TestWriteAwaitingApprovalBlocksLaterWrites: a write that waits for its
// approval holds the later writes of its response (the read runs); the
// session shows AwaitToolApproval, and once the write is approved and ran,
// the next write runs.
func TestWriteAwaitingApprovalBlocksLaterWrites(t *testing.T) {
	var l ledger
	var tr trail
	h := newHarness(t, Options{Tools: []Tool{
		tool(&l, "refund", EffectNonIdempotentWrite, marked(&tr)),
		tool(&l, "tag", EffectIdempotentWrite, marked(&tr)),
		tool(&l, "lookup", EffectRead, marked(&tr)),
	}})
	h.srv.Push(llmtest.ToolCalls(call("w1", "refund", `{}`), call("w2", "tag", `{}`), call("r1", "lookup", `{}`)), llmtest.Text("done"))
	h.send("s", "refund order 7")
	p := h.pending("s", 1)
	until(t, "the read ran", func() bool { return len(l.of("r1")) == 1 })
	until(t, "the turn waits for the approval", func() bool { return h.snap("s").Step == StepAwaitToolApproval })
	time.Sleep(30 * time.Millisecond)
	if len(l.of("w2")) != 0 {
		t.Fatal("the later write ran before the earlier one was approved")
	}
	if err := h.m.Resolve(ctx10(t), "s", p[0].ID, true, "ok"); err != nil {
		t.Fatal(err)
	}
	if r := h.wait("s"); r.Status != TurnCompleted {
		t.Fatalf("turn %+v", r)
	}
	if len(l.of("w1")) != 1 || len(l.of("w2")) != 1 || tr.index("begin w2") < tr.index("end w1") {
		t.Fatalf("ran %v", tr.evs)
	}
}

// TestWaitingWritePassivates: a turn whose later write waits behind a
// write awaiting approval has no work: the session passivates and, once
// the approval is resolved, activates and runs both writes in order.
func TestWaitingWritePassivates(t *testing.T) {
	var l ledger
	var tr trail
	h := newHarness(t, Options{IdleTimeout: 20 * time.Millisecond, Tools: []Tool{
		tool(&l, "refund", EffectNonIdempotentWrite, marked(&tr)),
		tool(&l, "tag", EffectIdempotentWrite, marked(&tr)),
	}})
	h.srv.Push(llmtest.ToolCalls(call("w1", "refund", `{}`), call("w2", "tag", `{}`)), llmtest.Text("done"))
	h.send("s", "refund order 7")
	p := h.pending("s", 1)
	until(t, "the session passivates", func() bool { return !slices.Contains(h.m.active(), "s") })
	if err := h.m.Resolve(ctx10(t), "s", p[0].ID, true, "ok"); err != nil {
		t.Fatal(err)
	}
	if r := h.wait("s"); r.Status != TurnCompleted {
		t.Fatalf("turn %+v", r)
	}
	if len(l.of("w1")) != 1 || len(l.of("w2")) != 1 || tr.index("begin w2") < tr.index("end w1") {
		t.Fatalf("ran %v", tr.evs)
	}
}

// TestParallelWrites: with Options.ParallelWrites the writes of a
// response run at once, and a failed write skips nothing.
func TestParallelWrites(t *testing.T) {
	var l ledger
	var tr trail
	release := make(chan struct{})
	h := newHarness(t, Options{ParallelWrites: true, Tools: []Tool{
		tool(&l, "reserve", EffectIdempotentWrite, heldCall(&tr, release)),
		tool(&l, "refund", EffectNonIdempotentWrite, heldCall(&tr, release)),
		tool(&l, "fail", EffectIdempotentWrite, func(context.Context, Call) (Result, error) { return Result{}, ToolErrorf("no") }),
		tool(&l, "email", EffectUnclassified, ok("sent")),
	}, Policy: map[string]ToolPolicy{"refund": {RequireApproval: Bool(false)}, "email": {RequireApproval: Bool(false)}}})
	h.srv.Push(llmtest.ToolCalls(call("w1", "reserve", `{}`), call("w2", "refund", `{}`)), llmtest.Text("one"))
	h.send("s", "go")
	until(t, "both writes run together", func() bool { return tr.has("begin w1") && tr.has("begin w2") })
	close(release)
	if r := h.wait("s"); r.Status != TurnCompleted {
		t.Fatalf("turn %+v", r)
	}
	h.srv.Push(llmtest.ToolCalls(call("w3", "fail", `{}`), call("w4", "email", `{}`)), llmtest.Text("two"))
	h.send("s", "again")
	if r := h.wait("s"); r.Status != TurnCompleted {
		t.Fatalf("turn %+v", r)
	}
	if len(l.of("w4")) != 1 {
		t.Fatal("a write after a failed one did not run with ParallelWrites")
	}
}

// TestCrashBetweenOrderedWrites: the session actor dies (a panic, which
// restarts it from the journal) between two ordered writes, the first a
// single-attempt write that succeeded: the recovered session resumes at
// the second write and never repeats the first. The crash suite does the
// same with SIGKILL ("WRITE next").
func TestCrashBetweenOrderedWrites(t *testing.T) {
	var l ledger
	h := newHarness(t, Options{Tools: []Tool{
		tool(&l, "refund", EffectNonIdempotentWrite, ok("refunded")),
		tool(&l, "email", EffectUnclassified, ok("sent")),
	}, Policy: map[string]ToolPolicy{"refund": {RequireApproval: Bool(false)}, "email": {RequireApproval: Bool(false)}}})
	var crashed atomic.Int32
	h.m.hook = func(p string) {
		if p == "WRITE next s w2" && crashed.Add(1) == 1 {
			panic("injected crash between two writes")
		}
	}
	h.srv.Push(llmtest.ToolCalls(call("w1", "refund", `{}`), call("w2", "email", `{}`)), llmtest.Text("done"))
	h.send("s", "refund and email")
	if r := h.wait("s"); r.Status != TurnCompleted || r.Answer != "done" {
		t.Fatalf("turn %+v", r)
	}
	if crashed.Load() != 2 {
		t.Fatalf("reached the point between the writes %d times, want 2 (the crash, then the resumed run)", crashed.Load())
	}
	if len(l.of("w1")) != 1 || len(l.of("w2")) != 1 {
		t.Fatalf("refund ran %d times, email %d", len(l.of("w1")), len(l.of("w2")))
	}
	for _, r := range h.snap("s").Tools {
		if r.Status != StatusSucceeded || r.Attempts != 1 {
			t.Errorf("%s: %s after %d attempts", r.ID, r.Status, r.Attempts)
		}
	}
	order := journalOrder(t, h.records("s"))
	want := []string{"started w1", "finished w1 succeeded", "started w2", "finished w2 succeeded"}
	if !slices.Equal(order, want) {
		t.Fatalf("journal %v, want %v", order, want)
	}
}
