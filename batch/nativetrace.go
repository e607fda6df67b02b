package batch

import (
	"cmp"
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/chorusrt/chorus/telemetry"
)

// Native batches are traced the way live lines are (telemetry.go), from
// the job's side of the provider's batch API:
//   - SpanNative per remote batch, a CLIENT child of the job's span, from
//     its submission (or, for a batch a resumed job picks up, from the
//     resume) to the run's last word on it: the provider, the model (a
//     Gemini batch names one), the endpoint, its line count and, once
//     known, the provider's batch id; submission, each poll whose state
//     or counts changed, and the results as events; error.type when it
//     was refused or its results could not be read.
//   - each line the batch answered a SpanLine of its own trace, as a live
//     line's is, linked to the job's span and to the batch's span, named
//     by custom_id, marked native, started at the submission and ended
//     when its result was written, with the GenAI usage attributes in
//     place of the inference span a live line has under it.
//   - chorus.batch.lines by outcome for each line, as live lines, and
//     chorus.batch.native.requests (total, succeeded, failed) per poll.

// SpanNative is a provider batch's span.
const SpanNative = "chorus.batch.native"

// Attribute keys and event names of native batch spans.
const (
	AttrNative       = attribute.Key("chorus.batch.native")
	AttrEndpoint     = attribute.Key("chorus.batch.endpoint")
	AttrState        = attribute.Key("chorus.batch.state")
	AttrRequests     = attribute.Key("chorus.batch.requests")
	AttrSucceeded    = attribute.Key("chorus.batch.succeeded")
	AttrNotRun       = attribute.Key("chorus.batch.not_run")
	AttrResumed      = attribute.Key("chorus.batch.resumed")
	EventSubmitted   = "chorus.batch.submitted"
	EventPolled      = "chorus.batch.polled"
	EventResults     = "chorus.batch.results"
	EventPollFailed  = "chorus.batch.poll_failed"
	outcomeNotRun    = "not_run"
	nativeStillAfter = "running" // the state of a batch the run left running
)

// nativeSpan is one remote batch's span and what its last poll said.
type nativeSpan struct {
	span      trace.Span
	id        string // the provider's batch id, once known
	lastState string
	lastDone  int
}

// batchSpan returns the span of the journal's batch key, starting it when
// the run has none yet (submitted now, or picked up by a resumed job).
func (n *native) batchSpan(ctx context.Context, key, provider, model, endpoint string, lines int, resumed bool) *nativeSpan {
	if s := n.spans[key]; s != nil {
		return s
	}
	kv := []attribute.KeyValue{telemetry.ProviderName(provider), AttrEndpoint.String(endpoint), AttrRequests.Int(lines)}
	if model != "" {
		kv = append(kv, semconv.GenAIRequestModel(model))
	}
	if resumed {
		kv = append(kv, AttrResumed.Bool(true))
	}
	_, span := n.r.j.Telemetry.Tracer().Start(ctx, SpanNative, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(kv...))
	if n.spans == nil {
		n.spans = map[string]*nativeSpan{}
	}
	s := &nativeSpan{span: span}
	n.spans[key] = s
	return s
}

// submitted records the provider's batch id on the batch's span.
func (s *nativeSpan) submitted(id string) {
	s.id = id
	s.span.SetAttributes(telemetry.AttrBatchID.String(id))
	s.span.AddEvent(EventSubmitted, trace.WithAttributes(telemetry.AttrBatchID.String(id)))
}

// polled adds a poll's answer as an event when it changed, and records
// the batch's progress.
func (n *native) polled(ctx context.Context, s *nativeSpan, b *remoteBatch, st remoteStatus) {
	n.r.j.Telemetry.NativeBatchProgress(ctx, b.provider, b.batchID, st.Total, st.Succeeded, st.Failed)
	done := st.Succeeded + st.Failed
	if st.State == s.lastState && done == s.lastDone {
		return
	}
	s.lastState, s.lastDone = st.State, done
	s.span.AddEvent(EventPolled, trace.WithAttributes(AttrState.String(st.State), AttrRequests.Int(st.Total),
		AttrSucceeded.Int(st.Succeeded), AttrFailed.Int(st.Failed)))
}

// endBatchSpan ends the batch's span: state is the provider's last state
// ("": the last poll's), err why the run gave up on it.
func (n *native) endBatchSpan(key, state string, err error) {
	s := n.spans[key]
	if s == nil {
		return
	}
	delete(n.spans, key)
	if state = cmp.Or(state, s.lastState); state != "" {
		s.span.SetAttributes(AttrState.String(state))
	}
	if err != nil {
		s.span.SetAttributes(semconv.ErrorTypeKey.String(telemetry.ErrorType(err)))
		s.span.SetStatus(codes.Error, err.Error())
	}
	s.span.End()
}

// endAllBatchSpans ends the spans of the batches the run leaves running (the job
// stopped waiting: a resumed job picks them up).
func (n *native) endAllBatchSpans() {
	for key := range n.spans {
		n.endBatchSpan(key, nativeStillAfter, nil)
	}
}

// traceLine gives a native line its span (a trace of its own linked to
// the job's and the batch's spans, as a live line's) and counts it.
func (n *native) traceLine(ctx context.Context, s *nativeSpan, b *remoteBatch, res *result, end time.Time) {
	tel := n.r.j.Telemetry
	outcome := "succeeded"
	switch {
	case res.notRun != "":
		outcome = outcomeNotRun
	case res.failed:
		outcome = "failed"
	}
	tel.BatchLine(ctx, outcome)
	links := []trace.Link{{SpanContext: n.r.jobSpan}}
	if s != nil {
		links = append(links, trace.Link{SpanContext: s.span.SpanContext()})
	}
	op := semconv.GenAIOperationNameChat
	if b.endpoint == URLEmbeddings {
		op = semconv.GenAIOperationNameEmbeddings
	}
	kv := []attribute.KeyValue{telemetry.AttrCustomID.String(res.item.customID), AttrNative.Bool(true),
		telemetry.AttrBatchID.String(b.batchID), op, telemetry.ProviderName(b.provider)}
	if res.item.line > 0 {
		kv = append(kv, AttrLine.Int(res.item.line))
	}
	if b.model != "" {
		kv = append(kv, semconv.GenAIRequestModel(b.model))
	}
	if outcome == "succeeded" {
		u := res.usage
		kv = append(kv, semconv.GenAIUsageInputTokens(u.InputTokens()), semconv.GenAIUsageOutputTokens(u.CompletionTokens),
			semconv.GenAIUsageCacheReadInputTokens(u.CacheReadTokens), semconv.GenAIUsageCacheCreationInputTokens(u.CacheWriteTokens),
			semconv.GenAIUsageReasoningOutputTokens(u.ReasoningTokens))
	}
	_, span := tel.Tracer().Start(ctx, SpanLine, trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithTimestamp(b.at), trace.WithLinks(links...), trace.WithAttributes(kv...))
	if outcome != "succeeded" {
		et := outcome
		if res.notRun != "" {
			et = res.notRun
		} else if res.err != nil {
			et = telemetry.ErrorType(res.err)
		}
		span.SetAttributes(semconv.ErrorTypeKey.String(et))
		span.SetStatus(codes.Error, et)
	}
	span.End(trace.WithTimestamp(end))
}
