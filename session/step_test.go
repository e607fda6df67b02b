package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/chorusrt/chorus/llm"
)

// scriptStep is a ModelStep that answers from a script by the number of
// results it was given, recording every input.
type scriptStep struct {
	mu     sync.Mutex
	ins    []StepInput
	failAt map[int]error // attempt number of step 3 -> error
}

func (s *scriptStep) RunModel(_ context.Context, in StepInput) (*StepOutput, error) {
	s.mu.Lock()
	s.ins = append(s.ins, in)
	s.mu.Unlock()
	if in.State == nil {
		in.Delta(llm.Event{Type: llm.EventText, Text: "checking"})
		return &StepOutput{
			Result: &llm.ChatResult{Content: "checking",
				ToolCalls: []llm.ToolCall{call("k1", "lookup", `{"order":7}`), call("k2", "refund", `{"order":7}`)}},
			State:  []byte("checkpoint-1"),
			Agents: map[string]string{"k1": "triage", "k2": "billing"},
		}, nil
	}
	if err := s.failAt[in.Attempt]; err != nil {
		return nil, err
	}
	return &StepOutput{Result: &llm.ChatResult{Content: fmt.Sprintf("done after %d results", len(in.Results))}}, nil
}

func (s *scriptStep) inputs() []StepInput {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]StepInput(nil), s.ins...)
}

// TestModelStep: a session whose RunModel steps a ModelStep runs (no
// Model): the step's tool calls run as CallTool steps of Options.Tools,
// the next step gets their records in the model's order and the state the
// previous step returned, from the journal; a failed attempt is retried
// with the same input; the agent of each call lands on its record.
func TestModelStep(t *testing.T) {
	var l ledger
	st := &scriptStep{failAt: map[int]error{1: errors.New("flaky")}}
	h := newHarness(t, Options{ModelStep: st, Model: nilModel{}, Tools: []Tool{
		tool(&l, "lookup", EffectRead, ok("order 7")),
		tool(&l, "refund", EffectNonIdempotentWrite, ok("refunded")),
	}, Policy: map[string]ToolPolicy{"refund": {RequireApproval: Bool(false)}}})
	evs := collect(h.m, "s")
	h.send("s", "refund order 7")
	if r := h.wait("s"); r.Status != TurnCompleted || r.Answer != "done after 2 results" {
		t.Fatalf("turn %+v", r)
	}
	ins := st.inputs()
	if len(ins) != 3 {
		t.Fatalf("%d step attempts, want 3", len(ins))
	}
	if ins[0].State != nil || len(ins[0].Results) != 0 || ins[0].Step != 1 || ins[0].Messages[len(ins[0].Messages)-1].Content != "refund order 7" {
		t.Fatalf("first step input %+v", ins[0])
	}
	for i, in := range ins[1:] {
		if string(in.State) != "checkpoint-1" || len(in.Results) != 2 || in.Results[0].ID != "k1" || in.Results[1].ID != "k2" ||
			in.Results[0].Status != StatusSucceeded || in.Results[1].Result != "refunded" || in.Attempt != i+1 || in.Step != 4 {
			t.Fatalf("step input %d: %+v", i+2, in)
		}
		if resp := FunctionResponse(in.Results[0]); resp.Content != "order 7" || resp.ToolCallID != "k1" {
			t.Fatalf("function response %+v", resp)
		}
	}
	s := h.snap("s")
	if len(s.Tools) != 2 || s.Tools[0].Agent != "triage" || s.Tools[1].Agent != "billing" {
		t.Fatalf("records %+v", s.Tools)
	}
	tl, err := ReadTimeline(ctx10(t), h.j, "s")
	if err != nil {
		t.Fatal(err)
	}
	agents := map[string]string{}
	for _, e := range tl {
		for _, c := range e.Calls {
			agents[c.ID] = c.Agent
		}
	}
	if agents["k1"] != "triage" || agents["k2"] != "billing" {
		t.Fatalf("timeline agents %v", agents)
	}
	if len(l.of("k1")) != 1 || len(l.of("k2")) != 1 {
		t.Fatal("each call should run once")
	}
	sawDelta := false
	for _, ev := range evs.close() {
		sawDelta = sawDelta || ev.Type == EventTextDelta && ev.Text == "checking"
	}
	if !sawDelta {
		t.Error("the step's delta never reached the events")
	}
	// A restart reads the state back from the journal.
	h.restart()
	if got := h.snap("s"); got.Last.Answer != "done after 2 results" {
		t.Fatalf("after restart %+v", got.Last)
	}
}

// TestModelStepFailsTurn: a ModelStep error wrapping ErrStepFailed fails
// the turn at once, without another attempt, and the note says why.
func TestModelStepFailsTurn(t *testing.T) {
	st := &scriptStep{failAt: map[int]error{1: fmt.Errorf("%w: transfer_to_agent was called with other tools", ErrStepFailed)}}
	h := newHarness(t, Options{ModelStep: st, Model: nilModel{}, Tools: []Tool{
		tool(nil, "lookup", EffectRead, ok("order 7")), tool(nil, "refund", EffectRead, ok("x")),
	}})
	h.send("s", "go")
	r := h.wait("s")
	if r.Status != TurnFailed || !strings.Contains(r.Error, "transfer_to_agent was called with other tools") || !strings.Contains(r.Note, "lookup") {
		t.Fatalf("turn %+v", r)
	}
	if n := len(st.inputs()); n != 2 {
		t.Fatalf("%d step attempts, want 2 (no retry of the failed one)", n)
	}
}

// nilModel is a Model that must not be called.
type nilModel struct{}

func (nilModel) Stream(context.Context, *llm.ChatRequest) (*llm.Stream, error) {
	return nil, errors.New("the Model was called instead of the ModelStep")
}

// TestModelStepOptions: a ModelStep needs no Model nor ModelName, unless
// compaction (which calls the Model) is on.
func TestModelStepOptions(t *testing.T) {
	j := newHarness(t, Options{}).j
	if _, err := New(Options{Journal: j, ModelStep: &scriptStep{}}); err != nil {
		t.Fatalf("ModelStep without Model: %v", err)
	}
	var ce *llm.ConfigError
	if _, err := New(Options{Journal: j, ModelStep: &scriptStep{}, Compaction: &CompactionPolicy{ContextWindowTokens: 1000}}); !errors.As(err, &ce) || ce.Field != "Model" {
		t.Fatalf("ModelStep with compaction, no Model: %v", err)
	}
}
