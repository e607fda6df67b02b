package gateway

import (
	"net/http"

	"github.com/chorusrt/chorus/llm"
)

// chatCodec is what a client format brings to serveChat: the three formats
// share the flow (key, model, buffered or streamed call, errors) and differ
// only in how an answer is encoded and how an error is shaped (f).
type chatCodec struct {
	f format
	// contentType of a buffered answer.
	contentType string
	// encode writes a buffered answer.
	encode func(res *llm.ChatResult) ([]byte, error)
	// stream returns the encoder of a streamed answer.
	stream func() streamEncoder
}

// begin authenticates a request and reads its capped body; on failure it
// has answered the client.
func (h *Handler) begin(w http.ResponseWriter, r *http.Request, f format) (*keyState, []byte, bool) {
	ks, e := h.authenticate(r)
	if e != nil {
		h.fail(w, f, e)
		return nil, nil, false
	}
	body, e := h.readBody(r)
	if e != nil {
		h.fail(w, f, e)
		return nil, nil, false
	}
	return ks, body, true
}

// serveChat runs one decoded chat request for a client: it checks the
// model against the key and takes the key's budgets, calls the runtime
// buffered or streamed, and answers in the client's format. model is the
// name the client asked for (what the headers report).
func (h *Handler) serveChat(w http.ResponseWriter, r *http.Request, ks *keyState, req *llm.ChatRequest, model string, stream bool, c chatCodec) {
	done, ok := h.call(w, r, c.f, model, ks)
	if !ok {
		return
	}
	if !stream {
		res, err := h.rt.Chat(r.Context(), req)
		if err != nil {
			done(llm.Usage{})
			h.fail(w, c.f, errorFor(err))
			return
		}
		done(res.Usage)
		b, err := c.encode(res)
		if err != nil {
			h.fail(w, c.f, errorFor(err))
			return
		}
		chorusHeaders(w.Header(), model, &res.Meta)
		w.Header().Set("Content-Type", c.contentType)
		_, _ = w.Write(b)
		return
	}
	s, err := h.rt.Stream(r.Context(), req)
	if err != nil {
		done(llm.Usage{})
		h.fail(w, c.f, errorFor(err))
		return
	}
	res, _ := h.pump(w, c.f, s, c.stream(), func(hd http.Header) { chorusHeaders(hd, model, nil) })
	if res != nil {
		done(res.Usage)
	} else {
		done(llm.Usage{})
	}
}
