package batch

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/chorusrt/chorus/telemetry"
)

// Span names of a job (see package telemetry).
const (
	// SpanJob is the job's span: the whole run, with its counts.
	SpanJob = "chorus.batch"
	// SpanLine is one live line's span: the root of its own trace, linked
	// to the job's span, parent of the line's inference span.
	SpanLine = "chorus.batch.line"
)

// Attribute keys of the job and line spans.
const (
	AttrInput    = attribute.Key("chorus.batch.input")
	AttrLine     = attribute.Key("chorus.batch.line")
	AttrWritten  = attribute.Key("chorus.batch.written")
	AttrFailed   = attribute.Key("chorus.batch.failed")
	AttrBadLines = attribute.Key("chorus.batch.bad_lines")
	AttrSkipped  = attribute.Key("chorus.batch.skipped")
)

// startJob starts the job's span.
func (r *run) startJob(ctx context.Context) (context.Context, trace.Span) {
	ctx, span := r.j.Telemetry.Tracer().Start(ctx, SpanJob, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(AttrInput.String(r.j.InputName)))
	r.jobSpan = span.SpanContext()
	return ctx, span
}

// endJob ends the job's span with the report's counts.
func endJob(span trace.Span, rep *Report, err error) {
	defer span.End()
	if rep != nil && span.IsRecording() {
		failed := 0
		for _, m := range rep.Models {
			failed += m.Failed
		}
		span.SetAttributes(AttrWritten.Int(rep.Written), AttrFailed.Int(failed), AttrBadLines.Int(len(rep.BadLines)), AttrSkipped.Int(rep.Skipped))
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(semconv.ErrorTypeKey.String(telemetry.ErrorType(err)))
	}
}

// startLine starts a live line's span: a new trace linked to the job's
// span, so that a job of many lines is not one enormous trace. The
// returned func ends it with the line's result.
func (r *run) startLine(ctx context.Context, it *item) (context.Context, func(*result)) {
	ctx, span := r.j.Telemetry.Tracer().Start(ctx, SpanLine, trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithLinks(trace.Link{SpanContext: r.jobSpan}),
		trace.WithAttributes(telemetry.AttrCustomID.String(it.customID), AttrLine.Int(it.line)))
	return ctx, func(res *result) {
		defer span.End()
		if res == nil || res.cancelled {
			return
		}
		outcome := "succeeded"
		if res.failed {
			outcome = "failed"
			et := "bad_line"
			if res.err != nil {
				et = telemetry.ErrorType(res.err)
			}
			if it.kind == kindBad {
				et = "bad_line"
			}
			span.SetAttributes(semconv.ErrorTypeKey.String(et))
			span.SetStatus(codes.Error, et)
		}
		r.j.Telemetry.BatchLine(ctx, outcome)
	}
}
