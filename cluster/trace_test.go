package cluster

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/runtime"
	"github.com/chorusrt/chorus/telemetry"
)

// TestRemoteStreamOneTrace: a stream run on another member carries the
// caller's trace context in StreamOpen, so the worker's inference span is
// a child of the caller's span, in the caller's trace.
func TestRemoteStreamOneTrace(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	tel := telemetry.New(telemetry.WithTracerProvider(tp))
	addrs := freeAddrs(t, 2)
	nodes := joinAll(t, "stream-trace", addrs, func(i int, c *Config) {
		c.Runtime = append(c.Runtime, openaiAt(srv, "sk-test"), runtime.WithTelemetry(tel))
	})
	defer closeAll(t, nodes)
	srv.Push(llmtest.Text("across nodes"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ctx, caller := tp.Tracer("test").Start(ctx, "caller")
	s, err := nodes[0].streamOn(ctx, addrs[1], &llm.ChatRequest{Model: "fake/m", Messages: []llm.Message{llm.UserText("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := s.Result(); err != nil || res.Content != "across nodes" {
		t.Fatalf("%v %v", res, err)
	}
	caller.End()
	var chat sdktrace.ReadOnlySpan
	deadline := time.Now().Add(5 * time.Second)
	for chat == nil && time.Now().Before(deadline) {
		for _, sp := range rec.Ended() {
			if sp.Name() == "chat m" {
				chat = sp
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if chat == nil {
		t.Fatal("no inference span on the worker")
	}
	if chat.SpanContext().TraceID() != caller.SpanContext().TraceID() || chat.Parent().SpanID() != caller.SpanContext().SpanID() || !chat.Parent().IsRemote() {
		t.Fatalf("worker span in trace %v under %v (remote %v), want trace %v under %v", chat.SpanContext().TraceID(), chat.Parent().SpanID(), chat.Parent().IsRemote(), caller.SpanContext().TraceID(), caller.SpanContext().SpanID())
	}
}
