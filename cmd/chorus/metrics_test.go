package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
)

// TestNodeMetricsEndpoint: chorus node --metrics-addr serves its
// OpenTelemetry metrics in the Prometheus format at /metrics over
// loopback. After a batch ran its calls on the member, the scrape holds
// the GenAI client metrics and Chorus's own, and neither the member's
// provider key nor any message content.
func TestNodeMetricsEndpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts a cluster member")
	}
	bin := buildChorus(t)
	addrs := freePairs(t, 1)
	const key = "sk-metrics-test-KEY-0123456789"
	cmd := exec.Command(bin, "node", "--cluster", "metricstest", "--bind", addrs[0], "--peers", addrs[0], "--metrics-addr", "127.0.0.1:0")
	cmd.Env = cleanEnv("OPENAI_API_KEY=" + key)
	n, url := launchNode(t, cmd, addrs[0], regexp.MustCompile(`metrics at (http://\S+/metrics)`))
	defer n.stop(t)

	in := writeInput(t,
		chatLine("a", "sim/echo", "a secret prompt"),
		chatLine("b", "sim/echo", "another secret prompt"),
	)
	out := filepath.Join(t.TempDir(), "out.jsonl")
	batch := exec.Command(bin, "batch", "-i", in, "-o", out, "--cluster", "metricstest", "--peers", addrs[0])
	batch.Env = cleanEnv()
	if b, err := batch.CombinedOutput(); err != nil {
		t.Fatalf("batch over the member: %v\n%s", err, b)
	}
	if got := readOutput(t, out); len(got) != 2 {
		t.Fatalf("%d lines out, want 2", len(got))
	}

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	page := string(body)
	for _, name := range []string{
		"gen_ai_client_operation_duration_seconds_bucket",
		"gen_ai_client_token_usage_bucket",
		`gen_ai_operation_name="chat"`,
		"chorus_",
	} {
		if !strings.Contains(page, name) {
			t.Errorf("no %s in the scrape:\n%s", name, page)
		}
	}
	if strings.Contains(page, key) || strings.Contains(page, "secret prompt") {
		t.Error("the scrape holds the key or message content")
	}
}

// TestServeMetrics: chorus serve --metrics serves the same metrics at
// /metrics on its own port: after a call through the gateway the scrape
// holds the GenAI metrics, and neither the provider key nor the prompt.
// With gateway keys configured /metrics asks for one of them.
func TestServeMetrics(t *testing.T) {
	const key = "sk-serve-metrics-KEY-0123456789"
	base, stop := startServe(t, map[string]string{"OPENAI_API_KEY": key}, "--addr", "127.0.0.1:0", "--metrics")
	if code, b := post(t, base+"/v1/chat/completions", `{"model":"sim/echo","messages":[{"role":"user","content":"a secret prompt"}]}`); code != 200 {
		t.Fatalf("chat: %d %s", code, b)
	}
	code, page := get(t, base+"/metrics")
	if code != 200 || !strings.Contains(page, "gen_ai_client_operation_duration_seconds_bucket") || !strings.Contains(page, "gen_ai_client_token_usage_bucket") ||
		!strings.Contains(page, "chorus_request_log_records_total{") || !strings.Contains(page, `outcome="dropped"} 0`) { // the request log's overflow
		t.Errorf("scrape %d:\n%s", code, page)
	}
	if strings.Contains(page, key) || strings.Contains(page, "secret prompt") {
		t.Error("the scrape holds the key or the prompt")
	}
	if exit, stderr := stop(); exit != 0 {
		t.Errorf("exit %d: %s", exit, stderr)
	}

	cfg := filepath.Join(t.TempDir(), "chorus.yaml")
	if err := os.WriteFile(cfg, []byte("gateway:\n  keys:\n    - name: ci\n      key_env: CHORUS_TEST_GATEWAY_KEY\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base, stop = startServe(t, map[string]string{"CHORUS_TEST_GATEWAY_KEY": "gk-metrics-1"}, "--addr", "127.0.0.1:0", "--metrics", "--config", cfg)
	defer stop()
	if code, _ := get(t, base+"/metrics"); code != 401 {
		t.Errorf("/metrics without a gateway key: %d", code)
	}
	if code, _ := get(t, base+"/metrics", "Authorization", "Bearer wrong"); code != 401 {
		t.Errorf("/metrics with a wrong key: %d", code)
	}
	if code, page := get(t, base+"/metrics", "Authorization", "Bearer gk-metrics-1"); code != 200 || !strings.Contains(page, "target_info") {
		t.Errorf("/metrics with the key: %d", code)
	}
}

func get(t *testing.T, url string, header ...string) (int, string) {
	t.Helper()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest("GET", url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestMetricsBesideOTLP: with OTLP metrics asked for by the environment,
// --metrics-addr replaces setupOTel's meter provider by one with both
// readers: an instrument made afterwards is scraped at /metrics and
// exported over OTLP when the command ends; the global is a no-op after.
func TestMetricsBesideOTLP(t *testing.T) {
	sink := &otlpSink{spans: map[string]int{}, metrics: map[string]bool{}}
	srv := httptest.NewServer(sink)
	defer srv.Close()
	vars := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL, "OTEL_TRACES_EXPORTER": "none"}
	shutdown, err := setupOTel(context.Background(), func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	m, err := startMetrics(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, _ := otel.GetMeterProvider().Meter("test").Int64Counter("chorus.test.both", metric.WithUnit("{thing}"))
	c.Add(context.Background(), 3)
	if code, page := get(t, "http://"+m.addr+"/metrics"); code != 200 || !strings.Contains(page, "chorus_test_both_total") {
		t.Errorf("scrape %d:\n%s", code, page)
	}
	if err := m.stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if !sink.metrics["chorus.test.both"] {
		t.Errorf("not exported over OTLP: %v", sink.metrics)
	}
	if _, ok := otel.GetMeterProvider().(metricnoop.MeterProvider); !ok {
		t.Errorf("the global meter provider after shutdown is %T", otel.GetMeterProvider())
	}
}
