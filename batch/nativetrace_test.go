package batch

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/telemetry"
)

// TestNativeBatchTelemetry: each provider batch is a CLIENT span under the
// job's span, with its provider, batch id, line count, final state and
// its submission, polls and results as events; each line a batch answered
// is a span of its own trace linked to the job's and the batch's spans,
// named by custom_id, marked native, with the usage the batch reported, a
// failed or expired line with error.type; chorus.batch.lines counts
// native lines with the live ones, chorus.batch.native.requests holds the
// polls' counts. No key and no prompt in any span.
func TestNativeBatchTelemetry(t *testing.T) {
	srv := llmtest.NewServer(llmtest.WithBatchAPI(llmtest.BatchAPIOptions{Run: 30 * time.Millisecond, Result: outcomes}))
	defer srv.Close()
	rec := newRecording(t)

	out, err := OpenOutput(filepath.Join(t.TempDir(), "out.jsonl"), Create)
	if err != nil {
		t.Fatal(err)
	}
	native := &Native{Clients: nativeClients(t, srv), Poll: 5 * time.Millisecond}
	if _, _, err := runJob(t, context.Background(), Job{Input: strings.NewReader(nativeInput()), Output: out, Runner: &fakeRunner{}, Native: native, Telemetry: rec.tel}); err != nil {
		t.Fatal(err)
	}

	var job sdktrace.ReadOnlySpan
	batches := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	lines := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.spans.Ended() {
		switch s.Name() {
		case SpanJob:
			job = s
		case SpanNative:
			batches[s.SpanContext().SpanID()] = s
		case SpanLine:
			lines[spanAttrs(s)[telemetry.AttrCustomID].AsString()] = s
		}
		kvs := s.Attributes()
		for _, ev := range s.Events() {
			kvs = append(kvs, ev.Attributes...)
		}
		for _, kv := range kvs {
			if strings.Contains(kv.Value.String(), testKey) || kv.Value.String() == "p" {
				t.Errorf("span %s: %s = %q", s.Name(), kv.Key, kv.Value.String())
			}
		}
		if strings.Contains(s.Status().Description, testKey) {
			t.Errorf("span %s: status %q", s.Name(), s.Status().Description)
		}
	}
	if job == nil {
		t.Fatal("no job span")
	}
	// openai (chat), openai (embeddings), anthropic, gemini/gem-x.
	if len(batches) != 4 {
		t.Fatalf("%d batch spans, want 4", len(batches))
	}
	providersSeen := map[string]int{}
	for _, b := range batches {
		a := spanAttrs(b)
		providersSeen[a["gen_ai.provider.name"].AsString()]++
		if b.SpanKind() != trace.SpanKindClient || b.Parent().SpanID() != job.SpanContext().SpanID() || b.SpanContext().TraceID() != job.SpanContext().TraceID() {
			t.Errorf("batch span %v is not a CLIENT child of the job", a)
		}
		if a[telemetry.AttrBatchID].AsString() == "" || a[AttrRequests].AsInt64() < 1 || a[AttrState].AsString() == "" {
			t.Errorf("batch span attributes %v", a)
		}
		events := map[string]bool{}
		for _, ev := range b.Events() {
			events[ev.Name] = true
		}
		if !events[EventSubmitted] || !events[EventPolled] || !events[EventResults] {
			t.Errorf("batch span %s events %v", a[telemetry.AttrBatchID].AsString(), events)
		}
		if b.Status().Code != 0 {
			t.Errorf("batch span %s: status %v", a[telemetry.AttrBatchID].AsString(), b.Status())
		}
	}
	if providersSeen["openai"] != 2 || providersSeen["anthropic"] != 1 || providersSeen["gcp.gemini"] != 1 {
		t.Errorf("batch spans by provider %v", providersSeen)
	}

	for id, want := range map[string]string{"oa1": "", "an1": "", "gm1": "", "vec": "", "e-oa": "client", "e-an": "client", "e-gm": "client", "x-oa": CodeExpired, "x-an": CodeExpired} {
		s := lines[id]
		if s == nil {
			t.Fatalf("no line span for %s", id)
		}
		a := spanAttrs(s)
		if !a[AttrNative].AsBool() || s.Parent().IsValid() {
			t.Errorf("%s: native %v, parent %v", id, a[AttrNative].AsBool(), s.Parent().IsValid())
		}
		if len(s.Links()) != 2 || s.Links()[0].SpanContext.SpanID() != job.SpanContext().SpanID() || batches[s.Links()[1].SpanContext.SpanID()] == nil {
			t.Errorf("%s: links %v", id, s.Links())
		} else if b := batches[s.Links()[1].SpanContext.SpanID()]; spanAttrs(b)[telemetry.AttrBatchID] != a[telemetry.AttrBatchID] {
			t.Errorf("%s: linked to a batch span of another batch", id)
		}
		if got := a["error.type"].AsString(); got != want {
			t.Errorf("%s: error.type %q, want %q", id, got, want)
		}
		if want == "" && id != "vec" && (a["gen_ai.usage.input_tokens"].AsInt64() != 150 || a["gen_ai.usage.output_tokens"].AsInt64() != 20 || a["gen_ai.usage.cache_read.input_tokens"].AsInt64() != 50) {
			t.Errorf("%s: usage attributes %v", id, a)
		}
	}
	if l := lines["live1"]; l == nil || spanAttrs(l)[AttrNative].AsBool() {
		t.Error("the live line has no span, or one marked native")
	}

	ms := rec.metrics(t)
	outcomesSeen := sumBy(ms[telemetry.MetricBatchLines], "chorus.outcome")
	var polled bool
	gauge, _ := ms[telemetry.MetricNativeRequests].(metricdata.Gauge[int64])
	for _, p := range gauge.DataPoints {
		st, _ := p.Attributes.Value("chorus.batch.state")
		polled = polled || st.AsString() == "total" && p.Value > 0
	}
	if outcomesSeen["succeeded"] != 6 || outcomesSeen["failed"] != 3 || outcomesSeen["not_run"] != 2 {
		t.Errorf("chorus.batch.lines %v, want 6 succeeded (5 native, 1 live), 3 failed, 2 not run", outcomesSeen)
	}
	if !polled {
		t.Error("no chorus.batch.native.requests total recorded")
	}
}
