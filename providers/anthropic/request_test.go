package anthropic

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// buildBody builds req and decodes the JSON body generically.
func buildBody(t *testing.T, req *llm.ChatRequest, o wire.BuildOptions) (map[string]any, *wire.Request) {
	t.Helper()
	r, err := Codec{}.ChatRequest(req, o)
	if err != nil {
		t.Fatalf("ChatRequest: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, r.Body)
	}
	return m, r
}

func decodeJSON(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad expectation %s: %v", s, err)
	}
	return v
}

func user(s string) []llm.Message { return []llm.Message{llm.UserText(s)} }

func TestChatRequestMapping(t *testing.T) {
	png := []byte{0x89, 'P', 'N', 'G'}
	pdf := []byte("%PDF-1.4")
	cases := []struct {
		name   string
		req    llm.ChatRequest
		opts   wire.BuildOptions
		want   map[string]string // top-level key -> expected JSON value
		absent []string
	}{
		{
			name: "minimal",
			req:  llm.ChatRequest{Model: "claude-x", Messages: user("hi")},
			want: map[string]string{
				"model":      `"claude-x"`,
				"max_tokens": `8192`,
				"messages":   `[{"role":"user","content":[{"type":"text","text":"hi"}]}]`,
			},
			absent: []string{"system", "stream", "temperature", "top_p", "thinking", "tools", "tool_choice", "stop_sequences", "output_config"},
		},
		{
			name: "system messages become one block each, in order",
			req: llm.ChatRequest{Model: "m", Messages: []llm.Message{
				llm.SystemText("be brief"), llm.UserText("hi"), llm.SystemText("be kind"),
				{Role: llm.RoleSystem, Content: "a", Parts: []llm.Part{llm.TextPart("b")}},
			}},
			want: map[string]string{
				"system":   `[{"type":"text","text":"be brief"},{"type":"text","text":"be kind"},{"type":"text","text":"a\nb"}]`,
				"messages": `[{"role":"user","content":[{"type":"text","text":"hi"}]}]`,
			},
		},
		{
			name: "sampling, stop and stream",
			req: llm.ChatRequest{Model: "m", Messages: user("hi"), MaxTokens: 100,
				Temperature: llm.Ptr(0.5), TopP: llm.Ptr(0.9), Stop: []string{"END", "STOP"}, Seed: llm.Ptr[int64](7)},
			opts: wire.BuildOptions{Stream: true},
			want: map[string]string{
				"max_tokens": `100`, "temperature": `0.5`, "top_p": `0.9`,
				"stop_sequences": `["END","STOP"]`, "stream": `true`,
			},
			absent: []string{"seed"},
		},
		{
			name:   "learned: temperature and top_p rejected",
			req:    llm.ChatRequest{Model: "m", Messages: user("hi"), Temperature: llm.Ptr(0.5), TopP: llm.Ptr(0.9)},
			opts:   wire.BuildOptions{Learned: wire.Learned{NoTemperature: true, NoTopP: true}},
			absent: []string{"temperature", "top_p"},
		},
		{
			name: "thinking low: budget + 8192, sampling omitted",
			req: llm.ChatRequest{Model: "m", Messages: user("hi"), Temperature: llm.Ptr(1.0), TopP: llm.Ptr(0.5),
				Reasoning: &llm.Reasoning{Effort: llm.EffortLow}},
			want:   map[string]string{"thinking": `{"type":"enabled","budget_tokens":1024}`, "max_tokens": `9216`},
			absent: []string{"temperature", "top_p"},
		},
		{
			name: "thinking medium",
			req:  llm.ChatRequest{Model: "m", Messages: user("hi"), Reasoning: &llm.Reasoning{Effort: llm.EffortMedium}},
			want: map[string]string{"thinking": `{"type":"enabled","budget_tokens":8192}`, "max_tokens": `16384`},
		},
		{
			name: "thinking high",
			req:  llm.ChatRequest{Model: "m", Messages: user("hi"), Reasoning: &llm.Reasoning{Effort: llm.EffortHigh}},
			want: map[string]string{"thinking": `{"type":"enabled","budget_tokens":16384}`, "max_tokens": `24576`},
		},
		{
			name: "thinking max",
			req:  llm.ChatRequest{Model: "m", Messages: user("hi"), Reasoning: &llm.Reasoning{Effort: llm.EffortMax}},
			want: map[string]string{"thinking": `{"type":"enabled","budget_tokens":16384}`, "max_tokens": `24576`},
		},
		{
			name: "budget wins over effort",
			req:  llm.ChatRequest{Model: "m", Messages: user("hi"), Reasoning: &llm.Reasoning{Effort: llm.EffortHigh, BudgetTokens: 2000}},
			want: map[string]string{"thinking": `{"type":"enabled","budget_tokens":2000}`, "max_tokens": `10192`},
		},
		{
			name: "budget raised to the 1024 minimum",
			req:  llm.ChatRequest{Model: "m", Messages: user("hi"), Reasoning: &llm.Reasoning{BudgetTokens: 10}},
			want: map[string]string{"thinking": `{"type":"enabled","budget_tokens":1024}`, "max_tokens": `9216`},
		},
		{
			name: "explicit budget below explicit max_tokens",
			req:  llm.ChatRequest{Model: "m", Messages: user("hi"), MaxTokens: 4000, Reasoning: &llm.Reasoning{BudgetTokens: 3000}},
			want: map[string]string{"thinking": `{"type":"enabled","budget_tokens":3000}`, "max_tokens": `4000`},
		},
		{
			name: "preset budget clamped to half of max_tokens",
			req:  llm.ChatRequest{Model: "m", Messages: user("hi"), MaxTokens: 10000, Reasoning: &llm.Reasoning{Effort: llm.EffortHigh}},
			want: map[string]string{"thinking": `{"type":"enabled","budget_tokens":5000}`, "max_tokens": `10000`},
		},
		{
			name:   "effort none: no thinking, sampling kept",
			req:    llm.ChatRequest{Model: "m", Messages: user("hi"), Temperature: llm.Ptr(0.3), Reasoning: &llm.Reasoning{Effort: llm.EffortNone, BudgetTokens: 5000}},
			want:   map[string]string{"temperature": `0.3`, "max_tokens": `8192`},
			absent: []string{"thinking"},
		},
		{
			name: "tools with default schema, tool_choice auto",
			req: llm.ChatRequest{Model: "m", Messages: user("hi"),
				Tools: []llm.Tool{
					{Name: "now", Description: "time"},
					{Name: "get", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`), Strict: true},
				},
				ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceAuto}},
			want: map[string]string{
				"tools": `[{"name":"now","description":"time","input_schema":{"type":"object"}},
					{"name":"get","input_schema":{"type":"object","properties":{"q":{"type":"string"}}},"strict":true}]`,
				"tool_choice": `{"type":"auto"}`,
			},
		},
		{
			name: "tool_choice required -> any, parallel off",
			req: llm.ChatRequest{Model: "m", Messages: user("hi"), Tools: []llm.Tool{{Name: "a"}},
				ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceRequired}, ParallelToolCalls: llm.Ptr(false)},
			want: map[string]string{"tool_choice": `{"type":"any","disable_parallel_tool_use":true}`},
		},
		{
			name: "tool_choice tool",
			req: llm.ChatRequest{Model: "m", Messages: user("hi"), Tools: []llm.Tool{{Name: "a"}},
				ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: "a"}},
			want: map[string]string{"tool_choice": `{"type":"tool","name":"a"}`},
		},
		{
			name: "tool_choice none",
			req: llm.ChatRequest{Model: "m", Messages: user("hi"), Tools: []llm.Tool{{Name: "a"}},
				ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceNone}, ParallelToolCalls: llm.Ptr(false)},
			want: map[string]string{"tool_choice": `{"type":"none"}`},
		},
		{
			name: "parallel off alone -> auto with disable",
			req: llm.ChatRequest{Model: "m", Messages: user("hi"), Tools: []llm.Tool{{Name: "a"}},
				ParallelToolCalls: llm.Ptr(false)},
			want: map[string]string{"tool_choice": `{"type":"auto","disable_parallel_tool_use":true}`},
		},
		{
			name: "parallel on, no mode -> no tool_choice",
			req: llm.ChatRequest{Model: "m", Messages: user("hi"), Tools: []llm.Tool{{Name: "a"}},
				ParallelToolCalls: llm.Ptr(true)},
			absent: []string{"tool_choice"},
		},
		{
			name: "json_schema output",
			req: llm.ChatRequest{Model: "m", Messages: user("hi"),
				ResponseFormat: &llm.ResponseFormat{Type: llm.ResponseJSONSchema, Name: "x", Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"}}}`)}},
			want: map[string]string{"output_config": `{"format":{"type":"json_schema","schema":{"type":"object","properties":{"a":{"type":"integer"}}}}}`},
		},
		{
			name: "json_object output",
			req:  llm.ChatRequest{Model: "m", Messages: user("hi"), ResponseFormat: &llm.ResponseFormat{Type: llm.ResponseJSONObject}},
			want: map[string]string{"output_config": `{"format":{"type":"json_schema","schema":{"type":"object"}}}`},
		},
		{
			name:   "text output sends nothing",
			req:    llm.ChatRequest{Model: "m", Messages: user("hi"), ResponseFormat: &llm.ResponseFormat{Type: llm.ResponseText}},
			absent: []string{"output_config"},
		},
		{
			name: "images and documents",
			req: llm.ChatRequest{Model: "m", Messages: []llm.Message{{
				Role: llm.RoleUser, Content: "look",
				Parts: []llm.Part{llm.ImagePart("image/png", png), llm.ImageURLPart("https://x/y.jpg"), llm.DocumentPart(pdf), llm.TextPart("and this")},
			}}},
			want: map[string]string{"messages": `[{"role":"user","content":[
				{"type":"text","text":"look"},
				{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw=="}},
				{"type":"image","source":{"type":"url","url":"https://x/y.jpg"}},
				{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0xLjQ="}},
				{"type":"text","text":"and this"}]}]`},
		},
		{
			name: "assistant replay: anthropic thinking first in order, foreign blocks dropped, then text, then tool_use",
			req: llm.ChatRequest{Model: "m", Messages: []llm.Message{
				llm.UserText("q"),
				{Role: llm.RoleAssistant, Content: "let me look",
					ThinkingBlocks: []llm.ThinkingBlock{
						{Format: "anthropic", Text: "first", Signature: "sigA"},
						{Format: "gemini", Text: "foreign", Signature: "gsig"},
						{Format: "anthropic", Redacted: true, Data: "REDACTED"},
						{Format: "openai-responses", Data: "enc"},
						{Format: "", Text: "unlabelled", Signature: "x"},
						{Format: "anthropic", Text: "", Signature: "sigC"},
					},
					ToolCalls: []llm.ToolCall{
						{ID: "toolu_1", Name: "get", Arguments: `{ "q" : "x" }`},
						{ID: "toolu_2", Name: "now", Arguments: ""},
					}},
			}},
			want: map[string]string{"messages": `[{"role":"user","content":[{"type":"text","text":"q"}]},
				{"role":"assistant","content":[
				{"type":"thinking","thinking":"first","signature":"sigA"},
				{"type":"redacted_thinking","data":"REDACTED"},
				{"type":"thinking","thinking":"","signature":"sigC"},
				{"type":"text","text":"let me look"},
				{"type":"tool_use","id":"toolu_1","name":"get","input":{"q":"x"}},
				{"type":"tool_use","id":"toolu_2","name":"now","input":{}}]}]`},
		},
		{
			name: "empty assistant turn gets a blank text block",
			req:  llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("a"), {Role: llm.RoleAssistant}, llm.UserText("b")}},
			want: map[string]string{"messages": `[{"role":"user","content":[{"type":"text","text":"a"}]},
				{"role":"assistant","content":[{"type":"text","text":" "}]},
				{"role":"user","content":[{"type":"text","text":"b"}]}]`},
		},
		{
			name: "consecutive tool messages merge into one user message",
			req: llm.ChatRequest{Model: "m", Messages: []llm.Message{
				llm.UserText("q"),
				{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "t1", Name: "a", Arguments: "{}"}, {ID: "t2", Name: "b", Arguments: "{}"}}},
				llm.ToolResult("t1", "one", false),
				llm.ToolResult("t2", "boom", true),
				llm.UserText("next"),
				{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "t3", Name: "a", Arguments: "{}"}}},
				{Role: llm.RoleTool, ToolCallID: "t3", Content: "see", Parts: []llm.Part{llm.ImagePart("image/png", png)}},
			}},
			want: map[string]string{"messages": `[
				{"role":"user","content":[{"type":"text","text":"q"}]},
				{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"a","input":{}},{"type":"tool_use","id":"t2","name":"b","input":{}}]},
				{"role":"user","content":[
					{"type":"tool_result","tool_use_id":"t1","content":"one"},
					{"type":"tool_result","tool_use_id":"t2","content":"boom","is_error":true}]},
				{"role":"user","content":[{"type":"text","text":"next"}]},
				{"role":"assistant","content":[{"type":"tool_use","id":"t3","name":"a","input":{}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"t3","content":[
					{"type":"text","text":"see"},
					{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw=="}}]}]}]`},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := buildBody(t, &tc.req, tc.opts)
			for k, w := range tc.want {
				if !reflect.DeepEqual(got[k], decodeJSON(t, w)) {
					g, _ := json.Marshal(got[k])
					t.Errorf("%s = %s\nwant %s", k, g, w)
				}
			}
			for _, k := range tc.absent {
				if v, ok := got[k]; ok {
					t.Errorf("%s present (%v), want absent", k, v)
				}
			}
		})
	}
}

func TestChatRequestHTTP(t *testing.T) {
	req := &llm.ChatRequest{Model: "m", Messages: user("hi"), Headers: map[string]string{"anthropic-beta": "x-2025", "X-Trace": "abc"}}
	for _, stream := range []bool{false, true} {
		_, r := buildBody(t, req, wire.BuildOptions{Stream: stream})
		if r.Method != http.MethodPost || r.Path != "/v1/messages" {
			t.Errorf("stream=%v: %s %s, want POST /v1/messages", stream, r.Method, r.Path)
		}
		if r.Header.Get("Anthropic-Beta") != "x-2025" || r.Header.Get("X-Trace") != "abc" {
			t.Errorf("caller headers not copied: %v", r.Header)
		}
		if r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("Content-Type = %q", r.Header.Get("Content-Type"))
		}
		wantAccept := "application/json"
		if stream {
			wantAccept = "text/event-stream"
		}
		if r.Header.Get("Accept") != wantAccept {
			t.Errorf("stream=%v: Accept = %q, want %q", stream, r.Header.Get("Accept"), wantAccept)
		}
	}
}

func TestChatRequestErrors(t *testing.T) {
	signed := []llm.ThinkingBlock{{Format: "anthropic", Text: "ok", Signature: "s"}}
	cases := []struct {
		name  string
		req   llm.ChatRequest
		field string
	}{
		{"budget equal to max_tokens", llm.ChatRequest{Model: "m", Messages: user("hi"), MaxTokens: 2000,
			Reasoning: &llm.Reasoning{BudgetTokens: 2000}}, "reasoning.budget_tokens"},
		{"budget above max_tokens", llm.ChatRequest{Model: "m", Messages: user("hi"), MaxTokens: 2000,
			Reasoning: &llm.Reasoning{BudgetTokens: 5000}}, "reasoning.budget_tokens"},
		{"raised budget reaches max_tokens", llm.ChatRequest{Model: "m", Messages: user("hi"), MaxTokens: 1000,
			Reasoning: &llm.Reasoning{BudgetTokens: 100}}, "reasoning.budget_tokens"},
		{"max_tokens too small for any thinking", llm.ChatRequest{Model: "m", Messages: user("hi"), MaxTokens: 1000,
			Reasoning: &llm.Reasoning{Effort: llm.EffortLow}}, "max_tokens"},
		{"unsigned anthropic thinking block", llm.ChatRequest{Model: "m", Messages: []llm.Message{
			llm.UserText("q"),
			{Role: llm.RoleAssistant, Content: "a", ThinkingBlocks: append(signed, llm.ThinkingBlock{Format: "anthropic", Text: "unsigned"})},
		}}, "messages[1].thinking_blocks[1].signature"},
		{"redacted block without data", llm.ChatRequest{Model: "m", Messages: []llm.Message{
			llm.UserText("q"), {Role: llm.RoleAssistant, Content: "a", ThinkingBlocks: []llm.ThinkingBlock{{Format: "anthropic", Redacted: true}}},
		}}, "messages[1].thinking_blocks[0].data"},
		{"non-object tool arguments", llm.ChatRequest{Model: "m", Messages: []llm.Message{
			llm.UserText("q"), {Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "t", Name: "a", Arguments: "[1]"}}},
		}}, "messages[1].tool_calls[0].arguments"},
		{"invalid tool arguments", llm.ChatRequest{Model: "m", Messages: []llm.Message{
			llm.UserText("q"), {Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "t", Name: "a", Arguments: "{"}}},
		}}, "messages[1].tool_calls[0].arguments"},
		{"unknown role", llm.ChatRequest{Model: "m", Messages: []llm.Message{{Role: "robot", Content: "x"}}}, "messages[0].role"},
		{"image without MIME type", llm.ChatRequest{Model: "m", Messages: []llm.Message{
			{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartImage, Data: []byte{1}}}},
		}}, "messages[0].parts[0].mime_type"},
		{"bad json_schema", llm.ChatRequest{Model: "m", Messages: user("hi"),
			ResponseFormat: &llm.ResponseFormat{Type: llm.ResponseJSONSchema}}, "response_format.schema"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Codec{}.ChatRequest(&tc.req, wire.BuildOptions{})
			var ce *llm.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v (%T), request %v; want *llm.ConfigError", err, err, r)
			}
			if ce.Field != tc.field {
				t.Errorf("Field = %q, want %q (%v)", ce.Field, tc.field, ce)
			}
		})
	}
}

func TestAuthorize(t *testing.T) {
	h := http.Header{}
	Codec{}.Authorize(h, "sk-ant-secret", wire.Quirks{})
	if h.Get("x-api-key") != "sk-ant-secret" || h.Get("anthropic-version") != "2023-06-01" {
		t.Errorf("headers = %v", h)
	}
	if h.Get("Authorization") != "" {
		t.Errorf("Authorization set: %q", h.Get("Authorization"))
	}
	Codec{}.Authorize(h, "k2", wire.Quirks{AnthropicVersion: "2099-01-01"})
	if got := h.Values("anthropic-version"); len(got) != 1 || got[0] != "2099-01-01" {
		t.Errorf("anthropic-version = %v", got)
	}
	if got := h.Values("x-api-key"); len(got) != 1 || got[0] != "k2" {
		t.Errorf("x-api-key = %v", got)
	}
}

func TestFormat(t *testing.T) {
	if f := (Codec{}).Format(); f != "anthropic" {
		t.Errorf("Format = %q", f)
	}
	if !strings.HasPrefix(DefaultBaseURL, "https://api.anthropic.com") || strings.HasSuffix(DefaultBaseURL, "/v1") {
		t.Errorf("DefaultBaseURL = %q", DefaultBaseURL)
	}
}
