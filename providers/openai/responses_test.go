package openai

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

func TestResponsesRequestBody(t *testing.T) {
	calls := []llm.ToolCall{{ID: "call_a", Name: "weather", Arguments: `{"city":"Rome"}`}, {ID: "call_b", Name: "now"}}
	tests := []struct {
		name string
		req  llm.ChatRequest
		o    wire.BuildOptions
		c    ResponsesCodec
		want string
	}{
		{
			name: "minimal: stateless, encrypted reasoning requested",
			req:  llm.ChatRequest{Model: "gpt-5", Messages: userHi},
			want: `{"model":"gpt-5","input":[{"role":"user","content":"hi"}],"store":false,"include":["reasoning.encrypted_content"]}`,
		},
		{
			name: "streaming; include left out once the model rejected it",
			req:  llm.ChatRequest{Model: "gpt-4o", Messages: userHi},
			o:    wire.BuildOptions{Stream: true},
			c:    ResponsesCodec{NoEncryptedReasoning: true},
			want: `{"model":"gpt-4o","input":[{"role":"user","content":"hi"}],"store":false,"stream":true}`,
		},
		{
			name: "system messages become instructions",
			req: llm.ChatRequest{Model: "m", Messages: []llm.Message{
				llm.SystemText("be brief"), llm.UserText("hi"), {Role: llm.RoleSystem, Parts: []llm.Part{llm.TextPart("be kind")}},
			}},
			want: `{"model":"m","instructions":"be brief\n\nbe kind","input":[{"role":"user","content":"hi"}],"store":false,"include":["reasoning.encrypted_content"]}`,
		},
		{
			name: "user parts: text, inline image, image URL, PDF",
			req: llm.ChatRequest{Model: "m", Messages: []llm.Message{{
				Role: llm.RoleUser, Content: "look",
				Parts: []llm.Part{llm.ImagePart("image/png", []byte("PNG")), llm.ImageURLPart("https://x/y.jpg"), llm.TextPart(""), llm.DocumentPart([]byte("%PDF"))},
			}}},
			want: `{"model":"m","input":[{"role":"user","content":[
				{"type":"input_text","text":"look"},
				{"type":"input_image","image_url":"data:image/png;base64,UE5H","detail":"auto"},
				{"type":"input_image","image_url":"https://x/y.jpg","detail":"auto"},
				{"type":"input_file","filename":"document.pdf","file_data":"data:application/pdf;base64,JVBERg=="}]}],
				"store":false,"include":["reasoning.encrypted_content"]}`,
		},
		{
			name: "several text parts stay parts",
			req:  llm.ChatRequest{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: "a", Parts: []llm.Part{llm.TextPart("b")}}}},
			want: `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]}],"store":false,"include":["reasoning.encrypted_content"]}`,
		},
		{
			name: "tool turn: function calls, outputs, empty arguments as {}",
			req: llm.ChatRequest{Model: "m", Messages: []llm.Message{
				llm.UserText("hi"),
				{Role: llm.RoleAssistant, ToolCalls: calls},
				llm.ToolResult("call_a", "sunny", false),
				llm.ToolResult("call_b", "boom", true),
			}},
			want: `{"model":"m","input":[{"role":"user","content":"hi"},
				{"type":"function_call","call_id":"call_a","name":"weather","arguments":"{\"city\":\"Rome\"}"},
				{"type":"function_call","call_id":"call_b","name":"now","arguments":"{}"},
				{"type":"function_call_output","call_id":"call_a","output":"sunny"},
				{"type":"function_call_output","call_id":"call_b","output":"boom"}],
				"store":false,"include":["reasoning.encrypted_content"]}`,
		},
		{
			name: "tool result with an image sends parts",
			req: llm.ChatRequest{Model: "m", Messages: []llm.Message{
				llm.UserText("hi"), {Role: llm.RoleAssistant, ToolCalls: calls[:1]},
				{Role: llm.RoleTool, ToolCallID: "call_a", Content: "chart", Parts: []llm.Part{llm.ImagePart("image/png", []byte("PNG"))}},
			}},
			want: `{"model":"m","input":[{"role":"user","content":"hi"},
				{"type":"function_call","call_id":"call_a","name":"weather","arguments":"{\"city\":\"Rome\"}"},
				{"type":"function_call_output","call_id":"call_a","output":[{"type":"input_text","text":"chart"},{"type":"input_image","image_url":"data:image/png;base64,UE5H","detail":"auto"}]}],
				"store":false,"include":["reasoning.encrypted_content"]}`,
		},
		{
			name: "assistant text without a paired reasoning item is an easy message; refusal keeps its part",
			req: llm.ChatRequest{Model: "m", Messages: []llm.Message{
				llm.UserText("hi"), llm.AssistantText("hello"), llm.UserText("bad"), {Role: llm.RoleAssistant, Refusal: "no"}, llm.UserText("ok"),
			}},
			want: `{"model":"m","input":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},{"role":"user","content":"bad"},
				{"type":"message","role":"assistant","status":"completed","content":[{"type":"refusal","refusal":"no"}]},{"role":"user","content":"ok"}],
				"store":false,"include":["reasoning.encrypted_content"]}`,
		},
		{
			name: "flat tools, strict explicit, choice, parallel calls, limits, sampling",
			req: llm.ChatRequest{Model: "m", Messages: userHi, Tools: []llm.Tool{weather, {Name: "now", Strict: true}},
				ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: "now"}, ParallelToolCalls: llm.Ptr(false),
				MaxTokens: 300, Temperature: llm.Ptr(0.5), TopP: llm.Ptr(0.9), Seed: llm.Ptr(int64(7))},
			want: `{"model":"m","input":[{"role":"user","content":"hi"}],
				"tools":[{"type":"function","name":"weather","description":"Get weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}},"strict":false},
				         {"type":"function","name":"now","parameters":{"type":"object"},"strict":true}],
				"tool_choice":{"type":"function","name":"now"},"parallel_tool_calls":false,"max_output_tokens":300,"temperature":0.5,"top_p":0.9,
				"store":false,"include":["reasoning.encrypted_content"]}`,
		},
		{
			name: "learned-off parameters are dropped",
			req: llm.ChatRequest{Model: "m", Messages: userHi, Tools: []llm.Tool{weather}, ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceRequired},
				ParallelToolCalls: llm.Ptr(true), Temperature: llm.Ptr(0.5), TopP: llm.Ptr(0.9)},
			o: wire.BuildOptions{Learned: wire.Learned{NoParallelToolCalls: true, NoTemperature: true, NoTopP: true}},
			want: `{"model":"m","input":[{"role":"user","content":"hi"}],
				"tools":[{"type":"function","name":"weather","description":"Get weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}},"strict":false}],
				"tool_choice":"required","store":false,"include":["reasoning.encrypted_content"]}`,
		},
		{
			name: "parallel_tool_calls only with tools",
			req:  llm.ChatRequest{Model: "m", Messages: userHi, ParallelToolCalls: llm.Ptr(true), ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceNone}},
			want: `{"model":"m","input":[{"role":"user","content":"hi"}],"tool_choice":"none","store":false,"include":["reasoning.encrypted_content"]}`,
		},
		{
			name: "reasoning effort with summary",
			req:  llm.ChatRequest{Model: "m", Messages: userHi, Reasoning: &llm.Reasoning{Effort: llm.EffortHigh}},
			want: `{"model":"m","input":[{"role":"user","content":"hi"}],"reasoning":{"effort":"high","summary":"auto"},"store":false,"include":["reasoning.encrypted_content"]}`,
		},
		{
			name: "max effort is high",
			req:  llm.ChatRequest{Model: "m", Messages: userHi, Reasoning: &llm.Reasoning{Effort: llm.EffortMax}},
			want: `{"model":"m","input":[{"role":"user","content":"hi"}],"reasoning":{"effort":"high","summary":"auto"},"store":false,"include":["reasoning.encrypted_content"]}`,
		},
		{
			name: "effort none: no summary",
			req:  llm.ChatRequest{Model: "m", Messages: userHi, Reasoning: &llm.Reasoning{Effort: llm.EffortNone}},
			want: `{"model":"m","input":[{"role":"user","content":"hi"}],"reasoning":{"effort":"none"},"store":false,"include":["reasoning.encrypted_content"]}`,
		},
		{
			name: "reasoning without an effort asks for the summary only",
			req:  llm.ChatRequest{Model: "m", Messages: userHi, Reasoning: &llm.Reasoning{IncludeThoughts: true}},
			want: `{"model":"m","input":[{"role":"user","content":"hi"}],"reasoning":{"summary":"auto"},"store":false,"include":["reasoning.encrypted_content"]}`,
		},
		{
			name: "json_schema text format",
			req: llm.ChatRequest{Model: "m", Messages: userHi, ResponseFormat: &llm.ResponseFormat{Type: llm.ResponseJSONSchema, Name: "Person",
				Schema: json.RawMessage(`{"type":"object"}`), Strict: true}},
			want: `{"model":"m","input":[{"role":"user","content":"hi"}],"text":{"format":{"type":"json_schema","name":"Person","schema":{"type":"object"},"strict":true}},"store":false,"include":["reasoning.encrypted_content"]}`,
		},
		{
			name: "json_object text format",
			req:  llm.ChatRequest{Model: "m", Messages: userHi, ResponseFormat: &llm.ResponseFormat{Type: llm.ResponseJSONObject}},
			want: `{"model":"m","input":[{"role":"user","content":"hi"}],"text":{"format":{"type":"json_object"}},"store":false,"include":["reasoning.encrypted_content"]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := tt.c.ChatRequest(&tt.req, tt.o)
			if err != nil {
				t.Fatal(err)
			}
			if r.Path != "/responses" || r.Method != "POST" {
				t.Fatalf("%s %s", r.Method, r.Path)
			}
			wantAccept := "application/json"
			if tt.o.Stream {
				wantAccept = "text/event-stream"
			}
			if r.Header.Get("Accept") != wantAccept || r.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("headers %v", r.Header)
			}
			jsonEqual(t, r.Body, tt.want)
		})
	}
}

func TestResponsesRequestErrors(t *testing.T) {
	tests := []struct {
		req   llm.ChatRequest
		o     wire.BuildOptions
		field string
	}{
		{llm.ChatRequest{Messages: userHi}, wire.BuildOptions{}, "model"},
		{llm.ChatRequest{Model: "m", Messages: userHi, Stop: []string{"END"}}, wire.BuildOptions{}, "stop"},
		{llm.ChatRequest{Model: "m", Messages: []llm.Message{{Role: "bot", Content: "x"}}}, wire.BuildOptions{}, "messages[0].role"},
		{llm.ChatRequest{Model: "m", Messages: []llm.Message{{Role: llm.RoleTool, Content: "x"}}}, wire.BuildOptions{}, "messages[0].tool_call_id"},
		{llm.ChatRequest{Model: "m", Messages: []llm.Message{{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{Name: "f"}}}}}, wire.BuildOptions{}, "messages[0].tool_calls[0].id"},
		{llm.ChatRequest{Model: "m", Messages: []llm.Message{{Role: llm.RoleSystem, Parts: []llm.Part{llm.ImageURLPart("u")}}}}, wire.BuildOptions{}, "messages[0].parts[0].type"},
		{llm.ChatRequest{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartImage, Data: []byte("x")}}}}}, wire.BuildOptions{}, "messages[0].parts[0].mime_type"},
		{llm.ChatRequest{Model: "m", Messages: userHi, Tools: []llm.Tool{{Name: "t", Parameters: json.RawMessage(`{`)}}}, wire.BuildOptions{}, "tools[0].parameters"},
		{llm.ChatRequest{Model: "m", Messages: userHi, ToolChoice: llm.ToolChoice{Mode: "any"}}, wire.BuildOptions{}, "tool_choice.mode"},
		{llm.ChatRequest{Model: "m", Messages: userHi, Reasoning: &llm.Reasoning{Effort: "extreme"}}, wire.BuildOptions{}, "reasoning.effort"},
		{llm.ChatRequest{Model: "m", Messages: userHi, MaxTokens: -1}, wire.BuildOptions{}, "max_tokens"},
		{llm.ChatRequest{Model: "m", Messages: userHi, ResponseFormat: &llm.ResponseFormat{Type: llm.ResponseJSONSchema, Schema: json.RawMessage(`{}`)}},
			wire.BuildOptions{Provider: "deepseek", Quirks: wire.Quirks{NoJSONSchema: true}}, "response_format.type"},
	}
	for _, tt := range tests {
		_, err := ResponsesCodec{}.ChatRequest(&tt.req, tt.o)
		var ce *llm.ConfigError
		if !errors.As(err, &ce) || ce.Field != tt.field {
			t.Errorf("want ConfigError on %s, got %v", tt.field, err)
		}
	}
}

// replayInput builds the next request from history and returns its input
// items decoded generically.
func replayInput(t *testing.T, c ResponsesCodec, history []llm.Message) []map[string]any {
	t.Helper()
	r, err := c.ChatRequest(&llm.ChatRequest{Model: "m", Messages: history}, wire.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Input []map[string]any `json:"input"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatal(err)
	}
	return body.Input
}

// itemSummary renders input items as "type:key" for order checks.
func itemSummary(items []map[string]any) string {
	var parts []string
	for _, it := range items {
		ty, _ := it["type"].(string)
		if ty == "" {
			ty = "easy"
		}
		key := ""
		for _, k := range []string{"id", "call_id", "role"} {
			if s, ok := it[k].(string); ok && s != "" {
				key = s
				break
			}
		}
		parts = append(parts, ty+":"+key)
	}
	return strings.Join(parts, " ")
}

func TestResponsesReasoningReplayOrder(t *testing.T) {
	rb := func(id, data, sig string) llm.ThinkingBlock {
		return llm.ThinkingBlock{Format: ResponsesFormat, ID: id, Data: data, Text: "thought " + id, Signature: sig}
	}
	calls := []llm.ToolCall{{ID: "c1", Name: "f", Arguments: "{}"}, {ID: "c2", Name: "f", Arguments: "{}"}, {ID: "c3", Name: "f", Arguments: "{}"}}
	tests := []struct {
		name string
		msg  llm.Message
		c    ResponsesCodec
		want string
	}{
		{
			name: "each reasoning item goes back in front of the item it preceded",
			msg: llm.Message{Role: llm.RoleAssistant, ToolCalls: calls, ThinkingBlocks: []llm.ThinkingBlock{
				rb("rs_1", "e1", "function_call:c1"), rb("rs_2", "e2", "function_call:c3"),
			}},
			want: "reasoning:rs_1 function_call:c1 function_call:c2 reasoning:rs_2 function_call:c3",
		},
		{
			name: "a message keeps its original id after its reasoning",
			msg: llm.Message{Role: llm.RoleAssistant, Content: "hi", ThinkingBlocks: []llm.ThinkingBlock{
				rb("rs_1", "e1", "message:msg_9"),
			}},
			want: "reasoning:rs_1 message:msg_9",
		},
		{
			name: "foreign, unsigned and orphaned blocks are skipped; unpaired ones go first",
			msg: llm.Message{Role: llm.RoleAssistant, Content: "hi", ToolCalls: calls[:1], ThinkingBlocks: []llm.ThinkingBlock{
				{Format: "anthropic", Text: "t", Signature: "sig"},
				rb("rs_nodata", "", "function_call:c1"),
				rb("rs_ws", "e", "web_search_call:ws_1"),
				rb("rs_gone", "e", "function_call:c_unknown"),
				rb("rs_free", "e", ""),
				rb("rs_1", "e1", "function_call:c1"),
			}},
			want: "reasoning:rs_free easy:assistant reasoning:rs_1 function_call:c1",
		},
		{
			name: "a model without encrypted reasoning gets none replayed",
			c:    ResponsesCodec{NoEncryptedReasoning: true},
			msg: llm.Message{Role: llm.RoleAssistant, ToolCalls: calls[:1], ThinkingBlocks: []llm.ThinkingBlock{
				rb("rs_1", "e1", "function_call:c1"),
			}},
			want: "function_call:c1",
		},
	}
	for _, tt := range tests {
		items := replayInput(t, tt.c, []llm.Message{llm.UserText("q"), tt.msg})
		if got := itemSummary(items[1:]); got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}
	// The replayed reasoning item carries the encrypted content and summary.
	items := replayInput(t, ResponsesCodec{}, []llm.Message{llm.UserText("q"), tests[1].msg})
	ri, msg := items[1], items[2]
	sum, _ := ri["summary"].([]any)
	if ri["encrypted_content"] != "e1" || len(sum) != 1 || sum[0].(map[string]any)["text"] != "thought rs_1" {
		t.Errorf("reasoning item %v", ri)
	}
	content, _ := msg["content"].([]any)
	if msg["status"] != "completed" || msg["role"] != "assistant" || len(content) != 1 || content[0].(map[string]any)["type"] != "output_text" || content[0].(map[string]any)["text"] != "hi" {
		t.Errorf("message item %v", msg)
	}
}

func TestResponsesParseChat(t *testing.T) {
	body := `{"id":"resp_1","object":"response","status":"completed","model":"gpt-5-x","error":null,"incomplete_details":null,
	  "output":[
	    {"id":"rs_1","type":"reasoning","encrypted_content":"ENC1","summary":[{"type":"summary_text","text":"first"},{"type":"summary_text","text":"second"}]},
	    {"id":"msg_1","type":"message","role":"assistant","content":[{"type":"output_text","text":"Hello ","annotations":[]},{"type":"output_text","text":"there"}]},
	    {"id":"rs_2","type":"reasoning","encrypted_content":"ENC2","summary":[]},
	    {"id":"fc_1","type":"function_call","call_id":"call_1","name":"f","arguments":"{\"a\":1}"},
	    {"id":"ws_1","type":"web_search_call","status":"completed"},
	    {"id":"fc_2","type":"function_call","call_id":"call_2","name":"g","arguments":""}],
	  "usage":{"input_tokens":100,"input_tokens_details":{"cached_tokens":60},"output_tokens":40,"output_tokens_details":{"reasoning_tokens":30},"total_tokens":140}}`
	res, err := ResponsesCodec{}.ParseChat([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if res.ID != "resp_1" || res.Model != "gpt-5-x" || res.Content != "Hello there" || res.Reasoning != "first\n\nsecond" {
		t.Errorf("result %+v", res)
	}
	wantBlocks := []llm.ThinkingBlock{
		{Format: ResponsesFormat, ID: "rs_1", Text: "first\n\nsecond", Data: "ENC1", Signature: "message:msg_1"},
		{Format: ResponsesFormat, ID: "rs_2", Data: "ENC2", Signature: "function_call:call_1"},
	}
	if len(res.ThinkingBlocks) != 2 || res.ThinkingBlocks[0] != wantBlocks[0] || res.ThinkingBlocks[1] != wantBlocks[1] {
		t.Errorf("blocks %+v", res.ThinkingBlocks)
	}
	if len(res.ToolCalls) != 2 || res.ToolCalls[0] != (llm.ToolCall{ID: "call_1", Name: "f", Arguments: `{"a":1}`}) || res.ToolCalls[1].Arguments != "{}" {
		t.Errorf("calls %+v", res.ToolCalls)
	}
	if res.FinishReason != llm.FinishToolCalls {
		t.Errorf("finish %q", res.FinishReason)
	}
	if (res.Usage != llm.Usage{PromptTokens: 40, CacheReadTokens: 60, CompletionTokens: 40, ReasoningTokens: 30}) {
		t.Errorf("usage %+v", res.Usage)
	}

	// Refusal and DeepSeek's raw reasoning text.
	res, err = ResponsesCodec{}.ParseChat([]byte(`{"status":"completed","output":[
	  {"type":"reasoning","id":"r","content":[{"type":"reasoning_text","text":"raw"}],"summary":[],"encrypted_content":null},
	  {"type":"message","id":"m","content":[{"type":"refusal","refusal":"I can't"}]}]}`))
	if err != nil || res.Refusal != "I can't" || res.Reasoning != "raw" || res.ThinkingBlocks[0].Data != "" || res.FinishReason != llm.FinishContentFilter {
		t.Errorf("%+v %v", res, err)
	}
}

func TestResponsesFinishTable(t *testing.T) {
	tests := []struct {
		status, reason string
		calls          int
		want           llm.FinishReason
	}{
		{"completed", "", 0, llm.FinishStop},
		{"completed", "", 2, llm.FinishToolCalls},
		{"incomplete", "max_output_tokens", 0, llm.FinishLength},
		{"incomplete", "max_output_tokens", 1, llm.FinishLength},
		{"incomplete", "content_filter", 1, llm.FinishContentFilter},
		{"incomplete", "something_new", 1, llm.FinishToolCalls},
		{"incomplete", "something_new", 0, llm.FinishLength},
		{"failed", "", 0, llm.FinishUnknown},
		{"cancelled", "", 0, llm.FinishUnknown},
		{"in_progress", "", 0, llm.FinishUnknown},
		{"queued", "", 1, llm.FinishUnknown},
	}
	for _, tt := range tests {
		if got := responsesFinish(tt.status, tt.reason, tt.calls, false); got != tt.want {
			t.Errorf("%s/%s/%d: %q, want %q", tt.status, tt.reason, tt.calls, got, tt.want)
		}
	}
	// With a refusal part: a completed answer is content_filter (tool
	// calls or not); an incomplete one keeps its reason.
	refused := []struct {
		status, reason string
		calls          int
		want           llm.FinishReason
	}{
		{"completed", "", 0, llm.FinishContentFilter},
		{"completed", "", 1, llm.FinishContentFilter},
		{"incomplete", "max_output_tokens", 0, llm.FinishLength},
		{"incomplete", "content_filter", 0, llm.FinishContentFilter},
		{"failed", "", 0, llm.FinishUnknown},
	}
	for _, tt := range refused {
		if got := responsesFinish(tt.status, tt.reason, tt.calls, true); got != tt.want {
			t.Errorf("refused %s/%s/%d: %q, want %q", tt.status, tt.reason, tt.calls, got, tt.want)
		}
	}
}

func TestResponsesParseChatErrors(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		code      string
		retryable bool
	}{
		{"error body", `{"error":{"message":"quota","type":"insufficient_quota","code":"insufficient_quota"}}`, "insufficient_quota", false},
		{"failed response", `{"id":"r","object":"response","status":"failed","error":{"code":"server_error","message":"boom"},"output":[]}`, "server_error", true},
	}
	for _, tt := range tests {
		_, err := ResponsesCodec{}.ParseChat([]byte(tt.body))
		var api *llm.APIError
		if !errors.As(err, &api) || api.Code != tt.code || api.Retryable != tt.retryable || api.Message == "" {
			t.Errorf("%s: %#v", tt.name, err)
		}
	}
	_, err := ResponsesCodec{}.ParseChat([]byte(`{"output":[`))
	var de *llm.DecodeError
	if !errors.As(err, &de) {
		t.Errorf("malformed: %v", err)
	}
}

// rxFeed feeds SSE events (name, data) to a Responses decoder.
func rxFeed(t *testing.T, events ...[2]string) (evs []llm.Event, d wire.StreamDecoder, done bool, err error) {
	t.Helper()
	d = ResponsesCodec{}.NewStreamDecoder()
	for _, e := range events {
		done, err = d.Feed([]byte(e[0]), []byte(e[1]), func(ev llm.Event) bool {
			evs = append(evs, ev)
			return true
		})
		if err != nil || done {
			return evs, d, done, err
		}
	}
	return evs, d, done, nil
}

// rx builds one event whose SSE name is its JSON type.
func rx(typ, rest string) [2]string {
	if rest != "" {
		rest = "," + rest
	}
	return [2]string{typ, `{"type":"` + typ + `"` + rest + `}`}
}

func TestResponsesStreamInterleavedCalls(t *testing.T) {
	evs, d, done, err := rxFeed(t,
		rx("response.created", `"response":{"id":"resp_9","model":"gpt-5","status":"in_progress","output":[]}`),
		rx("response.output_item.added", `"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}`),
		rx("response.reasoning_summary_text.delta", `"output_index":0,"summary_index":0,"delta":"think"`),
		rx("response.reasoning_summary_text.delta", `"output_index":0,"summary_index":1,"delta":"more"`),
		rx("response.output_item.done", `"output_index":0,"item":{"id":"rs_1","type":"reasoning","encrypted_content":"ENC","summary":[{"type":"summary_text","text":"think"},{"type":"summary_text","text":"more"}]}`),
		rx("response.output_item.added", `"output_index":1,"item":{"id":"fc_a","type":"function_call","call_id":"call_a","name":"f","arguments":""}`),
		rx("response.output_item.added", `"output_index":2,"item":{"id":"fc_b","type":"function_call","call_id":"call_b","name":"g","arguments":""}`),
		rx("response.function_call_arguments.delta", `"output_index":2,"item_id":"fc_b","delta":"{\"y\":"`),
		rx("response.function_call_arguments.delta", `"output_index":1,"item_id":"fc_a","delta":"{\"x\":1}"`),
		rx("response.function_call_arguments.delta", `"item_id":"fc_b","delta":"2}"`),
		rx("response.output_item.done", `"output_index":1,"item":{"id":"fc_a","type":"function_call","call_id":"call_a","name":"f","arguments":"{\"x\":1}"}`),
		rx("response.completed", `"response":{"id":"resp_9","status":"completed","usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":4},"output_tokens":7,"output_tokens_details":{"reasoning_tokens":5}}}`),
	)
	if err != nil || !done || !d.Complete() {
		t.Fatalf("err %v done %v", err, done)
	}
	res := d.Result()
	if res.ID != "resp_9" || res.Model != "gpt-5" || res.Reasoning != "think\n\nmore" {
		t.Errorf("result %+v", res)
	}
	if len(res.ToolCalls) != 2 || res.ToolCalls[0].Arguments != `{"x":1}` || res.ToolCalls[1].Arguments != `{"y":2}` || res.ToolCalls[1].ID != "call_b" {
		t.Errorf("calls %+v", res.ToolCalls)
	}
	if len(res.ThinkingBlocks) != 1 || res.ThinkingBlocks[0] != (llm.ThinkingBlock{Format: ResponsesFormat, ID: "rs_1", Text: "think\n\nmore", Data: "ENC", Signature: "function_call:call_a"}) {
		t.Errorf("blocks %+v", res.ThinkingBlocks)
	}
	for _, ev := range evs {
		if ev.Type == llm.EventToolCallStart || ev.Type == llm.EventToolCallDelta {
			want := map[string]int{"call_a": 0, "call_b": 1}
			if ev.Type == llm.EventToolCallStart && want[ev.ToolCallID] != ev.ToolIndex {
				t.Errorf("start %s at %d", ev.ToolCallID, ev.ToolIndex)
			}
		}
	}
	if res.FinishReason != llm.FinishToolCalls || (res.Usage != llm.Usage{PromptTokens: 6, CacheReadTokens: 4, CompletionTokens: 7, ReasoningTokens: 5}) {
		t.Errorf("finish %q usage %+v", res.FinishReason, res.Usage)
	}
	if last := evs[len(evs)-1]; last.Type != llm.EventFinish {
		t.Errorf("last event %v", last.Type)
	}
}

func TestResponsesStreamEdges(t *testing.T) {
	t.Run("incomplete: length, arguments only in done, text only in the finished item", func(t *testing.T) {
		_, d, done, err := rxFeed(t,
			rx("response.output_item.added", `"output_index":0,"item":{"id":"m","type":"message","content":[]}`),
			rx("response.output_item.done", `"output_index":0,"item":{"id":"m","type":"message","content":[{"type":"output_text","text":"whole"}]}`),
			rx("response.output_item.added", `"output_index":1,"item":{"id":"fc","type":"function_call","call_id":"c","name":"f"}`),
			rx("response.function_call_arguments.done", `"output_index":1,"arguments":"{\"k\":true}"`),
			rx("response.incomplete", `"response":{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"}}`),
		)
		res := d.Result()
		if err != nil || !done || res.Content != "whole" || res.ToolCalls[0].Arguments != `{"k":true}` || res.FinishReason != llm.FinishLength {
			t.Errorf("%+v %v", res, err)
		}
	})
	t.Run("a call whose arguments never arrive gets {}", func(t *testing.T) {
		_, d, _, err := rxFeed(t,
			rx("response.output_item.added", `"output_index":0,"item":{"id":"fc","type":"function_call","call_id":"c","name":"f","arguments":""}`),
			rx("response.completed", `"response":{"status":"completed"}`),
		)
		if res := d.Result(); err != nil || res.ToolCalls[0].Arguments != "{}" || res.FinishReason != llm.FinishToolCalls {
			t.Errorf("%+v %v", res, err)
		}
	})
	t.Run("a terminal response without deltas is replayed from its output", func(t *testing.T) {
		evs, d, _, err := rxFeed(t,
			rx("response.completed", `"response":{"status":"completed","output":[{"type":"message","id":"m","content":[{"type":"output_text","text":"all at once"}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}]}`),
		)
		if res := d.Result(); err != nil || res.Content != "all at once" || len(res.ToolCalls) != 1 || res.FinishReason != llm.FinishToolCalls || textOfEvents(evs) != "all at once" {
			t.Errorf("%+v %v", res, err)
		}
	})
	t.Run("refusal deltas", func(t *testing.T) {
		_, d, _, err := rxFeed(t,
			rx("response.output_item.added", `"output_index":0,"item":{"id":"m","type":"message"}`),
			rx("response.refusal.delta", `"output_index":0,"delta":"No."`),
			rx("response.output_item.done", `"output_index":0,"item":{"id":"m","type":"message","content":[{"type":"refusal","refusal":"No."}]}`),
			rx("response.completed", `"response":{"status":"completed"}`),
		)
		if res := d.Result(); err != nil || res.Refusal != "No." || res.Content != "" {
			t.Errorf("%+v %v", res, err)
		}
	})
	t.Run("a stream that ends early is not complete and keeps its partial reasoning block", func(t *testing.T) {
		evs, d, done, err := rxFeed(t,
			rx("response.output_item.added", `"output_index":0,"item":{"id":"rs","type":"reasoning"}`),
			rx("response.output_item.done", `"output_index":0,"item":{"id":"rs","type":"reasoning","encrypted_content":"E","summary":[]}`),
			rx("response.output_text.delta", `"output_index":1,"delta":"par"`),
		)
		res := d.Result()
		if err != nil || done || d.Complete() || len(evs) == 0 || res.Content != "par" || len(res.ThinkingBlocks) != 1 || res.ThinkingBlocks[0].Data != "E" {
			t.Errorf("%+v %v", res, err)
		}
	})
	t.Run("a gateway's [DONE] ends the stream; without a terminal event it is premature", func(t *testing.T) {
		_, d, done, err := rxFeed(t, rx("response.output_text.delta", `"output_index":0,"delta":"x"`), [2]string{"", "[DONE]"})
		if err != nil || !done || d.Complete() {
			t.Errorf("done %v complete %v err %v", done, d.Complete(), err)
		}
	})
	t.Run("malformed event", func(t *testing.T) {
		_, _, _, err := rxFeed(t, [2]string{"response.output_text.delta", `{"type":"response.output_text.delta","delta":`})
		var de *llm.DecodeError
		if !errors.As(err, &de) {
			t.Errorf("%v", err)
		}
	})
	t.Run("consumer gone", func(t *testing.T) {
		d := ResponsesCodec{}.NewStreamDecoder()
		_, err := d.Feed(nil, []byte(`{"type":"response.output_text.delta","output_index":0,"delta":"x"}`), func(llm.Event) bool { return false })
		if !errors.Is(err, wire.ErrAborted) {
			t.Errorf("%v", err)
		}
	})
}

func TestResponsesStreamErrors(t *testing.T) {
	tests := []struct {
		name      string
		ev        [2]string
		code      string
		retryable bool
	}{
		{"nested error event", rx("error", `"error":{"type":"insufficient_quota","code":"insufficient_quota","message":"You exceeded your current quota"}`), "insufficient_quota", false},
		{"top-level error event", rx("error", `"code":"server_error","message":"The server had an error","param":null`), "server_error", true},
		{"rate limit in the stream", rx("error", `"code":"rate_limit_exceeded","message":"slow down"`), "rate_limit_exceeded", true},
		{"failed response", rx("response.failed", `"response":{"id":"r","status":"failed","error":{"code":"server_error","message":"boom"}}`), "server_error", true},
		{"failed on a bad prompt", rx("response.failed", `"response":{"status":"failed","error":{"code":"invalid_prompt","message":"flagged"}}`), "invalid_prompt", false},
	}
	for _, tt := range tests {
		_, _, _, err := rxFeed(t, tt.ev)
		var api *llm.APIError
		if !errors.As(err, &api) || api.Code != tt.code || api.Retryable != tt.retryable || api.Message == "" || api.Status != 0 {
			t.Errorf("%s: %#v", tt.name, err)
		}
	}
}

func textOfEvents(evs []llm.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.Type == llm.EventText {
			b.WriteString(ev.Text)
		}
	}
	return b.String()
}

// rxDelta is a recorded-shape output_text delta event (gpt-5.5).
const rxDelta = `{"type":"response.output_text.delta","content_index":0,"delta":" sunny","item_id":"msg_0f4809b27460351d0169fab21cd7308196b7478e3e6deca0ba","logprobs":[],"obfuscation":"ZG6pXbFq2b","output_index":1,"sequence_number":17}`

func rxDecoderWithMessage(tb testing.TB) wire.StreamDecoder {
	tb.Helper()
	d := ResponsesCodec{}.NewStreamDecoder()
	emit := func(llm.Event) bool { return true }
	for _, e := range []string{
		`{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","model":"gpt-5.5","status":"in_progress","output":[]}}`,
		`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}}`,
		`{"type":"response.output_item.added","sequence_number":2,"output_index":1,"item":{"id":"msg_0f4809b27460351d0169fab21cd7308196b7478e3e6deca0ba","type":"message","role":"assistant","content":[]}}`,
	} {
		if _, err := d.Feed(nil, []byte(e), emit); err != nil {
			tb.Fatal(err)
		}
	}
	return d
}

// TestResponsesDecoderAllocsPerDelta holds the hot-path budget of the
// Chat Completions decoder: at most two allocations per text delta (one is
// the delta string).
func TestResponsesDecoderAllocsPerDelta(t *testing.T) {
	d := rxDecoderWithMessage(t)
	emit := func(llm.Event) bool { return true }
	name, data := []byte("response.output_text.delta"), []byte(rxDelta)
	allocs := testing.AllocsPerRun(2000, func() {
		if _, err := d.Feed(name, data, emit); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 2 {
		t.Errorf("%.2f allocations per text delta, budget 2", allocs)
	}
}

func BenchmarkResponsesStreamDecoder(b *testing.B) {
	d := rxDecoderWithMessage(b)
	emit := func(llm.Event) bool { return true }
	name, data := []byte("response.output_text.delta"), []byte(rxDelta)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := d.Feed(name, data, emit); err != nil {
			b.Fatal(err)
		}
	}
}
