package console

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/session"
)

// agentStep is a session.ModelStep standing for a framework's agent tree:
// agent "billing" asks for the refund, then the tree answers.
type agentStep struct{}

func (agentStep) RunModel(_ context.Context, in session.StepInput) (*session.StepOutput, error) {
	if in.State == nil {
		return &session.StepOutput{
			Result: &llm.ChatResult{ToolCalls: []llm.ToolCall{{ID: "b1", Name: "refund", Arguments: `{"order":7}`}}},
			State:  []byte("paused"), Agents: map[string]string{"b1": "billing"},
		}, nil
	}
	return &session.StepOutput{Result: &llm.ChatResult{Content: "refunded"}}, nil
}

// TestAgentOfEachCall: a session whose steps a framework's agent tree runs
// (session.Options.ModelStep) shows, in the API and on its page, the agent
// that asked for each call: in the tool records and in the timeline.
func TestAgentOfEachCall(t *testing.T) {
	k := newKit(t, kitOpts{})
	k.mopt.ModelStep = agentStep{}
	k.restart()
	in := k.refundSession("a1")
	if in.Call.Agent != "billing" {
		t.Fatalf("pending call %+v", in.Call)
	}
	if err := k.m.Resolve(ctxT(t, 10*time.Second), "a1", in.ID, true, "ok"); err != nil {
		t.Fatal(err)
	}
	if r, err := k.m.Wait(ctxT(t, 10*time.Second), "a1"); err != nil || r.Answer != "refunded" {
		t.Fatalf("turn %+v %v", r, err)
	}
	var sv SessionView
	k.do(req{path: APIPrefix + "sessions/a1", bearer: testToken}).json(t, &sv)
	if len(sv.Tools) != 1 || sv.Tools[0].Agent != "billing" {
		t.Fatalf("tools %+v", sv.Tools)
	}
	planned := ""
	for _, e := range sv.Timeline {
		for _, c := range e.Calls {
			planned = c.Agent
		}
	}
	if planned != "billing" {
		t.Fatalf("timeline %+v", sv.Timeline)
	}
	page := k.do(req{path: PagePrefix + "sessions/a1", bearer: testToken})
	if body := string(page.body); page.status != 200 || !strings.Contains(body, "(agent billing)") || !strings.Contains(body, "call refund by agent billing") {
		t.Fatalf("session page: %d %s", page.status, body)
	}
}
