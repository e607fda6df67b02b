package providers

import (
	"context"
	"fmt"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// learnEvents lists a span's learned-fallback events as "name flag@attempt".
func learnEvents(s sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, ev := range s.Events() {
		if ev.Name != EventLearned && ev.Name != EventLearnedApplied {
			continue
		}
		var flag string
		var attempt int64
		for _, kv := range ev.Attributes {
			switch kv.Key {
			case AttrLearned:
				flag = kv.Value.AsString()
			case AttrAttempt:
				attempt = kv.Value.AsInt64()
			}
		}
		out = append(out, fmt.Sprintf("%s %s@%d", ev.Name, flag, attempt))
	}
	return out
}

// TestLearnedFallbacksOnSpan: the attempt whose rejection teaches a flag
// puts chorus.learned on the caller's span, the retry built without the
// parameter chorus.learned.applied; a later call, buffered or streamed,
// has the applied event only; a request without the parameter has none.
func TestLearnedFallbacksOnSpan(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	c := newClient(t, formats(srv)[0])
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	call := func(name string, stream bool, req *llm.ChatRequest) []string {
		t.Helper()
		ctx, span := tp.Tracer("test").Start(ctxT(t), name)
		var err error
		if stream {
			var s *llm.Stream
			if s, err = c.Stream(ctx, req); err == nil {
				_, err = s.Result()
			}
		} else {
			_, err = c.Chat(ctx, req)
		}
		span.End()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ended := rec.Ended()
		return learnEvents(ended[len(ended)-1])
	}
	withTemp := func() *llm.ChatRequest {
		r := hello()
		r.Temperature = llm.Ptr(0.2)
		return r
	}
	srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 400, Message: "Unsupported parameter: 'temperature' is not supported with this model."}})
	if got, want := fmt.Sprint(call("first", false, withTemp())), "[chorus.learned no_temperature@1 chorus.learned.applied no_temperature@2]"; got != want {
		t.Errorf("the call that learned: %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(call("later", false, withTemp())), "[chorus.learned.applied no_temperature@1]"; got != want {
		t.Errorf("a later call: %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(call("streamed", true, withTemp())), "[chorus.learned.applied no_temperature@1]"; got != want {
		t.Errorf("a later stream: %s, want %s", got, want)
	}
	if got := call("no temperature", false, hello()); len(got) != 0 {
		t.Errorf("a call without the parameter: %v", got)
	}
}

// TestLearnedFallbacksNotRecordingAllocFree: with no recording span (no
// SDK, or a span sampled out) the per-attempt hook allocates nothing, even
// with every flag learned and every parameter sent.
func TestLearnedFallbacksNotRecordingAllocFree(t *testing.T) {
	c, req, sent := appliedFixture(t)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	defer tp.Shutdown(context.Background())
	sampledOut, span := tp.Tracer("test").Start(context.Background(), "x")
	defer span.End()
	for name, ctx := range map[string]context.Context{"no span": context.Background(), "sampled out": sampledOut} {
		if n := testing.AllocsPerRun(200, func() {
			c.traceApplied(ctx, req, sent, true, 1)
			traceLearned(ctx, LearnNoTemperature, 1)
		}); n != 0 {
			t.Errorf("%s: %v allocations per attempt", name, n)
		}
	}
}

func appliedFixture(t testing.TB) (*Client, *llm.ChatRequest, wire.Learned) {
	cfg := Config{ID: "openai", Format: FormatOpenAI, BaseURL: "http://127.0.0.1:1/v1", APIKey: testKey}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for f := LearnNoStreamOptions; f <= lastFlag; f <<= 1 {
		c.learned.Set(f)
	}
	c.learned.SetModel(LearnResponsesAPI, "m")
	req := &llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("go")}, Temperature: llm.Ptr(0.1), TopP: llm.Ptr(0.9), Seed: llm.Ptr(int64(1))}
	return c, req, c.learned.snapshot()
}

// BenchmarkLearnedFallbacksOff is the per-attempt cost of the learned
// fallback events with telemetry off (no span): every flag learned, every
// parameter sent.
func BenchmarkLearnedFallbacksOff(b *testing.B) {
	c, req, sent := appliedFixture(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c.traceApplied(ctx, req, sent, true, 1)
	}
}

// BenchmarkLearnedFallbacksOn is the same with a recording span: the cost
// of the events when telemetry is on.
func BenchmarkLearnedFallbacksOn(b *testing.B) {
	c, req, sent := appliedFixture(b)
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	ctx, span := tp.Tracer("test").Start(context.Background(), "x")
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%64 == 0 { // a fresh span now and then: its event list is capped
			span.End()
			ctx, span = tp.Tracer("test").Start(context.Background(), "x")
		}
		c.traceApplied(ctx, req, sent, true, 1)
	}
	span.End()
}
