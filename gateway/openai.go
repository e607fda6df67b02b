package gateway

import (
	"net/http"
	"strconv"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/openai"
	"github.com/chorusrt/chorus/runtime"
)

// call is what every endpoint does before calling the runtime: it
// authenticates, checks the model against the key and takes the key's
// budgets. The admission's end ends the call, charging its tokens.
//
// model is the client's name for the model; served is the name the
// runtime serves it by (names.go), which the key is checked against (or
// the client's own name, when the key lists that). maxOut is the most
// output the call may produce (its max_tokens; 0: not given; -1: none, as
// counting tokens), which the call's cost is reserved for (estimate).
func (h *Handler) call(w http.ResponseWriter, r *http.Request, f format, model string, ks *keyState, maxOut int) (a admission, served string, ok bool) {
	served, err := h.resolve(r, f, model)
	if ks != nil && !ks.allows(model) && (err != nil || !ks.allows(served)) {
		if err == nil {
			model = served
		}
		h.fail(w, f, &Error{Status: http.StatusForbidden, Message: "gateway key " + strconv.Quote(ks.key.Name) + " may not call model " + strconv.Quote(model)})
		return a, "", false
	}
	if err != nil {
		h.fail(w, f, errorFor(err))
		return a, "", false
	}
	if ks == nil {
		return a, served, true
	}
	a, v, e := ks.admit(h.opts.Now(), h.estimate(ks, served, r.ContentLength, maxOut))
	setRateLimitHeaders(w.Header(), v)
	if e != nil {
		h.fail(w, f, e)
		return a, "", false
	}
	return a, served, true
}

func (h *Handler) openAIChat(w http.ResponseWriter, r *http.Request) {
	const f = formatOpenAI
	ks, body, ok := h.begin(w, r, f)
	if !ok {
		return
	}
	sc, err := openai.DecodeServerChat(body)
	if err != nil {
		h.fail(w, f, errorFor(err))
		return
	}
	req := sc.Chat
	if targets, ok := h.opts.FanOut[req.Model]; ok {
		h.serveFanOut(w, r, ks, sc, req.Model, targets) // fanout.go
		return
	}
	created := h.opts.Now().Unix()
	h.serveChat(w, r, ks, req, req.Model, sc.Stream, chatCodec{
		f:           f,
		contentType: "application/json",
		encode:      func(res *llm.ChatResult) ([]byte, error) { return openai.EncodeServerChat(res, req.Model, created) },
		stream: func() streamEncoder {
			return &openAIStream{s: openai.NewServerStream("chatcmpl-chorus-"+strconv.FormatInt(h.opts.Now().UnixNano(), 36), req.Model, created, sc.IncludeUsage)}
		},
	})
}

// openAIResponses serves POST /v1/responses, statelessly: the client sends
// the whole conversation (reasoning items with their encrypted content)
// and nothing is stored.
func (h *Handler) openAIResponses(w http.ResponseWriter, r *http.Request) {
	const f = formatOpenAI
	ks, body, ok := h.begin(w, r, f)
	if !ok {
		return
	}
	sr, err := openai.DecodeServerResponses(body)
	if err != nil {
		h.fail(w, f, errorFor(err))
		return
	}
	req := sr.Chat
	created := h.opts.Now().Unix()
	id := newID("resp_") // unique: clients may keep it
	h.serveChat(w, r, ks, req, req.Model, sr.Stream, chatCodec{
		f:           f,
		contentType: "application/json",
		encode:      func(res *llm.ChatResult) ([]byte, error) { return sr.EncodeServerResponse(res, id, req.Model, created) },
		stream: func() streamEncoder {
			return &responsesStream{s: sr.NewServerResponsesStream(id, req.Model, created)}
		},
	})
}

type responsesStream struct{ s *openai.ServerResponsesStream }

func (o *responsesStream) event(dst []byte, ev *llm.Event) []byte     { return o.s.Event(dst, ev) }
func (o *responsesStream) end(dst []byte, res *llm.ChatResult) []byte { return o.s.End(dst, res) }
func (o *responsesStream) fail(dst []byte, e *Error) []byte {
	return o.s.Error(dst, e.Status, e.Message)
}

// openAIStream encodes chat.completion.chunk frames through the codec,
// except a text delta once the answer has started (its chunks no longer
// carry the role): that one is written with a textFrame taken from the
// codec's own chunk.
type openAIStream struct {
	s *openai.ServerStream
	// started: the codec has written a chunk (and with it the role).
	started bool
	text    textFrame
}

func (o *openAIStream) event(dst []byte, ev *llm.Event) []byte {
	if ev.Type == llm.EventText && o.started {
		if !o.text.tried {
			o.text.derive(func(t string) []byte { return o.s.Event(nil, &llm.Event{Type: llm.EventText, Text: t}) })
		}
		if o.text.ok {
			return o.text.append(dst, ev.Text)
		}
	}
	n := len(dst)
	dst = o.s.Event(dst, ev)
	if len(dst) > n {
		o.started = true // every event the codec writes a chunk for starts the answer
	}
	return dst
}

func (o *openAIStream) end(dst []byte, res *llm.ChatResult) []byte { return o.s.End(dst, res) }
func (o *openAIStream) fail(dst []byte, e *Error) []byte           { return o.s.Error(dst, e.Status, e.Message) }

func (h *Handler) openAIEmbeddings(w http.ResponseWriter, r *http.Request) {
	const f = formatOpenAI
	ks, body, ok := h.begin(w, r, f)
	if !ok {
		return
	}
	req, b64, err := openai.DecodeServerEmbed(body)
	if err != nil {
		h.fail(w, f, errorFor(err))
		return
	}
	noteModel(w, req.Model, false) // requestlog.go
	adm, served, ok := h.call(w, r, f, req.Model, ks, 0)
	if !ok {
		return
	}
	rep := new(runtime.CallReport)
	call := *req
	call.Model = served
	lc := h.logStart(w, r, ks, f, req.Model, false)
	res, err := h.rt.Embed(runtime.WithCallReport(r.Context(), rep), &call)
	lc.end(rep, embedUsage(res), err)
	if err != nil {
		adm.end(llm.Usage{})
		chorusHeaders(w.Header(), rep, nil)
		h.fail(w, f, errorFor(err))
		return
	}
	adm.done(res.Usage, rep)
	out, err := openai.EncodeServerEmbed(res, req.Model, b64)
	if err != nil {
		h.fail(w, f, errorFor(err))
		return
	}
	chorusHeaders(w.Header(), rep, &res.Meta)
	h.writeJSON(w, out)
}
