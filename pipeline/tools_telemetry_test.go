package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/pipeline"
	"github.com/chorusrt/chorus/telemetry"
)

// TestToolLoopTelemetry: each tool call of a loop is an execute_tool span
// (INTERNAL) with the tool's name, the call id and the outcome, under the
// caller's span; the handler runs inside it; a failed call has error.type;
// arguments and results appear only with telemetry.WithContent.
func TestToolLoopTelemetry(t *testing.T) {
	for _, content := range []bool{false, true} {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		opts := []telemetry.Option{telemetry.WithTracerProvider(tp)}
		if content {
			opts = append(opts, telemetry.WithContent())
		}
		tel := telemetry.New(opts...)
		c := newFake(nil)
		c.chat, _ = scripted(calls(
			llm.ToolCall{ID: "c1", Name: "echo", Arguments: `{"secret":"arg-text"}`},
			llm.ToolCall{ID: "c2", Name: "fails", Arguments: `{}`},
		), final("ok"))
		var inside trace.SpanContext
		tools := pipeline.ToolSet{
			"echo": {Func: func(ctx context.Context, a json.RawMessage) (string, error) {
				inside = trace.SpanContextFromContext(ctx)
				return "result-text", nil
			}},
			"fails": {Func: func(ctx context.Context, _ json.RawMessage) (string, error) { return "", errors.New("disk full") }},
		}
		ctx, parent := tp.Tracer("test").Start(context.Background(), "caller")
		if _, err := pipeline.ToolLoop(ctx, c, userReq("go"), tools, pipeline.ToolLoopOptions{Telemetry: tel}); err != nil {
			t.Fatal(err)
		}
		parent.End()
		got := map[string]map[attribute.Key]attribute.Value{}
		for _, s := range rec.Ended() {
			if s.Name() == "caller" {
				continue
			}
			a := map[attribute.Key]attribute.Value{}
			for _, kv := range s.Attributes() {
				a[kv.Key] = kv.Value
			}
			got[s.Name()] = a
			if s.SpanKind() != trace.SpanKindInternal || s.Parent().SpanID() != parent.SpanContext().SpanID() {
				t.Errorf("%s: kind %v parent %v", s.Name(), s.SpanKind(), s.Parent().SpanID())
			}
			if s.Name() == "execute_tool echo" && inside.SpanID() != s.SpanContext().SpanID() {
				t.Error("the handler did not run inside its span")
			}
		}
		echo, fails := got["execute_tool echo"], got["execute_tool fails"]
		if echo == nil || fails == nil {
			t.Fatalf("spans %v", got)
		}
		if echo["gen_ai.operation.name"].AsString() != "execute_tool" || echo["gen_ai.tool.name"].AsString() != "echo" || echo["gen_ai.tool.call.id"].AsString() != "c1" || echo["chorus.tool.outcome"].AsString() != "succeeded" {
			t.Errorf("echo span %v", echo)
		}
		if fails["chorus.tool.outcome"].AsString() != "failed" || fails["error.type"].AsString() == "" {
			t.Errorf("fails span %v", fails)
		}
		_, hasArgs := echo["gen_ai.tool.call.arguments"]
		_, hasResult := echo["gen_ai.tool.call.result"]
		if hasArgs != content || hasResult != content {
			t.Errorf("content=%v: arguments %v result %v recorded", content, hasArgs, hasResult)
		}
		tp.Shutdown(context.Background())
	}
}
