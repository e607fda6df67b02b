package gateway

import (
	"net/http"
	"strconv"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/anthropic"
)

func (h *Handler) anthropicMessages(w http.ResponseWriter, r *http.Request) {
	const f = formatAnthropic
	ks, e := h.authenticate(r)
	if e != nil {
		h.fail(w, f, e)
		return
	}
	body, e := h.readBody(r)
	if e != nil {
		h.fail(w, f, e)
		return
	}
	sm, err := anthropic.DecodeServerMessages(body, false)
	if err != nil {
		h.fail(w, f, errorFor(err))
		return
	}
	req := sm.Chat
	done, ok := h.call(w, r, f, req.Model, ks)
	if !ok {
		return
	}
	id := "msg_chorus_" + strconv.FormatInt(h.opts.Now().UnixNano(), 36)
	if !sm.Stream {
		res, err := h.rt.Chat(r.Context(), req)
		if err != nil {
			done(llm.Usage{})
			h.fail(w, f, errorFor(err))
			return
		}
		done(res.Usage)
		if res.ID != "" {
			id = res.ID
		}
		b, err := anthropic.EncodeServerMessage(res, id, req.Model)
		if err != nil {
			h.fail(w, f, errorFor(err))
			return
		}
		chorusHeaders(w.Header(), req.Model, &res.Meta)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
		return
	}
	s, err := h.rt.Stream(r.Context(), req)
	if err != nil {
		done(llm.Usage{})
		h.fail(w, f, errorFor(err))
		return
	}
	enc := &anthropicStream{s: anthropic.NewServerStream(id, req.Model)}
	res, _ := h.pump(w, f, s, enc, func(hd http.Header) { chorusHeaders(hd, req.Model, nil) })
	if res != nil {
		done(res.Usage)
	} else {
		done(llm.Usage{})
	}
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
	ks, e := h.authenticate(r)
	if e != nil {
		h.fail(w, f, e)
		return
	}
	body, e := h.readBody(r)
	if e != nil {
		h.fail(w, f, e)
		return
	}
	sm, err := anthropic.DecodeServerMessages(body, true)
	if err != nil {
		h.fail(w, f, errorFor(err))
		return
	}
	done, ok := h.call(w, r, f, sm.Chat.Model, ks)
	if !ok {
		return
	}
	res, err := h.rt.CountTokens(r.Context(), sm.Chat)
	done(llm.Usage{})
	if err != nil {
		h.fail(w, f, errorFor(err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(anthropic.EncodeServerCountTokens(res.InputTokens))
}
