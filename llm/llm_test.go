package llm

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// produce runs a producer that emits n text events then finishes with err.
func produce(ctx context.Context, w *StreamWriter, n int, err error) {
	var b ResultBuilder
	for i := 0; i < n; i++ {
		ev := Event{Type: EventText, Text: "x"}
		if !w.Emit(ev) {
			w.Finish(b.Result(), ctx.Err())
			return
		}
		b.Apply(&ev)
	}
	w.Finish(b.Result(), err)
}

func TestStreamFaces(t *testing.T) {
	// Events channel.
	s, w, ctx := NewStream(context.Background(), 2)
	go produce(ctx, w, 5, nil)
	n := 0
	for range s.Events() {
		n++
	}
	res, err := s.Result()
	if n != 5 || err != nil || res.Content != "xxxxx" {
		t.Fatalf("Events: n=%d err=%v res=%+v", n, err, res)
	}
	// Iterator with a failure yielded last.
	boom := errors.New("boom")
	s, w, ctx = NewStream(context.Background(), 0)
	go produce(ctx, w, 3, boom)
	var got []error
	n = 0
	for _, err := range s.All() {
		if err != nil {
			got = append(got, err)
			continue
		}
		n++
	}
	if n != 3 || len(got) != 1 || got[0] != boom {
		t.Fatalf("All: n=%d errs=%v", n, got)
	}
	// Result alone drains.
	s, w, ctx = NewStream(context.Background(), 0)
	go produce(ctx, w, 100, nil)
	if res, err := s.Result(); err != nil || len(res.Content) != 100 {
		t.Fatalf("Result: %v %v", res, err)
	}
}

func TestStreamBreakAndCloseStopProducer(t *testing.T) {
	s, w, ctx := NewStream(context.Background(), 0)
	go produce(ctx, w, 1_000_000, nil)
	for range s.All() {
		break
	}
	if err := s.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("after break: %v", err)
	}
	s, w, ctx = NewStream(context.Background(), 0)
	go produce(ctx, w, 1_000_000, nil)
	<-s.Events()
	s.Close()
	s.Close() // idempotent
	select {
	case <-s.Done():
	default:
		t.Fatal("Close returned before the producer finished")
	}
}

func TestStreamParentCancel(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	s, w, ctx := NewStream(parent, 0)
	go produce(ctx, w, 1_000_000, nil)
	<-s.Events()
	cancel()
	done := make(chan struct{})
	go func() { s.Result(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("cancelled parent did not end the stream")
	}
}

func TestResultBuilderInterleavedToolCalls(t *testing.T) {
	var b ResultBuilder
	for _, ev := range []Event{
		{Type: EventToolCallStart, ToolIndex: 0, ToolCallID: "a", ToolName: "f", Text: `{"x":`},
		{Type: EventToolCallStart, ToolIndex: 1, ToolCallID: "b", ToolName: "g", Text: `{"y":`},
		{Type: EventToolCallDelta, ToolIndex: 0, Text: `1}`},
		{Type: EventToolCallDelta, ToolIndex: 1, Text: `2}`},
		{Type: EventReasoning, Text: "think"},
		{Type: EventText, Text: "hi"},
		{Type: EventUsage, Usage: &Usage{PromptTokens: 3, CompletionTokens: 4}},
		{Type: EventFinish, Finish: FinishToolCalls},
	} {
		b.Apply(&ev)
	}
	r := b.Result()
	if len(r.ToolCalls) != 2 || r.ToolCalls[0].Arguments != `{"x":1}` || r.ToolCalls[1].Arguments != `{"y":2}` ||
		r.Content != "hi" || r.Reasoning != "think" || r.Usage.TotalTokens() != 7 || r.FinishReason != FinishToolCalls {
		t.Fatalf("%+v", r)
	}
	m := r.Message()
	if m.Role != RoleAssistant || len(m.ToolCalls) != 2 || m.Reasoning != "think" {
		t.Fatalf("Message() = %+v", m)
	}
}

func TestValidate(t *testing.T) {
	ok := &ChatRequest{Model: "m", Messages: []Message{SystemText("s"), UserText("u"), {Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "1", Name: "f", Arguments: "{}"}}}, ToolResult("1", "r", false)},
		Tools: []Tool{{Name: "f"}}, ToolChoice: ToolChoice{Mode: ToolChoiceRequired}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	cases := map[string]*ChatRequest{
		"messages[0].role":                    {Model: "m", Messages: []Message{{Role: "bot", Content: "x"}}},
		"messages[0].content":                 {Model: "m", Messages: []Message{{Role: RoleUser}}},
		"messages[0].tool_calls":              {Model: "m", Messages: []Message{{Role: RoleUser, Content: "x", ToolCalls: []ToolCall{{Name: "f"}}}}},
		"messages[0].tool_calls[0].arguments": {Model: "m", Messages: []Message{{Role: RoleAssistant, ToolCalls: []ToolCall{{Name: "f", Arguments: "{"}}}}},
		"messages[0].parts[0].mime_type":      {Model: "m", Messages: []Message{{Role: RoleUser, Parts: []Part{{Type: PartImage, MIMEType: "text/plain", Data: []byte("x")}}}}},
		"messages[0].parts[0]":                {Model: "m", Messages: []Message{{Role: RoleUser, Parts: []Part{{Type: PartImage}}}}},
		"messages[0].parts[0].type":           {Model: "m", Messages: []Message{{Role: RoleUser, Parts: []Part{{Type: "audio"}}}}},
		"tools[1].name":                       {Model: "m", Messages: []Message{UserText("x")}, Tools: []Tool{{Name: "f"}, {Name: "f"}}},
		"tool_choice":                         {Model: "m", Messages: []Message{UserText("x")}, ToolChoice: ToolChoice{Mode: ToolChoiceRequired}},
		"response_format.schema":              {Model: "m", Messages: []Message{UserText("x")}, ResponseFormat: &ResponseFormat{Type: ResponseJSONSchema}},
		"reasoning.effort":                    {Model: "m", Messages: []Message{UserText("x")}, Reasoning: &Reasoning{Effort: "extreme"}},
		"temperature":                         {Model: "m", Messages: []Message{UserText("x")}, Temperature: Ptr(3.0)},
		"headers":                             {Model: "m", Messages: []Message{UserText("x")}, Headers: map[string]string{"X-Api-Key": "k"}},
	}
	for field, req := range cases {
		err := req.Validate()
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != field {
			t.Errorf("%s: got %v", field, err)
		}
	}
}

func TestErrorsMatch(t *testing.T) {
	rl := &RateLimitError{APIError: APIError{Provider: "p", Status: 429, Message: "slow down", RetryAfter: time.Second}}
	var api *APIError
	if !errors.Is(rl, ErrRateLimited) || !errors.As(rl, &api) || api.Status != 429 {
		t.Fatal("RateLimitError does not match")
	}
	se := &StreamError{Partial: &ChatResult{Content: "p"}, Err: ErrIdleTimeout}
	if !errors.Is(se, ErrIdleTimeout) || !strings.Contains(se.Error(), "partial") {
		t.Fatal("StreamError does not unwrap")
	}
	if !errors.Is(&UnsupportedError{Provider: "p", Op: "count_tokens"}, ErrUnsupported) {
		t.Fatal("UnsupportedError")
	}
	for _, r := range []FinishReason{"stop", "length", "tool_calls", "content_filter", ""} {
		if !r.Valid() {
			t.Fatal(r)
		}
	}
	if FinishReason("end_turn").Valid() {
		t.Fatal("provider string accepted as canonical")
	}
}
