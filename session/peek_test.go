package session

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llmtest"
)

// TestPeekDoesNotActivate: Peek reads a passivated session from the
// journal, leaving it passive, with the state Snapshot would give: an idle
// session's history and last answer; a parked one's pending approval, with
// the turn at AwaitToolApproval. An active session's snapshot comes from
// its actor. An unknown session is ErrUnknownSession and activates nothing.
func TestPeekDoesNotActivate(t *testing.T) {
	var l ledger
	h := newHarness(t, Options{IdleTimeout: 20 * time.Millisecond,
		Tools: []Tool{tool(&l, "refund", EffectNonIdempotentWrite, ok(`{"refund":"r-1"}`))}})
	h.srv.Push(llmtest.Text("hello"))
	h.send("a", "hi")
	h.wait("a")
	h.srv.Push(llmtest.ToolCalls(call("c1", "refund", `{"order":7}`)))
	h.send("b", "refund order 7")
	pend := h.pending("b", 1)
	until(t, "both sessions passivated", func() bool { return len(h.m.active()) == 0 })

	for range 3 {
		a, err := h.m.Peek(ctx10(t), "a")
		if err != nil {
			t.Fatal(err)
		}
		if !a.Passive || a.Step != StepAwaitUserMessage || len(a.History) != 2 || a.Last.Answer != "hello" || a.ModelCalls != 1 || len(a.Pending) != 0 {
			t.Fatalf("a: %+v", a)
		}
		b, err := h.m.Peek(ctx10(t), "b")
		if err != nil {
			t.Fatal(err)
		}
		if !b.Passive || b.Step != StepAwaitToolApproval || len(b.Pending) != 1 || b.Pending[0].ID != pend[0].ID || b.Pending[0].Call.Arguments != `{"order":7}` || b.Turn != 1 {
			t.Fatalf("b: %+v", b)
		}
		if _, err := h.m.Peek(ctx10(t), "nobody"); !errors.Is(err, ErrUnknownSession) {
			t.Fatalf("unknown session: %v", err)
		}
		if act := h.m.active(); len(act) != 0 {
			t.Fatalf("Peek activated %q", act)
		}
		if live := h.m.Live(); !slices.Equal(live, []string{"b"}) {
			t.Fatalf("live sessions %q, want b (parked with its approval)", live)
		}
	}
	// An active session's snapshot is its actor's.
	waited := make(chan struct{})
	go func() { _, _ = h.m.Wait(ctx10(t), "b"); close(waited) }()
	until(t, "b active for its waiter", func() bool { return len(h.m.active()) == 1 })
	b, err := h.m.Peek(ctx10(t), "b")
	if err != nil || b.Passive || b.Step != StepAwaitToolApproval || len(b.Pending) != 1 {
		t.Fatalf("active b: %+v, %v", b, err)
	}
	h.srv.Push(llmtest.Text("refunded"))
	if err := h.m.Resolve(ctx10(t), "b", pend[0].ID, true, ""); err != nil {
		t.Fatal(err)
	}
	<-waited
	if len(l.of("c1")) != 1 {
		t.Fatalf("the refund ran %d times", len(l.of("c1")))
	}
}
