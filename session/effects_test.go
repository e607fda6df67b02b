package session

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

// TestRetriesPerEffect runs one call per case and checks the attempts the
// handler saw, their keys, the record's status and the function response
// the model got.
func TestRetriesPerEffect(t *testing.T) {
	errBoom := errors.New("boom")
	failN := func(n int) func(context.Context, Call) (Result, error) {
		var calls atomic.Int32
		return func(context.Context, Call) (Result, error) {
			if int(calls.Add(1)) <= n {
				return Result{}, errBoom
			}
			return Result{Content: `{"ok":true}`}, nil
		}
	}
	cases := []struct {
		name     string
		effect   Effect
		fn       func(context.Context, Call) (Result, error)
		timeout  time.Duration
		attempts int
		status   ToolStatus
		response string // substring of the function response
		keyed    bool
	}{
		{"read fails always", EffectRead, failN(99), 0, 3, StatusFailed, "The tool call failed: 3 attempts failed; the last: boom", false},
		{"read succeeds on the third attempt", EffectRead, failN(2), 0, 3, StatusSucceeded, `{"ok":true}`, false},
		{"read tool error is not retried", EffectRead, func(context.Context, Call) (Result, error) {
			return Result{}, ToolErrorf("order %d does not exist", 7)
		}, 0, 1, StatusFailed, "The tool call failed: order 7 does not exist", false},
		{"read panics then succeeds", EffectRead, func() func(context.Context, Call) (Result, error) {
			var n atomic.Int32
			return func(context.Context, Call) (Result, error) {
				if n.Add(1) == 1 {
					panic("kaput")
				}
				return Result{Content: "fine"}, nil
			}
		}(), 0, 2, StatusSucceeded, "fine", false},
		{"read times out", EffectRead, func(ctx context.Context, _ Call) (Result, error) {
			<-ctx.Done()
			return Result{}, ctx.Err()
		}, 20 * time.Millisecond, 3, StatusFailed, "timed out after 20ms", false},
		{"idempotent write fails always", EffectIdempotentWrite, failN(99), 0, 3, StatusOutcomeUnknown, OutcomeUnknownText, true},
		{"idempotent write succeeds on the second attempt", EffectIdempotentWrite, failN(1), 0, 2, StatusSucceeded, `{"ok":true}`, true},
		{"idempotent write tool error", EffectIdempotentWrite, func(context.Context, Call) (Result, error) {
			return Result{}, &ToolError{Msg: "card declined"}
		}, 0, 1, StatusFailed, "card declined", true},
		{"non-idempotent write fails once", EffectNonIdempotentWrite, failN(99), 0, 1, StatusOutcomeUnknown, OutcomeUnknownText, false},
		{"non-idempotent write times out", EffectNonIdempotentWrite, func(ctx context.Context, _ Call) (Result, error) {
			<-ctx.Done()
			return Result{}, ctx.Err()
		}, 20 * time.Millisecond, 1, StatusOutcomeUnknown, OutcomeUnknownText, false},
		{"non-idempotent write tool error", EffectNonIdempotentWrite, func(context.Context, Call) (Result, error) {
			return Result{}, ToolErrorf("refused: amount too high")
		}, 0, 1, StatusFailed, "refused: amount too high", false},
		{"unclassified panics", EffectUnclassified, func(context.Context, Call) (Result, error) { panic("kaput") }, 0, 1, StatusOutcomeUnknown, OutcomeUnknownText, false},
		{"unclassified succeeds", EffectUnclassified, ok("sent"), 0, 1, StatusSucceeded, "sent", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var l ledger
			tl := tool(&l, "op", tc.effect, tc.fn)
			tl.Timeout = tc.timeout
			h := newHarness(t, Options{Tools: []Tool{tl}, Policy: map[string]ToolPolicy{"op": {RequireApproval: Bool(false)}}})
			h.srv.Push(llmtest.ToolCalls(call("c1", "op", `{"x":1}`)), llmtest.Text("done"))
			h.send("s1", "go")
			if r := h.wait("s1"); r.Status != TurnCompleted || r.Answer != "done" {
				t.Fatalf("turn = %+v", r)
			}
			inv := l.of("c1")
			if len(inv) != tc.attempts {
				t.Fatalf("handler ran %d times, want %d: %+v", len(inv), tc.attempts, inv)
			}
			for i, in := range inv {
				if in.Attempt != i+1 {
					t.Errorf("attempt %d numbered %d", i+1, in.Attempt)
				}
				wantKey := ""
				if tc.keyed {
					wantKey = "s1/1/c1"
				}
				if in.Key != wantKey {
					t.Errorf("attempt %d key = %q, want %q", i+1, in.Key, wantKey)
				}
				if in.Effect != tc.effect {
					t.Errorf("effect = %q", in.Effect)
				}
			}
			s := h.snap("s1")
			if len(s.Tools) != 1 {
				t.Fatalf("tool records = %+v", s.Tools)
			}
			rec := s.Tools[0]
			if rec.Status != tc.status || rec.Attempts != tc.attempts {
				t.Fatalf("record = %+v, want status %s after %d attempts", rec, tc.status, tc.attempts)
			}
			resp, found := toolResponse(h.lastRequest(), "c1")
			if !found || !strings.Contains(resp, tc.response) {
				t.Fatalf("function response = %q, want it to contain %q", resp, tc.response)
			}
			// Invariant 11: every tool_started precedes its outcome in the journal.
			ks := strings.Join(kinds(h.records("s1")), ",")
			if strings.Count(ks, recToolStarted) != tc.attempts || !strings.Contains(ks, recToolStarted+",") {
				t.Fatalf("journal kinds = %s", ks)
			}
		})
	}
}

// TestEffectResolution checks where a call's effect and approval come
// from: the caller's policy, else the tool's declaration, else the
// configurable default.
func TestEffectResolution(t *testing.T) {
	tools := []Tool{
		tool(nil, "declared_read", EffectRead, ok("a")),
		tool(nil, "declared_write", EffectNonIdempotentWrite, ok("b")),
		tool(nil, "undeclared", "", ok("c")),
		tool(nil, "overridden", EffectNonIdempotentWrite, ok("d")),
		tool(nil, "forced_approval", EffectRead, ok("e")),
	}
	cases := []struct {
		def      Effect
		name     string
		effect   Effect
		approval bool
	}{
		{"", "declared_read", EffectRead, false},
		{"", "declared_write", EffectNonIdempotentWrite, true},
		{"", "undeclared", EffectUnclassified, true},
		{EffectRead, "undeclared", EffectRead, false},
		{"", "overridden", EffectIdempotentWrite, false},
		{"", "forced_approval", EffectRead, true},
	}
	policy := map[string]ToolPolicy{
		"overridden":      {Effect: EffectIdempotentWrite},
		"forced_approval": {RequireApproval: Bool(true)},
	}
	for _, tc := range cases {
		m, err := New(Options{Journal: &faultJournal{}, Model: newClient(t, "http://127.0.0.1:1"), ModelName: "x", Tools: tools, Policy: policy, DefaultEffect: tc.def})
		if err != nil {
			t.Fatal(err)
		}
		r, found := m.policyFor(tc.name)
		if !found || r.effect != tc.effect || r.approval != tc.approval {
			t.Errorf("default %q, %s: effect %q approval %v, want %q %v", tc.def, tc.name, r.effect, r.approval, tc.effect, tc.approval)
		}
		wantAttempts := 1
		if tc.effect.retryable() {
			wantAttempts = 3
		}
		if r.maxAttempts != wantAttempts {
			t.Errorf("%s: %d attempts, want %d", tc.name, r.maxAttempts, wantAttempts)
		}
		_ = m.Close(context.Background())
	}
	if _, err := New(Options{Journal: &faultJournal{}, Model: newClient(t, "http://127.0.0.1:1"), ModelName: "x", DefaultEffect: "sometimes"}); err == nil {
		t.Fatal("unknown default effect accepted")
	} else if ce := (*llm.ConfigError)(nil); !errors.As(err, &ce) || ce.Field != "DefaultEffect" {
		t.Fatalf("error = %v", err)
	}
}

// TestUnknownToolAndParallelCalls: the calls of one response run in
// parallel, each in its own step; a call of a tool the session does not
// have ends failed without running, and the model sees why.
func TestUnknownToolAndParallelCalls(t *testing.T) {
	started := make(chan string, 3)
	release := make(chan struct{})
	block := func(_ context.Context, c Call) (Result, error) {
		started <- c.ID
		<-release
		return Result{Content: c.ID}, nil
	}
	h := newHarness(t, Options{Tools: []Tool{tool(nil, "a", EffectRead, block), tool(nil, "b", EffectIdempotentWrite, block)}})
	h.srv.Push(llmtest.ToolCalls(call("c1", "a", "{}"), call("c2", "b", "{}"), call("c3", "nope", "{}")), llmtest.Text("ok"))
	h.send("s", "go")
	// Both handlers are running at once: parallel steps.
	got := map[string]bool{<-started: true, <-started: true}
	if !got["c1"] || !got["c2"] {
		t.Fatalf("started %v", got)
	}
	if s := h.snap("s"); s.Step != StepCallTool {
		t.Fatalf("step = %s", s.Step)
	}
	close(release)
	h.wait("s")
	s := h.snap("s")
	steps := map[int]bool{}
	for _, r := range s.Tools {
		steps[r.Step] = true
	}
	if len(steps) != 3 {
		t.Fatalf("calls share steps: %+v", s.Tools)
	}
	if s.Tools[2].Status != StatusFailed || s.Tools[2].Attempts != 0 {
		t.Fatalf("unknown tool record = %+v", s.Tools[2])
	}
	resp, _ := toolResponse(h.lastRequest(), "c3")
	if !strings.Contains(resp, `there is no tool named \"nope\"`) {
		t.Fatalf("response = %s", resp)
	}
}
