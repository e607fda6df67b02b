package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	collmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	colltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpSink is an OTLP/HTTP receiver in miniature: it decodes what the
// exporters post to /v1/traces and /v1/metrics.
type otlpSink struct {
	mu      sync.Mutex
	spans   map[string]int // name -> count
	metrics map[string]bool
	service string
	raw     strings.Builder
}

func (s *otlpSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.raw.Write(body)
	switch r.URL.Path {
	case "/v1/traces":
		var req colltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		for _, rs := range req.ResourceSpans {
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.Key == "service.name" {
					s.service = kv.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					s.spans[sp.Name]++
				}
			}
		}
	case "/v1/metrics":
		var req collmetrics.ExportMetricsServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		for _, rm := range req.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					s.metrics[m.Name] = true
				}
			}
		}
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(200)
}

// TestBatchExportsOTLPFromEnv: the standard OTEL_* variables alone make
// chorus batch export its spans and metrics over OTLP/HTTP (here to an
// in-process receiver), under OTEL_SERVICE_NAME; with none set nothing is
// exported; no key of the environment is in what was sent.
func TestBatchExportsOTLPFromEnv(t *testing.T) {
	sink := &otlpSink{spans: map[string]int{}, metrics: map[string]bool{}}
	srv := httptest.NewServer(sink)
	defer srv.Close()
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	lines := `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"sim/echo","messages":[{"role":"user","content":"hello there"}]}}
{"custom_id":"b","method":"POST","url":"/v1/chat/completions","body":{"model":"sim/echo","messages":[{"role":"user","content":"again"}]}}
`
	if err := os.WriteFile(in, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	const key = "sk-otel-test-KEY-0123456789"
	code, _, stderr := runCLI(t, context.Background(), map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL,
		"OTEL_SERVICE_NAME":           "chorus-test",
		"OPENAI_API_KEY":              key,
	}, "batch", "-i", in, "-o", filepath.Join(dir, "out.jsonl"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	sink.mu.Lock()
	if sink.spans["chorus.batch"] != 1 || sink.spans["chorus.batch.line"] != 2 || sink.spans["chat echo"] != 2 || sink.service != "chorus-test" {
		t.Errorf("spans %v, service %q", sink.spans, sink.service)
	}
	for _, m := range []string{"gen_ai.client.operation.duration", "gen_ai.client.token.usage", "chorus.batch.lines"} {
		if !sink.metrics[m] {
			t.Errorf("metric %s not exported (got %v)", m, sink.metrics)
		}
	}
	if strings.Contains(sink.raw.String(), key) || strings.Contains(sink.raw.String(), "hello there") {
		t.Error("a key or message content was exported")
	}
	n := len(sink.spans)
	sink.mu.Unlock()

	code, _, stderr = runCLI(t, context.Background(), nil, "batch", "-i", in, "-o", filepath.Join(dir, "out2.jsonl"))
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if code != 0 || len(sink.spans) != n || sink.spans["chorus.batch"] != 1 {
		t.Fatalf("without OTEL_* variables: exit %d (%s), spans %v", code, stderr, sink.spans)
	}
}
