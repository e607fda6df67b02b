package providers

import (
	"context"
	"errors"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// Learned fallbacks are events on the span of ctx, which is the runtime's
// inference span when a runtime makes the call (package telemetry names
// the same event and attribute; this package uses the OpenTelemetry API
// only and does not import it):
//   - EventLearned when an attempt's rejection taught a flag and the call
//     is sent again at once without the refused parameter (or on the other
//     route), with the flag and the attempt;
//   - EventLearnedApplied for each learned flag that shaped an attempt's
//     request (a parameter left out, the Responses route, a stream served
//     from a buffered call), with the flag and the attempt.
//
// With no recording span (no SDK installed, or the call not sampled) the
// cost is one context lookup per attempt: nothing is allocated.
const (
	EventLearned        = "chorus.learned"
	EventLearnedApplied = "chorus.learned.applied"
	// AttrLearned is the flag's name (LearnFlag.String).
	AttrLearned = attribute.Key("chorus.learned")
	// AttrAttempt is the attempt's number, from 1.
	AttrAttempt = attribute.Key("chorus.attempt")
)

// traceLearned puts the flag an attempt just learned on ctx's span.
func traceLearned(ctx context.Context, f LearnFlag, attempt int) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() || f == 0 {
		return
	}
	span.AddEvent(EventLearned, trace.WithAttributes(AttrLearned.String(f.String()), AttrAttempt.Int(attempt)))
}

// routeLesson is the per-model flag learnRoute took from err.
func routeLesson(err error) LearnFlag {
	var api *llm.APIError
	if !errors.As(err, &api) {
		return 0
	}
	if responsesRequired(strings.ToLower(api.Message + " " + api.Code)) {
		return LearnResponsesAPI
	}
	return LearnNoEncryptedReasoning
}

// traceApplied puts on ctx's span one event per learned flag that shapes
// this attempt of req: sent is the learned state its request was built
// with. It returns at once when the span does not record.
func (c *Client) traceApplied(ctx context.Context, req *llm.ChatRequest, sent wire.Learned, stream bool, attempt int) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	openaiFmt := c.cfg.Format == FormatOpenAI
	for _, a := range [...]struct {
		f  LearnFlag
		on bool
	}{
		{LearnNoStreamOptions, stream && openaiFmt && !c.cfg.Quirks.NoStreamOptions && sent.NoStreamOptions},
		{LearnBuffered, stream && c.learned.Has(LearnBuffered)},
		{LearnNoParallelToolCalls, sent.NoParallelToolCalls && req.ParallelToolCalls != nil && len(req.Tools) > 0},
		{LearnNoReasoningEffort, sent.NoReasoningEffort && req.Reasoning != nil && openaiFmt},
		{LearnNoTemperature, sent.NoTemperature && req.Temperature != nil},
		{LearnNoTopP, sent.NoTopP && req.TopP != nil},
		{LearnNoSeed, sent.NoSeed && req.Seed != nil},
		{LearnResponsesAPI, openaiFmt && !c.cfg.Models[req.Model].Responses && c.learned.HasModel(LearnResponsesAPI, req.Model)},
		{LearnNoEncryptedReasoning, openaiFmt && c.usesResponses(req.Model) && c.learned.HasModel(LearnNoEncryptedReasoning, req.Model)},
	} {
		if a.on {
			span.AddEvent(EventLearnedApplied, trace.WithAttributes(AttrLearned.String(a.f.String()), AttrAttempt.Int(attempt)))
		}
	}
}
