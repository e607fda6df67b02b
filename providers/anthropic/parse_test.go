package anthropic

import (
	"errors"
	"reflect"
	"testing"

	"github.com/chorusrt/chorus/llm"
)

func TestParseChat(t *testing.T) {
	body := `{"id":"msg_9","type":"message","role":"assistant","model":"claude-z",
		"content":[
			{"type":"thinking","thinking":"hmm","signature":"S1"},
			{"type":"redacted_thinking","data":"RD"},
			{"type":"text","text":"Hello, "},
			{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"q"}},
			{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[]},
			{"type":"text","text":"world","citations":[]},
			{"type":"tool_use","id":"toolu_1","name":"get","input":{ "a" : [1, 2] }},
			{"type":"tool_use","id":"toolu_2","name":"now"}
		],
		"stop_reason":"tool_use",
		"usage":{"input_tokens":5,"cache_read_input_tokens":100,"cache_creation_input_tokens":20,"output_tokens":7}}`
	res, err := Codec{}.ParseChat([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want := &llm.ChatResult{
		ID: "msg_9", Model: "claude-z", Content: "Hello, world", Reasoning: "hmm",
		ThinkingBlocks: []llm.ThinkingBlock{
			{Format: "anthropic", Text: "hmm", Signature: "S1"},
			{Format: "anthropic", Redacted: true, Data: "RD"},
		},
		ToolCalls: []llm.ToolCall{
			{ID: "toolu_1", Name: "get", Arguments: `{"a":[1,2]}`},
			{ID: "toolu_2", Name: "now", Arguments: `{}`},
		},
		FinishReason: llm.FinishToolCalls,
		Usage:        llm.Usage{PromptTokens: 5, CacheReadTokens: 100, CacheWriteTokens: 20, CompletionTokens: 7},
	}
	if !reflect.DeepEqual(res, want) {
		t.Errorf("ParseChat =\n%+v\nwant\n%+v", res, want)
	}
}

func TestParseChatStopReasons(t *testing.T) {
	for reason, want := range map[string]llm.FinishReason{
		"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls",
		"refusal": "content_filter", "pause_turn": "", "model_context_window_exceeded": "", "brand_new": "",
	} {
		res, err := Codec{}.ParseChat([]byte(`{"type":"message","id":"m","content":[{"type":"text","text":"x"}],"stop_reason":"` + reason + `","usage":{}}`))
		if err != nil {
			t.Fatal(err)
		}
		if res.FinishReason != want {
			t.Errorf("%s -> %q, want %q", reason, res.FinishReason, want)
		}
	}
	// A normal end with tool calls is a tool turn.
	res, err := Codec{}.ParseChat([]byte(`{"type":"message","content":[{"type":"tool_use","id":"t","name":"a","input":{}}],"stop_reason":"end_turn"}`))
	if err != nil || res.FinishReason != llm.FinishToolCalls {
		t.Errorf("end_turn with a call -> %v, %v", res, err)
	}
}

func TestParseChatErrors(t *testing.T) {
	_, err := Codec{}.ParseChat([]byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}`))
	var ae *llm.APIError
	if !errors.As(err, &ae) || ae.Type != "overloaded_error" || ae.Message != "Overloaded" || !ae.Retryable || ae.Status != 529 || ae.RequestID != "req_1" {
		t.Errorf("error envelope -> %#v", err)
	}
	for _, bad := range []string{`not json`, `{"type":"completion"}`, `[]`} {
		_, err := Codec{}.ParseChat([]byte(bad))
		var de *llm.DecodeError
		if !errors.As(err, &de) {
			t.Errorf("ParseChat(%s) = %v, want *llm.DecodeError", bad, err)
		}
	}
}

func TestParseError(t *testing.T) {
	cases := []struct {
		body     string
		typ, msg string
	}{
		{`{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`, "rate_limit_error", "slow down"},
		{`{"error":{"message":"model: x","type":"not_found_error"},"request_id":"req","type":"error"}`, "not_found_error", "model: x"},
		{`<html>bad gateway</html>`, "", ""},
		{`{"message":"flat"}`, "", ""},
	}
	for _, tc := range cases {
		got := Codec{}.ParseError(400, []byte(tc.body))
		if got.Type != tc.typ || got.Message != tc.msg || got.Code != "" {
			t.Errorf("ParseError(%s) = %+v, want type %q message %q", tc.body, got, tc.typ, tc.msg)
		}
	}
}
