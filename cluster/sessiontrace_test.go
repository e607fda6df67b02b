package cluster

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/session"
	"github.com/chorusrt/chorus/telemetry"
)

// TestSessionCallsOneTrace: session calls made on a client node carry the
// caller's trace context in SessionRequest, so for each operation (send,
// wait, snapshot, resolve, cancel, follow) the session node's SERVER span
// is the child of the caller's CLIENT span, in the caller's trace, and
// both name the session; no span holds the key or the message. The calls that fail (cancel with no turn,
// resolve of no interrupt) mark both spans with error.type. The turn the
// send started (invoke_agent, on the session's node) is in the caller's
// trace, the child of the send's SERVER span.
func TestSessionCallsOneTrace(t *testing.T) {
	dsn := pgDSN(t)
	srv := llmtest.NewServer()
	defer srv.Close()
	srv.SetResponder(agentResponder)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	tel := telemetry.New(telemetry.WithTracerProvider(tp))
	l := &ledger{path: filepath.Join(t.TempDir(), "ledger")}
	addrs := freeAddrs(t, 2)
	members := joinAll(t, "session-trace", addrs[:1], func(i int, c *Config) {
		c.Runtime = append(c.Runtime, openaiAt(srv, "sk-test"))
		c.Sessions = sessionOptions(t, dsn, l, 0)
		c.Sessions.Telemetry = tel // the member's spans: from Sessions.Telemetry
	})
	client, err := Join(context.Background(), Config{Name: "session-trace", Bind: addrs[1], Peers: addrs[:1], Client: true, RefreshInterval: 200 * time.Millisecond, Telemetry: tel})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(t, append(members, client))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := client.WaitMembers(ctx, 1); err != nil {
		t.Fatal(err)
	}

	ss := client.Sessions()
	ctx, root := tp.Tracer("test").Start(ctx, "caller")
	evs, stop := ss.Events(ctx, "s1", 0)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for ev := range evs {
			if ev.Type == session.EventTurnFinished {
				return
			}
		}
	}()
	if err := ss.Send(ctx, "s1", llm.UserText("refund order 7")); err != nil {
		t.Fatal(err)
	}
	if tr, err := ss.Wait(ctx, "s1"); err != nil || tr.Status != session.TurnCompleted {
		t.Fatalf("wait: %+v %v", tr, err)
	}
	if _, err := ss.Snapshot(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	// Two that fail: no turn to cancel, no such interrupt.
	if err := ss.CancelTurn(ctx, "s1"); err == nil {
		t.Fatal("cancelling a session with no turn succeeded")
	}
	if err := ss.Resolve(ctx, "s1", "no-such-interrupt", true, ""); err == nil {
		t.Fatal("resolving an interrupt that does not exist succeeded")
	}
	select {
	case <-finished:
	case <-ctx.Done():
		t.Fatal("the follower never saw the turn finish")
	}
	stop()
	root.End()

	want := []string{"send", "wait", "snapshot", "cancel", "resolve", "follow"}
	deadline := time.Now().Add(10 * time.Second)
	var clients, servers map[string]sdktrace.ReadOnlySpan
	for {
		clients, servers = map[string]sdktrace.ReadOnlySpan{}, map[string]sdktrace.ReadOnlySpan{}
		for _, sp := range rec.Ended() {
			switch sp.SpanKind() {
			case trace.SpanKindClient:
				clients[sp.Name()] = sp
			case trace.SpanKindServer:
				servers[sp.Name()] = sp
			}
		}
		complete := true
		for _, op := range want {
			complete = complete && clients["chorus.session "+op] != nil && servers["chorus.session "+op] != nil
		}
		if complete || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, op := range want {
		name := "chorus.session " + op
		c, s := clients[name], servers[name]
		if c == nil || s == nil {
			t.Fatalf("%s: client span %v, server span %v", name, c != nil, s != nil)
		}
		if c.SpanContext().TraceID() != root.SpanContext().TraceID() || c.Parent().SpanID() != root.SpanContext().SpanID() {
			t.Errorf("%s: the client span is not the caller's child", name)
		}
		if s.SpanContext().TraceID() != c.SpanContext().TraceID() || s.Parent().SpanID() != c.SpanContext().SpanID() || !s.Parent().IsRemote() {
			t.Errorf("%s: the server span (trace %v, parent %v, remote %v) is not the client span's remote child (trace %v, span %v)",
				name, s.SpanContext().TraceID(), s.Parent().SpanID(), s.Parent().IsRemote(), c.SpanContext().TraceID(), c.SpanContext().SpanID())
		}
		for _, sp := range []sdktrace.ReadOnlySpan{c, s} {
			if v := attr(sp, "gen_ai.conversation.id"); v != "s1" {
				t.Errorf("%s: gen_ai.conversation.id %q", name, v)
			}
			if v := attr(sp, string(AttrSessionOp)); v != op {
				t.Errorf("%s: %s %q", name, AttrSessionOp, v)
			}
			if got := attr(sp, "error.type"); (got != "") != (op == "resolve" || op == "cancel") {
				t.Errorf("%s: error.type %q", name, got)
			}
		}
	}
	// The turn the send started is in the caller's trace: its
	// invoke_agent span is the child of the session node's send span.
	var turn sdktrace.ReadOnlySpan
	for _, sp := range rec.Ended() {
		if sp.Name() == "invoke_agent" {
			turn = sp
		}
	}
	if send := servers["chorus.session send"]; turn == nil || turn.SpanContext().TraceID() != root.SpanContext().TraceID() || turn.Parent().SpanID() != send.SpanContext().SpanID() {
		t.Errorf("the turn's span %v is not the child of the session node's send span %v in the caller's trace %v", turn, send.SpanContext().SpanID(), root.SpanContext().TraceID())
	}
	for _, sp := range rec.Ended() {
		if sp.Name() == "chorus.session touch" {
			t.Error("a lease touch was traced")
		}
		kvs := sp.Attributes()
		for _, ev := range sp.Events() {
			kvs = append(kvs, ev.Attributes...)
		}
		for _, kv := range kvs {
			if v := kv.Value.String(); strings.Contains(v, "sk-test") || strings.Contains(v, "refund order 7") {
				t.Errorf("span %s: %s = %q (a key or message content)", sp.Name(), kv.Key, v)
			}
		}
		if strings.Contains(sp.Status().Description, "sk-test") {
			t.Errorf("span %s: status %q", sp.Name(), sp.Status().Description)
		}
	}
}

// attr is a span attribute's value as a string ("" when absent).
func attr(sp sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range sp.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}
