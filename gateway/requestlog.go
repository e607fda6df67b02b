package gateway

import (
	"context"
	"encoding/hex"
	"errors"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/chorusrt/chorus/batch"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/requestlog"
	"github.com/chorusrt/chorus/runtime"
)

// RequestLog receives one record per call the gateway placed on the
// runtime: chat completions, Responses, messages and generateContent,
// buffered or streamed, embeddings, and each live line of a batch (with
// its batch and line id), answered or failed. A request refused before
// its call (authentication, a malformed body, the key's model list or
// limits), fan-out requests and lines sent to a provider's own batch API
// are not recorded. Log is
// called on the request's goroutine and must not block:
// *requestlog.Logger queues and returns.
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
}

// logStart begins the record of a call to requested (the client's name).
func (h *Handler) logStart(r *http.Request, ks *keyState, f format, requested string, stream bool) logCall {
	if h.opts.RequestLog == nil {
		return logCall{}
	}
	return logCall{lg: h.opts.RequestLog, ctx: r.Context(), route: r.Pattern, ks: ks, f: f, requested: requested, stream: stream, start: time.Now()}
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
func (c *logCall) end(rep *runtime.CallReport, u llm.Usage, err error) {
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
		rec.KeyFingerprint, rec.KeyName = hex.EncodeToString(c.ks.key.SHA256[:8]), c.ks.key.Name
	}
	if sc := trace.SpanContextFromContext(c.ctx); sc.HasTraceID() {
		rec.TraceID = sc.TraceID().String()
	}
	if err != nil {
		rec.Status, rec.ErrorType = errorFor(err).Status, errorKind(err)
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
