package session

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/chorusrt/chorus/internal/testkit/syncbuf"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/telemetry"
)

// spanModel is a Model that remembers the span each model step ran under.
type spanModel struct {
	Model
	mu    sync.Mutex
	under []trace.SpanContext
}

func (m *spanModel) Stream(ctx context.Context, req *llm.ChatRequest) (*llm.Stream, error) {
	m.mu.Lock()
	m.under = append(m.under, trace.SpanContextFromContext(ctx))
	m.mu.Unlock()
	return m.Model.Stream(ctx, req)
}

// TestSessionTelemetry: a turn is one invoke_agent span with the session
// id as gen_ai.conversation.id; its model steps run under it; each tool
// call is an execute_tool span under it with the effect class, attempt,
// outcome and (idempotent writes) the idempotency key, the handler running
// inside it; approvals are events on the turn span (requested, then
// resolved with their wait); the pending-approvals metric returns to zero.
func TestSessionTelemetry(t *testing.T) {
	tel, rec, reader := recorded(t)
	var l ledger
	var handlerMu sync.Mutex
	handlerUnder := map[string]trace.SpanContext{}
	traced := func(name string, effect Effect) Tool {
		return tool(&l, name, effect, func(ctx context.Context, c Call) (Result, error) {
			handlerMu.Lock()
			handlerUnder[c.ID] = trace.SpanContextFromContext(ctx)
			handlerMu.Unlock()
			return Result{Content: "ok"}, nil
		})
	}
	sm := &spanModel{}
	hh := newHarness(t, Options{
		Telemetry: tel,
		Tools:     []Tool{traced("refund", EffectNonIdempotentWrite), traced("email", ""), traced("lookup", EffectRead), traced("tag", EffectIdempotentWrite)},
		Model:     sm,
	})
	sm.Model = newClient(t, hh.srv.OpenAIBaseURL())
	// The rejected email comes last, so no write after it is skipped.
	hh.srv.Push(llmtest.ToolCalls(call("c1", "refund", `{}`), call("c3", "lookup", `{}`), call("c4", "tag", `{}`), call("c2", "email", `{}`)), llmtest.Text("done"))
	hh.send("s", "refund order 7")
	pend := hh.pending("s", 2)
	ctx := ctx10(t)
	for _, p := range pend {
		if err := hh.m.Resolve(ctx, "s", p.ID, p.Call.ID == "c1", "decided"); err != nil {
			t.Fatal(err)
		}
	}
	if r := hh.wait("s"); r.Status != TurnCompleted {
		t.Fatalf("turn %+v", r)
	}
	if err := hh.m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	var turn sdktrace.ReadOnlySpan
	tools := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		switch s.Name() {
		case "invoke_agent":
			if turn != nil {
				t.Fatal("two turn spans")
			}
			turn = s
		default:
			for _, kv := range s.Attributes() {
				if kv.Key == "gen_ai.tool.call.id" {
					tools[kv.Value.AsString()] = s
				}
			}
		}
	}
	if turn == nil {
		t.Fatal("no invoke_agent span")
	}
	ta := map[attribute.Key]attribute.Value{}
	for _, kv := range turn.Attributes() {
		ta[kv.Key] = kv.Value
	}
	if ta["gen_ai.conversation.id"].AsString() != "s" || ta["gen_ai.operation.name"].AsString() != "invoke_agent" || ta[AttrTurnStatus].AsString() != string(TurnCompleted) {
		t.Errorf("turn attributes %v", turn.Attributes())
	}
	sm.mu.Lock()
	if len(sm.under) != 2 || sm.under[0].SpanID() != turn.SpanContext().SpanID() || sm.under[1].SpanID() != turn.SpanContext().SpanID() {
		t.Errorf("model steps ran under %v, want the turn span %v twice", sm.under, turn.SpanContext().SpanID())
	}
	sm.mu.Unlock()
	want := map[string]struct{ outcome, effect string }{
		"c1": {"succeeded", string(EffectNonIdempotentWrite)},
		"c2": {"rejected", string(EffectUnclassified)},
		"c3": {"succeeded", string(EffectRead)},
		"c4": {"succeeded", string(EffectIdempotentWrite)},
	}
	for id, w := range want {
		s := tools[id]
		if s == nil {
			t.Errorf("no execute_tool span for %s", id)
			continue
		}
		a := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes() {
			a[kv.Key] = kv.Value
		}
		if a[telemetry.AttrToolOutcome].AsString() != w.outcome || a[telemetry.AttrToolEffect].AsString() != w.effect || s.Parent().SpanID() != turn.SpanContext().SpanID() {
			t.Errorf("%s: %s %v parent %v", id, s.Name(), s.Attributes(), s.Parent().SpanID())
		}
		if id == "c4" && a[telemetry.AttrIdempotencyKey].AsString() != idempotencyKey("s", 1, "c4") {
			t.Errorf("c4 idempotency key %q", a[telemetry.AttrIdempotencyKey].AsString())
		}
		if id != "c2" && handlerUnder[id].SpanID() != s.SpanContext().SpanID() {
			t.Errorf("%s's handler did not run inside its span", id)
		}
	}
	var asked, resolved int
	for _, ev := range turn.Events() {
		switch ev.Name {
		case telemetry.EventApprovalAsked:
			asked++
		case telemetry.EventApprovalDone:
			resolved++
			wait := false
			for _, kv := range ev.Attributes {
				wait = wait || (kv.Key == AttrApprovalWait && kv.Value.AsFloat64() > 0)
			}
			if !wait {
				t.Errorf("resolution without its wait: %v", ev.Attributes)
			}
		}
	}
	if asked != 2 || resolved != 2 {
		t.Errorf("approval events: %d requested, %d resolved", asked, resolved)
	}
	points, found := approvalsPending(t, reader)
	for _, v := range points {
		if v != 0 {
			t.Errorf("approvals pending %d after the turn", v)
		}
	}
	if !found {
		t.Error("no approvals-pending metric")
	}
}

// TestSessionLogsCarryTraceIDs: a log line about a turn (a failed model
// call) carries the turn span's trace id through telemetry.LogHandler.
func TestSessionLogsCarryTraceIDs(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	var logs syncbuf.Buffer
	h := newHarness(t, Options{
		Telemetry: telemetry.New(telemetry.WithTracerProvider(tp)),
		Logger:    slog.New(telemetry.LogHandler(slog.NewTextHandler(&logs, nil))),
	})
	h.srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 500}}, llmtest.Text("done"))
	h.send("s", "hello")
	if r := h.wait("s"); r.Status != TurnCompleted {
		t.Fatalf("turn %+v", r)
	}
	if err := h.m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	turn := lastSpan(t, rec, "invoke_agent")
	var line string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "model call failed") {
			line = l
		}
	}
	if !strings.Contains(line, "trace_id="+turn.SpanContext().TraceID().String()) {
		t.Fatalf("log line %q lacks the turn's trace id %s", line, turn.SpanContext().TraceID())
	}
}

// TestApprovalExpiredEvent: an approval whose deadline passes is a
// chorus.approval.expired event on the turn span, with its wait, not a
// resolution; the pending-approvals metric goes back to zero.
func TestApprovalExpiredEvent(t *testing.T) {
	tel, rec, reader := recorded(t)
	var l ledger
	h := newHarness(t, Options{
		Telemetry:       tel,
		ApprovalTimeout: 300 * time.Millisecond,
		Tools:           []Tool{tool(&l, "refund", EffectNonIdempotentWrite, ok("r"))},
	})
	h.srv.Push(llmtest.ToolCalls(call("c1", "refund", `{}`)), llmtest.Text("expired, sorry"))
	h.send("s", "refund order 7")
	if r := h.wait("s"); r.Answer != "expired, sorry" {
		t.Fatalf("turn %+v", r)
	}
	if err := h.m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	turn := lastSpan(t, rec, "invoke_agent")
	var names []string
	wait := 0.0
	for _, ev := range turn.Events() {
		names = append(names, ev.Name)
		for _, kv := range ev.Attributes {
			if ev.Name == EventApprovalExp && kv.Key == AttrApprovalWait {
				wait = kv.Value.AsFloat64()
			}
		}
	}
	if strings.Join(names, ",") != telemetry.EventApprovalAsked+","+EventApprovalExp || wait < 0.25 {
		t.Fatalf("turn events %v, expired after %.3fs; want requested then expired after about 0.3s", names, wait)
	}
	points, _ := approvalsPending(t, reader)
	for _, v := range points {
		if v != 0 {
			t.Errorf("approvals pending %d after the turn", v)
		}
	}
}

// approvalsPending reads chorus.session.approvals.pending: its points'
// values, and whether the metric was there at all.
func approvalsPending(t *testing.T, reader *sdkmetric.ManualReader) (points []int64, found bool) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == telemetry.MetricApprovalsPending {
				found = true
				for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
					points = append(points, p.Value)
				}
			}
		}
	}
	return points, found
}

// pendingApprovals is chorus.session.approvals.pending summed over its points.
func pendingApprovals(t *testing.T, reader *sdkmetric.ManualReader) int64 {
	t.Helper()
	points, _ := approvalsPending(t, reader)
	var n int64
	for _, v := range points {
		n += v
	}
	return n
}

// recorded returns telemetry that records its spans into rec and its
// metrics into reader, shut down when the test ends.
func recorded(t *testing.T) (*telemetry.Telemetry, *tracetest.SpanRecorder, *sdkmetric.ManualReader) {
	rec := tracetest.NewSpanRecorder()
	reader := sdkmetric.NewManualReader()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	return telemetry.New(telemetry.WithTracerProvider(tp), telemetry.WithMeterProvider(mp)), rec, reader
}

// TestParkedApprovalsStayPending: a session passivated while its turn
// waits for an approval still counts in chorus.session.approvals.pending
// (the sessions stuck waiting are the ones to see); the Resolve that wakes
// it takes it out, with the wait since it was asked, and a session still
// parked when the Manager closes leaves the count then.
func TestParkedApprovalsStayPending(t *testing.T) {
	tel, rec, reader := recorded(t)
	var l ledger
	h := newHarness(t, Options{
		Telemetry:   tel,
		IdleTimeout: 10 * time.Millisecond,
		Tools:       []Tool{tool(&l, "refund", EffectNonIdempotentWrite, ok("r"))},
	})
	h.srv.Push(llmtest.ToolCalls(call("c1", "refund", `{}`)), llmtest.Text("refunded"), llmtest.ToolCalls(call("c2", "refund", `{}`)))
	h.send("a", "refund order 7")
	p := h.pending("a", 1)[0]
	asked := time.Now()
	until(t, "passivated", func() bool { return len(h.m.active()) == 0 })
	if n := pendingApprovals(t, reader); n != 1 {
		t.Fatalf("approvals pending %d while the session is parked, want 1", n)
	}
	time.Sleep(100 * time.Millisecond)
	if err := h.m.Resolve(ctx10(t), "a", p.ID, true, "ok"); err != nil {
		t.Fatal(err)
	}
	if r := h.wait("a"); r.Answer != "refunded" {
		t.Fatalf("turn %+v", r)
	}
	if n := pendingApprovals(t, reader); n != 0 {
		t.Fatalf("approvals pending %d after the resolution, want 0", n)
	}
	wait := 0.0
	for _, s := range rec.Ended() {
		for _, ev := range s.Events() {
			for _, kv := range ev.Attributes {
				if ev.Name == telemetry.EventApprovalDone && kv.Key == AttrApprovalWait {
					wait = kv.Value.AsFloat64()
				}
			}
		}
	}
	if min := time.Since(asked).Seconds() - 0.05; wait < 0.1 || wait < min-1 {
		t.Errorf("the resolution's wait %.3fs, want the time since the approval was asked (~%.3fs)", wait, time.Since(asked).Seconds())
	}

	h.send("b", "refund order 8")
	h.pending("b", 1)
	until(t, "passivated", func() bool { return len(h.m.active()) == 0 })
	if n := pendingApprovals(t, reader); n != 1 {
		t.Fatalf("approvals pending %d while b is parked, want 1", n)
	}
	if err := h.m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := pendingApprovals(t, reader); n != 0 {
		t.Fatalf("approvals pending %d after Close, want 0", n)
	}
}

// spansNamed are the ended spans named name, in the order they ended.
func spansNamed(rec *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// lastSpan is the last ended span named name; the test fails without one.
func lastSpan(t *testing.T, rec *tracetest.SpanRecorder, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	spans := spansNamed(rec, name)
	if len(spans) == 0 {
		t.Fatalf("no %s span", name)
	}
	return spans[len(spans)-1]
}
