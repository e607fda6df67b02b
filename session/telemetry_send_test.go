package session

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/telemetry"
)

// TestTurnJoinsTheSendersTrace: the turn a Send starts is a child of the
// sender's span (one trace from the caller through the turn, its model
// steps and tools); a message sent while a turn runs, taken by that turn,
// is a link on its span; a Send with no span starts a trace of its own.
func TestTurnJoinsTheSendersTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	var l ledger
	h := newHarness(t, Options{
		Telemetry: telemetry.New(telemetry.WithTracerProvider(tp)),
		Tools: []Tool{tool(&l, "refund", EffectNonIdempotentWrite, func(ctx context.Context, c Call) (Result, error) {
			return Result{Content: "ok"}, nil
		})},
	})
	h.srv.Push(llmtest.ToolCalls(call("c1", "refund", `{}`)), llmtest.Text("done"), llmtest.Text("again"), llmtest.Text("alone"))
	caller := tp.Tracer("caller")
	ctx := ctx10(t)
	ctxA, spanA := caller.Start(ctx, "A")
	if err := h.m.Send(ctxA, "s", llm.UserText("refund order 7")); err != nil {
		t.Fatal(err)
	}
	spanA.End()
	pend := h.pending("s", 1)
	ctxB, spanB := caller.Start(ctx, "B")
	if err := h.m.Send(ctxB, "s", llm.UserText("and tell me")); err != nil { // queued: the running turn takes it
		t.Fatal(err)
	}
	spanB.End()
	if err := h.m.Resolve(ctx, "s", pend[0].ID, true, "ok"); err != nil {
		t.Fatal(err)
	}
	if r := h.wait("s"); r.Status != TurnCompleted {
		t.Fatalf("turn %+v", r)
	}
	h.send("s", "no span here")
	if r := h.wait("s"); r.Status != TurnCompleted {
		t.Fatalf("turn %+v", r)
	}
	if err := h.m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	var turns []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "invoke_agent" {
			turns = append(turns, s)
		}
	}
	if len(turns) != 2 {
		t.Fatalf("%d turn spans, want 2", len(turns))
	}
	first, second := turns[0], turns[1]
	if first.Parent().SpanID() != spanA.SpanContext().SpanID() || first.SpanContext().TraceID() != spanA.SpanContext().TraceID() {
		t.Errorf("first turn's parent %v trace %v, want the sender's span %v", first.Parent().SpanID(), first.SpanContext().TraceID(), spanA.SpanContext())
	}
	linked := false
	for _, lk := range first.Links() {
		linked = linked || lk.SpanContext.SpanID() == spanB.SpanContext().SpanID()
	}
	if !linked {
		t.Errorf("first turn's links %v lack the queued message's sender %v", first.Links(), spanB.SpanContext().SpanID())
	}
	if second.Parent().IsValid() || second.SpanContext().TraceID() == spanA.SpanContext().TraceID() || second.SpanContext().TraceID() == spanB.SpanContext().TraceID() {
		t.Errorf("a turn sent with no span has parent %v in trace %v", second.Parent(), second.SpanContext().TraceID())
	}
}
