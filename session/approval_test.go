package session

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llmtest"
)

// TestApproval: a call that needs approval waits in AwaitToolApproval
// without running; an approved call runs once, a rejected call never runs
// and the model sees the rejection; a resolution is accepted once.
func TestApproval(t *testing.T) {
	var l ledger
	h := newHarness(t, Options{Tools: []Tool{
		tool(&l, "refund", EffectNonIdempotentWrite, ok(`{"refund":"r-1"}`)),
		tool(&l, "email", "", ok("sent")), // unclassified: approval by default
		tool(&l, "lookup", EffectRead, ok("order 7")),
	}})
	h.srv.Push(llmtest.ToolCalls(call("c1", "refund", `{"order":7}`), call("c2", "email", `{}`), call("c3", "lookup", `{}`)), llmtest.Text("done"))
	evs := collect(h.m, "s")
	h.send("s", "refund order 7")
	pend := h.pending("s", 2)
	until(t, "lookup ran", func() bool { return len(l.of("c3")) == 1 })
	// The read's record lands after its handler returns; then only the
	// approvals remain.
	until(t, "the turn waits for approvals", func() bool { return h.snap("s").Step == StepAwaitToolApproval })
	if len(l.of("c1"))+len(l.of("c2")) != 0 {
		t.Fatal("a call ran before its approval")
	}
	byCall := map[string]Interrupt{}
	for _, p := range pend {
		byCall[p.Call.ID] = p
		if p.Call.ApprovalStep == 0 || p.Call.ApprovalStep >= p.Call.Step {
			t.Errorf("approval step %d, call step %d", p.Call.ApprovalStep, p.Call.Step)
		}
	}
	ctx := ctx10(t)
	if err := h.m.Resolve(ctx, "s", byCall["c1"].ID, true, "ok by Ann"); err != nil {
		t.Fatal(err)
	}
	err := h.m.Resolve(ctx, "s", byCall["c1"].ID, false, "changed my mind")
	var re *ResolveError
	if !errors.As(err, &re) || !errors.Is(err, ErrAlreadyResolved) || !re.Approved || re.Reason != "ok by Ann" {
		t.Fatalf("duplicate resolution: %v", err)
	}
	if err := h.m.Resolve(ctx, "s", "approval/9/zz", true, ""); !errors.Is(err, ErrUnknownInterrupt) {
		t.Fatalf("unknown interrupt: %v", err)
	}
	if err := h.m.Resolve(ctx, "s", byCall["c2"].ID, false, "no emails today"); err != nil {
		t.Fatal(err)
	}
	if r := h.wait("s"); r.Status != TurnCompleted {
		t.Fatalf("turn %+v", r)
	}
	if n := len(l.of("c1")); n != 1 {
		t.Fatalf("approved call ran %d times", n)
	}
	if n := len(l.of("c2")); n != 0 {
		t.Fatalf("rejected call ran %d times", n)
	}
	// A resolution after the turn: still a duplicate for c2.
	if err := h.m.Resolve(ctx, "s", byCall["c2"].ID, true, ""); !errors.Is(err, ErrAlreadyResolved) {
		t.Fatalf("late duplicate: %v", err)
	}
	s := h.snap("s")
	want := map[string]ToolStatus{"c1": StatusSucceeded, "c2": StatusRejected, "c3": StatusSucceeded}
	for _, r := range s.Tools {
		if r.Status != want[r.ID] {
			t.Errorf("%s: %s, want %s", r.ID, r.Status, want[r.ID])
		}
	}
	resp, _ := toolResponse(h.lastRequest(), "c2")
	if !strings.Contains(resp, "The tool call was rejected: no emails today") {
		t.Fatalf("rejection response = %s", resp)
	}
	got := evs.close()
	var req, res int
	for _, e := range got {
		switch e.Type {
		case EventApprovalRequested:
			req++
			if e.StepKind != StepAwaitToolApproval || e.Interrupt == "" || e.Turn != 1 {
				t.Errorf("approval event %+v", e)
			}
		case EventApprovalResolved:
			res++
		}
	}
	if req != 2 || res != 2 {
		t.Fatalf("approval events: %d requested, %d resolved", req, res)
	}
}

// TestApprovalDeadline: a pending approval past its deadline ends
// rejected, and a later resolution is refused as stale. The deadline is
// durable: a restarted session expires it on time.
func TestApprovalDeadline(t *testing.T) {
	var l ledger
	h := newHarness(t, Options{ApprovalTimeout: 150 * time.Millisecond, Tools: []Tool{tool(&l, "refund", EffectNonIdempotentWrite, ok("r"))}})
	h.srv.Push(llmtest.ToolCalls(call("c1", "refund", `{}`)), llmtest.Text("expired, sorry"),
		llmtest.ToolCalls(call("c1", "refund", `{}`)), llmtest.Text("expired again"))
	h.send("s", "refund")
	p := h.pending("s", 1)[0]
	if d := time.Until(p.Deadline); d <= 0 || d > 150*time.Millisecond {
		t.Fatalf("deadline in %v", d)
	}
	if r := h.wait("s"); r.Status != TurnCompleted || r.Answer != "expired, sorry" {
		t.Fatalf("turn = %+v", r)
	}
	err := h.m.Resolve(ctx10(t), "s", p.ID, true, "")
	var re *ResolveError
	if !errors.As(err, &re) || !errors.Is(err, ErrStaleInterrupt) || !re.Expired {
		t.Fatalf("resolution after the deadline: %v", err)
	}
	rec := h.snap("s").Tools[0]
	if rec.Status != StatusRejected || !strings.Contains(rec.Error, "deadline") || len(l.inv) != 0 {
		t.Fatalf("record %+v, ran %d times", rec, len(l.inv))
	}
	resp, _ := toolResponse(h.lastRequest(), "c1")
	if !strings.Contains(resp, "The tool call was rejected: the approval deadline passed") {
		t.Fatalf("response = %s", resp)
	}

	// Second turn: stop the process while the approval is pending, start
	// again after the deadline: recovery expires it at once.
	h.send("s", "try again")
	p2 := h.pending("s", 1)[0]
	if p2.ID == p.ID {
		t.Fatalf("interrupt id reused: %s", p2.ID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(p2.Deadline) + 10*time.Millisecond)
	h.start()
	if _, err := h.m.Recover(ctx10(t)); err != nil {
		t.Fatal(err)
	}
	if r := h.wait("s"); r.Turn != 2 || r.Answer != "expired again" {
		t.Fatalf("turn after restart = %+v", r)
	}
	if len(l.inv) != 0 {
		t.Fatal("an expired call ran")
	}
}

// TestApprovalSurvivesRestart: a pending approval is durable; after a
// restart it is still pending with its id, and resolving it runs the call
// once.
func TestApprovalSurvivesRestart(t *testing.T) {
	var l ledger
	h := newHarness(t, Options{Tools: []Tool{tool(&l, "refund", EffectNonIdempotentWrite, ok("r"))}})
	h.srv.Push(llmtest.ToolCalls(call("c1", "refund", `{}`)), llmtest.Text("refunded"))
	h.send("s", "refund")
	p := h.pending("s", 1)[0]
	h.restart()
	busy, err := h.m.Recover(ctx10(t))
	if err != nil || len(busy) != 1 || busy[0] != "s" {
		t.Fatalf("Recover = %v, %v", busy, err)
	}
	p2 := h.pending("s", 1)[0]
	if p2.ID != p.ID {
		t.Fatalf("interrupt %s became %s", p.ID, p2.ID)
	}
	if err := h.m.Resolve(ctx10(t), "s", p.ID, true, ""); err != nil {
		t.Fatal(err)
	}
	if r := h.wait("s"); r.Answer != "refunded" {
		t.Fatalf("turn = %+v", r)
	}
	if len(l.inv) != 1 {
		t.Fatalf("ran %d times", len(l.inv))
	}
}

// TestToolRequiresApproval: a tool that declares RequireApproval waits for
// approval whatever its effect, and a policy cannot lower it: a read
// (no approval by default) whose policy says no approval still waits, and
// runs only once approved; a rejected call never runs.
func TestToolRequiresApproval(t *testing.T) {
	var l ledger
	confirm := tool(&l, "delete_file", EffectRead, ok("deleted"))
	confirm.RequireApproval = true
	h := newHarness(t, Options{
		Tools:  []Tool{confirm, tool(&l, "lookup", EffectRead, ok("x"))},
		Policy: map[string]ToolPolicy{"delete_file": {Effect: EffectIdempotentWrite, RequireApproval: Bool(false)}},
	})
	h.srv.Push(llmtest.ToolCalls(call("c1", "delete_file", `{}`), call("c2", "lookup", `{}`)), llmtest.Text("one done"),
		llmtest.ToolCalls(call("c1", "delete_file", `{}`)), llmtest.Text("not deleted"))
	h.send("s", "delete it")
	pend := h.pending("s", 1)
	if pend[0].Call.ID != "c1" || pend[0].Call.Effect != EffectIdempotentWrite {
		t.Fatalf("pending %+v, want c1 (idempotent_write by policy)", pend[0].Call)
	}
	until(t, "the turn waits for the approval", func() bool { return h.snap("s").Step == StepAwaitToolApproval })
	if len(l.of("c1")) != 0 || len(l.of("c2")) != 1 {
		t.Fatalf("ran before approval: c1 %d, c2 %d", len(l.of("c1")), len(l.of("c2")))
	}
	if err := h.m.Resolve(ctx10(t), "s", pend[0].ID, true, ""); err != nil {
		t.Fatal(err)
	}
	if r := h.wait("s"); r.Answer != "one done" || len(l.of("c1")) != 1 {
		t.Fatalf("turn %+v, c1 ran %d times", r, len(l.of("c1")))
	}
	h.send("s", "again")
	pend = h.pending("s", 1)
	if err := h.m.Resolve(ctx10(t), "s", pend[0].ID, false, "no"); err != nil {
		t.Fatal(err)
	}
	if r := h.wait("s"); r.Answer != "not deleted" || len(l.of("c1")) != 1 {
		t.Fatalf("turn %+v, c1 ran %d times", r, len(l.of("c1")))
	}
	if rec := h.snap("s").Tools[2]; rec.Status != StatusRejected || !rec.Approval {
		t.Fatalf("record %+v", rec)
	}
}
