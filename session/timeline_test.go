package session

import (
	"slices"
	"testing"

	"github.com/chorusrt/chorus/llmtest"
)

// TestTimelineAndSessions: Sessions lists the journal's sessions;
// Timeline decodes a turn with an approval: the user message, the model
// call with its usage and planned call, the resolution, the tool's attempt
// and outcome with its effect, the turn's end.
func TestTimelineAndSessions(t *testing.T) {
	var l ledger
	h := newHarness(t, Options{Tools: []Tool{tool(&l, "refund", EffectNonIdempotentWrite, ok(`<b>r-1</b>`))}})
	h.srv.Push(llmtest.ToolCalls(call("c1", "refund", `{"order":7}`)), llmtest.Text("done"))
	h.send("s2", "refund order 7")
	p := h.pending("s2", 1)
	if err := h.m.Resolve(ctx10(t), "s2", p[0].ID, true, "ok by Ann"); err != nil {
		t.Fatal(err)
	}
	if r := h.wait("s2"); r.Status != TurnCompleted {
		t.Fatalf("turn %+v", r)
	}
	ids, err := h.m.Sessions(ctx10(t))
	if err != nil || !slices.Equal(ids, []string{"s2"}) {
		t.Fatalf("sessions %q %v", ids, err)
	}
	tl, err := h.m.Timeline(ctx10(t), "s2")
	if err != nil {
		t.Fatal(err)
	}
	byKind := map[string][]TimelineEntry{}
	var order []string
	for _, e := range tl {
		byKind[e.Kind] = append(byKind[e.Kind], e)
		order = append(order, e.Kind)
	}
	if len(byKind["user_message"]) != 1 || byKind["user_message"][0].Text != "refund order 7" {
		t.Fatalf("user message: %+v (%q)", byKind["user_message"], order)
	}
	mo := byKind["model_output"]
	if len(mo) != 2 || len(mo[0].Calls) != 1 || mo[0].Calls[0].Name != "refund" || !mo[0].Calls[0].Approval || mo[0].Usage == nil || mo[1].Text != "done" {
		t.Fatalf("model outputs: %+v", mo)
	}
	ap := byKind["approval_resolved"]
	if len(ap) != 1 || !ap[0].Approved || ap[0].Text != "ok by Ann" || ap[0].Tool != "refund" || ap[0].Interrupt != p[0].ID {
		t.Fatalf("approval: %+v", ap)
	}
	st := byKind["tool_started"]
	if len(st) != 1 || st[0].Attempt != 1 || st[0].Effect != EffectNonIdempotentWrite || st[0].Step == 0 {
		t.Fatalf("tool started: %+v", st)
	}
	fin := byKind["tool_finished"]
	if len(fin) != 1 || fin[0].Status != "succeeded" || fin[0].Text != `<b>r-1</b>` || fin[0].Tool != "refund" {
		t.Fatalf("tool finished: %+v", fin)
	}
	end := byKind["turn_finished"]
	if len(end) != 1 || end[0].Status != "completed" || end[0].Turn != 1 {
		t.Fatalf("turn finished: %+v", end)
	}
	for i, e := range tl {
		if e.Seq != int64(i+1) || e.At.IsZero() {
			t.Fatalf("entry %d: seq %d at %v", i, e.Seq, e.At)
		}
	}
	if tl, err := h.m.Timeline(ctx10(t), "nobody"); err != nil || len(tl) != 0 {
		t.Fatalf("unknown session: %v %v", tl, err)
	}
	if _, err := h.m.Timeline(ctx10(t), ""); err == nil {
		t.Fatal("empty id accepted")
	}
}
