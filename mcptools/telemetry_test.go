package mcptools

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/chorusrt/chorus/telemetry"
)

func recorded(t *testing.T) (*tracetest.SpanRecorder, *sdktrace.TracerProvider, *telemetry.Telemetry) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return rec, tp, telemetry.New(telemetry.WithTracerProvider(tp))
}

func attrMap(s sdktrace.ReadOnlySpan) map[attribute.Key]string {
	m := map[attribute.Key]string{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value.String()
	}
	return m
}

// spansNamed returns the ended spans by name (the last of each name).
func spansNamed(rec *tracetest.SpanRecorder) map[string]sdktrace.ReadOnlySpan {
	out := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		out[s.Name()] = s
	}
	return out
}

// TestCallSpansHTTP: Set.Call over Streamable HTTP is an execute_tool
// span with the CLIENT span `tools/call {tool}` under it, which carries
// the MCP conventions' attributes (method, session id, protocol version,
// JSON-RPC request id, transport, server address and port, tool name);
// the session's attributes are on the execute_tool span too. A JSON-RPC
// error's code is error.type and rpc.response.status_code. No header
// value appears in any span.
func TestCallSpansHTTP(t *testing.T) {
	srv, url := goServer(t, "t1", "t2")
	rec, _, tel := recorded(t)
	set := start(t, Options{Servers: []Server{{Name: "go", URL: url, Headers: map[string]string{"Authorization": "Bearer " + testToken}, Prefix: "go_"}}, Telemetry: tel})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := set.Call(ctx, "go_t1", nil); err != nil {
		t.Fatal(err)
	}
	byName := spansNamed(rec)
	exec, call := byName["execute_tool go_t1"], byName["tools/call go_t1"]
	if exec == nil || call == nil {
		t.Fatalf("spans %v", byName)
	}
	if call.SpanKind() != trace.SpanKindClient || call.Parent().SpanID() != exec.SpanContext().SpanID() {
		t.Errorf("tools/call is not a CLIENT child of execute_tool")
	}
	a := attrMap(call)
	for k, want := range map[attribute.Key]string{
		"mcp.method.name": "tools/call", "gen_ai.tool.name": "go_t1", "gen_ai.operation.name": "execute_tool",
		"network.transport": "tcp", "network.protocol.name": "http", "server.address": "127.0.0.1", AttrServer: "go",
	} {
		if a[k] != want {
			t.Errorf("tools/call %s = %q, want %q", k, a[k], want)
		}
	}
	for _, k := range []attribute.Key{"mcp.session.id", "mcp.protocol.version", "jsonrpc.request.id", "server.port"} {
		if a[k] == "" {
			t.Errorf("tools/call has no %s (%v)", k, a)
		}
	}
	if e := attrMap(exec); e["mcp.session.id"] != a["mcp.session.id"] || e["gen_ai.tool.name"] != "go_t1" || e["chorus.tool.outcome"] != "succeeded" {
		t.Errorf("execute_tool attributes %v", e)
	}

	// A second call has its own request id.
	first := a["jsonrpc.request.id"]
	if _, err := set.Call(ctx, "go_t2", nil); err != nil {
		t.Fatal(err)
	}
	if second := attrMap(spansNamed(rec)["tools/call go_t2"])["jsonrpc.request.id"]; second == "" || second == first {
		t.Errorf("request ids %q then %q", first, second)
	}

	// A JSON-RPC error (the server no longer has the tool).
	srv.RemoveTools("t2")
	waitFor(t, func() bool { return !strings.Contains(names(set), "go_t2") }, "go_t2 to go")
	if _, err := set.server("go").call(ctx, &Tool{Name: "go_t2", RemoteName: "t2"}, nil, ""); err == nil {
		t.Fatal("the call of a removed tool succeeded")
	}
	ended := rec.Ended()
	failed := ended[len(ended)-1]
	fa := attrMap(failed)
	if failed.Name() != "tools/call go_t2" || fa["error.type"] == "" || fa["error.type"] != fa["rpc.response.status_code"] || !strings.HasPrefix(fa["error.type"], "-326") {
		t.Errorf("failed call span %s: %v", failed.Name(), fa)
	}
	for _, s := range rec.Ended() {
		kvs := s.Attributes()
		for _, ev := range s.Events() {
			kvs = append(kvs, ev.Attributes...)
		}
		for _, kv := range kvs {
			if strings.Contains(kv.Value.String(), testToken) {
				t.Errorf("span %s: %s holds the token", s.Name(), kv.Key)
			}
		}
		if strings.Contains(s.Status().Description, testToken) {
			t.Errorf("span %s: its status holds the token", s.Name())
		}
	}
}

// TestToolSetCallUnderCallersSpan: a ToolSet tool runs under the tool
// loop's own execute_tool span (here the test's): its tools/call span is
// that span's child, the session's attributes go on it, and mcptools adds
// no execute_tool span of its own.
func TestToolSetCallUnderCallersSpan(t *testing.T) {
	_, url := goServer(t, "t1")
	rec, tp, tel := recorded(t)
	set := start(t, Options{Servers: []Server{{Name: "go", URL: url, Headers: map[string]string{"Authorization": "Bearer " + testToken}}}, Telemetry: tel})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ctx, loop := tp.Tracer("test").Start(ctx, "execute_tool t1")
	if _, _, err := set.ToolSet()["t1"].PartsFunc(ctx, nil); err != nil {
		t.Fatal(err)
	}
	loop.End()
	var calls, execs int
	for _, s := range rec.Ended() {
		switch s.Name() {
		case "tools/call t1":
			calls++
			if s.Parent().SpanID() != loop.SpanContext().SpanID() {
				t.Error("tools/call is not the caller's span's child")
			}
		case "execute_tool t1":
			execs++
			if attrMap(s)["mcp.session.id"] == "" {
				t.Error("the caller's execute_tool span did not get the session's attributes")
			}
		}
	}
	if calls != 1 || execs != 1 {
		t.Errorf("%d tools/call and %d execute_tool spans, want 1 and 1", calls, execs)
	}
}

// TestCallSpansStdio: over stdio (the reference server) the tools/call
// span says network.transport pipe and carries the request's id.
func TestCallSpansStdio(t *testing.T) {
	rec, _, tel := recorded(t)
	set := start(t, Options{Servers: []Server{{Name: "everything", Command: everything(t)}}, Telemetry: tel})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := set.Call(ctx, "echo", []byte(`{"message":"hi"}`)); err != nil {
		t.Fatal(err)
	}
	call := spansNamed(rec)["tools/call echo"]
	if call == nil {
		t.Fatal("no tools/call span")
	}
	a := attrMap(call)
	if a["network.transport"] != "pipe" || a["jsonrpc.request.id"] == "" || a["mcp.protocol.version"] == "" || a["mcp.method.name"] != "tools/call" {
		t.Errorf("tools/call attributes %v", a)
	}
	if strings.Contains(a["gen_ai.tool.call.arguments"], "hi") {
		t.Error("arguments recorded without telemetry.WithContent")
	}
}
