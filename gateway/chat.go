package gateway

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/runtime"
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
	noteKey(w, ks, nil) // requestlog.go
	body, e := h.readBody(r)
	if e != nil {
		h.fail(w, f, e)
		return nil, nil, false
	}
	noteKey(w, ks, body)
	return ks, body, true
}

// serveChat runs one decoded chat request for a client: it checks the
// model against the key and takes the key's budgets, calls the runtime
// buffered or streamed, and answers in the client's format. model is the
// name the client asked for (what the key is checked against).
func (h *Handler) serveChat(w http.ResponseWriter, r *http.Request, ks *keyState, req *llm.ChatRequest, model string, stream bool, c chatCodec) {
	noteModel(w, model, stream) // requestlog.go
	if _, fan := h.opts.FanOut[model]; fan {
		h.fail(w, c.f, &Error{Status: http.StatusBadRequest, Message: "model " + strconv.Quote(model) + " is a fan-out: POST /v1/chat/completions answers it, with a choice per model"})
		return
	}
	cctx, ce := h.cacheContext(r.Context(), r, ks) // cache.go
	if ce != nil {
		h.fail(w, c.f, ce)
		return
	}
	adm, served, ok := h.call(w, r, c.f, model, ks, req.MaxTokens)
	if !ok {
		return
	}
	drop := h.opts.DropUnsupported || (ks != nil && ks.key.DropUnsupported)
	if served != req.Model || drop { // the encoders keep the client's name
		call := *req
		call.Model = served
		if drop {
			call.OnUnsupported = llm.DropUnsupported
		}
		req = &call
	}
	rep := new(runtime.CallReport)
	ctx := runtime.WithCallReport(cctx, rep)
	lc := h.logStart(w, r, ks, c.f, model, stream) // requestlog.go
	if !stream {
		res, err := h.rt.Chat(ctx, req)
		lc.endText(rep, resUsage(res), err, res)
		if err != nil {
			adm.end(llm.Usage{})
			chorusHeaders(w.Header(), rep, nil)
			h.fail(w, c.f, errorFor(err))
			return
		}
		adm.done(charged(rep, res.Usage), rep) // cache.go
		b, err := c.encode(res)
		if err != nil {
			h.fail(w, c.f, errorFor(err))
			return
		}
		chorusHeaders(w.Header(), rep, &res.Meta)
		w.Header().Set("Content-Type", c.contentType)
		_, _ = w.Write(b)
		return
	}
	s, err := h.rt.Stream(ctx, req)
	if err != nil {
		lc.end(rep, llm.Usage{}, err)
		adm.end(llm.Usage{})
		h.fail(w, c.f, errorFor(err))
		return
	}
	h.relay(w, c.f, s, c.stream(), rep, &adm, &lc)
}

// relay pumps a stream with the x-chorus-* headers known at its first
// event, sends its cost as a trailer when priced, and charges the key.
func (h *Handler) relay(w http.ResponseWriter, f format, s *llm.Stream, enc streamEncoder, rep *runtime.CallReport, adm *admission, lc *logCall) {
	res, err := h.pump(w, f, s, enc, func(hd http.Header) { lc.first(); chorusHeaders(hd, rep, nil) })
	lc.endText(rep, resUsage(res), err, res)
	// pump returned after the stream's Result: the whole report is final.
	if rep.Priced {
		w.Header().Set(http.TrailerPrefix+"x-chorus-cost-usd", strconv.FormatFloat(rep.Cost, 'f', -1, 64))
	}
	if res != nil {
		adm.done(charged(rep, res.Usage), rep) // cache.go
	} else {
		adm.done(llm.Usage{}, rep)
	}
}

// The x-chorus-* header names, in the canonical form http.Header keeps
// (TestHeaderNamesAreCanonical): set as map keys directly, they cost no
// canonicalization.
const (
	hdrModel        = "X-Chorus-Model"
	hdrProvider     = "X-Chorus-Provider"
	hdrCredential   = "X-Chorus-Credential"
	hdrFallbackStep = "X-Chorus-Fallback-Step"
	hdrAttempts     = "X-Chorus-Attempts"
	hdrQueueMS      = "X-Chorus-Queue-Ms"
	hdrHTTPAttempts = "X-Chorus-Http-Attempts"
	hdrCostUSD      = "X-Chorus-Cost-Usd"
	hdrDropped      = "X-Chorus-Dropped"
	hdrRoute        = "X-Chorus-Route"
)

// headerSetter sets header values with canonical names, all of them in one
// backing array: Header.Set allocates a slice per value, and a key per
// name that is not already canonical.
type headerSetter struct {
	hd   http.Header
	vals []string
}

func newHeaderSetter(hd http.Header, n int) headerSetter {
	return headerSetter{hd: hd, vals: make([]string, 0, n)}
}

// set sets canonical name to v, as hd.Set(name, v) does.
func (s *headerSetter) set(name, v string) {
	if len(s.vals) == cap(s.vals) {
		s.hd[name] = []string{v}
		return
	}
	s.vals = append(s.vals, v)
	n := len(s.vals)
	s.hd[name] = s.vals[n-1 : n : n]
}

// chorusHeaders names what served a call (or, for a failed one, what was
// tried last): the x-chorus-* headers. meta (buffered answers only) adds
// the HTTP attempts of the placement that served.
func chorusHeaders(hd http.Header, rep *runtime.CallReport, meta *llm.ResponseMeta) {
	cacheHeader(hd, rep)
	if rep.Attempts == 0 {
		return // never placed: nothing served
	}
	s := newHeaderSetter(hd, 8)
	s.set(hdrModel, rep.Model)
	s.set(hdrProvider, rep.Provider)
	s.set(hdrCredential, rep.Credential)
	s.set(hdrFallbackStep, strconv.Itoa(rep.Step))
	s.set(hdrAttempts, strconv.Itoa(rep.Attempts))
	s.set(hdrQueueMS, strconv.FormatFloat(float64(rep.QueueWait.Microseconds())/1000, 'f', 3, 64))
	if meta != nil && meta.Attempts > 0 {
		s.set(hdrHTTPAttempts, strconv.Itoa(meta.Attempts))
	}
	if meta != nil && rep.Priced { // a stream's cost is not known yet: never read it here
		s.set(hdrCostUSD, strconv.FormatFloat(rep.Cost, 'f', -1, 64))
	}
	if len(rep.Dropped) > 0 {
		hd[hdrDropped] = []string{strings.Join(rep.Dropped, ",")}
	}
	if rep.Strategy != "" { // a routed alias: its strategy and why
		hd[hdrRoute] = []string{rep.Strategy + "; " + rep.Reason}
	}
}
