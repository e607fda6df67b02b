package batch

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/telemetry"
)

// spanRunner is a fakeRunner that remembers the span each call ran under.
type spanRunner struct {
	fakeRunner
	mu    sync.Mutex
	under map[string]trace.SpanContext // by prompt
}

func (s *spanRunner) Chat(ctx context.Context, req *llm.ChatRequest) (*llm.ChatResult, error) {
	s.mu.Lock()
	s.under[req.Messages[len(req.Messages)-1].Content] = trace.SpanContextFromContext(ctx)
	s.mu.Unlock()
	return s.fakeRunner.Chat(ctx, req)
}

// TestBatchTelemetry: a job is one span with its counts; each live line is
// a span of its own trace, linked to the job's, carrying its custom_id,
// the parent of whatever the Runner does for it; a failed line has
// error.type; chorus.batch.lines counts lines by outcome.
func TestBatchTelemetry(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	reader := sdkmetric.NewManualReader()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer tp.Shutdown(context.Background())
	defer mp.Shutdown(context.Background())
	tel := telemetry.New(telemetry.WithTracerProvider(tp), telemetry.WithMeterProvider(mp))

	in := strings.Join([]string{chatLine("a", "p/m", "one"), chatLine("b", "p/m", "two"), chatLine("c", "p/m", "three fail")}, "\n")
	out, err := OpenOutput(filepath.Join(t.TempDir(), "out.jsonl"), Create)
	if err != nil {
		t.Fatal(err)
	}
	r := &spanRunner{under: map[string]trace.SpanContext{}}
	rep, _, err := runJob(t, context.Background(), Job{Input: strings.NewReader(in), InputName: "in.jsonl", Output: out, Runner: r, Telemetry: tel})
	if err != nil || rep.Written != 3 {
		t.Fatalf("%+v %v", rep, err)
	}
	var job sdktrace.ReadOnlySpan
	lines := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		a := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes() {
			a[kv.Key] = kv.Value
		}
		switch s.Name() {
		case SpanJob:
			job = s
			if a[AttrWritten].AsInt64() != 3 || a[AttrFailed].AsInt64() != 1 || a[AttrInput].AsString() != "in.jsonl" {
				t.Errorf("job attributes %v", s.Attributes())
			}
		case SpanLine:
			lines[a[telemetry.AttrCustomID].AsString()] = s
		}
	}
	if job == nil || len(lines) != 3 {
		t.Fatalf("job span %v, %d line spans", job != nil, len(lines))
	}
	for id, prompt := range map[string]string{"a": "one", "b": "two", "c": "three fail"} {
		s := lines[id]
		if s == nil {
			t.Fatalf("no span for line %s", id)
		}
		if len(s.Links()) != 1 || s.Links()[0].SpanContext.SpanID() != job.SpanContext().SpanID() {
			t.Errorf("line %s is not linked to the job", id)
		}
		if s.Parent().IsValid() || s.SpanContext().TraceID() == job.SpanContext().TraceID() {
			t.Errorf("line %s is not the root of its own trace", id)
		}
		if r.under[prompt].SpanID() != s.SpanContext().SpanID() {
			t.Errorf("line %s's call did not run under its span", id)
		}
		var et string
		for _, kv := range s.Attributes() {
			if kv.Key == "error.type" {
				et = kv.Value.AsString()
			}
		}
		if (id == "c") != (et == "client") {
			t.Errorf("line %s error.type %q", id, et)
		}
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == telemetry.MetricBatchLines {
				for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
					o, _ := p.Attributes.Value("chorus.outcome")
					got[o.AsString()] += p.Value
				}
			}
		}
	}
	if got["succeeded"] != 2 || got["failed"] != 1 {
		t.Fatalf("batch lines metric %v", got)
	}
}
