package gemini

import (
	"errors"
	"reflect"
	"testing"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/codectest"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// A request the codec builds decodes back to the same llm.ChatRequest.
func TestServerGenerateInvertsChatRequest(t *testing.T) {
	in := &llm.ChatRequest{
		Model: "gemini-2.5-flash",
		Messages: []llm.Message{
			llm.SystemText("sys"),
			llm.UserText("weather?"),
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "w", Name: "w", Arguments: `{"city":"Paris"}`, Signature: "sig"}}},
			{Role: llm.RoleTool, ToolCallID: "w", ToolName: "w", Content: `{"t":20}`},
		},
		Tools:      []llm.Tool{{Name: "w", Description: "d", Parameters: []byte(`{"type":"object"}`)}},
		ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: "w"},
		MaxTokens:  100,
	}
	wr, err := Codec{}.ChatRequest(in, wire.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeServerGenerate("gemini-2.5-flash", wr.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, in) {
		t.Fatalf("decoded %+v\nwant    %+v", got, in)
	}
}

// What the server encodes, buffered or streamed, the client codec parses
// back to the same result.
func TestServerEncodingsParseBack(t *testing.T) {
	res := &llm.ChatResult{ID: "r1", Model: "m", Content: "hi",
		ToolCalls:    []llm.ToolCall{{ID: "c1", Name: "f", Arguments: `{"a":1}`}},
		FinishReason: llm.FinishToolCalls, Usage: llm.Usage{PromptTokens: 3, CacheReadTokens: 2, CompletionTokens: 4}}
	b, err := EncodeServerGenerate(res, "m")
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
		{Type: llm.EventText, Text: "h"}, {Type: llm.EventText, Text: "i"},
		{Type: llm.EventToolCallStart, ToolIndex: 0, ToolCallID: "c1", ToolName: "f", Text: `{"a"`},
		{Type: llm.EventToolCallDelta, ToolIndex: 0, Text: `:1}`},
		{Type: llm.EventFinish, Finish: llm.FinishToolCalls},
		{Type: llm.EventUsage, Usage: &res.Usage},
	}
	s := NewServerStream("r1", "m")
	var frames []byte
	for i := range evs {
		frames = s.Event(frames, &evs[i])
	}
	frames = s.End(frames, nil)
	d := Codec{}.NewStreamDecoder()
	if _, _, err := codectest.Replay(t, d, frames); err != nil {
		t.Fatal(err)
	}
	if !d.Complete() {
		t.Fatal("the stream did not complete")
	}
	if got := d.Result(); !reflect.DeepEqual(got, res) {
		t.Fatalf("stream: got %+v\nwant %+v", got, res)
	}
	errFrame := s.Error(nil, 429, "slow")
	var api *llm.APIError
	if _, _, err := codectest.Replay(t, Codec{}.NewStreamDecoder(), errFrame); !errors.As(err, &api) {
		t.Fatalf("the in-band error %q decodes as %v, want an API error", errFrame, err)
	}
}
