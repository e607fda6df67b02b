package openai

import (
	"errors"
	"testing"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

func TestParseChat(t *testing.T) {
	tests := []struct {
		name string
		body string
		want llm.ChatResult
	}{
		{
			name: "text",
			body: `{"id":"chatcmpl-1","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Hello","refusal":null},"finish_reason":"stop"}],
				"usage":{"prompt_tokens":20,"completion_tokens":2,"total_tokens":22,"prompt_tokens_details":{"cached_tokens":16}}}`,
			want: llm.ChatResult{ID: "chatcmpl-1", Model: "gpt-4o-mini", Content: "Hello", FinishReason: llm.FinishStop,
				Usage: llm.Usage{PromptTokens: 4, CacheReadTokens: 16, CompletionTokens: 2}},
		},
		{
			name: "tool calls finish stop becomes tool_calls",
			body: `{"choices":[{"message":{"content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Rome\"}"}},
				{"id":"call_2","type":"function","function":{"name":"now","arguments":""}}]},"finish_reason":"stop"}]}`,
			want: llm.ChatResult{FinishReason: llm.FinishToolCalls, ToolCalls: []llm.ToolCall{
				{ID: "call_1", Name: "weather", Arguments: `{"city":"Rome"}`}, {ID: "call_2", Name: "now", Arguments: "{}"},
			}},
		},
		{
			name: "legacy function_call",
			body: `{"choices":[{"message":{"content":null,"function_call":{"name":"get_weather","arguments":"{\"location\":\"Boston\"}"}},"finish_reason":"function_call"}]}`,
			want: llm.ChatResult{FinishReason: llm.FinishToolCalls, ToolCalls: []llm.ToolCall{{ID: "call_0", Name: "get_weather", Arguments: `{"location":"Boston"}`}}},
		},
		{
			name: "arguments as an object (local servers)",
			body: `{"choices":[{"message":{"tool_calls":[{"id":"x","function":{"name":"f","arguments":{"a":1}}}]},"finish_reason":"tool_calls"}]}`,
			want: llm.ChatResult{FinishReason: llm.FinishToolCalls, ToolCalls: []llm.ToolCall{{ID: "x", Name: "f", Arguments: `{"a":1}`}}},
		},
		{
			name: "refusal",
			body: `{"choices":[{"message":{"content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}]}`,
			want: llm.ChatResult{Refusal: "I can't help with that.", FinishReason: llm.FinishContentFilter},
		},
		{
			name: "content as parts",
			body: `{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"},{"type":"refusal","refusal":"r"}]},"finish_reason":"stop"}]}`,
			want: llm.ChatResult{Content: "ab", Refusal: "r", FinishReason: llm.FinishContentFilter},
		},
		{
			name: "refusal cut short keeps length",
			body: `{"choices":[{"message":{"content":null,"refusal":"I can"},"finish_reason":"length"}]}`,
			want: llm.ChatResult{Refusal: "I can", FinishReason: llm.FinishLength},
		},
		{
			name: "refusal with an unmapped finish",
			body: `{"choices":[{"message":{"content":null,"refusal":"No."},"finish_reason":"eos"}]}`,
			want: llm.ChatResult{Refusal: "No.", FinishReason: llm.FinishContentFilter},
		},
		{
			name: "null and empty refusals are no refusal",
			body: `{"choices":[{"message":{"content":"ok","refusal":null},"finish_reason":"stop"}]}`,
			want: llm.ChatResult{Content: "ok", FinishReason: llm.FinishStop},
		},
		{
			name: "reasoning_content wins over reasoning and details",
			body: `{"choices":[{"message":{"content":"x","reasoning_content":"rc","reasoning":"r","reasoning_details":[{"type":"reasoning.text","text":"d"}]},"finish_reason":"stop"}]}`,
			want: llm.ChatResult{Content: "x", Reasoning: "rc", FinishReason: llm.FinishStop},
		},
		{
			name: "reasoning wins over details",
			body: `{"choices":[{"message":{"content":"x","reasoning_content":null,"reasoning":"r","reasoning_details":[{"type":"reasoning.text","text":"d"}]},"finish_reason":"stop"}]}`,
			want: llm.ChatResult{Content: "x", Reasoning: "r", FinishReason: llm.FinishStop},
		},
		{
			name: "details folded, encrypted skipped, non-strings tolerated",
			body: `{"choices":[{"message":{"content":"x","reasoning":{"weird":true},"reasoning_details":[
				{"type":"reasoning.summary","summary":"s1"},
				{"type":"reasoning.encrypted","data":"opaque","text":"secret"},
				{"type":"reasoning.text","text":"t2","signature":"sig"},
				{"type":"reasoning.text","text":42},
				"junk",
				{"type":"reasoning.text","text":"","summary":"s3"}]},"finish_reason":"stop"}]}`,
			want: llm.ChatResult{Content: "x", Reasoning: "s1\nt2\ns3", FinishReason: llm.FinishStop},
		},
		{
			name: "unknown finish reason is empty",
			body: `{"choices":[{"message":{"content":"x"},"finish_reason":"eos"}]}`,
			want: llm.ChatResult{Content: "x"},
		},
		{
			name: "length and content_filter",
			body: `{"choices":[{"message":{"content":"x"},"finish_reason":"length"}]}`,
			want: llm.ChatResult{Content: "x", FinishReason: llm.FinishLength},
		},
		{
			name: "content_filter",
			body: `{"choices":[{"message":{"content":""},"finish_reason":"content_filter"}]}`,
			want: llm.ChatResult{FinishReason: llm.FinishContentFilter},
		},
		{
			name: "choice 0 is chosen by index",
			body: `{"choices":[{"index":1,"message":{"content":"second"},"finish_reason":"stop"},{"index":0,"message":{"content":"first"},"finish_reason":"length"}]}`,
			want: llm.ChatResult{Content: "first", FinishReason: llm.FinishLength},
		},
		{
			name: "no choices",
			body: `{"id":"x","choices":[]}`,
			want: llm.ChatResult{ID: "x"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Codec{}.ParseChat([]byte(tt.body))
			if err != nil {
				t.Fatalf("ParseChat: %v", err)
			}
			if got.ID != tt.want.ID || got.Model != tt.want.Model || got.Content != tt.want.Content ||
				got.Refusal != tt.want.Refusal || got.Reasoning != tt.want.Reasoning ||
				got.FinishReason != tt.want.FinishReason || got.Usage != tt.want.Usage {
				t.Errorf("got  %+v\nwant %+v", *got, tt.want)
			}
			if len(got.ToolCalls) != len(tt.want.ToolCalls) {
				t.Fatalf("tool calls %+v, want %+v", got.ToolCalls, tt.want.ToolCalls)
			}
			for i := range got.ToolCalls {
				if got.ToolCalls[i] != tt.want.ToolCalls[i] {
					t.Errorf("tool call %d = %+v, want %+v", i, got.ToolCalls[i], tt.want.ToolCalls[i])
				}
			}
		})
	}
}

func TestParseChatErrors(t *testing.T) {
	_, err := Codec{}.ParseChat([]byte(`{"choices":[`))
	var de *llm.DecodeError
	if !errors.As(err, &de) {
		t.Errorf("malformed: err = %v, want *llm.DecodeError", err)
	}
	// A tool call that names no function is malformed, never a nameless call.
	for _, body := range []string{
		`{"choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{}]},"finish_reason":"tool_calls"}]}`,
		`{"choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`,
	} {
		if res, err := (Codec{}).ParseChat([]byte(body)); !errors.As(err, &de) {
			t.Errorf("nameless tool call %s: %+v, %v; want *llm.DecodeError", body, res, err)
		}
	}
	_, err = Codec{}.ParseChat([]byte(`{"error":{"message":"The server had an error","type":"server_error","code":null}}`))
	var ae *llm.APIError
	if !errors.As(err, &ae) || ae.Message != "The server had an error" || ae.Type != "server_error" || !ae.Retryable {
		t.Errorf("server error: %#v", err)
	}
	_, err = Codec{}.ParseChat([]byte(`{"error":{"message":"This model's maximum context length is 128000 tokens","type":"invalid_request_error","code":"context_length_exceeded"}}`))
	if !errors.As(err, &ae) || ae.Code != "context_length_exceeded" || ae.Retryable {
		t.Errorf("context length: %#v", err)
	}
}

// TestUsageNormalisation covers each row of provider-wire-notes §3.5.
func TestUsageNormalisation(t *testing.T) {
	tests := []struct {
		name, usage string
		want        llm.Usage
	}{
		{"openai cached", `{"prompt_tokens":100,"completion_tokens":50,"prompt_tokens_details":{"cached_tokens":60},"completion_tokens_details":{"reasoning_tokens":20}}`,
			llm.Usage{PromptTokens: 40, CacheReadTokens: 60, CompletionTokens: 50, ReasoningTokens: 20}},
		{"deepseek hit/miss, cached_tokens not subtracted twice", `{"prompt_tokens":339,"completion_tokens":83,"total_tokens":422,"prompt_tokens_details":{"cached_tokens":320},"completion_tokens_details":{"reasoning_tokens":39},"prompt_cache_hit_tokens":320,"prompt_cache_miss_tokens":19}`,
			llm.Usage{PromptTokens: 19, CacheReadTokens: 320, CompletionTokens: 83, ReasoningTokens: 39}},
		{"kimi top-level cached_tokens", `{"prompt_tokens":100,"completion_tokens":10,"total_tokens":110,"cached_tokens":64}`,
			llm.Usage{PromptTokens: 36, CacheReadTokens: 64, CompletionTokens: 10}},
		{"gateway anthropic-named fields are exclusive", `{"prompt_tokens":10,"completion_tokens":5,"cache_read_input_tokens":100,"cache_creation_input_tokens":30}`,
			llm.Usage{PromptTokens: 10, CacheReadTokens: 100, CacheWriteTokens: 30, CompletionTokens: 5}},
		{"gateway with openai cached_tokens too: subtracted once", `{"prompt_tokens":110,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":100},"cache_read_input_tokens":100,"cache_creation_input_tokens":0}`,
			llm.Usage{PromptTokens: 10, CacheReadTokens: 100, CompletionTokens: 5}},
		{"openrouter cache_write_tokens", `{"prompt_tokens":200,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":50,"cache_write_tokens":100}}`,
			llm.Usage{PromptTokens: 50, CacheReadTokens: 50, CacheWriteTokens: 100, CompletionTokens: 5}},
		{"xai counts reasoning outside completion", `{"prompt_tokens":12,"completion_tokens":2,"total_tokens":354,"prompt_tokens_details":{"cached_tokens":11},"completion_tokens_details":{"reasoning_tokens":340}}`,
			llm.Usage{PromptTokens: 1, CacheReadTokens: 11, CompletionTokens: 342, ReasoningTokens: 340}},
		{"cached above prompt is guarded", `{"prompt_tokens":5,"prompt_tokens_details":{"cached_tokens":9}}`,
			llm.Usage{CacheReadTokens: 9}},
		{"odd types stay zero", `{"prompt_tokens":"many","completion_tokens":null,"prompt_tokens_details":null,"completion_tokens_details":7,"queue_time":0.19}`,
			llm.Usage{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := parseUsage([]byte(tt.usage))
			if err != nil || !ok {
				t.Fatalf("parseUsage: ok=%v err=%v", ok, err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	for _, absent := range []string{``, `null`, `5`} {
		if _, ok, err := parseUsage([]byte(absent)); ok || err != nil {
			t.Errorf("parseUsage(%q) = ok %v, err %v", absent, ok, err)
		}
	}
}

func TestParseError(t *testing.T) {
	tests := []struct {
		name, body string
		want       wire.ErrorInfo
	}{
		{"openai", `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
			wire.ErrorInfo{Type: "invalid_request_error", Code: "invalid_api_key", Message: "Incorrect API key provided"}},
		{"numeric code (openrouter)", `{"error":{"message":"Rate limit exceeded","code":429,"metadata":{"raw":"x"}},"user_id":"u"}`,
			wire.ErrorInfo{Code: "429", Message: "Rate limit exceeded"}},
		{"top-level message and code", `{"message":"model not found","code":"model_not_found"}`,
			wire.ErrorInfo{Code: "model_not_found", Message: "model not found"}},
		{"error as a string", `{"error":"model 'llama9' not found"}`,
			wire.ErrorInfo{Message: "model 'llama9' not found"}},
		{"wrapped in an array", `[{"error":{"code":400,"message":"bad","status":"INVALID_ARGUMENT"}}]`,
			wire.ErrorInfo{Code: "400", Message: "bad"}},
		{"null code", `{"error":{"message":"boom","type":"server_error","code":null}}`,
			wire.ErrorInfo{Type: "server_error", Message: "boom"}},
		{"html", `<html>502 Bad Gateway</html>`, wire.ErrorInfo{}},
		{"unknown object", `{"detail":"nope"}`, wire.ErrorInfo{}},
		{"empty", ``, wire.ErrorInfo{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (Codec{}).ParseError(400, []byte(tt.body)); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestStreamErrorRetryable(t *testing.T) {
	tests := []struct {
		info   wire.ErrorInfo
		status int
		want   bool
	}{
		{wire.ErrorInfo{Message: "Internal error"}, 0, true},
		{wire.ErrorInfo{Code: "502"}, 502, true},
		{wire.ErrorInfo{Code: "429"}, 429, true},
		{wire.ErrorInfo{Code: "408"}, 408, true},
		{wire.ErrorInfo{Code: "400"}, 400, false},
		{wire.ErrorInfo{Type: "invalid_request_error", Code: "tool_use_failed"}, 0, false},
		{wire.ErrorInfo{Code: "context_length_exceeded"}, 0, false},
		{wire.ErrorInfo{Code: "insufficient_quota"}, 0, false},
		{wire.ErrorInfo{Type: "server_error"}, 0, true},
	}
	for _, tt := range tests {
		if got := streamErrorRetryable(tt.info, tt.status); got != tt.want {
			t.Errorf("%+v status %d: retryable %v, want %v", tt.info, tt.status, got, tt.want)
		}
	}
}
