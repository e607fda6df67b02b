package wire

import "github.com/chorusrt/chorus/llm"

// ToolAssembler maps a format's tool-call coordinates to the call's position
// in ChatResult.ToolCalls. Calls are keyed by (choice, index, id): a chunk
// that repeats a known id or omits it continues that call; a new id at a known
// index opens a new call (some gateways reuse index 0 for every call).
type ToolAssembler struct {
	slots []toolSlot
}

type toolSlot struct {
	choice, index int
	id            string
}

// Lookup returns the position of the call at (choice, index, id) and whether
// it is new. id may be empty for a continuation chunk.
func (a *ToolAssembler) Lookup(choice, index int, id string) (pos int, isNew bool) {
	// Scan from the most recent call: continuations are almost always for it.
	for i := len(a.slots) - 1; i >= 0; i-- {
		s := &a.slots[i]
		if s.choice != choice || s.index != index {
			continue
		}
		if id == "" || s.id == "" || s.id == id {
			if s.id == "" {
				s.id = id
			}
			return i, false
		}
		break // same (choice, index), different id: a new call
	}
	a.slots = append(a.slots, toolSlot{choice: choice, index: index, id: id})
	return len(a.slots) - 1, true
}

// Len is the number of calls seen.
func (a *ToolAssembler) Len() int { return len(a.slots) }

// FinishFor maps a normal completion to tool_calls when calls were made, per
// invariant 1: a tool turn that ends normally finishes tool_calls on every
// format; length, content_filter and unknown keep their value.
func FinishFor(r llm.FinishReason, toolCalls int) llm.FinishReason {
	if r == llm.FinishStop && toolCalls > 0 {
		return llm.FinishToolCalls
	}
	return r
}

// RefusalFinish applies invariant 1 to a refusal: an answer that carries
// refusal text (ChatResult.Refusal) and ends normally (stop) or for a
// reason with no canonical meaning ("") finishes content_filter on every
// format; length, tool_calls and content_filter keep their value. Apply it
// before FinishFor, so a refusal is never reported as a tool turn.
func RefusalFinish(r llm.FinishReason, refused bool) llm.FinishReason {
	if refused && (r == llm.FinishStop || r == llm.FinishUnknown) {
		return llm.FinishContentFilter
	}
	return r
}
