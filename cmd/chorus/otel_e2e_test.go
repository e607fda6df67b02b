//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chorusrt/chorus/internal/testkit/syncbuf"
)

// jaegerBin is the Jaeger v1.76 binary that make jaeger builds (see the
// Makefile); CHORUS_JAEGER_BIN overrides it.
func jaegerBin(t *testing.T) string {
	if p := os.Getenv("CHORUS_JAEGER_BIN"); p != "" {
		return p
	}
	p, err := filepath.Abs("../../.cache/jaeger/jaeger-v1.76.0")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// freePorts returns n loopback ports free a moment ago.
func freePorts(t *testing.T, n int) []int {
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

const jaegerConfig = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    storage:
      traces: mem
    http:
      endpoint: 127.0.0.1:%d
    grpc:
      endpoint: 127.0.0.1:%d
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 10000
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:%d
      http:
        endpoint: 127.0.0.1:%d
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
`

// startJaeger starts Jaeger on loopback ports and returns its OTLP/HTTP
// endpoint and its query API's base URL. It is killed at cleanup, and
// with this process if the test dies (Pdeathsig).
func startJaeger(t *testing.T) (otlp, query string) {
	t.Helper()
	bin := jaegerBin(t)
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the Jaeger receiver is missing (%v): make jaeger builds it", err)
		}
		t.Skipf("the Jaeger receiver is missing (%v): run make jaeger (under CI=true this fails)", err)
	}
	p := freePorts(t, 4)
	cfg := filepath.Join(t.TempDir(), "jaeger.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, jaegerConfig, p[0], p[1], p[2], p[3]), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	cmd := exec.Command(bin, "--config", cfg)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting Jaeger: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	query = fmt.Sprintf("http://127.0.0.1:%d", p[0])
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("Jaeger exited: %v\n%s", err, logs.String())
		default:
		}
		if resp, err := http.Get(query + "/api/services"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Jaeger's query API did not answer in 60s\n%s", logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The OTLP receiver starts with the pipeline; wait for its port too.
	for {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", p[3]))
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Jaeger's OTLP/HTTP receiver did not listen in 60s\n%s", logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", p[3]), query
}

// jaegerSpan is a span as Jaeger's query API (api/traces) shows it.
type jaegerSpan struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	Tags []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
}

func (s jaegerSpan) tag(k string) any {
	for _, t := range s.Tags {
		if t.Key == k {
			return t.Value
		}
	}
	return nil
}

// num is a numeric tag as an int64 (-1 when missing).
func (s jaegerSpan) num(k string) int64 {
	switch v := s.tag(k).(type) {
	case float64:
		return int64(v)
	case json.Number:
		n, _ := v.Int64()
		return n
	}
	return -1
}

func jaegerSpans(t *testing.T, query, service string) []jaegerSpan {
	t.Helper()
	resp, err := http.Get(query + "/api/traces?service=" + service + "&limit=1000&lookback=1h")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var out struct {
		Data []struct {
			Spans []jaegerSpan `json:"spans"`
		} `json:"data"`
	}
	if resp.StatusCode != 200 {
		return nil // the service is not known yet
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("api/traces: %v: %s", err, body)
	}
	var spans []jaegerSpan
	for _, tr := range out.Data {
		spans = append(spans, tr.Spans...)
	}
	return spans
}

// TestBatchTracesInJaeger is the end-to-end test of the telemetry: chorus
// batch on the simulator exports through OTLP/HTTP (configured only by the
// standard OTEL_* variables) to a real Jaeger that the test starts; the
// traces read back through Jaeger's query API have the job's span, one
// line span per custom_id linked to it, and under each a CLIENT chat span
// whose GenAI attributes and token counts are the output line's.
func TestBatchTracesInJaeger(t *testing.T) {
	otlp, query := startJaeger(t)
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.jsonl"), filepath.Join(dir, "out.jsonl")
	lines := []string{
		`{"custom_id":"q1","method":"POST","url":"/v1/chat/completions","body":{"model":"sim/echo","messages":[{"role":"user","content":"first question"}]}}`,
		`{"custom_id":"q2","method":"POST","url":"/v1/chat/completions","body":{"model":"sim/echo","messages":[{"role":"user","content":"a second, longer question for the simulator"}]}}`,
		`{"custom_id":"q3","method":"POST","url":"/v1/chat/completions","body":{"model":"sim/echo","max_tokens":50,"messages":[{"role":"user","content":"third"}]}}`,
		`{"custom_id":"bad","method":"POST","url":"/v1/chat/completions","body":{"model":"nowhere/x","messages":[{"role":"user","content":"unroutable"}]}}`,
	}
	if err := os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	service := fmt.Sprintf("chorus-e2e-%d", time.Now().UnixNano())
	vars := map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": otlp,
		"OTEL_SERVICE_NAME":           service,
		"OTEL_METRICS_EXPORTER":       "none", // Jaeger takes traces only
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code, _, stderr := runCLI(t, ctx, vars, "batch", "-i", in, "-o", out)
	if code != 1 && code != 0 {
		t.Fatalf("chorus batch exited %d: %s", code, stderr)
	}
	if strings.Contains(stderr, "OpenTelemetry") {
		t.Fatalf("export failed: %s", stderr)
	}
	results := readOutput(t, out)
	if len(results) != 4 || results["bad"].Error == nil {
		t.Fatalf("output: %+v", results)
	}

	// Read the traces back; the receiver stores them a moment after the export.
	var spans []jaegerSpan
	deadline := time.Now().Add(30 * time.Second)
	for {
		spans = jaegerSpans(t, query, service)
		n := 0
		for _, s := range spans {
			if strings.HasPrefix(s.OperationName, "chat ") || strings.HasPrefix(s.OperationName, "chorus.batch") {
				n++
			}
		}
		if n >= 1+4+3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	var job *jaegerSpan
	lineOf := map[string]jaegerSpan{}    // custom_id -> line span
	chatUnder := map[string]jaegerSpan{} // line span id -> its chat span
	for _, s := range spans {
		switch {
		case s.OperationName == "chorus.batch":
			job = &s
		case s.OperationName == "chorus.batch.line":
			lineOf[fmt.Sprint(s.tag("chorus.batch.custom_id"))] = s
		case strings.HasPrefix(s.OperationName, "chat "):
			for _, r := range s.References {
				if r.RefType == "CHILD_OF" {
					chatUnder[r.SpanID] = s
				}
			}
		}
	}
	if job == nil {
		t.Fatalf("no job span among %d spans", len(spans))
	}
	if job.num("chorus.batch.written") != 4 || job.num("chorus.batch.failed") != 1 {
		t.Errorf("job span tags %v", job.Tags)
	}
	for _, id := range []string{"q1", "q2", "q3", "bad"} {
		line, ok := lineOf[id]
		if !ok {
			t.Errorf("no line span for %s", id)
			continue
		}
		linked := false
		for _, r := range line.References {
			linked = linked || (r.SpanID == job.SpanID && r.TraceID == job.TraceID)
		}
		if !linked || line.TraceID == job.TraceID {
			t.Errorf("line %s: references %v, want a link to the job span %s in its own trace", id, line.References, job.SpanID)
		}
		chat, ok := chatUnder[line.SpanID]
		if id == "bad" {
			if ok || fmt.Sprint(line.tag("error.type")) != "config" {
				t.Errorf("bad line: chat span %v, error.type %v", ok, line.tag("error.type"))
			}
			continue
		}
		if !ok {
			t.Errorf("line %s has no chat span under it", id)
			continue
		}
		var body struct {
			Model string `json:"model"`
			Usage struct {
				PromptTokens     int64 `json:"prompt_tokens"`
				CompletionTokens int64 `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(results[id].Response.Body, &body); err != nil {
			t.Fatal(err)
		}
		if chat.OperationName != "chat echo" || chat.tag("span.kind") != "client" || chat.tag("gen_ai.operation.name") != "chat" ||
			chat.tag("gen_ai.provider.name") != "sim" || chat.tag("gen_ai.request.model") != "echo" || chat.tag("server.address") != "127.0.0.1" {
			t.Errorf("line %s chat span %s tags %v", id, chat.OperationName, chat.Tags)
		}
		if id == "q1" {
			t.Logf("line %s: %s %v\n  under %s %v", id, chat.OperationName, chat.Tags, line.OperationName, line.Tags)
		}
		if body.Usage.PromptTokens <= 0 || chat.num("gen_ai.usage.input_tokens") != body.Usage.PromptTokens || chat.num("gen_ai.usage.output_tokens") != body.Usage.CompletionTokens {
			t.Errorf("line %s: span tokens in %d out %d, output line usage %+v", id, chat.num("gen_ai.usage.input_tokens"), chat.num("gen_ai.usage.output_tokens"), body.Usage)
		}
	}
	for _, s := range spans {
		for _, tg := range s.Tags {
			if v := fmt.Sprint(tg.Value); strings.Contains(v, "question") || strings.Contains(v, "unroutable") {
				t.Errorf("message content in span %s tag %s", s.OperationName, tg.Key)
			}
		}
	}
}
