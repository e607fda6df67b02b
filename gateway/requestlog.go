package gateway

import (
	"context"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"github.com/chorusrt/chorus/batch"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/requestlog"
	"github.com/chorusrt/chorus/runtime"
)

// RequestLog receives one record per call the gateway placed on the
// runtime: chat completions, Responses, messages and generateContent,
// buffered or streamed, embeddings, each model's answer of a fan-out (its
// own usage and cost), and each live line of a batch (with its batch and
// line id), answered or failed; and one per request on those routes that
// was refused before its call (a missing or unknown key, a malformed or
// too large body, a model the key may not call or no provider serves, the
// key's limits or budget), with its status and error kind, the key when
// known and the requested model when parsed, and no usage. Lines sent to
// a provider's own batch API are not recorded. Log is called on the
// request's goroutine and must not block: *requestlog.Logger queues and
// returns.
type RequestLog interface {
	Log(requestlog.Record)
}

var formatNames = [...]string{formatOpenAI: "openai", formatAnthropic: "anthropic", formatGemini: "gemini"}

// logCall is one call's record in the making; its methods do nothing
// when the Handler has no RequestLog.
type logCall struct {
	lg          RequestLog
	ctx         context.Context // the trace's
	route       string
	ks          *keyState
	f           format
	requested   string
	stream      bool
	batch, line string
	start       time.Time
	ttft        time.Duration
	body        []byte // the request's, kept with Options.LogContent
	content     int    // Options.LogContentBytes when content is kept, else 0
}

// DefaultLogContentBytes caps the request body and the answer text a
// record keeps when Options.LogContentBytes is zero.
const DefaultLogContentBytes = 16 << 10

// logWriter is the ResponseWriter of a call route when the Handler has a
// RequestLog: it learns, as the handler goes, what a record of a request
// refused before its call holds (the key, the requested model, the error),
// and whether a call's record was begun (then the call's record is the
// request's). Unwrap lets http.ResponseController reach the connection.
type logWriter struct {
	http.ResponseWriter
	start     time.Time
	ks        *keyState
	requested string
	stream    bool
	body      []byte
	called    bool
	refusal   *Error
}

func (lw *logWriter) Unwrap() http.ResponseWriter { return lw.ResponseWriter }

// logged wraps a call route's handler: a request it refuses before a call
// is recorded.
func (h *Handler) logged(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.opts.RequestLog == nil {
			next(w, r)
			return
		}
		lw := &logWriter{ResponseWriter: w, start: time.Now()}
		next(lw, r)
		if lw.called || lw.refusal == nil {
			return
		}
		h.logRefusal(lw, r)
	}
}

// logRefusal records a request refused before its call.
func (h *Handler) logRefusal(lw *logWriter, r *http.Request) {
	e := lw.refusal
	rec := requestlog.Record{Time: lw.start, Route: r.Pattern, Format: formatNames[formatOf(r)], Requested: lw.requested, Stream: lw.stream,
		Status: e.Status, ErrorType: refusalKind(e, lw.requested != ""), Latency: time.Since(lw.start)}
	switch {
	case lw.ks != nil:
		rec.KeyFingerprint, rec.KeyName = keyFingerprint(lw.ks.key.SHA256), lw.ks.key.Name
	case h.Authenticated():
		if k := presentedKey(r); k != "" { // an unknown key: its fingerprint, never the key
			rec.KeyFingerprint = keyFingerprint(HashKey(k))
		}
	}
	if sc := trace.SpanContextFromContext(r.Context()); sc.HasTraceID() {
		rec.TraceID = sc.TraceID().String()
	}
	if h.opts.LogContent {
		rec.RequestBody = clip(lw.body, h.contentBytes())
	}
	h.opts.RequestLog.Log(rec)
}

// refusalKind names the kind of a refusal before a call; model says
// whether the request named its model (a 404 without one is a path the
// gateway does not serve).
func refusalKind(e *Error, model bool) string {
	switch {
	case e.Status == http.StatusUnauthorized:
		return "unauthorized"
	case e.Status == http.StatusForbidden:
		return "forbidden"
	case e.Code == "insufficient_quota":
		return "budget"
	case e.Status == http.StatusTooManyRequests:
		return "rate_limit"
	case e.Status == http.StatusNotFound && model:
		return "model_not_found"
	case e.Status == http.StatusNotFound:
		return "not_found"
	case e.Status == http.StatusRequestEntityTooLarge:
		return "too_large"
	case e.Status == http.StatusServiceUnavailable:
		return "overloaded"
	case e.Status < 500:
		return "invalid_request"
	}
	return "internal"
}

// keyFingerprint names a key in the request log: the first 8 bytes of its
// SHA-256, in hex.
func keyFingerprint(sum [32]byte) string { return hex.EncodeToString(sum[:8]) }

// noteKey tells w's record the request's key and body (nothing without a
// RequestLog).
func noteKey(w http.ResponseWriter, ks *keyState, body []byte) {
	if lw, ok := w.(*logWriter); ok {
		lw.ks, lw.body = ks, body
	}
}

// noteModel tells w's record the model the client asked for.
func noteModel(w http.ResponseWriter, model string, stream bool) {
	if lw, ok := w.(*logWriter); ok {
		lw.requested, lw.stream = model, stream
	}
}

// noteRefusal keeps the first error a call route answers with, for its
// record when no call was begun.
func noteRefusal(w http.ResponseWriter, e *Error) {
	if lw, ok := w.(*logWriter); ok && lw.refusal == nil {
		lw.refusal = e
	}
}

func (h *Handler) contentBytes() int {
	if h.opts.LogContentBytes > 0 {
		return h.opts.LogContentBytes
	}
	return DefaultLogContentBytes
}

// clip is b as a string of at most n bytes, cut at a rune's start.
func clip[T string | []byte](b T, n int) string {
	if len(b) <= n {
		return string(b)
	}
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return string(b[:n])
}

// answerText is what a record keeps of an answer with Options.LogContent:
// its text, its refusal and its tool calls (name and arguments).
func answerText(res *llm.ChatResult) string {
	if res == nil {
		return ""
	}
	if res.Refusal == "" && len(res.ToolCalls) == 0 {
		return res.Content
	}
	var b strings.Builder
	b.WriteString(res.Content)
	if res.Refusal != "" {
		b.WriteString("\n[refusal] " + res.Refusal)
	}
	for _, tc := range res.ToolCalls {
		b.WriteString("\n[tool call] " + tc.Name + " " + string(tc.Arguments))
	}
	return strings.TrimPrefix(b.String(), "\n")
}

// logStart begins the record of a call to requested (the client's name):
// the request's record is the call's (or, for a fan-out, its models').
func (h *Handler) logStart(w http.ResponseWriter, r *http.Request, ks *keyState, f format, requested string, stream bool) logCall {
	if h.opts.RequestLog == nil {
		return logCall{}
	}
	c := logCall{lg: h.opts.RequestLog, ctx: r.Context(), route: r.Pattern, ks: ks, f: f, requested: requested, stream: stream, start: time.Now()}
	if lw, ok := w.(*logWriter); ok {
		lw.called = true
		c.start = lw.start
		if h.opts.LogContent {
			c.body, c.content = lw.body, h.contentBytes()
		}
	}
	return c
}

// logLine begins the record of a live line of batch id, on route (the
// line's url, as the gateway serves it).
func (h *Handler) logLine(ctx context.Context, ks *keyState, id, route, requested string) logCall {
	if h.opts.RequestLog == nil {
		return logCall{}
	}
	return logCall{lg: h.opts.RequestLog, ctx: ctx, route: route, ks: ks, f: formatOpenAI, requested: requested,
		batch: id, line: batch.LineOf(ctx), start: time.Now()}
}

// first marks a stream's first event.
func (c *logCall) first() {
	if c.lg != nil && c.ttft == 0 {
		c.ttft = time.Since(c.start)
	}
}

// end records the call: rep is final, u is the answer's usage, err its
// failure.
func (c *logCall) end(rep *runtime.CallReport, u llm.Usage, err error) { c.endText(rep, u, err, nil) }

// endText is end with the answer, whose text the record keeps with
// Options.LogContent.
func (c *logCall) endText(rep *runtime.CallReport, u llm.Usage, err error, res *llm.ChatResult) {
	if c.lg == nil {
		return
	}
	rec := requestlog.Record{
		Time: c.start, Route: c.route, Format: formatNames[c.f], Requested: c.requested, Stream: c.stream, BatchID: c.batch, LineID: c.line,
		Model: rep.Model, Provider: rep.Provider, Step: rep.Step, Attempts: rep.Attempts, Queue: rep.QueueWait,
		TTFT: c.ttft, Latency: time.Since(c.start), Status: http.StatusOK,
		InputTokens: u.InputTokens(), CachedTokens: u.CacheReadTokens, OutputTokens: u.CompletionTokens,
	}
	rec.CacheHit = rep.Cache == "hit" // the response cache answered (cost zero)
	if rep.Priced {
		rec.Cost = rep.Cost // what x-chorus-cost-usd told the client
	}
	if c.ks != nil {
		rec.KeyFingerprint, rec.KeyName = keyFingerprint(c.ks.key.SHA256), c.ks.key.Name
	}
	if sc := trace.SpanContextFromContext(c.ctx); sc.HasTraceID() {
		rec.TraceID = sc.TraceID().String()
	}
	if err != nil {
		rec.Status, rec.ErrorType = errorFor(err).Status, errorKind(err)
	}
	if c.content > 0 {
		rec.RequestBody = clip(c.body, c.content)
		if err == nil {
			rec.Answer = clip(answerText(res), c.content)
		}
	}
	c.lg.Log(rec)
}

// errorKind names the kind of a call's failure for the request log.
func errorKind(err error) string {
	var (
		rl  *llm.RateLimitError
		api *llm.APIError
		mnf *runtime.ModelNotFoundError
		ce  *llm.ConfigError
		ue  *llm.UnsupportedError
		uf  *llm.UnsupportedFieldError
	)
	switch {
	case errors.As(err, &rl):
		return "rate_limit"
	case errors.Is(err, llm.ErrOverloaded), errors.Is(err, runtime.ErrClosed):
		return "overloaded"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.As(err, &mnf):
		return "model_not_found"
	case errors.As(err, &ce), errors.As(err, &ue), errors.As(err, &uf):
		return "invalid_request"
	case errors.As(err, &api):
		if api.Status >= 500 {
			return "upstream"
		}
		return "upstream_4xx"
	}
	if e := errorFor(err); e.Status == http.StatusTooManyRequests {
		return "rate_limit"
	}
	return "upstream"
}

// resUsage is res's usage, zero for nil.
func resUsage(res *llm.ChatResult) llm.Usage {
	if res == nil {
		return llm.Usage{}
	}
	return res.Usage
}

// embedUsage is res's usage, zero for nil.
func embedUsage(res *llm.EmbedResult) llm.Usage {
	if res == nil {
		return llm.Usage{}
	}
	return res.Usage
}
