package einosession_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/chorusrt/chorus/integrations/einosession"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/session"
)

// TestSessionTool: a session.Tool (as mcptools.Set.SessionTools gives, its
// effect from a trusted server's annotations) in an eino agent: its own
// effect applies unless a policy overrides it, and its handler gets the
// session's Call, idempotency key included.
func TestSessionTool(t *testing.T) {
	var keys []string
	tag := session.Tool{Def: llm.Tool{Name: "tag_order", Description: "tag an order", Parameters: json.RawMessage(`{"type":"object","properties":{"order":{"type":"integer"}}}`)},
		Effect: session.EffectIdempotentWrite,
		Handler: func(_ context.Context, c session.Call) (session.Result, error) {
			keys = append(keys, c.IdempotencyKey)
			return session.Result{Content: `{"tagged":true}`}, nil
		}}
	note := session.Tool{Def: llm.Tool{Name: "read_note", Description: "read a note"}, Effect: session.EffectUnclassified,
		Handler: func(context.Context, session.Call) (session.Result, error) {
			return session.Result{Content: "a note"}, nil
		}}
	rn := einosession.New()
	model := newScripted(t, llmtest.ToolCalls(call("c1", "tag_order", `{"order":7}`), call("c2", "read_note", `{}`)), llmtest.Text("tagged"))
	tagged := rn.SessionTool(tag)
	if again := rn.SessionTool(tag); again != tagged {
		t.Fatal("the same session tool wrapped twice (for two agents) is not one tool")
	}
	agent := chatAgent(t, "support", model, tagged, rn.SessionTool(note))
	h := newHarness(t, rn, agent, session.Options{Policy: map[string]session.ToolPolicy{"read_note": {Effect: session.EffectRead}}})
	if r := h.turn("s", "tag order 7"); r.Status != session.TurnCompleted || r.Answer != "tagged" {
		t.Fatalf("turn %+v", r)
	}
	recs := h.records("s")
	if recs["tag_order"].Effect != session.EffectIdempotentWrite || recs["tag_order"].Key != "s/1/c1" || recs["read_note"].Effect != session.EffectRead {
		t.Fatalf("records %+v", recs)
	}
	if !slices.Equal(keys, []string{"s/1/c1"}) {
		t.Fatalf("handler keys %v", keys)
	}
	if !modelSaw(model, `"tag_order"`) || !modelSaw(model, `"order"`) {
		t.Fatal("the model was not offered the session tool with its schema")
	}
}
