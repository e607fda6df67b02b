package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/codectest"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// The Responses server side is ResponsesCodec's inverse: a request the
// client codec builds (reasoning items with their encrypted content, in
// front of the items they preceded) decodes back to the same request.
func TestServerResponsesInvertsChatRequest(t *testing.T) {
	in := &llm.ChatRequest{
		Model: "gpt-5-mini",
		Messages: []llm.Message{
			llm.SystemText("sys"),
			{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("look"), llm.ImageURLPart("https://x/y.png")}},
			{Role: llm.RoleAssistant, Content: "let me call", ToolCalls: []llm.ToolCall{{ID: "c1", Name: "f", Arguments: `{"a":1}`}},
				ThinkingBlocks: []llm.ThinkingBlock{
					{Format: ResponsesFormat, ID: "rs_1", Text: "think", Data: "ENC1", Signature: "message:msg_1"},
					{Format: ResponsesFormat, ID: "rs_2", Text: "more", Data: "ENC2", Signature: "function_call:c1"},
				}},
			llm.ToolResult("c1", "ok", false),
		},
		Tools:          []llm.Tool{{Name: "f", Description: "d", Parameters: []byte(`{"type":"object"}`), Strict: true}},
		ToolChoice:     llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: "f"},
		ResponseFormat: &llm.ResponseFormat{Type: llm.ResponseJSONSchema, Name: "s", Schema: []byte(`{"type":"object"}`), Strict: true},
		MaxTokens:      100,
		Temperature:    llm.Ptr(0.5),
		Reasoning:      &llm.Reasoning{Effort: llm.EffortHigh},
	}
	wr, err := ResponsesCodec{}.ChatRequest(in, wire.BuildOptions{Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	sr, err := DecodeServerResponses(wr.Body)
	if err != nil {
		t.Fatal(err)
	}
	in.PreferResponses = true // a Responses client's request is served by the Responses API
	if !sr.Stream || !reflect.DeepEqual(sr.Chat, in) {
		t.Fatalf("decoded %+v\nwant    %+v\nbody %s", sr.Chat, in, wr.Body)
	}
	// And again: what the server decoded builds the same body.
	wr2, err := ResponsesCodec{}.ChatRequest(sr.Chat, wire.BuildOptions{Stream: true})
	if err != nil || string(wr2.Body) != string(wr.Body) {
		t.Fatalf("rebuilt %s\nwant    %s (%v)", wr2.Body, wr.Body, err)
	}
}

func TestServerResponsesDecodeErrors(t *testing.T) {
	for _, c := range []struct{ body, field string }{
		{`{"model":"m","input":"hi","previous_response_id":"resp_1"}`, "previous_response_id"},
		{`{"model":"m","input":"hi","conversation":"conv_1"}`, "conversation"},
		{`{"model":"m"}`, "input"},
		{`{"model":"m","input":[{"type":"item_reference","id":"x"}]}`, "input[0].type"},
		{`{"model":"m","input":"hi","tools":[{"type":"web_search"}]}`, "tools[0].type"},
		{`{"model":"m","input":"hi","tool_choice":"sometimes"}`, "tool_choice"},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_image","file_id":"file_1"}]}]}`, "input[0].content[0].image_url"},
		{`{"model":"m","input":"hi","text":{"format":{"type":"xml"}}}`, "text.format.type"},
		{`not json`, "body"},
	} {
		_, err := DecodeServerResponses([]byte(c.body))
		var ce *llm.ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("%s: %v, want a ConfigError on %s", c.body, err, c.field)
		}
	}
	// The easy form: a string input, strict defaulting to true.
	sr, err := DecodeServerResponses([]byte(`{"model":"m","input":"hi","instructions":"be brief","tools":[{"type":"function","name":"f","parameters":{"type":"object"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(sr.Chat.Messages) != 2 || sr.Chat.Messages[0].Role != llm.RoleSystem || sr.Chat.Messages[1].Content != "hi" || !sr.Chat.Tools[0].Strict {
		t.Fatalf("decoded %+v", sr.Chat)
	}
}

// A buffered answer parses back, through the client codec, to the result
// it encoded.
func TestServerResponseRoundTrip(t *testing.T) {
	sr, err := DecodeServerResponses([]byte(`{"model":"openai/gpt-5-mini","input":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range []*llm.ChatResult{
		{Content: "hello", FinishReason: llm.FinishStop, Usage: llm.Usage{PromptTokens: 5, CacheReadTokens: 2, CompletionTokens: 9, ReasoningTokens: 4},
			Reasoning: "think", ThinkingBlocks: []llm.ThinkingBlock{{Format: ResponsesFormat, ID: "rs_9", Text: "think", Data: "ENC", Signature: "message:msg_x"}}},
		{ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "f", Arguments: `{"a":1}`}, {ID: "call_2", Name: "g", Arguments: `{}`}}, FinishReason: llm.FinishToolCalls},
		{Content: "cut", FinishReason: llm.FinishLength},
		{Refusal: "no", FinishReason: llm.FinishContentFilter},
	} {
		b, err := sr.EncodeServerResponse(res, "resp_x", "openai/gpt-5-mini", 1700000000)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ResponsesCodec{}.ParseChat(b)
		if err != nil {
			t.Fatalf("%v: %s", err, b)
		}
		want := *res
		want.ID, want.Model = "resp_x", "openai/gpt-5-mini"
		if len(want.ThinkingBlocks) > 0 {
			want.ThinkingBlocks[0].Signature = "message:msg_x" // the message item's id
		}
		if !reflect.DeepEqual(got, &want) {
			t.Errorf("parsed %+v\nwant   %+v\nbody %s", got, &want, b)
		}
		var obj map[string]any
		if json.Unmarshal(b, &obj) != nil || obj["object"] != "response" || obj["store"] != false {
			t.Errorf("object %s", b)
		}
	}
}

// A stream encodes to Responses events that the client codec decodes back
// to the same events and result; a failure is an error event the decoder
// reports as an API error.
func TestServerResponsesStreamRoundTrip(t *testing.T) {
	sr, err := DecodeServerResponses([]byte(`{"model":"m","input":"hi","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	u := &llm.Usage{PromptTokens: 3, CompletionTokens: 7}
	evs := []llm.Event{
		{Type: llm.EventReasoning, Text: "hm"},
		{Type: llm.EventReasoning, Text: "m"},
		{Type: llm.EventText, Text: "Hel"},
		{Type: llm.EventText, Text: "lo"},
		{Type: llm.EventToolCallStart, ToolIndex: 0, ToolCallID: "call_1", ToolName: "f", Text: `{"a"`},
		{Type: llm.EventToolCallStart, ToolIndex: 1, ToolCallID: "call_2", ToolName: "g"},
		{Type: llm.EventToolCallDelta, ToolIndex: 0, Text: `:1}`},
		{Type: llm.EventToolCallDelta, ToolIndex: 1, Text: `{}`},
		{Type: llm.EventUsage, Usage: u},
		{Type: llm.EventFinish, Finish: llm.FinishToolCalls},
	}
	s := sr.NewServerResponsesStream("resp_s", "m", 1700000000)
	var body []byte
	for i := range evs {
		body = s.Event(body, &evs[i])
	}
	body = s.End(body, &llm.ChatResult{FinishReason: llm.FinishToolCalls, Usage: *u})
	got, d, err := rxRun(t, body)
	if err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	res := d.Result()
	if res.Content != "Hello" || res.Reasoning != "hmm" || len(res.ToolCalls) != 2 || res.ToolCalls[0].Arguments != `{"a":1}` ||
		res.ToolCalls[1].Name != "g" || res.ToolCalls[1].Arguments != "{}" || res.Usage != *u || res.FinishReason != llm.FinishToolCalls {
		t.Fatalf("result %+v\n%s", res, body)
	}
	var text, reasoning strings.Builder
	for _, e := range got {
		switch e.Type {
		case llm.EventText:
			text.WriteString(e.Text)
		case llm.EventReasoning:
			reasoning.WriteString(e.Text)
		}
	}
	if text.String() != "Hello" || reasoning.String() != "hmm" {
		t.Fatalf("events %+v", got)
	}
	// Sequence numbers count from 0, one per event.
	if n := strings.Count(string(body), `"sequence_number":`); !strings.Contains(string(body), `"sequence_number":`+itoa(n-1)+`}`) {
		t.Errorf("sequence numbers: %d events\n%s", n, body)
	}

	// A failure after the first event: an error event, no response.completed.
	s = sr.NewServerResponsesStream("resp_e", "m", 1700000000)
	body = s.Event(nil, &llm.Event{Type: llm.EventText, Text: "par"})
	body = s.Error(body, 502, "upstream reset")
	if strings.Contains(string(body), "response.completed") || !strings.Contains(string(body), "event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"upstream reset\",\"param\":null") {
		t.Fatalf("error stream %s", body)
	}
	_, _, err = rxRun(t, body)
	var api *llm.APIError
	if !errors.As(err, &api) {
		t.Fatalf("decoder: %v, want an API error", err)
	}
}

// Both stream encoders end the same way (wire.HeldEnd): the finish event's
// reason unless there was none, then the result's; the result's usage when
// it has any, else the usage event's, else zero. Checked through the client
// codecs.
func TestServerStreamsEndWithHeldFinishAndUsage(t *testing.T) {
	u1 := llm.Usage{PromptTokens: 3, CompletionTokens: 4}
	u2 := llm.Usage{PromptTokens: 5, CompletionTokens: 6}
	sr, err := DecodeServerResponses([]byte(`{"model":"m","input":"hi","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name       string
		events     []llm.Event
		res        *llm.ChatResult
		wantFinish llm.FinishReason
		wantUsage  llm.Usage
	}{
		{"event finish, result usage", []llm.Event{{Type: llm.EventFinish, Finish: llm.FinishLength}, {Type: llm.EventUsage, Usage: &u1}},
			&llm.ChatResult{FinishReason: llm.FinishStop, Usage: u2}, llm.FinishLength, u2},
		{"result finish, event usage", []llm.Event{{Type: llm.EventUsage, Usage: &u1}},
			&llm.ChatResult{FinishReason: llm.FinishLength}, llm.FinishLength, u1},
		{"events only", []llm.Event{{Type: llm.EventUsage, Usage: &u1}, {Type: llm.EventFinish, Finish: llm.FinishLength}}, nil, llm.FinishLength, u1},
		{"nothing", nil, nil, llm.FinishStop, llm.Usage{}},
	} {
		evs := append([]llm.Event{{Type: llm.EventText, Text: "hi"}}, c.events...)
		chat := NewServerStream("chatcmpl-1", "m", 1, true)
		resp := sr.NewServerResponsesStream("resp_1", "m", 1)
		var chatBody, respBody []byte
		for i := range evs {
			chatBody = chat.Event(chatBody, &evs[i])
			respBody = resp.Event(respBody, &evs[i])
		}
		chatBody = chat.End(chatBody, c.res)
		respBody = resp.End(respBody, c.res)
		for _, f := range []struct {
			name string
			dec  wire.StreamDecoder
			body []byte
		}{{"chat", Codec{}.NewStreamDecoder(), chatBody}, {"responses", ResponsesCodec{}.NewStreamDecoder(), respBody}} {
			if _, _, err := codectest.Replay(t, f.dec, f.body); err != nil {
				t.Fatalf("%s %s: %v", c.name, f.name, err)
			}
			if got := f.dec.Result(); got.FinishReason != c.wantFinish || got.Usage != c.wantUsage {
				t.Errorf("%s %s: finish %q usage %+v, want %q %+v\n%s", c.name, f.name, got.FinishReason, got.Usage, c.wantFinish, c.wantUsage, f.body)
			}
		}
	}
}

// The final response of a stream has one reasoning item per Responses
// thinking block, each with its id and encrypted_content, before the item
// it preceded, even when the blocks did not stream one item each (here
// the second has no summary, so streamed nothing).
func TestServerResponsesStreamReasoningItems(t *testing.T) {
	sr, err := DecodeServerResponses([]byte(`{"model":"m","input":"hi","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	evs := []llm.Event{
		{Type: llm.EventReasoning, Text: "a"},
		{Type: llm.EventToolCallStart, ToolIndex: 0, ToolCallID: "c1", ToolName: "f", Text: `{}`},
		{Type: llm.EventToolCallStart, ToolIndex: 1, ToolCallID: "c2", ToolName: "g", Text: `{}`},
	}
	s := sr.NewServerResponsesStream("resp_s", "m", 1700000000)
	var body []byte
	for i := range evs {
		body = s.Event(body, &evs[i])
	}
	body = s.End(body, &llm.ChatResult{FinishReason: llm.FinishToolCalls, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "f", Arguments: "{}"}, {ID: "c2", Name: "g", Arguments: "{}"}},
		ThinkingBlocks: []llm.ThinkingBlock{
			{Format: ResponsesFormat, ID: "rs_A", Text: "a", Data: "enc-A", Signature: "function_call:c1"},
			{Format: ResponsesFormat, ID: "rs_B", Data: "enc-B", Signature: "function_call:c2"},
		}})
	last := body[bytes.LastIndex(body, []byte("data: "))+len("data: "):]
	var done struct {
		Response struct {
			Output []struct {
				Type, ID         string
				CallID           string `json:"call_id"`
				EncryptedContent string `json:"encrypted_content"`
			}
		}
	}
	if err := json.Unmarshal(last, &done); err != nil {
		t.Fatalf("%v: %s", err, last)
	}
	var got []string
	for _, o := range done.Response.Output {
		got = append(got, o.Type+":"+o.ID+o.CallID+":"+o.EncryptedContent)
	}
	want := "reasoning:rs_A:enc-A function_call:fc_c1c1: reasoning:rs_B:enc-B function_call:fc_c2c2:"
	if strings.Join(got, " ") != want {
		t.Fatalf("final output %q, want %q\n%s", strings.Join(got, " "), want, body)
	}
	// The client codec reads both blocks back, each before its call.
	res, err := ResponsesCodec{}.ParseChat(mustField(t, last, "response"))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.ThinkingBlocks) != 2 || res.ThinkingBlocks[1].Data != "enc-B" || res.ThinkingBlocks[1].Signature != "function_call:c2" {
		t.Fatalf("parsed blocks %+v", res.ThinkingBlocks)
	}
}

func mustField(t *testing.T, b []byte, name string) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m[name]
}
