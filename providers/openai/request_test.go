package openai

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

// jsonEqual compares two JSON documents structurally.
func jsonEqual(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("golden is not JSON: %v\n%s", err, want)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("body mismatch\n got: %s\nwant: %s", got, want)
	}
}

var (
	userHi   = []llm.Message{llm.UserText("hi")}
	weather  = llm.Tool{Name: "weather", Description: "Get weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}
	noParams = llm.Tool{Name: "now"}
)

func TestChatRequestBody(t *testing.T) {
	tests := []struct {
		name string
		req  llm.ChatRequest
		o    wire.BuildOptions
		want string
	}{
		{
			name: "minimal",
			req:  llm.ChatRequest{Model: "gpt-4o-mini", Messages: userHi},
			want: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`,
		},
		{
			name: "system messages stay separate",
			req: llm.ChatRequest{Model: "m", Messages: []llm.Message{
				llm.SystemText("a"), llm.SystemText("b"), llm.UserText("hi"), llm.SystemText("c"),
			}},
			want: `{"model":"m","messages":[{"role":"system","content":"a"},{"role":"system","content":"b"},{"role":"user","content":"hi"},{"role":"system","content":"c"}]}`,
		},
		{
			name: "user parts: text, inline image, image URL, PDF",
			req: llm.ChatRequest{Model: "m", Messages: []llm.Message{{
				Role: llm.RoleUser, Content: "look",
				Parts: []llm.Part{
					llm.ImagePart("image/png", []byte("PNG")),
					llm.TextPart(""),
					llm.ImageURLPart("https://example.com/cat.jpg"),
					llm.DocumentPart([]byte("%PDF")),
					llm.TextPart("thanks"),
				},
			}}},
			want: `{"model":"m","messages":[{"role":"user","content":[
				{"type":"text","text":"look"},
				{"type":"image_url","image_url":{"url":"data:image/png;base64,UE5H"}},
				{"type":"image_url","image_url":{"url":"https://example.com/cat.jpg"}},
				{"type":"file","file":{"filename":"document.pdf","file_data":"data:application/pdf;base64,JVBERg=="}},
				{"type":"text","text":"thanks"}]}]}`,
		},
		{
			name: "a single text part is plain text, several are parts",
			req: llm.ChatRequest{Model: "m", Messages: []llm.Message{
				{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("one")}},
				{Role: llm.RoleUser, Content: "a", Parts: []llm.Part{llm.TextPart("b")}},
			}},
			want: `{"model":"m","messages":[{"role":"user","content":"one"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`,
		},
		{
			name: "assistant tool calls with null content, tool results",
			req: llm.ChatRequest{Model: "m", Messages: []llm.Message{
				llm.UserText("weather?"),
				{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{
					{ID: "call_1", Name: "weather", Arguments: `{"city":"Rome"}`},
					{ID: "call_2", Name: "now"},
				}},
				llm.ToolResult("call_1", "31C", false),
				llm.ToolResult("call_2", "clock unavailable", true),
				llm.AssistantText("It is 31C."),
			}},
			want: `{"model":"m","messages":[
				{"role":"user","content":"weather?"},
				{"role":"assistant","content":null,"tool_calls":[
					{"id":"call_1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Rome\"}"}},
					{"id":"call_2","type":"function","function":{"name":"now","arguments":"{}"}}]},
				{"role":"tool","tool_call_id":"call_1","content":"31C"},
				{"role":"tool","tool_call_id":"call_2","content":"clock unavailable"},
				{"role":"assistant","content":"It is 31C."}]}`,
		},
		{
			name: "tool result images follow the run of tool messages",
			req: llm.ChatRequest{Model: "m", Messages: []llm.Message{
				llm.UserText("draw"),
				{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "a", Name: "draw"}, {ID: "b", Name: "draw"}}},
				{Role: llm.RoleTool, ToolCallID: "a", Parts: []llm.Part{llm.ImagePart("image/png", []byte("PNG"))}},
				{Role: llm.RoleTool, ToolCallID: "b", Content: "done", Parts: []llm.Part{llm.TextPart("twice")}},
			}},
			want: `{"model":"m","messages":[
				{"role":"user","content":"draw"},
				{"role":"assistant","content":null,"tool_calls":[
					{"id":"a","type":"function","function":{"name":"draw","arguments":"{}"}},
					{"id":"b","type":"function","function":{"name":"draw","arguments":"{}"}}]},
				{"role":"tool","tool_call_id":"a","content":"(image result attached below)"},
				{"role":"tool","tool_call_id":"b","content":"done\ntwice"},
				{"role":"user","content":[
					{"type":"text","text":"Images returned by tool call a:"},
					{"type":"image_url","image_url":{"url":"data:image/png;base64,UE5H"}}]}]}`,
		},
		{
			name: "reasoning echoed when present",
			req: llm.ChatRequest{Model: "m", Messages: []llm.Message{
				llm.UserText("q"),
				{Role: llm.RoleAssistant, Content: "a", Reasoning: "thought"},
				{Role: llm.RoleAssistant, Content: "b"},
				llm.UserText("q2"),
			}},
			want: `{"model":"m","messages":[{"role":"user","content":"q"},
				{"role":"assistant","content":"a","reasoning_content":"thought"},
				{"role":"assistant","content":"b"},
				{"role":"user","content":"q2"}]}`,
		},
		{
			name: "EchoReasoningWithTools with tools echoes empty reasoning",
			req: llm.ChatRequest{Model: "deepseek-reasoner", Tools: []llm.Tool{noParams}, Messages: []llm.Message{
				llm.UserText("q"),
				{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c", Name: "now", Arguments: "{}"}}},
				llm.ToolResult("c", "noon", false),
			}},
			o: wire.BuildOptions{Quirks: wire.Quirks{EchoReasoningWithTools: true}},
			want: `{"model":"deepseek-reasoner","messages":[{"role":"user","content":"q"},
				{"role":"assistant","content":null,"reasoning_content":"","tool_calls":[{"id":"c","type":"function","function":{"name":"now","arguments":"{}"}}]},
				{"role":"tool","tool_call_id":"c","content":"noon"}],
				"tools":[{"type":"function","function":{"name":"now","parameters":{"type":"object"}}}]}`,
		},
		{
			name: "EchoReasoningWithTools without tools echoes nothing",
			req: llm.ChatRequest{Model: "m", Messages: []llm.Message{
				llm.UserText("q"), llm.AssistantText("a"), llm.UserText("q2"),
			}},
			o:    wire.BuildOptions{Quirks: wire.Quirks{EchoReasoningWithTools: true}},
			want: `{"model":"m","messages":[{"role":"user","content":"q"},{"role":"assistant","content":"a"},{"role":"user","content":"q2"}]}`,
		},
		{
			name: "tools, strict, named tool choice, parallel calls",
			req: llm.ChatRequest{Model: "m", Messages: userHi,
				Tools:             []llm.Tool{weather, {Name: "s", Parameters: json.RawMessage(`{"type":"object"}`), Strict: true}},
				ToolChoice:        llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: "weather"},
				ParallelToolCalls: llm.Ptr(false),
			},
			want: `{"model":"m","messages":[{"role":"user","content":"hi"}],
				"tools":[
					{"type":"function","function":{"name":"weather","description":"Get weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}},
					{"type":"function","function":{"name":"s","parameters":{"type":"object"},"strict":true}}],
				"tool_choice":{"type":"function","function":{"name":"weather"}},
				"parallel_tool_calls":false}`,
		},
		{
			name: "parallel_tool_calls needs tools",
			req:  llm.ChatRequest{Model: "m", Messages: userHi, ParallelToolCalls: llm.Ptr(true), ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceNone}},
			want: `{"model":"m","messages":[{"role":"user","content":"hi"}],"tool_choice":"none"}`,
		},
		{
			name: "parallel_tool_calls dropped once learned",
			req:  llm.ChatRequest{Model: "m", Messages: userHi, Tools: []llm.Tool{noParams}, ParallelToolCalls: llm.Ptr(true), ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceRequired}},
			o:    wire.BuildOptions{Learned: wire.Learned{NoParallelToolCalls: true}},
			want: `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"now","parameters":{"type":"object"}}}],"tool_choice":"required"}`,
		},
		{
			name: "tool_choice auto",
			req:  llm.ChatRequest{Model: "m", Messages: userHi, Tools: []llm.Tool{noParams}, ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceAuto}},
			want: `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"now","parameters":{"type":"object"}}}],"tool_choice":"auto"}`,
		},
		{
			name: "json_object",
			req:  llm.ChatRequest{Model: "m", Messages: userHi, ResponseFormat: &llm.ResponseFormat{Type: llm.ResponseJSONObject}},
			want: `{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_object"}}`,
		},
		{
			name: "json_schema with the default name",
			req: llm.ChatRequest{Model: "m", Messages: userHi, ResponseFormat: &llm.ResponseFormat{
				Type: llm.ResponseJSONSchema, Schema: json.RawMessage(`{"type":"object"}`), Strict: true,
			}},
			want: `{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"response","schema":{"type":"object"},"strict":true}}}`,
		},
		{
			name: "text format sends nothing",
			req:  llm.ChatRequest{Model: "m", Messages: userHi, ResponseFormat: &llm.ResponseFormat{Type: llm.ResponseText}},
			want: `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		},
		{
			name: "json_schema named",
			req: llm.ChatRequest{Model: "m", Messages: userHi, ResponseFormat: &llm.ResponseFormat{
				Type: llm.ResponseJSONSchema, Name: "person", Schema: json.RawMessage(`{"type":"object"}`),
			}},
			want: `{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"person","schema":{"type":"object"}}}}`,
		},
		{
			name: "sampling, stop, max_tokens",
			req: llm.ChatRequest{Model: "m", Messages: userHi, MaxTokens: 100,
				Temperature: llm.Ptr(0.0), TopP: llm.Ptr(0.9), Seed: llm.Ptr(int64(7)), Stop: []string{"END"}},
			want: `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":100,"temperature":0,"top_p":0.9,"seed":7,"stop":["END"]}`,
		},
		{
			name: "max_completion_tokens quirk and learned sampling drops",
			req: llm.ChatRequest{Model: "o3", Messages: userHi, MaxTokens: 100,
				Temperature: llm.Ptr(0.5), TopP: llm.Ptr(0.9), Seed: llm.Ptr(int64(7))},
			o:    wire.BuildOptions{Quirks: wire.Quirks{MaxCompletionTokens: true}, Learned: wire.Learned{NoTemperature: true, NoTopP: true, NoSeed: true}},
			want: `{"model":"o3","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":100}`,
		},
		{
			name: "stream with usage",
			req:  llm.ChatRequest{Model: "m", Messages: userHi},
			o:    wire.BuildOptions{Stream: true},
			want: `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`,
		},
		{
			name: "stream without stream_options (quirk)",
			req:  llm.ChatRequest{Model: "m", Messages: userHi},
			o:    wire.BuildOptions{Stream: true, Quirks: wire.Quirks{NoStreamOptions: true}},
			want: `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`,
		},
		{
			name: "stream without stream_options (learned)",
			req:  llm.ChatRequest{Model: "m", Messages: userHi},
			o:    wire.BuildOptions{Stream: true, Learned: wire.Learned{NoStreamOptions: true}},
			want: `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`,
		},
		{
			name: "thinking object: none disables",
			req:  llm.ChatRequest{Model: "deepseek-chat", Messages: userHi, Reasoning: &llm.Reasoning{Effort: llm.EffortNone}},
			o:    wire.BuildOptions{Quirks: wire.Quirks{ThinkingObject: true, ReasoningEffort: true}},
			want: `{"model":"deepseek-chat","messages":[{"role":"user","content":"hi"}],"thinking":{"type":"disabled"}}`,
		},
		{
			name: "thinking object alone: effort enables",
			req:  llm.ChatRequest{Model: "deepseek-chat", Messages: userHi, Reasoning: &llm.Reasoning{Effort: llm.EffortLow}},
			o:    wire.BuildOptions{Quirks: wire.Quirks{ThinkingObject: true}},
			want: `{"model":"deepseek-chat","messages":[{"role":"user","content":"hi"}],"thinking":{"type":"enabled"}}`,
		},
		{
			name: "thinking object with reasoning_effort: max becomes high",
			req:  llm.ChatRequest{Model: "glm-4.7", Messages: userHi, Reasoning: &llm.Reasoning{Effort: llm.EffortMax}},
			o:    wire.BuildOptions{Quirks: wire.Quirks{ThinkingObject: true, ReasoningEffort: true}},
			want: `{"model":"glm-4.7","messages":[{"role":"user","content":"hi"}],"thinking":{"type":"enabled"},"reasoning_effort":"high"}`,
		},
		{
			name: "thinking object with reasoning_effort learned away",
			req:  llm.ChatRequest{Model: "glm-4.7", Messages: userHi, Reasoning: &llm.Reasoning{Effort: llm.EffortMedium}},
			o:    wire.BuildOptions{Quirks: wire.Quirks{ThinkingObject: true, ReasoningEffort: true}, Learned: wire.Learned{NoReasoningEffort: true}},
			want: `{"model":"glm-4.7","messages":[{"role":"user","content":"hi"}],"thinking":{"type":"enabled"}}`,
		},
		{
			name: "reasoning_effort none",
			req:  llm.ChatRequest{Model: "gpt-5", Messages: userHi, Reasoning: &llm.Reasoning{Effort: llm.EffortNone}},
			o:    wire.BuildOptions{Quirks: wire.Quirks{ReasoningEffort: true}},
			want: `{"model":"gpt-5","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"none"}`,
		},
		{
			name: "reasoning_effort max becomes high",
			req:  llm.ChatRequest{Model: "gpt-5", Messages: userHi, Reasoning: &llm.Reasoning{Effort: llm.EffortMax}},
			o:    wire.BuildOptions{Quirks: wire.Quirks{ReasoningEffort: true}},
			want: `{"model":"gpt-5","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"high"}`,
		},
		{
			name: "reasoning_effort learned away",
			req:  llm.ChatRequest{Model: "gpt-5", Messages: userHi, Reasoning: &llm.Reasoning{Effort: llm.EffortLow}},
			o:    wire.BuildOptions{Quirks: wire.Quirks{ReasoningEffort: true}, Learned: wire.Learned{NoReasoningEffort: true}},
			want: `{"model":"gpt-5","messages":[{"role":"user","content":"hi"}]}`,
		},
		{
			name: "no reasoning quirks: nothing sent",
			req:  llm.ChatRequest{Model: "kimi-k2", Messages: userHi, Reasoning: &llm.Reasoning{Effort: llm.EffortHigh, BudgetTokens: 5000}},
			want: `{"model":"kimi-k2","messages":[{"role":"user","content":"hi"}]}`,
		},
		{
			name: "include_reasoning",
			req:  llm.ChatRequest{Model: "m", Messages: userHi},
			o:    wire.BuildOptions{Quirks: wire.Quirks{IncludeReasoning: true}},
			want: `{"model":"m","messages":[{"role":"user","content":"hi"}],"include_reasoning":true}`,
		},
		{
			name: "include_reasoning not sent when reasoning is off",
			req:  llm.ChatRequest{Model: "m", Messages: userHi, Reasoning: &llm.Reasoning{Effort: llm.EffortNone}},
			o:    wire.BuildOptions{Quirks: wire.Quirks{IncludeReasoning: true}},
			want: `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		},
		{
			name: "assistant refusal and text parts",
			req: llm.ChatRequest{Model: "m", Messages: []llm.Message{
				llm.UserText("q"), {Role: llm.RoleAssistant, Refusal: "no"}, llm.UserText("q2"),
			}},
			want: `{"model":"m","messages":[{"role":"user","content":"q"},{"role":"assistant","content":null,"refusal":"no"},{"role":"user","content":"q2"}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Codec{}.ChatRequest(&tt.req, tt.o)
			if err != nil {
				t.Fatalf("ChatRequest: %v", err)
			}
			if r.Method != http.MethodPost || r.Path != "/chat/completions" {
				t.Errorf("request line = %s %s", r.Method, r.Path)
			}
			jsonEqual(t, r.Body, tt.want)
		})
	}
}

func TestChatRequestHeaders(t *testing.T) {
	req := &llm.ChatRequest{Model: "m", Messages: userHi, Headers: map[string]string{"X-Title": "chorus", "http-referer": "https://example.com"}}
	r, err := Codec{}.ChatRequest(req, wire.BuildOptions{Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Header.Get("X-Title"); got != "chorus" {
		t.Errorf("X-Title = %q", got)
	}
	if got := r.Header.Get("Http-Referer"); got != "https://example.com" {
		t.Errorf("Http-Referer = %q", got)
	}
	if r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Accept") != "text/event-stream" {
		t.Errorf("framing headers = %v", r.Header)
	}
	if r.Header.Get("Authorization") != "" {
		t.Error("ChatRequest must not authorize")
	}
	r, err = Codec{}.ChatRequest(req, wire.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Header.Get("Accept") != "application/json" {
		t.Errorf("buffered Accept = %q", r.Header.Get("Accept"))
	}
}

func TestChatRequestErrors(t *testing.T) {
	schema := &llm.ResponseFormat{Type: llm.ResponseJSONSchema, Schema: json.RawMessage(`{"type":"object"}`)}
	tests := []struct {
		name  string
		req   *llm.ChatRequest
		o     wire.BuildOptions
		field string
	}{
		{"nil request", nil, wire.BuildOptions{}, "request"},
		{"empty model", &llm.ChatRequest{Messages: userHi}, wire.BuildOptions{}, "model"},
		{"json_schema under NoJSONSchema", &llm.ChatRequest{Model: "deepseek-chat", Messages: userHi, ResponseFormat: schema},
			wire.BuildOptions{Provider: "deepseek", Quirks: wire.Quirks{NoJSONSchema: true}}, "response_format.type"},
		{"json_schema without schema", &llm.ChatRequest{Model: "m", Messages: userHi, ResponseFormat: &llm.ResponseFormat{Type: llm.ResponseJSONSchema}},
			wire.BuildOptions{}, "response_format.schema"},
		{"unknown response format", &llm.ChatRequest{Model: "m", Messages: userHi, ResponseFormat: &llm.ResponseFormat{Type: "yaml"}},
			wire.BuildOptions{}, "response_format.type"},
		{"unknown role", &llm.ChatRequest{Model: "m", Messages: []llm.Message{{Role: "wizard", Content: "x"}}}, wire.BuildOptions{}, "messages[0].role"},
		{"tool message without id", &llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("q"), {Role: llm.RoleTool, Content: "x"}}},
			wire.BuildOptions{}, "messages[1].tool_call_id"},
		{"tool calls on a user message", &llm.ChatRequest{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: "q", ToolCalls: []llm.ToolCall{{ID: "a", Name: "b"}}}}},
			wire.BuildOptions{}, "messages[0].tool_calls"},
		{"assistant call without id", &llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("q"), {Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{Name: "b"}}}}},
			wire.BuildOptions{}, "messages[1].tool_calls[0].id"},
		{"assistant call without name", &llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("q"), {Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "a"}}}}},
			wire.BuildOptions{}, "messages[1].tool_calls[0].name"},
		{"image in a system message", &llm.ChatRequest{Model: "m", Messages: []llm.Message{{Role: llm.RoleSystem, Parts: []llm.Part{llm.ImageURLPart("https://x/y.png")}}, llm.UserText("q")}},
			wire.BuildOptions{}, "messages[0].parts[0].type"},
		{"image without data or URL", &llm.ChatRequest{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartImage}}}}},
			wire.BuildOptions{}, "messages[0].parts[0]"},
		{"inline image without MIME type", &llm.ChatRequest{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartImage, Data: []byte("x")}}}}},
			wire.BuildOptions{}, "messages[0].parts[0].mime_type"},
		{"document that is not a PDF", &llm.ChatRequest{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartDocument, MIMEType: "text/csv", Data: []byte("a,b")}}}}},
			wire.BuildOptions{}, "messages[0].parts[0].mime_type"},
		{"unknown part type", &llm.ChatRequest{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Type: "audio", Data: []byte("x")}}}}},
			wire.BuildOptions{}, "messages[0].parts[0].type"},
		{"tool without name", &llm.ChatRequest{Model: "m", Messages: userHi, Tools: []llm.Tool{{}}}, wire.BuildOptions{}, "tools[0].name"},
		{"tool parameters not JSON", &llm.ChatRequest{Model: "m", Messages: userHi, Tools: []llm.Tool{{Name: "x", Parameters: json.RawMessage(`{`)}}},
			wire.BuildOptions{}, "tools[0].parameters"},
		{"named tool choice without name", &llm.ChatRequest{Model: "m", Messages: userHi, ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceTool}},
			wire.BuildOptions{}, "tool_choice.name"},
		{"unknown tool choice", &llm.ChatRequest{Model: "m", Messages: userHi, ToolChoice: llm.ToolChoice{Mode: "any"}},
			wire.BuildOptions{}, "tool_choice.mode"},
		{"unknown effort", &llm.ChatRequest{Model: "m", Messages: userHi, Reasoning: &llm.Reasoning{Effort: "extreme"}},
			wire.BuildOptions{Quirks: wire.Quirks{ReasoningEffort: true}}, "reasoning.effort"},
		{"negative max tokens", &llm.ChatRequest{Model: "m", Messages: userHi, MaxTokens: -1}, wire.BuildOptions{}, "max_tokens"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Codec{}.ChatRequest(tt.req, tt.o)
			var ce *llm.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v (request %v), want *llm.ConfigError", err, r)
			}
			if ce.Field != tt.field {
				t.Errorf("Field = %q, want %q (%v)", ce.Field, tt.field, err)
			}
		})
	}
}

func TestNoJSONSchemaNamesProvider(t *testing.T) {
	req := &llm.ChatRequest{Model: "m", Messages: userHi, ResponseFormat: &llm.ResponseFormat{Type: llm.ResponseJSONSchema, Schema: json.RawMessage(`{}`)}}
	_, err := Codec{}.ChatRequest(req, wire.BuildOptions{Provider: "deepseek", Quirks: wire.Quirks{NoJSONSchema: true}})
	if err == nil || !strings.Contains(err.Error(), "deepseek") || !strings.Contains(err.Error(), "json_object") {
		t.Errorf("err = %v", err)
	}
}

func TestAuthorize(t *testing.T) {
	h := http.Header{}
	Codec{}.Authorize(h, "sk-test", wire.Quirks{})
	if got := h.Get("Authorization"); got != "Bearer sk-test" {
		t.Errorf("Authorization = %q", got)
	}
	h = http.Header{}
	Codec{}.Authorize(h, "", wire.Quirks{})
	if len(h) != 0 {
		t.Errorf("empty key set headers: %v", h)
	}
	if (Codec{}).Format() != "openai" {
		t.Error("Format")
	}
}
