package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/pipeline"
)

// scripted returns a chat function answering turn k (from 0) with turns[k]
// and recording each request's messages.
func scripted(turns ...*llm.ChatResult) (func(context.Context, *llm.ChatRequest) (*llm.ChatResult, error), *[][]llm.Message) {
	var seen [][]llm.Message
	var n atomic.Int64
	return func(ctx context.Context, req *llm.ChatRequest) (*llm.ChatResult, error) {
		seen = append(seen, slices.Clone(req.Messages))
		k := int(n.Add(1)) - 1
		if k >= len(turns) {
			k = len(turns) - 1
		}
		return turns[k].Clone(), nil
	}, &seen
}

func calls(cs ...llm.ToolCall) *llm.ChatResult {
	return &llm.ChatResult{ToolCalls: cs, FinishReason: llm.FinishToolCalls, Usage: llm.Usage{PromptTokens: 10, CompletionTokens: 2}}
}

func final(text string) *llm.ChatResult {
	return &llm.ChatResult{Content: text, FinishReason: llm.FinishStop, Usage: llm.Usage{PromptTokens: 20, CompletionTokens: 3}}
}

func TestToolLoopParallelCallsKeepCallOrder(t *testing.T) {
	for _, parallel := range []bool{true, false} {
		t.Run(fmt.Sprint("parallel=", parallel), func(t *testing.T) {
			defer goleak.VerifyNone(t)
			var fl inflight
			// In parallel, each handler waits until all three are in, so
			// that being in at once does not hang on the scheduler of a
			// loaded machine (c3's goroutine starting after c2 slept its
			// 30ms); run one at a time, the first would wait its 10 s
			// out alone.
			var entered atomic.Int32
			allIn := make(chan struct{})
			sleepy := func(ctx context.Context, args json.RawMessage) (string, error) {
				fl.enter()
				defer fl.leave()
				if parallel {
					if entered.Add(1) == 3 {
						close(allIn)
					}
					select {
					case <-allIn:
					case <-time.After(10 * time.Second):
					}
				}
				var a struct{ MS int }
				if err := json.Unmarshal(args, &a); err != nil {
					return "", err
				}
				time.Sleep(time.Duration(a.MS) * time.Millisecond) // the first call is the slowest
				return fmt.Sprint("slept ", a.MS), nil
			}
			c := newFake(nil)
			chat, seen := scripted(
				calls(llm.ToolCall{ID: "c1", Name: "sleep", Arguments: `{"MS":60}`},
					llm.ToolCall{ID: "c2", Name: "sleep", Arguments: `{"MS":30}`},
					llm.ToolCall{ID: "c3", Name: "sleep", Arguments: `{"MS":1}`}),
				final("done"))
			c.chat = chat
			req := &llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("go")}}
			tools := pipeline.ToolSet{"sleep": {Definition: llm.Tool{Description: "sleeps"}, Func: sleepy}}
			res, err := pipeline.ToolLoop(context.Background(), c, req, tools, pipeline.ToolLoopOptions{Parallel: parallel})
			if err != nil {
				t.Fatal(err)
			}
			if res.Result.Content != "done" || res.Turns != 2 || res.Usage.TotalTokens() != 12+23 {
				t.Fatalf("result = %+v", res)
			}
			// user, assistant(3 calls), 3 tool results in call order, final assistant.
			if len(res.Messages) != 6 {
				t.Fatalf("history has %d messages: %+v", len(res.Messages), res.Messages)
			}
			for k, want := range []string{"slept 60", "slept 30", "slept 1"} {
				m := res.Messages[2+k]
				if m.Role != llm.RoleTool || m.ToolCallID != fmt.Sprint("c", k+1) || m.Content != want || m.IsError || m.ToolName != "sleep" {
					t.Errorf("tool message %d = %+v", k, m)
				}
			}
			if last := res.Messages[5]; last.Role != llm.RoleAssistant || last.Content != "done" {
				t.Errorf("last message = %+v", last)
			}
			if got := (*seen)[1]; len(got) != 5 || got[4].Content != "slept 1" {
				t.Errorf("second model call saw %d messages", len(got))
			}
			if wantMax := map[bool]int64{true: 3, false: 1}[parallel]; fl.max.Load() != wantMax {
				t.Errorf("max concurrent handlers %d, want %d", fl.max.Load(), wantMax)
			}
			if len(req.Messages) != 1 || req.Tools != nil {
				t.Error("ToolLoop modified the caller's request")
			}
			if r := c.reqs[0]; len(r.Tools) != 1 || r.Tools[0].Name != "sleep" || r.Tools[0].Description != "sleeps" {
				t.Errorf("tools sent = %+v", r.Tools)
			}
		})
	}
}

func TestToolLoopErrorsPanicsUnknownTools(t *testing.T) {
	defer goleak.VerifyNone(t)
	c := newFake(nil)
	c.chat, _ = scripted(calls(
		llm.ToolCall{ID: "1", Name: "fails", Arguments: `{}`},
		llm.ToolCall{ID: "2", Name: "panics", Arguments: `{}`},
		llm.ToolCall{ID: "3", Name: "nosuch", Arguments: `{}`},
		llm.ToolCall{ID: "4", Name: "echo", Arguments: `{not json`},
		llm.ToolCall{ID: "5", Name: "echo", Arguments: ``},
	), final("ok"))
	tools := pipeline.ToolSet{
		"fails":  {Func: func(ctx context.Context, _ json.RawMessage) (string, error) { return "", errors.New("disk full") }},
		"panics": {Func: func(ctx context.Context, _ json.RawMessage) (string, error) { panic("nil map") }},
		"echo":   {Func: func(ctx context.Context, a json.RawMessage) (string, error) { return string(a), nil }},
	}
	res, err := pipeline.ToolLoop(context.Background(), c, userReq("go"), tools, pipeline.ToolLoopOptions{Parallel: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		content string
		isErr   bool
	}{
		{"disk full", true},
		{`tool "panics" panicked: nil map`, true},
		{`unknown tool "nosuch"`, true},
		{`tool "echo": arguments are not valid JSON`, true},
		{`{}`, false},
	}
	for k, w := range want {
		m := res.Messages[2+k]
		if m.ToolCallID != fmt.Sprint(k+1) || m.Content != w.content || m.IsError != w.isErr {
			t.Errorf("tool result %d = %q (error %v), want %q (error %v)", k, m.Content, m.IsError, w.content, w.isErr)
		}
	}
	if res.Result.Content != "ok" {
		t.Errorf("final = %q", res.Result.Content)
	}
}

func TestToolLoopMaxTurns(t *testing.T) {
	defer goleak.VerifyNone(t)
	c := newFake(nil)
	var ran atomic.Int64
	c.chat, _ = scripted(calls(llm.ToolCall{ID: "x", Name: "again", Arguments: `{}`}))
	tools := pipeline.ToolSet{"again": {Func: func(ctx context.Context, _ json.RawMessage) (string, error) {
		ran.Add(1)
		return "more", nil
	}}}
	res, err := pipeline.ToolLoop(context.Background(), c, userReq("loop"), tools, pipeline.ToolLoopOptions{MaxTurns: 3})
	if !errors.Is(err, pipeline.ErrMaxTurns) {
		t.Fatalf("err = %v, want ErrMaxTurns", err)
	}
	var mt *pipeline.MaxTurnsError
	if !errors.As(err, &mt) || mt.Turns != 3 || mt.Last == nil || len(mt.Last.ToolCalls) != 1 {
		t.Fatalf("MaxTurnsError = %+v", mt)
	}
	// user + 3 × (assistant with a call, its tool result): every call answered.
	if len(mt.Messages) != 7 || mt.Messages[6].Role != llm.RoleTool || len(res.Messages) != 7 || res.Turns != 3 {
		t.Fatalf("history = %d messages, result %d", len(mt.Messages), len(res.Messages))
	}
	if c.chats.Load() != 3 || ran.Load() != 3 {
		t.Fatalf("%d model calls and %d tool runs, want 3 and 3", c.chats.Load(), ran.Load())
	}
}

// Cancelling mid-loop cancels running handlers, waits for them and returns
// the context error with the history so far.
func TestToolLoopCancelled(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := newFake(nil)
	c.chat, _ = scripted(calls(llm.ToolCall{ID: "a", Name: "block"}, llm.ToolCall{ID: "b", Name: "block"}), final("never"))
	var blocked, released atomic.Int64
	tools := pipeline.ToolSet{"block": {Func: func(ctx context.Context, _ json.RawMessage) (string, error) {
		blocked.Add(1)
		<-ctx.Done()
		released.Add(1)
		return "", ctx.Err()
	}}}
	go func() {
		for blocked.Load() < 2 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	res, err := pipeline.ToolLoop(ctx, c, userReq("go"), tools, pipeline.ToolLoopOptions{Parallel: true})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if released.Load() != 2 || c.chats.Load() != 1 {
		t.Fatalf("%d handlers released, %d model calls", released.Load(), c.chats.Load())
	}
	if res == nil || len(res.Messages) != 4 || !res.Messages[3].IsError {
		t.Fatalf("partial history = %+v", res)
	}
	// A model call cancelled mid-flight ends the loop the same way.
	ctx2, cancel2 := context.WithCancel(context.Background())
	c2 := newFake(map[string]spec{"m": {hang: true}})
	time.AfterFunc(10*time.Millisecond, cancel2)
	req := userReq("go")
	req.Model = "m"
	if _, err := pipeline.ToolLoop(ctx2, c2, req, nil, pipeline.ToolLoopOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

func TestToolSet(t *testing.T) {
	noop := func(ctx context.Context, _ json.RawMessage) (string, error) { return "", nil }
	defs := pipeline.ToolSet{"b": {Func: noop}, "a": {Func: noop, Definition: llm.Tool{Name: "a"}}, "c": {Func: noop}}.Definitions()
	if names := []string{defs[0].Name, defs[1].Name, defs[2].Name}; strings.Join(names, "") != "abc" {
		t.Errorf("definitions = %v", names)
	}
	for _, bad := range []pipeline.ToolSet{
		{"a": {Func: noop, Definition: llm.Tool{Name: "b"}}},
		{"a": {}},
		{"": {Func: noop}},
	} {
		_, err := pipeline.ToolLoop(context.Background(), newFake(nil), userReq("x"), bad, pipeline.ToolLoopOptions{})
		var ce *llm.ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("ToolSet %v: err = %v, want a ConfigError", bad, err)
		}
	}
}

// A forced tool choice applies to the first call only, or the model could
// never stop calling tools.
func TestToolLoopResetsForcedToolChoice(t *testing.T) {
	defer goleak.VerifyNone(t)
	c := newFake(nil)
	var choices []llm.ToolChoiceMode
	chat, _ := scripted(calls(llm.ToolCall{ID: "1", Name: "t", Arguments: "{}"}), final("ok"))
	c.chat = func(ctx context.Context, req *llm.ChatRequest) (*llm.ChatResult, error) {
		choices = append(choices, req.ToolChoice.Mode)
		return chat(ctx, req)
	}
	req := userReq("go")
	req.ToolChoice = llm.ToolChoice{Mode: llm.ToolChoiceRequired}
	tools := pipeline.ToolSet{"t": {Func: func(ctx context.Context, _ json.RawMessage) (string, error) { return "x", nil }}}
	if _, err := pipeline.ToolLoop(context.Background(), c, req, tools, pipeline.ToolLoopOptions{}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(choices, []llm.ToolChoiceMode{llm.ToolChoiceRequired, ""}) || req.ToolChoice.Mode != llm.ToolChoiceRequired {
		t.Fatalf("tool choices sent %v; caller's request now %v", choices, req.ToolChoice.Mode)
	}
}
