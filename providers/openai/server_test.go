package openai

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/codectest"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// The server side is the client side's inverse: a request the codec
// builds decodes back to the same llm.ChatRequest.
func TestServerChatInvertsChatRequest(t *testing.T) {
	in := &llm.ChatRequest{
		Model: "gpt-4.1-mini",
		Messages: []llm.Message{
			llm.SystemText("sys"),
			{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("look"), llm.ImageURLPart("https://x/y.png")}},
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "f", Arguments: `{"a":1}`}}},
			llm.ToolResult("c1", "ok", false),
		},
		Tools:          []llm.Tool{{Name: "f", Description: "d", Parameters: []byte(`{"type":"object"}`)}},
		ToolChoice:     llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: "f"},
		ResponseFormat: &llm.ResponseFormat{Type: llm.ResponseJSONSchema, Name: "s", Schema: []byte(`{"type":"object"}`), Strict: true},
		MaxTokens:      100,
		Temperature:    llm.Ptr(0.5),
		Stop:           []string{"END"},
	}
	wr, err := Codec{}.ChatRequest(in, wire.BuildOptions{Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := DecodeServerChat(wr.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !sc.Stream || !reflect.DeepEqual(sc.Chat, in) {
		t.Fatalf("decoded %+v\nwant    %+v", sc.Chat, in)
	}
}

func TestServerChatRefusesWhatItCannotServe(t *testing.T) {
	for body, field := range map[string]string{
		`{"model":"m","n":2,"messages":[{"role":"user","content":"x"}]}`:                             "n",
		`{"model":"m","messages":[{"role":"wizard","content":"x"}]}`:                                 "messages[0].role",
		`{"model":"m","tool_choice":"maybe","messages":[{"role":"user","content":"x"}]}`:             "tool_choice",
		`{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio"}]}]}`:              "messages[0].content[0].type",
		`{"model":"m","response_format":{"type":"yaml"},"messages":[{"role":"user","content":"x"}]}`: "response_format.type",
		`not json`: "body",
	} {
		_, err := DecodeServerChat([]byte(body))
		ce, ok := err.(*llm.ConfigError)
		if !ok || ce.Field != field {
			t.Errorf("%s: %v, want a ConfigError on %s", body, err, field)
		}
	}
}

// What the server encodes, the client codec parses back to the same result.
func TestServerEncodingsParseBack(t *testing.T) {
	res := &llm.ChatResult{ID: "chatcmpl-1", Model: "m", Content: "hi", Reasoning: "think",
		ToolCalls:    []llm.ToolCall{{ID: "c1", Name: "f", Arguments: `{"a":1}`}},
		FinishReason: llm.FinishToolCalls, Usage: llm.Usage{PromptTokens: 3, CacheReadTokens: 2, CompletionTokens: 4, ReasoningTokens: 1}}
	b, err := EncodeServerChat(res, "m", 1)
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
		{Type: llm.EventToolCallStart, ToolIndex: 0, ToolCallID: "c1", ToolName: "f", Text: `{"a"`},
		{Type: llm.EventToolCallDelta, ToolIndex: 0, Text: `:1}`},
		{Type: llm.EventFinish, Finish: llm.FinishToolCalls},
		{Type: llm.EventUsage, Usage: &res.Usage},
	}
	s := NewServerStream("chatcmpl-1", "m", 1, true)
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
		t.Fatal("the stream did not end with its completion signal")
	}
	if got := d.Result(); !reflect.DeepEqual(got, res) {
		t.Fatalf("stream: got %+v\nwant %+v", got, res)
	}

	errFrame := s.Error(nil, 429, "slow down")
	var api *llm.APIError
	if _, _, err := codectest.Replay(t, Codec{}.NewStreamDecoder(), errFrame); !errors.As(err, &api) {
		t.Fatalf("the in-band error %q decodes as %v, want an API error", errFrame, err)
	}
}

// Both server decoders read content and tool_choice through the same
// helpers (decodeParts, decodeToolChoiceMode): a string or parts,
// text-only parts folded into one string, other parts kept, each refusal
// naming the part's field; tool_choice null or a mode.
func TestServerContentAndToolChoiceBothFormats(t *testing.T) {
	const img = `"data:image/png;base64,iVBORw=="`
	chat := func(content, toolChoice string) (*llm.ChatRequest, error) {
		sc, err := DecodeServerChat([]byte(`{"model":"m","tool_choice":` + toolChoice + `,"messages":[{"role":"user","content":` + content + `}]}`))
		if err != nil {
			return nil, err
		}
		return sc.Chat, nil
	}
	responses := func(content, toolChoice string) (*llm.ChatRequest, error) {
		sr, err := DecodeServerResponses([]byte(`{"model":"m","tool_choice":` + toolChoice + `,"input":[{"role":"user","content":` + content + `}]}`))
		if err != nil {
			return nil, err
		}
		return sr.Chat, nil
	}
	for _, f := range []struct {
		name                  string
		decode                func(content, toolChoice string) (*llm.ChatRequest, error)
		text, image, badPart  string
		field, badField, what string
	}{
		{"chat", chat, `{"type":"text","text":"%s"}`, `{"type":"image_url","image_url":{"url":` + img + `}}`, `{"type":"input_audio"}`,
			"messages[0].content", "messages[0].content[1].type", "array of parts"},
		{"responses", responses, `{"type":"input_text","text":"%s"}`, `{"type":"input_image","image_url":` + img + `}`, `{"type":"input_audio"}`,
			"input[0].content", "input[0].content[1].type", "list of parts"},
	} {
		text := func(s string) string { return strings.Replace(f.text, "%s", s, 1) }
		req, err := f.decode(`[`+text("a")+`,`+text("b")+`]`, `"none"`)
		if err != nil || req.Messages[0].Content != "ab" || req.Messages[0].Parts != nil || req.ToolChoice.Mode != llm.ToolChoiceNone {
			t.Errorf("%s: text-only parts: %+v %v", f.name, req, err)
		}
		req, err = f.decode(`[`+text("look")+`,`+f.image+`]`, `null`)
		if err != nil || req.Messages[0].Content != "" || len(req.Messages[0].Parts) != 2 ||
			req.Messages[0].Parts[1].Type != llm.PartImage || req.Messages[0].Parts[1].MIMEType != "image/png" || req.ToolChoice != (llm.ToolChoice{}) {
			t.Errorf("%s: mixed parts: %+v %v", f.name, req, err)
		}
		for _, c := range []struct{ content, toolChoice, field, msg string }{
			{`[` + text("a") + `,` + f.badPart + `]`, `"auto"`, f.badField, `"input_audio" is not served`},
			{`{"x":1}`, `"auto"`, f.field, "is neither a string nor a" + map[bool]string{true: "n", false: ""}[f.name == "chat"] + " " + f.what},
			{`"hi"`, `"sometimes"`, "tool_choice", `"sometimes" is unknown`},
		} {
			_, err := f.decode(c.content, c.toolChoice)
			var ce *llm.ConfigError
			if !errors.As(err, &ce) || ce.Field != c.field || ce.Msg != c.msg {
				t.Errorf("%s: %s / %s: %v, want a ConfigError on %s: %s", f.name, c.content, c.toolChoice, err, c.field, c.msg)
			}
		}
	}
}
