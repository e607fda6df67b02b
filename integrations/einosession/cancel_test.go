package einosession_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chorusrt/chorus/integrations/einosession"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/session"
)

// TestCancelAndNote: CancelTurn on an eino session whose write waits for
// approval ends the turn cancelled without running the write; the next
// turn starts a new run whose model sees the turn-failure note; the event
// stream carries the turn's steps, tool calls and text as for a native
// session.
func TestCancelAndNote(t *testing.T) {
	var l ledger
	rn := einosession.New()
	refund := rn.Tool(orderTool(t, &l, "refund_order", "r-1"), einosession.Effect(session.EffectNonIdempotentWrite))
	model := newScripted(t, llmtest.ToolCalls(call("c1", "refund_order", `{"order":7}`)), llmtest.Text("nothing was refunded"))
	h := newHarness(t, rn, chatAgent(t, "support", model, refund), session.Options{})
	ch, stop := h.m.Events("s", 0)
	var mu sync.Mutex
	var evs []session.Event
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range ch {
			mu.Lock()
			evs = append(evs, ev)
			mu.Unlock()
		}
	}()
	ctx := ctxT(t)
	if err := h.m.Send(ctx, "s", llm.UserText("refund order 7")); err != nil {
		t.Fatal(err)
	}
	for {
		s, err := h.m.Snapshot(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Pending) == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err := h.m.CancelTurn(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	r, err := h.m.Wait(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != session.TurnCancelled || !strings.Contains(r.Note, "refund_order") {
		t.Fatalf("turn %+v", r)
	}
	if rec := h.records("s")["refund_order"]; rec.Status != session.StatusRejected || len(l.list()) != 0 {
		t.Fatalf("record %+v, ran %v", rec, l.list())
	}
	if r := h.turn("s", "so?"); r.Answer != "nothing was refunded" {
		t.Fatalf("second turn %+v", r)
	}
	if !modelSaw(model, "[chorus] Turn 1 cancelled") {
		t.Fatal("the next turn's run did not see the note")
	}
	stop()
	<-done
	seen := map[session.EventType]int{}
	for _, ev := range evs {
		seen[ev.Type]++
	}
	if seen[session.EventApprovalRequested] != 1 || seen[session.EventToolCallFinished] != 1 || seen[session.EventTurnFinished] != 2 || seen[session.EventTextDelta] == 0 {
		t.Fatalf("events %v", seen)
	}
}
