package gateway_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/gateway"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

type anthropicMessage struct {
	Type    string `json:"type"`
	Model   string `json:"model"`
	Content []struct {
		Type      string          `json:"type"`
		Text      string          `json:"text"`
		Thinking  string          `json:"thinking"`
		Signature string          `json:"signature"`
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
	} `json:"content"`
	StopReason string `json:"stop_reason"`
	Usage      struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
}

// A buffered Anthropic answer keeps its thinking blocks and signatures
// (invariant 7), text and usage.
func TestAnthropicMessagesBuffered(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	f.up.Push(llmtest.Respond(llmtest.Reply{Text: "hello", Reasoning: "let me think", Signature: "sig-abc", Usage: &llm.Usage{PromptTokens: 9, CompletionTokens: 2}}))
	a := f.do(t, "POST", "/v1/messages", `{"model":"anthropic/claude-haiku-4-5","max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":1024},"system":"be brief","messages":[{"role":"user","content":"hi"}]}`,
		"x-api-key", "client-key", "anthropic-version", "2023-06-01")
	if a.status != 200 {
		t.Fatalf("status %d %s", a.status, a.body)
	}
	var m anthropicMessage
	decode(t, a.body, &m)
	if m.Type != "message" || len(m.Content) != 2 || m.Content[0].Type != "thinking" || m.Content[0].Signature != "sig-abc" ||
		m.Content[1].Text != "hello" || m.StopReason != "end_turn" || m.Usage.InputTokens != 9 || m.Usage.OutputTokens != 2 {
		t.Fatalf("answer %s", a.body)
	}
	r := f.up.Requests()[0]
	if r.Header.Get("x-api-key") != providerKey {
		t.Fatal("the upstream call did not carry the provider's own key")
	}
	if !strings.Contains(string(r.Body), `"budget_tokens":1024`) || !strings.Contains(string(r.Body), `"be brief"`) {
		t.Fatalf("upstream body %s", r.Body)
	}
}

// Streamed events come in Anthropic's order: message_start, per block
// content_block_start/delta/stop, message_delta, message_stop.
func TestAnthropicMessagesStreamEventOrder(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	f.up.Push(llmtest.Respond(llmtest.Reply{Reasoning: "hm", Deltas: []string{"a", "b"}, ToolCalls: []llm.ToolCall{{ID: "toolu_9", Name: "f", Arguments: `{"x":1}`}}}))
	a := f.do(t, "POST", "/v1/messages", `{"model":"anthropic/claude-haiku-4-5","max_tokens":100,"stream":true,"tools":[{"name":"f","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"go"}]}`)
	if a.status != 200 {
		t.Fatalf("status %d %s", a.status, a.body)
	}
	var names []string
	var text, args, stop string
	for _, ev := range sseEvents(a.body) {
		var d struct {
			Type  string `json:"type"`
			Delta struct {
				Type        string `json:"type"`
				Text        string `json:"text"`
				PartialJSON string `json:"partial_json"`
				StopReason  string `json:"stop_reason"`
			} `json:"delta"`
		}
		decode(t, []byte(ev[1]), &d)
		if d.Type != ev[0] {
			t.Fatalf("event %s carries type %s", ev[0], d.Type)
		}
		if len(names) == 0 || names[len(names)-1] != ev[0] {
			names = append(names, ev[0])
		}
		text += d.Delta.Text
		args += d.Delta.PartialJSON
		if d.Delta.StopReason != "" {
			stop = d.Delta.StopReason
		}
	}
	want := "message_start content_block_start ping content_block_delta content_block_stop content_block_start content_block_delta content_block_stop content_block_start content_block_delta content_block_stop message_delta message_stop"
	if strings.Join(names, " ") != want || text != "ab" || args != `{"x":1}` || stop != "tool_use" {
		t.Fatalf("events %v text %q args %q stop %q", names, text, args, stop)
	}
}

// Any model behind any format: an Anthropic client on an OpenAI-format
// model, and an OpenAI client on an Anthropic-format model, get the same
// text and tool call as a direct call.
func TestCrossFormat(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	call := llm.ToolCall{ID: "call_x", Name: "get_weather", Arguments: `{"city":"Oslo"}`}
	f.up.Push(llmtest.Respond(llmtest.Reply{Text: "sure", ToolCalls: []llm.ToolCall{call}}), llmtest.Respond(llmtest.Reply{Text: "sure", ToolCalls: []llm.ToolCall{call}}))
	a := f.do(t, "POST", "/v1/messages", `{"model":"openai/gpt-4.1-mini","max_tokens":50,"stream":true,"tools":[{"name":"get_weather","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"w"}]}`)
	var text, args, id string
	for _, ev := range sseEvents(a.body) {
		var d struct {
			ContentBlock struct{ ID string } `json:"content_block"`
			Delta        struct {
				Text        string `json:"text"`
				PartialJSON string `json:"partial_json"`
			} `json:"delta"`
		}
		decode(t, []byte(ev[1]), &d)
		text, args = text+d.Delta.Text, args+d.Delta.PartialJSON
		if d.ContentBlock.ID != "" {
			id = d.ContentBlock.ID
		}
	}
	if a.status != 200 || text != "sure" || args != call.Arguments || id != call.ID {
		t.Fatalf("anthropic client on openai model: %d text %q args %q id %q", a.status, text, args, id)
	}
	if r := f.up.Requests()[0]; !strings.HasSuffix(r.Path, "/chat/completions") {
		t.Fatalf("upstream path %s", r.Path)
	}

	a = f.do(t, "POST", "/v1/chat/completions", `{"model":"anthropic/claude-haiku-4-5","stream":true,"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}],"messages":[{"role":"user","content":"w"}]}`)
	text, args, id = "", "", ""
	for _, d := range sseData(a.body) {
		if d == "[DONE]" {
			continue
		}
		var c chunk
		decode(t, []byte(d), &c)
		if c.Choices[0].Delta.Content != nil {
			text += *c.Choices[0].Delta.Content
		}
		for _, tc := range c.Choices[0].Delta.ToolCalls {
			args += tc.Function.Arguments
			if tc.ID != "" {
				id = tc.ID
			}
		}
	}
	if a.status != 200 || text != "sure" || args != call.Arguments || id != call.ID {
		t.Fatalf("openai client on anthropic model: %d text %q args %q id %q", a.status, text, args, id)
	}
	if r := f.up.Requests()[1]; r.Path != "/v1/messages" {
		t.Fatalf("upstream path %s", r.Path)
	}
}

func TestAnthropicErrorsAndCountTokens(t *testing.T) {
	f := newFixture(t, gatewayKeys(1))
	auth := []string{"x-api-key", "gk-team-a"}
	a := f.do(t, "POST", "/v1/messages", `{"model":"anthropic/claude-haiku-4-5","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`)
	var e struct {
		Type  string `json:"type"`
		Error struct{ Type, Message string }
	}
	decode(t, a.body, &e)
	if a.status != 401 || e.Type != "error" || e.Error.Type != "authentication_error" {
		t.Fatalf("no key: %d %s", a.status, a.body)
	}
	a = f.do(t, "POST", "/v1/messages", `{"model":"anthropic/claude-haiku-4-5","messages":[{"role":"user","content":"x"}]}`, auth...)
	decode(t, a.body, &e)
	if a.status != 400 || e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, "max_tokens") {
		t.Fatalf("no max_tokens: %d %s", a.status, a.body)
	}
	a = f.do(t, "POST", "/v1/messages/count_tokens", `{"model":"anthropic/claude-haiku-4-5","messages":[{"role":"user","content":"count me"}]}`, auth...)
	var n struct {
		InputTokens int `json:"input_tokens"`
	}
	decode(t, a.body, &n)
	if a.status != 200 || n.InputTokens <= 0 {
		t.Fatalf("count_tokens: %d %s", a.status, a.body)
	}
	a = f.do(t, "POST", "/v1/messages", `{"model":"anthropic/claude-haiku-4-5","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`, auth...)
	decode(t, a.body, &e)
	if a.status != 429 || e.Error.Type != "rate_limit_error" || a.header.Get("retry-after") == "" {
		t.Fatalf("past the key's rpm: %d %s", a.status, a.body)
	}
}
