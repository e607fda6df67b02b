package session

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
)

// TestSteering: a message sent during a turn is durable at once (queued),
// and the model sees it at the next step boundary, after the function
// responses of the running step, within the same turn.
func TestSteering(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	h := newHarness(t, Options{Tools: []Tool{tool(nil, "lookup", EffectRead, func(context.Context, Call) (Result, error) {
		close(started)
		<-release
		return Result{Content: "order 7: delivered"}, nil
	})}})
	h.srv.Push(llmtest.ToolCalls(call("c1", "lookup", `{}`)), llmtest.Text("done"))
	h.send("s", "where is my order?")
	<-started
	if err := h.m.Send(ctx10(t), "s", llm.UserText("also, it is order 7")); err != nil {
		t.Fatal(err)
	}
	s := h.snap("s")
	if len(s.Queued) != 1 || s.Queued[0].Content != "also, it is order 7" {
		t.Fatalf("queued = %+v", s.Queued)
	}
	recs := h.records("s")
	if last := recs[len(recs)-1]; last.Kind != recUserMessage {
		t.Fatalf("steering message not in the journal: last record %s", last.Kind)
	}
	close(release)
	if r := h.wait("s"); r.Turn != 1 || r.Answer != "done" {
		t.Fatalf("turn = %+v", r)
	}
	req := h.lastRequest()
	var roles []string
	for _, m := range req.Messages {
		roles = append(roles, m.Role)
	}
	if got := strings.Join(roles, ","); got != "user,assistant,tool,user" {
		t.Fatalf("roles = %s", got)
	}
	if req.Messages[3].text() != "also, it is order 7" {
		t.Fatalf("steering text = %q", req.Messages[3].text())
	}
	if h.srv.Count() != 2 {
		t.Fatalf("%d model calls, want 2 (one turn)", h.srv.Count())
	}
}

// TestCancelTurn: CancelTurn stops the turn between steps. A running tool
// attempt ends and is recorded; a call waiting for approval ends rejected
// and its interrupt goes stale; the turn's note records what ran.
func TestCancelTurn(t *testing.T) {
	var l ledger
	started, release := make(chan struct{}), make(chan struct{})
	h := newHarness(t, Options{Tools: []Tool{
		tool(&l, "slow_read", EffectRead, func(context.Context, Call) (Result, error) {
			close(started)
			<-release
			return Result{Content: "read it"}, nil
		}),
		tool(&l, "refund", EffectNonIdempotentWrite, ok("refunded")),
	}})
	h.srv.Push(llmtest.ToolCalls(call("c1", "slow_read", `{}`), call("c2", "refund", `{}`)), llmtest.Text("next turn answer"))
	h.send("s", "go")
	<-started
	p := h.pending("s", 1)[0]
	if err := h.m.CancelTurn(ctx10(t), "s"); err != nil {
		t.Fatal(err)
	}
	// The running attempt is not abandoned: the turn waits for it.
	time.Sleep(20 * time.Millisecond)
	if s := h.snap("s"); s.Last.Turn != 0 {
		t.Fatalf("turn ended while a tool ran: %+v", s.Last)
	}
	if err := h.m.Resolve(ctx10(t), "s", p.ID, true, ""); !errors.Is(err, ErrStaleInterrupt) {
		t.Fatalf("resolution during cancellation: %v", err)
	}
	close(release)
	r := h.wait("s")
	if r.Status != TurnCancelled {
		t.Fatalf("turn = %+v", r)
	}
	if len(l.of("c2")) != 0 {
		t.Fatal("cancelled call ran")
	}
	s := h.snap("s")
	st := map[string]ToolStatus{}
	for _, rec := range s.Tools {
		st[rec.ID] = rec.Status
	}
	if st["c1"] != StatusSucceeded || st["c2"] != StatusRejected {
		t.Fatalf("records = %+v", s.Tools)
	}
	for _, want := range []string{"Turn 1 cancelled", "slow_read (call c1) {}: succeeded: read it", "refund (call c2) {}: rejected"} {
		if !strings.Contains(r.Note, want) {
			t.Errorf("note lacks %q:\n%s", want, r.Note)
		}
	}
	if err := h.m.CancelTurn(ctx10(t), "s"); !errors.Is(err, ErrNoActiveTurn) {
		t.Fatalf("cancel when idle: %v", err)
	}
	// The next turn's model sees the note instead of the partial turn.
	h.send("s", "and now?")
	h.wait("s")
	req := h.lastRequest()
	if len(req.Messages) != 3 || !strings.Contains(req.Messages[1].text(), "Turn 1 cancelled") {
		t.Fatalf("next request = %+v", req.Messages)
	}
}

// TestCancelDuringModel: a running model call is cancelled at once.
func TestCancelDuringModel(t *testing.T) {
	h := newHarness(t, Options{})
	h.srv.Push(llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultStall, After: 2, Stall: 30 * time.Second}))
	h.send("s", "hello")
	until(t, "model call", func() bool { return h.srv.Count() == 1 })
	start := time.Now()
	if err := h.m.CancelTurn(ctx10(t), "s"); err != nil {
		t.Fatal(err)
	}
	if r := h.wait("s"); r.Status != TurnCancelled || !strings.Contains(r.Note, "It made no tool calls") {
		t.Fatalf("turn = %+v", r)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("cancellation took %v", d)
	}
}

// TestTurnFailureNote: a turn whose model calls keep failing after tool
// calls ran ends failed, with a note listing each call and its outcome;
// the next turn's model sees the note.
func TestTurnFailureNote(t *testing.T) {
	var l ledger
	h := newHarness(t, Options{
		Tools: []Tool{
			tool(&l, "refund", EffectIdempotentWrite, ok(`{"refund":"r-9"}`)),
			tool(&l, "email", EffectNonIdempotentWrite, func(context.Context, Call) (Result, error) { return Result{}, errors.New("smtp reset") }),
		},
		Policy: map[string]ToolPolicy{"email": {RequireApproval: Bool(false)}},
	})
	h.srv.Push(llmtest.ToolCalls(call("c1", "refund", `{"order":7}`), call("c2", "email", `{"to":"a@b"}`)),
		llmtest.Status(500, 0), llmtest.Status(500, 0), llmtest.Status(500, 0),
		llmtest.Text("I see the refund was made"))
	h.send("s", "refund order 7 and email me")
	r := h.wait("s")
	if r.Status != TurnFailed || !strings.Contains(r.Error, "the model call failed after 3 attempts") {
		t.Fatalf("turn = %+v", r)
	}
	for _, want := range []string{
		"Turn 1 failed",
		`refund (call c1) {"order":7}: succeeded: {"refund":"r-9"}`,
		`email (call c2) {"to":"a@b"}: outcome_unknown: it may or may not have taken effect`,
		"Do not repeat",
	} {
		if !strings.Contains(r.Note, want) {
			t.Errorf("note lacks %q:\n%s", want, r.Note)
		}
	}
	h.send("s", "did it work?")
	if r := h.wait("s"); r.Status != TurnCompleted {
		t.Fatalf("second turn = %+v", r)
	}
	req := h.lastRequest()
	var texts []string
	for _, m := range req.Messages {
		texts = append(texts, m.Role+": "+m.text())
	}
	if len(req.Messages) != 3 || req.Messages[1].Role != "user" || req.Messages[1].text() != r0Note(t, h) {
		t.Fatalf("second turn input:\n%s", strings.Join(texts, "\n"))
	}
	if len(l.of("c1")) != 1 || len(l.of("c2")) != 1 {
		t.Fatal("a write ran twice")
	}
}

func r0Note(t *testing.T, h *harness) string {
	s := h.snap("s")
	for _, m := range s.History {
		if strings.HasPrefix(m.Content, "[chorus] Turn 1 failed") {
			return m.Content
		}
	}
	t.Fatal("no note in the history")
	return ""
}

// TestModelRetry: a failed model attempt is retried within the step; the
// step's events carry the attempt.
func TestModelRetry(t *testing.T) {
	h := newHarness(t, Options{})
	h.srv.Push(llmtest.Status(503, 0), llmtest.Deltas("he", "llo"))
	evs := collect(h.m, "s")
	h.send("s", "hi")
	if r := h.wait("s"); r.Answer != "hello" {
		t.Fatalf("turn = %+v", r)
	}
	var starts []int
	for _, e := range evs.close() {
		if e.Type == EventStepStarted && e.StepKind == StepRunModel {
			starts = append(starts, e.Step*10+e.Attempt)
		}
		if e.Type == EventTextDelta && (e.Step != 1 || e.Attempt != 2) {
			t.Errorf("delta tagged step %d attempt %d", e.Step, e.Attempt)
		}
	}
	if !slices.Equal(starts, []int{11, 12}) {
		t.Fatalf("RunModel starts (step*10+attempt) = %v", starts)
	}
}

// TestSnapshot checks the snapshot's fields after a turn with a tool call.
func TestSnapshot(t *testing.T) {
	h := newHarness(t, Options{Tools: []Tool{tool(nil, "lookup", EffectRead, ok("found"))}})
	h.srv.Push(llmtest.Respond(llmtest.Reply{ToolCalls: []llm.ToolCall{call("c1", "lookup", `{}`)}, Usage: &llm.Usage{PromptTokens: 10, CompletionTokens: 2}}),
		llmtest.Respond(llmtest.Reply{Text: "it is found", Usage: &llm.Usage{PromptTokens: 20, CompletionTokens: 3}}))
	if _, err := h.m.Snapshot(ctx10(t), "s"); !errors.Is(err, ErrUnknownSession) {
		t.Fatalf("snapshot of an unknown session: %v", err)
	}
	h.send("s", "find it")
	h.wait("s")
	s := h.snap("s")
	if s.Step != StepAwaitUserMessage || s.Turn != 1 || s.ModelCalls != 2 {
		t.Fatalf("snapshot = %+v", s)
	}
	if s.Usage.PromptTokens != 30 || s.Usage.CompletionTokens != 5 {
		t.Fatalf("usage = %+v", s.Usage)
	}
	var roles []string
	for _, m := range s.History {
		roles = append(roles, string(m.Role))
	}
	if strings.Join(roles, ",") != "user,assistant,tool,assistant" {
		t.Fatalf("history roles = %v", roles)
	}
	if len(s.Tools) != 1 || s.Tools[0].Status != StatusSucceeded || s.Tools[0].Result != "found" || len(s.Pending) != 0 {
		t.Fatalf("tools %+v pending %+v", s.Tools, s.Pending)
	}
	if s.Seq != int64(len(h.records("s"))) {
		t.Fatalf("seq %d", s.Seq)
	}
}

// TestJournalFailure: when an append fails the session stops (nothing
// more may run unrecorded) and reports the error; the next call recovers
// it from the journal.
func TestJournalFailure(t *testing.T) {
	var l ledger
	h := newHarness(t, Options{Tools: []Tool{tool(&l, "lookup", EffectRead, ok("x"))}})
	h.srv.Push(llmtest.Text("one"))
	h.send("s", "first")
	h.wait("s")
	h.j.mu.Lock()
	h.j.failNext = 1
	h.j.mu.Unlock()
	err := h.m.Send(ctx10(t), "s", llm.UserText("second"))
	if !errors.Is(err, errInjected) {
		t.Fatalf("Send with a failing journal: %v", err)
	}
	h.srv.Push(llmtest.Text("two"))
	h.send("s", "third")
	if r := h.wait("s"); r.Turn != 2 || r.Answer != "two" {
		t.Fatalf("after recovery: %+v", r)
	}
	if q := h.snap("s").History; q[2].Content != "third" {
		t.Fatalf("history = %+v", q)
	}
}

// TestRuntimeModel drives a session through the runtime (provider/model
// names, credential actors) instead of a bare client.
func TestRuntimeModel(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rt, err := runtime.New(runtime.WithProvider(providers.Config{ID: "openai", Format: providers.FormatOpenAI, BaseURL: srv.OpenAIBaseURL(), APIKey: "sk-test"}))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(context.Background())
	h := newHarness(t, Options{Model: rt, ModelName: "openai/gpt-test", Tools: []Tool{tool(nil, "lookup", EffectRead, ok("x"))}})
	srv.Push(llmtest.ToolCalls(call("c1", "lookup", `{}`)), llmtest.Text("via runtime"))
	h.send("s", "hi")
	if r := h.wait("s"); r.Answer != "via runtime" {
		t.Fatalf("turn = %+v", r)
	}
	if reqs := srv.Requests(); len(reqs) != 2 || reqs[0].Model != "gpt-test" {
		t.Fatalf("requests = %d, model %q", len(reqs), reqs[0].Model)
	}
}

// TestSendValidation: only non-empty user messages are taken.
func TestSendValidation(t *testing.T) {
	h := newHarness(t, Options{})
	for _, m := range []llm.Message{{Role: llm.RoleAssistant, Content: "x"}, {Role: llm.RoleUser}} {
		var ce *llm.ConfigError
		if err := h.m.Send(ctx10(t), "s", m); !errors.As(err, &ce) {
			t.Errorf("Send(%+v) = %v", m, err)
		}
	}
	if err := h.m.Send(ctx10(t), "", llm.UserText("x")); err == nil {
		t.Error("empty session id accepted")
	}
}

// TestCloseAfterJournalFailure: a Manager whose session stopped on a
// journal failure still closes cleanly.
func TestCloseAfterJournalFailure(t *testing.T) {
	h := newHarness(t, Options{})
	h.j.mu.Lock()
	h.j.failNext = 1
	h.j.mu.Unlock()
	if err := h.m.Send(ctx10(t), "s", llm.UserText("x")); !errors.Is(err, errInjected) {
		t.Fatalf("Send = %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.m.Send(ctx10(t), "s", llm.UserText("y")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Send after Close = %v", err)
	}
}

// TestCancelDuringRetryBackoff: calls waiting for a retry when the turn is
// cancelled end with their effect's exhausted status.
func TestCancelDuringRetryBackoff(t *testing.T) {
	var l ledger
	fail := func(context.Context, Call) (Result, error) { return Result{}, errors.New("flaky") }
	h := newHarness(t, Options{
		Tools:  []Tool{tool(&l, "read", EffectRead, fail), tool(&l, "write", EffectIdempotentWrite, fail)},
		Policy: map[string]ToolPolicy{"read": {Backoff: time.Minute}, "write": {Backoff: time.Minute}},
	})
	h.srv.Push(llmtest.ToolCalls(call("c1", "read", `{}`), call("c2", "write", `{}`)))
	h.send("s", "go")
	until(t, "first attempts", func() bool { return len(l.of("c1")) == 1 && len(l.of("c2")) == 1 })
	until(t, "attempt failures recorded", func() bool {
		s := h.snap("s")
		return len(s.Tools) == 2 && len(s.Tools[0].AttemptErrors) == 1 && len(s.Tools[1].AttemptErrors) == 1
	})
	if err := h.m.CancelTurn(ctx10(t), "s"); err != nil {
		t.Fatal(err)
	}
	r := h.wait("s")
	s := h.snap("s")
	if r.Status != TurnCancelled || s.Tools[0].Status != StatusFailed || s.Tools[1].Status != StatusOutcomeUnknown {
		t.Fatalf("turn %+v, records %+v", r, s.Tools)
	}
	if !strings.Contains(s.Tools[0].Error, "cancelled before attempt 2; the last error: flaky") {
		t.Fatalf("error = %q", s.Tools[0].Error)
	}
	if len(l.of("c1")) != 1 || len(l.of("c2")) != 1 {
		t.Fatal("a retry ran after the cancellation")
	}
}

// TestMessageAfterLastStep: a message sent while the turn's last model
// step streams starts the next turn.
func TestMessageAfterLastStep(t *testing.T) {
	h := newHarness(t, Options{})
	h.srv.Push(llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultSlowDrip, Stall: 300 * time.Millisecond, Reply: &llmtest.Reply{Text: "first answer"}}),
		llmtest.Text("second answer"))
	h.send("s", "one")
	until(t, "model call", func() bool { return h.srv.Count() == 1 })
	h.send("s", "two")
	if r := h.wait("s"); r.Turn != 2 || r.Answer != "second answer" {
		t.Fatalf("last turn = %+v", r)
	}
	req := h.lastRequest()
	if len(req.Messages) != 3 || req.Messages[1].text() != "first answer" || req.Messages[2].text() != "two" {
		t.Fatalf("second turn input = %+v", req.Messages)
	}
}

// TestActorRestartRecovers: a panic inside the session actor restarts it
// (Proto.Actor's supervision); the new incarnation recovers from the
// journal and finishes the turn, and callers waiting meanwhile get their
// answer.
func TestActorRestartRecovers(t *testing.T) {
	var l ledger
	h := newHarness(t, Options{Tools: []Tool{tool(&l, "lookup", EffectRead, ok("found"))}})
	var panicked atomic.Bool
	h.m.hook = func(p string) {
		if strings.HasPrefix(p, "STEP boundary") && panicked.CompareAndSwap(false, true) {
			panic("injected actor panic")
		}
	}
	h.srv.Push(llmtest.ToolCalls(call("c1", "lookup", `{}`)), llmtest.Text("done"))
	h.send("s", "go")
	if r := h.wait("s"); r.Answer != "done" || !panicked.Load() {
		t.Fatalf("turn %+v, panicked %v", r, panicked.Load())
	}
	if s := h.snap("s"); len(s.Tools) != 1 || s.Tools[0].Status != StatusSucceeded || len(l.of("c1")) != 1 {
		t.Fatalf("tools %+v, ran %d times", s.Tools, len(l.of("c1")))
	}
}
