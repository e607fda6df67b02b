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

type anthropicStream struct{ s *anthropic.ServerStream }

func (a *anthropicStream) event(dst []byte, ev *llm.Event) []byte     { return a.s.Event(dst, ev) }
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
	adm, ok := h.call(w, r, f, sm.Chat.Model, ks)
	if !ok {
		return
	}
	res, err := h.rt.CountTokens(r.Context(), sm.Chat)
	adm.end(llm.Usage{})
	if err != nil {
		h.fail(w, f, errorFor(err))
		return
	}
	h.writeJSON(w, anthropic.EncodeServerCountTokens(res.InputTokens))
}
