package session

import (
	"testing"

	"github.com/chorusrt/chorus/llmtest"
)

// Passivate stops one session and reports whether it was idle; the next
// call activates it again from the journal, where it stopped, and other
// sessions are untouched.
func TestPassivate(t *testing.T) {
	var l ledger
	h := newHarness(t, Options{Tools: []Tool{tool(&l, "refund", EffectNonIdempotentWrite, ok(`{"refund":"r-1"}`))}})
	h.srv.Push(llmtest.Text("hello"))
	h.send("idle", "hi")
	if r := h.wait("idle"); r.Answer != "hello" {
		t.Fatalf("turn: %+v", r)
	}
	// A session waiting for an approval is not idle.
	h.srv.Push(llmtest.ToolCalls(call("c1", "refund", `{"order":7}`)), llmtest.Text("refunded"))
	h.send("busy", "refund order 7")
	pend := h.pending("busy", 1)

	idle, err := h.m.Passivate(ctx10(t), "idle")
	if err != nil || !idle {
		t.Fatalf("Passivate(idle) = %v, %v; want idle", idle, err)
	}
	idle, err = h.m.Passivate(ctx10(t), "busy")
	if err != nil || idle {
		t.Fatalf("Passivate(busy) = %v, %v; want not idle", idle, err)
	}
	if idle, err := h.m.Passivate(ctx10(t), "never-seen"); err != nil || !idle {
		t.Fatalf("Passivate(unknown) = %v, %v; want idle", idle, err)
	}
	if _, err := h.m.Passivate(ctx10(t), ""); err == nil {
		t.Fatal("Passivate accepted an empty id")
	}
	// Activated again: the idle one has its history, the busy one its
	// pending approval, which resolves and finishes the turn; the write ran
	// once.
	if s := h.snap("idle"); len(s.History) != 2 {
		t.Fatalf("idle session after passivation: %d messages, want 2", len(s.History))
	}
	if err := h.m.Resolve(ctx10(t), "busy", pend[0].ID, true, "ok"); err != nil {
		t.Fatalf("resolve after passivation: %v", err)
	}
	if r := h.wait("busy"); r.Answer != "refunded" {
		t.Fatalf("busy session's turn: %+v", r)
	}
	if n := len(l.of("c1")); n != 1 {
		t.Fatalf("the refund ran %d times, want 1", n)
	}
}
