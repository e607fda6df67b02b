package gateway_test

import (
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/chorusrt/chorus/gateway"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/runtime"
	"github.com/chorusrt/chorus/telemetry"
)

// TestServerSpan: each request is an HTTP server span (semconv names),
// child of the client's traceparent, and the parent of the runtime's spans
// of its call; a 5xx marks it an error, a 4xx does not.
func TestServerSpan(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	defer tp.Shutdown(t.Context())
	tel := telemetry.New(telemetry.WithTracerProvider(tp))
	f := newFixture(t, gateway.Options{Telemetry: tel}, runtime.WithTelemetry(tel))
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	a := f.do(t, "POST", "/v1/chat/completions", `{"model":"openai/gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}`,
		"traceparent", "00-"+traceID+"-"+parentID+"-01", "User-Agent", "sdk-test/1")
	if a.status != 200 {
		t.Fatalf("status %d %s", a.status, a.body)
	}
	spans := sr.Ended()
	var server sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.SpanKind() == trace.SpanKindServer {
			server = s
		}
	}
	if server == nil {
		t.Fatalf("no server span among %d", len(spans))
	}
	if server.Name() != "POST /v1/chat/completions" || server.SpanContext().TraceID().String() != traceID ||
		server.Parent().SpanID().String() != parentID || !server.Parent().IsRemote() {
		t.Errorf("server span %q trace %s parent %s", server.Name(), server.SpanContext().TraceID(), server.Parent().SpanID())
	}
	attrs := map[string]string{}
	for _, kv := range server.Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	for k, v := range map[string]string{"http.request.method": "POST", "http.route": "/v1/chat/completions", "http.response.status_code": "200",
		"url.path": "/v1/chat/completions", "url.scheme": "http", "server.address": "127.0.0.1", "client.address": "127.0.0.1",
		"user_agent.original": "sdk-test/1", "network.protocol.version": "1.1"} {
		if attrs[k] != v {
			t.Errorf("%s = %q, want %q", k, attrs[k], v)
		}
	}
	children := 0
	for _, s := range spans {
		if s != server && s.Parent().SpanID() == server.SpanContext().SpanID() {
			children++
			if s.SpanContext().TraceID().String() != traceID {
				t.Errorf("runtime span %q in another trace", s.Name())
			}
		}
	}
	if children == 0 {
		t.Errorf("no runtime span under the server span (spans: %d)", len(spans))
	}

	// A 404 is the client's: no error. A provider's failure (502) is one.
	sr2 := len(sr.Ended())
	f.do(t, "GET", "/v1/nothing", "")
	f.up.Push(llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultStatus, Status: 500}), llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultStatus, Status: 500}))
	if a := f.do(t, "POST", "/v1/chat/completions", `{"model":"openai/gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}`); a.status != 502 {
		t.Fatalf("status %d", a.status)
	}
	var got []string
	for _, s := range sr.Ended()[sr2:] {
		if s.SpanKind() == trace.SpanKindServer {
			code := ""
			for _, kv := range s.Attributes() {
				if kv.Key == "http.response.status_code" {
					code = kv.Value.String()
				}
			}
			got = append(got, s.Name()+" "+code+" "+s.Status().Code.String())
		}
	}
	if len(got) != 2 || got[0] != "GET 404 Unset" || got[1] != "POST /v1/chat/completions 502 Error" {
		t.Errorf("server spans %q", got)
	}
}
