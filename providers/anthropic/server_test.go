package anthropic

import (
	"errors"
	"reflect"
	"testing"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/codectest"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// The server side is the client side's inverse: a request the codec builds
// decodes back to the same llm.ChatRequest.
func TestServerMessagesInvertsChatRequest(t *testing.T) {
	in := &llm.ChatRequest{
		Model: "claude-haiku-4-5",
		Messages: []llm.Message{
			llm.SystemText("sys"),
			llm.UserText("weather?"),
			{Role: llm.RoleAssistant, ThinkingBlocks: []llm.ThinkingBlock{{Format: "anthropic", Text: "hmm", Signature: "sig1"}},
				ToolCalls: []llm.ToolCall{{ID: "toolu_1", Name: "w", Arguments: `{"city":"Paris"}`}}},
			llm.ToolResult("toolu_1", "sunny", false),
		},
		Tools:      []llm.Tool{{Name: "w", Description: "d", Parameters: []byte(`{"type":"object"}`)}},
		ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: "w"},
		MaxTokens:  100,
		Stop:       []string{"END"},
	}
	wr, err := Codec{}.ChatRequest(in, wire.BuildOptions{Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	sm, err := DecodeServerMessages(wr.Body, false)
	if err != nil {
		t.Fatal(err)
	}
	if !sm.Stream || !reflect.DeepEqual(sm.Chat, in) {
		t.Fatalf("decoded %+v\nwant    %+v", sm.Chat, in)
	}
}

func TestServerMessagesRefusesWhatItCannotServe(t *testing.T) {
	for body, field := range map[string]string{
		`{"model":"m","messages":[{"role":"user","content":"x"}]}`:                                               "max_tokens",
		`{"model":"m","max_tokens":5,"messages":[{"role":"system","content":"x"}]}`:                              "messages[0].role",
		`{"model":"m","max_tokens":5,"tool_choice":{"type":"maybe"},"messages":[{"role":"user","content":"x"}]}`: "tool_choice.type",
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"audio"}]}]}`:                 "messages[0].content[0].type",
	} {
		_, err := DecodeServerMessages([]byte(body), false)
		ce, ok := err.(*llm.ConfigError)
		if !ok || ce.Field != field {
			t.Errorf("%s: %v, want a ConfigError on %s", body, err, field)
		}
	}
}

// What the server encodes, the client codec parses back to the same result.
func TestServerEncodingsParseBack(t *testing.T) {
	res := &llm.ChatResult{ID: "msg_1", Model: "m", Content: "hi",
		ThinkingBlocks: []llm.ThinkingBlock{{Format: "anthropic", Text: "think", Signature: "s1"}}, Reasoning: "think",
		ToolCalls:    []llm.ToolCall{{ID: "toolu_1", Name: "f", Arguments: `{"a":1}`}},
		FinishReason: llm.FinishToolCalls, Usage: llm.Usage{PromptTokens: 3, CacheReadTokens: 2, CompletionTokens: 4}}
	b, err := EncodeServerMessage(res, "msg_1", "m")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Codec{}.ParseChat(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, res) {
		t.Fatalf("buffered: got %+v\nwant %+v", got, res)
	}

	evs := []llm.Event{
		{Type: llm.EventReasoning, Text: "think"},
		{Type: llm.EventText, Text: "h"}, {Type: llm.EventText, Text: "i"},
		{Type: llm.EventToolCallStart, ToolIndex: 0, ToolCallID: "toolu_1", ToolName: "f", Text: `{"a"`},
		{Type: llm.EventToolCallDelta, ToolIndex: 0, Text: `:1}`},
		{Type: llm.EventFinish, Finish: llm.FinishToolCalls},
		{Type: llm.EventUsage, Usage: &res.Usage},
	}
	s := NewServerStream("msg_1", "m")
	var frames []byte
	for i := range evs {
		frames = s.Event(frames, &evs[i])
	}
	frames = s.End(frames, nil)
	d := Codec{}.NewStreamDecoder()
	_, done, err := codectest.Replay(t, d, frames)
	if err != nil {
		t.Fatal(err)
	}
	if !done || !d.Complete() {
		t.Fatal("the stream did not end with message_stop")
	}
	got = d.Result()
	want := res.Clone()
	want.ThinkingBlocks = []llm.ThinkingBlock{{Format: "anthropic", Text: "think"}} // streamed thinking carries no signature
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("stream: got %+v\nwant %+v", got, want)
	}
	errFrame := s.Error(nil, 529, "busy")
	var api *llm.APIError
	if _, _, err := codectest.Replay(t, Codec{}.NewStreamDecoder(), errFrame); !errors.As(err, &api) {
		t.Fatalf("the in-band error %q decodes as %v, want an API error", errFrame, err)
	}
}
