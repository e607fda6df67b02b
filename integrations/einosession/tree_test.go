package einosession_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/components/tool/utils"
	"github.com/cloudwego/eino/compose"

	"github.com/chorusrt/chorus/integrations/einosession"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/session"
)

var noApproval = session.ToolPolicy{RequireApproval: session.Bool(false)}

// TestSequentialAgent: a sequential agent of two ChatModelAgents. The
// first answers without tools, so the second makes its model call in the
// same RunModel; its tool call is a CallTool step, and the next RunModel
// resumes the sequence inside the second agent.
func TestSequentialAgent(t *testing.T) {
	var l ledger
	rn := einosession.New()
	lookup := rn.Tool(orderTool(t, &l, "lookup_order", "delivered"), einosession.Effect(session.EffectRead))
	first := newScripted(t, llmtest.Text("triaged: an order question"))
	second := newScripted(t, llmtest.ToolCalls(call("c1", "lookup_order", `{"order":7}`)), llmtest.Text("order 7 was delivered"))
	seq, err := adk.NewSequentialAgent(ctxT(t), &adk.SequentialAgentConfig{Name: "pipeline", Description: "triage then answer",
		SubAgents: []adk.Agent{chatAgent(t, "triage", first), chatAgent(t, "answer", second, lookup)}})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, rn, seq, session.Options{})
	r := h.turn("s", "where is order 7?")
	if r.Status != session.TurnCompleted || r.Answer != "order 7 was delivered" {
		t.Fatalf("turn %+v", r)
	}
	want := []string{"RunModel", "CallTool lookup_order succeeded", "RunModel"}
	if got := h.steps("s", 1); !slices.Equal(got, want) {
		t.Fatalf("steps %v, want %v", got, want)
	}
	if first.calls() != 1 || second.calls() != 2 {
		t.Fatalf("model calls: triage %d, answer %d; want 1 and 2", first.calls(), second.calls())
	}
	if a := h.agents("s"); a["lookup_order"] != "answer" {
		t.Fatalf("agents %v", a)
	}
	if !modelSaw(second, "triaged: an order question") {
		t.Fatal("the second agent did not see the first's answer")
	}
	if got := l.list(); !slices.Equal(got, []string{"lookup_order(7)"}) {
		t.Fatalf("tools ran %v", got)
	}
}

// TestParallelAgent: a parallel agent of two ChatModelAgent branches. Both
// model calls are in the first RunModel; the branch that answers without
// tools is done there, the other's tool call is a CallTool step, and the
// next RunModel resumes that branch with its recorded result.
func TestParallelAgent(t *testing.T) {
	var l ledger
	rn := einosession.New()
	tag := rn.Tool(orderTool(t, &l, "tag_order", "tagged"), einosession.Effect(session.EffectIdempotentWrite))
	a := newScripted(t, llmtest.Text("order 7 looks fine"))
	b := newScripted(t, llmtest.ToolCalls(call("cb", "tag_order", `{"order":7}`)), llmtest.Text("tagged order 7"))
	par, err := adk.NewParallelAgent(ctxT(t), &adk.ParallelAgentConfig{Name: "both", Description: "review and tag",
		SubAgents: []adk.Agent{chatAgent(t, "reviewer", a), chatAgent(t, "tagger", b, tag)}})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, rn, par, session.Options{})
	r := h.turn("s", "review and tag order 7")
	if r.Status != session.TurnCompleted || r.Answer != "tagged order 7" {
		t.Fatalf("turn %+v", r)
	}
	want := []string{"RunModel", "CallTool tag_order succeeded", "RunModel"}
	if got := h.steps("s", 1); !slices.Equal(got, want) {
		t.Fatalf("steps %v, want %v", got, want)
	}
	if a.calls() != 1 || b.calls() != 2 {
		t.Fatalf("model calls: reviewer %d, tagger %d; want 1 and 2", a.calls(), b.calls())
	}
	if ag := h.agents("s"); ag["tag_order"] != "tagger" {
		t.Fatalf("agents %v", ag)
	}
	if !modelSaw(b, `{\"tag_order\":\"tagged\"}`) {
		t.Fatal("the branch did not get its recorded result")
	}
	if rec := h.records("s")["tag_order"]; rec.Key != "s/1/cb" {
		t.Fatalf("idempotency key %q", rec.Key)
	}
	if got := l.list(); !slices.Equal(got, []string{"tag_order(7)"}) {
		t.Fatalf("tools ran %v", got)
	}
}

// TestParallelBranchesBothCallTools: when two branches of a parallel agent
// call tools in one step the turn fails before any tool runs, saying why:
// eino v0.7.36 resumes parallel branches with a data race of its own that
// can crash the process (concurrent map writes in internal/core).
func TestParallelBranchesBothCallTools(t *testing.T) {
	var l ledger
	rn := einosession.New()
	lookup := rn.Tool(orderTool(t, &l, "lookup_order", "delivered"), einosession.Effect(session.EffectRead))
	tag := rn.Tool(orderTool(t, &l, "tag_order", "tagged"), einosession.Effect(session.EffectIdempotentWrite))
	a := newScripted(t, llmtest.ToolCalls(call("ca", "lookup_order", `{"order":7}`)))
	b := newScripted(t, llmtest.ToolCalls(call("cb", "tag_order", `{"order":7}`)))
	par, err := adk.NewParallelAgent(ctxT(t), &adk.ParallelAgentConfig{Name: "both", Description: "look up and tag",
		SubAgents: []adk.Agent{chatAgent(t, "looker", a, lookup), chatAgent(t, "tagger", b, tag)}})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, rn, par, session.Options{})
	r := h.turn("s", "look up and tag order 7")
	if r.Status != session.TurnFailed || !strings.Contains(r.Error, "pause 2 agents at once") {
		t.Fatalf("turn %+v", r)
	}
	if len(l.list()) != 0 || len(h.records("s")) != 0 {
		t.Fatalf("a tool ran: %v", l.list())
	}
}

// TestTransferToSubAgent: the root agent transfers to a sub-agent in its
// RunModel (transfer is a control tool: no step); the sub-agent's model
// call is in the same RunModel, its tool call a CallTool step, and the
// next RunModel resumes inside the sub-agent.
func TestTransferToSubAgent(t *testing.T) {
	var l ledger
	rn := einosession.New()
	refund := rn.Tool(orderTool(t, &l, "refund_order", "r-1"), einosession.Effect(session.EffectNonIdempotentWrite))
	triageModel := newScripted(t, llmtest.ToolCalls(call("t1", adk.TransferToAgentToolName, `{"agent_name":"billing"}`)))
	billingModel := newScripted(t, llmtest.ToolCalls(call("b1", "refund_order", `{"order":7}`)), llmtest.Text("refund r-1 issued"))
	root, err := adk.SetSubAgents(ctxT(t), chatAgent(t, "triage", triageModel), []adk.Agent{chatAgent(t, "billing", billingModel, refund)})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, rn, root, session.Options{Policy: map[string]session.ToolPolicy{"refund_order": noApproval}})
	r := h.turn("s", "refund order 7")
	if r.Status != session.TurnCompleted || r.Answer != "refund r-1 issued" {
		t.Fatalf("turn %+v", r)
	}
	want := []string{"RunModel", "CallTool refund_order succeeded", "RunModel"}
	if got := h.steps("s", 1); !slices.Equal(got, want) {
		t.Fatalf("steps %v, want %v", got, want)
	}
	if triageModel.calls() != 1 || billingModel.calls() != 2 {
		t.Fatalf("model calls: triage %d, billing %d", triageModel.calls(), billingModel.calls())
	}
	if a := h.agents("s"); a["refund_order"] != "billing" {
		t.Fatalf("agents %v", a)
	}
	if got := l.list(); !slices.Equal(got, []string{"refund_order(7)"}) {
		t.Fatalf("tools ran %v", got)
	}
}

// TestAgentAsTool: an agent used as a tool runs its whole agent inside one
// CallTool step: its inner tool runs there, without a step of its own.
func TestAgentAsTool(t *testing.T) {
	var l ledger
	rn := einosession.New()
	lookup := rn.Tool(orderTool(t, &l, "lookup_order", "delivered"), einosession.Effect(session.EffectRead))
	innerModel := newScripted(t, llmtest.ToolCalls(call("i1", "lookup_order", `{"order":7}`)), llmtest.Text("order 7: delivered"))
	inner := chatAgent(t, "researcher", innerModel, lookup)
	research := rn.Tool(adk.NewAgentTool(ctxT(t), inner).(tool.InvokableTool), einosession.Effect(session.EffectRead))
	rootModel := newScripted(t, llmtest.ToolCalls(call("r1", "researcher", `{"request":"order 7"}`)), llmtest.Text("it was delivered"))
	root := chatAgent(t, "support", rootModel, research)
	h := newHarness(t, rn, root, session.Options{})
	r := h.turn("s", "where is order 7?")
	if r.Status != session.TurnCompleted || r.Answer != "it was delivered" {
		t.Fatalf("turn %+v", r)
	}
	want := []string{"RunModel", "CallTool researcher succeeded", "RunModel"}
	if got := h.steps("s", 1); !slices.Equal(got, want) {
		t.Fatalf("steps %v, want %v", got, want)
	}
	if rootModel.calls() != 2 || innerModel.calls() != 2 {
		t.Fatalf("model calls: root %d, inner %d", rootModel.calls(), innerModel.calls())
	}
	if got := l.list(); !slices.Equal(got, []string{"lookup_order(7)"}) {
		t.Fatalf("tools ran %v", got)
	}
	if res := h.records("s")["researcher"].Result; !strings.Contains(res, "order 7: delivered") {
		t.Fatalf("agent tool result %q", res)
	}
}

// TestReadAgentToolWithWrite: an agent tool declared read whose agent
// calls a tool that is not read ends failed before that tool runs.
func TestReadAgentToolWithWrite(t *testing.T) {
	var l ledger
	rn := einosession.New()
	refund := rn.Tool(orderTool(t, &l, "refund_order", "r-1"), einosession.Effect(session.EffectNonIdempotentWrite))
	innerModel := newScripted(t, llmtest.ToolCalls(call("i1", "refund_order", `{"order":7}`)), llmtest.Text("done"))
	inner := chatAgent(t, "refunder", innerModel, refund)
	agentTool := rn.Tool(adk.NewAgentTool(ctxT(t), inner).(tool.InvokableTool), einosession.Effect(session.EffectRead))
	rootModel := newScripted(t, llmtest.ToolCalls(call("r1", "refunder", `{"request":"order 7"}`)), llmtest.Text("could not"))
	h := newHarness(t, rn, chatAgent(t, "support", rootModel, agentTool), session.Options{})
	if r := h.turn("s", "refund order 7"); r.Status != session.TurnCompleted {
		t.Fatalf("turn %+v", r)
	}
	rec := h.records("s")["refunder"]
	if rec.Status != session.StatusFailed || rec.Attempts != 1 || !strings.Contains(rec.Error, "refunder is declared read, but its agent called refund_order, which is not read") {
		t.Fatalf("record %+v", rec)
	}
	if len(l.list()) != 0 {
		t.Fatalf("the write ran: %v", l.list())
	}
}

// TestControlToolWithOthers: a response calling transfer_to_agent together
// with another tool fails the turn before any tool runs.
func TestControlToolWithOthers(t *testing.T) {
	var l ledger
	rn := einosession.New()
	lookup := rn.Tool(orderTool(t, &l, "lookup_order", "delivered"), einosession.Effect(session.EffectRead))
	triageModel := newScripted(t, llmtest.ToolCalls(call("t1", adk.TransferToAgentToolName, `{"agent_name":"billing"}`), call("t2", "lookup_order", `{"order":7}`)))
	billingModel := newScripted(t, llmtest.Text("billing here"))
	root, err := adk.SetSubAgents(ctxT(t), chatAgent(t, "triage", triageModel, lookup), []adk.Agent{chatAgent(t, "billing", billingModel)})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, rn, root, session.Options{})
	r := h.turn("s", "refund order 7")
	if r.Status != session.TurnFailed || !strings.Contains(r.Error, "called transfer_to_agent together with lookup_order") {
		t.Fatalf("turn %+v", r)
	}
	if len(l.list()) != 0 || len(h.records("s")) != 0 {
		t.Fatalf("a tool ran: %v %v", l.list(), h.records("s"))
	}
	if triageModel.calls() != 1 {
		t.Fatalf("triage model called %d times: the step was retried", triageModel.calls())
	}
}

// TestConfirmationInsideStep: a tool that interrupts for a confirmation
// of its own inside its step ends failed, saying so.
func TestConfirmationInsideStep(t *testing.T) {
	rn := einosession.New()
	asks, err := utils.InferTool("wire_money", "wire money", func(ctx context.Context, in orderIn) (string, error) {
		return "", compose.Interrupt(ctx, "really wire the money?")
	})
	if err != nil {
		t.Fatal(err)
	}
	wire := rn.Tool(asks, einosession.Effect(session.EffectNonIdempotentWrite))
	model := newScripted(t, llmtest.ToolCalls(call("c1", "wire_money", `{"order":7}`)), llmtest.Text("could not wire"))
	h := newHarness(t, rn, chatAgent(t, "support", model, wire), session.Options{Policy: map[string]session.ToolPolicy{"wire_money": noApproval}})
	if r := h.turn("s", "wire it"); r.Status != session.TurnCompleted {
		t.Fatalf("turn %+v", r)
	}
	rec := h.records("s")["wire_money"]
	if rec.Status != session.StatusFailed || !strings.Contains(rec.Error, "asked for a confirmation of its own inside its step") {
		t.Fatalf("record %+v", rec)
	}
}
