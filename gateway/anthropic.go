package gateway

import (
	"net/http"
	"strconv"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/anthropic"
)

func (h *Handler) anthropicMessages(w http.ResponseWriter, r *http.Request) {
	const f = formatAnthropic
	ks, body, ok := h.begin(w, r, f)
	if !ok {
		return
	}
	sm, err := anthropic.DecodeServerMessages(body, false)
	if err != nil {
		h.fail(w, f, errorFor(err))
		return
	}
	req := sm.Chat
	id := "msg_chorus_" + strconv.FormatInt(h.opts.Now().UnixNano(), 36)
	h.serveChat(w, r, ks, req, req.Model, sm.Stream, chatCodec{
		f:           f,
		contentType: "application/json",
		encode: func(res *llm.ChatResult) ([]byte, error) {
			if res.ID != "" {
				id = res.ID
			}
			return anthropic.EncodeServerMessage(res, id, req.Model)
		},
		stream: func() streamEncoder { return &anthropicStream{s: anthropic.NewServerStream(id, req.Model)} },
	})
}

// anthropicStream encodes Anthropic's streamed events through the codec,
// except a text delta that continues an open text block (the event before
// it, usage and finish aside, was text too): that one is written with a
// textFrame taken from the codec's own content_block_delta for the block,
// taken anew for each text block (the frame holds the block's index).
type anthropicStream struct {
	s *anthropic.ServerStream
	// inText: the codec's open block is a text block this stream wrote.
	inText bool
	text   textFrame
}

func (a *anthropicStream) event(dst []byte, ev *llm.Event) []byte {
	switch ev.Type {
	case llm.EventText, llm.EventRefusal: // both are text_delta in a text block
		if a.inText {
			if !a.text.tried {
				a.text.derive(func(t string) []byte { return a.s.Event(nil, &llm.Event{Type: llm.EventText, Text: t}) })
			}
			if a.text.ok {
				return a.text.append(dst, ev.Text)
			}
		}
		a.inText = true
	case llm.EventUsage, llm.EventFinish: // held for the end: the open block stays
	default:
		a.inText, a.text = false, textFrame{}
	}
	return a.s.Event(dst, ev)
}

func (a *anthropicStream) end(dst []byte, res *llm.ChatResult) []byte { return a.s.End(dst, res) }
func (a *anthropicStream) fail(dst []byte, e *Error) []byte {
	return a.s.Error(dst, e.Status, e.Message)
}

// anthropicCountTokens answers with the provider's own count: a model
// whose provider cannot count is a 400 (never an estimate).
func (h *Handler) anthropicCountTokens(w http.ResponseWriter, r *http.Request) {
	const f = formatAnthropic
	ks, body, ok := h.begin(w, r, f)
	if !ok {
		return
	}
	sm, err := anthropic.DecodeServerMessages(body, true)
	if err != nil {
		h.fail(w, f, errorFor(err))
		return
	}
	adm, served, ok := h.call(w, r, f, sm.Chat.Model, ks, -1)
	if !ok {
		return
	}
	call := *sm.Chat
	call.Model = served
	res, err := h.rt.CountTokens(r.Context(), &call)
	adm.end(llm.Usage{})
	if err != nil {
		h.fail(w, f, errorFor(err))
		return
	}
	h.writeJSON(w, anthropic.EncodeServerCountTokens(res.InputTokens))
}
