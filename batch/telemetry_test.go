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

// recording is a Telemetry whose spans and metrics a test reads.
type recording struct {
	tel    *telemetry.Telemetry
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
}

// newRecording records every span and metric of its Telemetry until the
// test ends.
func newRecording(t *testing.T) *recording {
	r := &recording{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	t.Cleanup(func() {
		_ = mp.Shutdown(context.Background())
		_ = tp.Shutdown(context.Background())
	})
	r.tel = telemetry.New(telemetry.WithTracerProvider(tp), telemetry.WithMeterProvider(mp))
	return r
}

// metrics collects the metrics recorded so far, by name.
func (r *recording) metrics(t *testing.T) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// sumBy adds up an int64 counter's points by the value of attribute key
// (empty when agg is not one).
func sumBy(agg metricdata.Aggregation, key attribute.Key) map[string]int64 {
	out := map[string]int64{}
	sum, _ := agg.(metricdata.Sum[int64])
	for _, p := range sum.DataPoints {
		v, _ := p.Attributes.Value(key)
		out[v.AsString()] += p.Value
	}
	return out
}

func spanAttrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	a := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		a[kv.Key] = kv.Value
	}
	return a
}

// TestBatchTelemetry: a job is one span with its counts; each live line is
// a span of its own trace, linked to the job's, carrying its custom_id,
// the parent of whatever the Runner does for it; a failed line has
// error.type; chorus.batch.lines counts lines by outcome.
func TestBatchTelemetry(t *testing.T) {
	rec := newRecording(t)
	in := strings.Join([]string{chatLine("a", "p/m", "one"), chatLine("b", "p/m", "two"), chatLine("c", "p/m", "three fail")}, "\n")
	out, err := OpenOutput(filepath.Join(t.TempDir(), "out.jsonl"), Create)
	if err != nil {
		t.Fatal(err)
	}
	r := &spanRunner{under: map[string]trace.SpanContext{}}
	rep, _, err := runJob(t, context.Background(), Job{Input: strings.NewReader(in), InputName: "in.jsonl", Output: out, Runner: r, Telemetry: rec.tel})
	if err != nil || rep.Written != 3 {
		t.Fatalf("%+v %v", rep, err)
	}
	var job sdktrace.ReadOnlySpan
	lines := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.spans.Ended() {
		a := spanAttrs(s)
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
	got := sumBy(rec.metrics(t)[telemetry.MetricBatchLines], "chorus.outcome")
	if got["succeeded"] != 2 || got["failed"] != 1 {
		t.Fatalf("batch lines metric %v", got)
	}
}
