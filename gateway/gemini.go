package gateway

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/gemini"
	"github.com/chorusrt/chorus/runtime"
)

// gemini serves POST /v1beta/models/{model}:{method}. The model may hold a
// slash (openai/gpt-4.1-mini): the method is what follows the last colon.
func (h *Handler) gemini(w http.ResponseWriter, r *http.Request) {
	const f = formatGemini
	rest := r.PathValue("rest")
	i := strings.LastIndexByte(rest, ':')
	if i <= 0 {
		h.fail(w, f, &Error{Status: http.StatusNotFound, Message: "no such endpoint: " + r.URL.Path})
		return
	}
	model, method := rest[:i], rest[i+1:]
	switch method {
	case "generateContent", "streamGenerateContent":
		noteModel(w, model, method == "streamGenerateContent") // requestlog.go
		h.geminiGenerate(w, r, model, method == "streamGenerateContent")
	case "embedContent", "batchEmbedContents":
		noteModel(w, model, false)
		h.geminiEmbed(w, r, model, method == "batchEmbedContents")
	default:
		h.fail(w, f, &Error{Status: http.StatusNotFound, Message: "method " + strconv.Quote(method) + " is not served"})
	}
}

func (h *Handler) geminiGenerate(w http.ResponseWriter, r *http.Request, model string, stream bool) {
	const f = formatGemini
	ks, e := h.authenticate(r)
	if e != nil {
		h.fail(w, f, e)
		return
	}
	noteKey(w, ks, nil) // requestlog.go
	if stream && r.URL.Query().Get("alt") != "sse" {
		h.fail(w, f, &Error{Status: http.StatusBadRequest, Message: "streamGenerateContent is served with alt=sse only"})
		return
	}
	body, e := h.readBody(r)
	if e != nil {
		h.fail(w, f, e)
		return
	}
	noteKey(w, ks, body)
	req, err := gemini.DecodeServerGenerate(model, body)
	if err != nil {
		h.fail(w, f, errorFor(err))
		return
	}
	h.serveChat(w, r, ks, req, model, stream, chatCodec{
		f:           f,
		contentType: "application/json; charset=UTF-8",
		encode:      func(res *llm.ChatResult) ([]byte, error) { return gemini.EncodeServerGenerate(res, model) },
		stream: func() streamEncoder {
			return &geminiStream{s: gemini.NewServerStream("chorus-"+strconv.FormatInt(h.opts.Now().UnixNano(), 36), model)}
		},
	})
}

// geminiStream encodes Gemini's chunks through the codec, except a text
// delta: a text chunk depends on nothing but the stream's model and id,
// so it is written with a textFrame taken from the codec's own chunk.
type geminiStream struct {
	s    *gemini.ServerStream
	text textFrame
}

func (g *geminiStream) event(dst []byte, ev *llm.Event) []byte {
	if ev.Type == llm.EventText || ev.Type == llm.EventRefusal {
		if !g.text.tried {
			g.text.derive(func(t string) []byte { return g.s.Event(nil, &llm.Event{Type: llm.EventText, Text: t}) })
		}
		if g.text.ok {
			return g.text.append(dst, ev.Text)
		}
	}
	return g.s.Event(dst, ev)
}

func (g *geminiStream) end(dst []byte, res *llm.ChatResult) []byte { return g.s.End(dst, res) }
func (g *geminiStream) fail(dst []byte, e *Error) []byte {
	return g.s.Error(dst, e.Status, e.Message)
}

func (h *Handler) geminiEmbed(w http.ResponseWriter, r *http.Request, model string, batch bool) {
	const f = formatGemini
	ks, body, ok := h.begin(w, r, f)
	if !ok {
		return
	}
	req, err := gemini.DecodeServerEmbed(model, batch, body)
	if err != nil {
		h.fail(w, f, errorFor(err))
		return
	}
	adm, served, ok := h.call(w, r, f, model, ks, 0)
	if !ok {
		return
	}
	req.Model = served
	rep := new(runtime.CallReport)
	lc := h.logStart(w, r, ks, f, model, false) // requestlog.go
	res, err := h.rt.Embed(runtime.WithCallReport(r.Context(), rep), req)
	lc.end(rep, embedUsage(res), err)
	if err != nil {
		adm.end(llm.Usage{})
		chorusHeaders(w.Header(), rep, nil)
		h.fail(w, f, errorFor(err))
		return
	}
	adm.done(res.Usage, rep)
	b, err := gemini.EncodeServerEmbed(res, batch)
	if err != nil {
		h.fail(w, f, errorFor(err))
		return
	}
	chorusHeaders(w.Header(), rep, &res.Meta)
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	_, _ = w.Write(b)
}
