package wire

import (
	"testing"

	"github.com/chorusrt/chorus/llm"
)

// The events' finish wins over the result's, the result's usage over the
// events'; each side fills what the other lacks.
func TestHeldEnd(t *testing.T) {
	var h HeldEnd
	if fin, u := h.Final(nil); fin != llm.FinishUnknown || !u.IsZero() {
		t.Fatalf("nothing held: %q %+v", fin, u)
	}
	h.Hold(&llm.Event{Type: llm.EventText, Text: "x"})
	h.Hold(&llm.Event{Type: llm.EventUsage, Usage: &llm.Usage{PromptTokens: 3}})
	h.Hold(&llm.Event{Type: llm.EventFinish, Finish: llm.FinishToolCalls})
	if fin, u := h.Final(&llm.ChatResult{FinishReason: llm.FinishStop, Usage: llm.Usage{PromptTokens: 7}}); fin != llm.FinishToolCalls || u.PromptTokens != 7 {
		t.Fatalf("both: %q %+v, want the events' finish and the result's usage", fin, u)
	}
	if fin, u := h.Final(&llm.ChatResult{FinishReason: llm.FinishStop}); fin != llm.FinishToolCalls || u.PromptTokens != 3 {
		t.Fatalf("result without usage: %q %+v, want the events' usage", fin, u)
	}
	var none HeldEnd
	if fin, _ := none.Final(&llm.ChatResult{FinishReason: llm.FinishStop}); fin != llm.FinishStop {
		t.Fatalf("no finish event: %q, want the result's", fin)
	}
}
