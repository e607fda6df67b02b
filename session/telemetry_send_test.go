package session

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/telemetry"
)

// TestTurnJoinsTheSendersTrace: the turn a Send starts is a child of the
// sender's span (one trace from the caller through the turn, its model
// steps and tools); a message sent while a turn runs, taken by that turn,
// is a link on its span, and so is the Resolve of its approval; a Send
// with no span starts a trace of its own.
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
	ctxR, spanR := caller.Start(ctx, "R")
	if err := h.m.Resolve(ctxR, "s", pend[0].ID, true, "ok"); err != nil {
		t.Fatal(err)
	}
	spanR.End()
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
	turns := spansNamed(rec, "invoke_agent")
	if len(turns) != 2 {
		t.Fatalf("%d turn spans, want 2", len(turns))
	}
	first, second := turns[0], turns[1]
	if first.Parent().SpanID() != spanA.SpanContext().SpanID() || first.SpanContext().TraceID() != spanA.SpanContext().TraceID() {
		t.Errorf("first turn's parent %v trace %v, want the sender's span %v", first.Parent().SpanID(), first.SpanContext().TraceID(), spanA.SpanContext())
	}
	for _, sp := range []trace.Span{spanB, spanR} {
		linked := false
		for _, lk := range first.Links() {
			linked = linked || lk.SpanContext.SpanID() == sp.SpanContext().SpanID()
		}
		if !linked {
			t.Errorf("first turn's links %v lack %v (the queued message's sender, then the resolver)", first.Links(), sp.SpanContext().SpanID())
		}
	}
	if second.Parent().IsValid() || second.SpanContext().TraceID() == spanA.SpanContext().TraceID() || second.SpanContext().TraceID() == spanB.SpanContext().TraceID() {
		t.Errorf("a turn sent with no span has parent %v in trace %v", second.Parent(), second.SpanContext().TraceID())
	}
}

// TestResumedTurnJoinsTheResolversTrace: a turn passivated while it waits
// for an approval ends its span (suspended); the Resolve that wakes it
// starts the resumed turn's span as the resolver's child.
func TestResumedTurnJoinsTheResolversTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	var l ledger
	h := newHarness(t, Options{
		Telemetry:   telemetry.New(telemetry.WithTracerProvider(tp)),
		IdleTimeout: 10 * time.Millisecond,
		Tools:       []Tool{tool(&l, "refund", EffectNonIdempotentWrite, ok("r"))},
	})
	h.srv.Push(llmtest.ToolCalls(call("c1", "refund", `{}`)), llmtest.Text("refunded"))
	h.send("s", "refund order 7")
	p := h.pending("s", 1)[0]
	until(t, "passivated", func() bool { return len(h.m.active()) == 0 })
	ctxR, spanR := tp.Tracer("caller").Start(ctx10(t), "R")
	if err := h.m.Resolve(ctxR, "s", p.ID, true, "ok"); err != nil {
		t.Fatal(err)
	}
	spanR.End()
	if r := h.wait("s"); r.Answer != "refunded" {
		t.Fatalf("turn %+v", r)
	}
	if err := h.m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	turns := spansNamed(rec, "invoke_agent")
	if len(turns) != 2 {
		t.Fatalf("%d turn spans, want the suspended one and the resumed one", len(turns))
	}
	if got := turns[1].Parent().SpanID(); got != spanR.SpanContext().SpanID() {
		t.Fatalf("the resumed turn's parent %v, want the resolver's span %v", got, spanR.SpanContext().SpanID())
	}
}
