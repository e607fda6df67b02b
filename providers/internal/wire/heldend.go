package wire

import "github.com/chorusrt/chorus/llm"

// HeldEnd is what a server-side stream encoder (every format's) holds back
// for the answer's end: the usage and finish events, which each format
// sends last.
type HeldEnd struct {
	usage  llm.Usage
	finish llm.FinishReason
}

// Hold keeps a usage or finish event; others are not its business.
func (h *HeldEnd) Hold(ev *llm.Event) {
	switch ev.Type {
	case llm.EventUsage:
		if ev.Usage != nil {
			h.usage = *ev.Usage
		}
	case llm.EventFinish:
		h.finish = ev.Finish
	}
}

// Final is the finish reason and usage to end with: the events' finish
// unless there was none, then res's; res's usage when it has any, else the
// events' (zero when neither). res may be nil.
func (h *HeldEnd) Final(res *llm.ChatResult) (llm.FinishReason, llm.Usage) {
	fin, usage := h.finish, h.usage
	if res != nil {
		if fin == llm.FinishUnknown {
			fin = res.FinishReason
		}
		if !res.Usage.IsZero() {
			usage = res.Usage
		}
	}
	return fin, usage
}
