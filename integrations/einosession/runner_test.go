package einosession_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/integrations/einosession"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/session"
)

// TestChatModelAgentReadAndWrite: a ChatModelAgent with a read and a write
// tool. Its response calls both; each call is a CallTool step of its own
// (the write after approval, once), the model's second call is the next
// RunModel, which resumes the agent with the recorded results, and the
// model sees them. One RunModel per model call, one CallTool per call.
func TestChatModelAgentReadAndWrite(t *testing.T) {
	var l ledger
	rn := einosession.New()
	lookup := rn.Tool(orderTool(t, &l, "lookup_order", "delivered"), einosession.Effect(session.EffectRead))
	refund := rn.Tool(orderTool(t, &l, "refund_order", "r-1"))
	model := newScripted(t,
		llmtest.ToolCalls(call("c1", "lookup_order", `{"order":7}`), call("c2", "refund_order", `{"order":7}`)),
		llmtest.Text("refunded order 7"))
	agent := chatAgent(t, "support", model, lookup, refund)
	h := newHarness(t, rn, agent, session.Options{Policy: map[string]session.ToolPolicy{"refund_order": {Effect: session.EffectNonIdempotentWrite}}})
	ctx := ctxT(t)
	if err := h.m.Send(ctx, "s", llm.UserText("refund order 7")); err != nil {
		t.Fatal(err)
	}
	var pend []session.Interrupt
	for len(pend) == 0 {
		s, err := h.m.Snapshot(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		pend = s.Pending
	}
	if pend[0].Call.Name != "refund_order" || slices.Contains(l.list(), "refund_order(7)") {
		t.Fatalf("pending %+v, ran %v", pend, l.list())
	}
	if err := h.m.Resolve(ctx, "s", pend[0].ID, true, "ok"); err != nil {
		t.Fatal(err)
	}
	r, err := h.m.Wait(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != session.TurnCompleted || r.Answer != "refunded order 7" {
		t.Fatalf("turn %+v", r)
	}
	want := []string{"RunModel", "CallTool lookup_order succeeded", "CallTool refund_order succeeded", "RunModel"}
	if got := h.steps("s", 1); !slices.Equal(got, want) {
		t.Fatalf("steps %v, want %v", got, want)
	}
	if model.calls() != 2 {
		t.Fatalf("%d model calls, want 2", model.calls())
	}
	if got := l.list(); !slices.Equal(got, []string{"lookup_order(7)", "refund_order(7)"}) {
		t.Fatalf("tools ran %v", got)
	}
	recs := h.records("s")
	if recs["lookup_order"].Effect != session.EffectRead || recs["refund_order"].Effect != session.EffectNonIdempotentWrite || !recs["refund_order"].Approval {
		t.Fatalf("records %+v", recs)
	}
	if a := h.agents("s"); a["lookup_order"] != "support" || a["refund_order"] != "support" {
		t.Fatalf("agents %v", a)
	}
	if !modelSaw(model, `{\"refund_order\":\"r-1\"}`) || !modelSaw(model, `{\"lookup_order\":\"delivered\"}`) {
		t.Fatal("the model's second call did not get the recorded results")
	}
	// A second turn starts a new run with the session's history.
	model.srv.Push(llmtest.Text("you are welcome"))
	if r := h.turn("s", "thanks"); r.Answer != "you are welcome" {
		t.Fatalf("second turn %+v", r)
	}
	if got := h.steps("s", 2); !slices.Equal(got, []string{"RunModel"}) {
		t.Fatalf("second turn steps %v", got)
	}
	if !strings.Contains(string(model.srv.Requests()[2].Body), "refunded order 7") {
		t.Fatal("the second turn's run did not see the first turn")
	}
}

// TestToolNameCollision: two different tools under one name fail Options.
func TestToolNameCollision(t *testing.T) {
	var l ledger
	rn := einosession.New()
	a := rn.Tool(orderTool(t, &l, "lookup_order", "a"))
	_ = rn.Tool(orderTool(t, &l, "lookup_order", "b"))
	agent := chatAgent(t, "support", newScripted(t), a)
	_, err := rn.Options(agent, session.Options{})
	if err == nil || !strings.Contains(err.Error(), `two different tools are named "lookup_order"`) {
		t.Fatalf("Options: %v", err)
	}
	// The same tool wrapped twice (for two agents) is one tool.
	rn2 := einosession.New()
	same := orderTool(t, &l, "lookup_order", "a")
	rn2.Tool(same)
	rn2.Tool(same)
	if _, err := rn2.Options(agent, session.Options{}); err != nil {
		t.Fatalf("the same tool twice: %v", err)
	}
}
