package llmtest_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

func TestAnthropicBuffered(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	srv.Push(llmtest.Respond(llmtest.Reply{
		Thinking: []llm.ThinkingBlock{
			{Text: "first thought", Signature: "sig-1"},
			{Redacted: true, Data: "opaque"},
			{Text: "second thought", Signature: "sig-2"},
		},
		Text:      "It is sunny.",
		ToolCalls: []llm.ToolCall{{Name: "weather", Arguments: `{"city":"Paris"}`}},
	}))
	body := anthropicEP.body(false)
	r := post(t, newClient(t), anthropicEP.url(srv, false), body)
	if r.resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", r.resp.StatusCode, r.body)
	}
	m := obj(t, string(r.body))
	if str(m["type"]) != "message" || str(m["role"]) != "assistant" || str(m["model"]) != model || !strings.HasPrefix(str(m["id"]), "msg_") {
		t.Errorf("envelope %v", m)
	}
	if str(m["stop_reason"]) != "tool_use" {
		t.Errorf("stop_reason %v", m["stop_reason"])
	}
	content := asSlice(m["content"])
	wantTypes := []string{"thinking", "redacted_thinking", "thinking", "text", "tool_use"}
	if len(content) != len(wantTypes) {
		t.Fatalf("content = %v", content)
	}
	for i, w := range wantTypes {
		if got := str(get(content[i], "type")); got != w {
			t.Errorf("block %d type %q, want %q", i, got, w)
		}
	}
	if str(get(content[0], "signature")) != "sig-1" || str(get(content[2], "signature")) != "sig-2" ||
		str(get(content[0], "thinking")) != "first thought" || str(get(content[1], "data")) != "opaque" {
		t.Errorf("thinking blocks lost their order or signatures: %v", content[:3])
	}
	if str(get(content[3], "text")) != "It is sunny." {
		t.Errorf("text %v", content[3])
	}
	if str(get(content[4], "input", "city")) != "Paris" || str(get(content[4], "name")) != "weather" ||
		!strings.HasPrefix(str(get(content[4], "id")), "toolu_") {
		t.Errorf("tool_use %v", content[4])
	}
	if num(get(m, "usage", "input_tokens")) != len(body)/4 {
		t.Errorf("input_tokens %v, want %d", get(m, "usage", "input_tokens"), len(body)/4)
	}
	if r.resp.Header.Get("request-id") == "" {
		t.Error("request-id header missing")
	}
}

// anStream is an Anthropic stream put back together.
type anStream struct {
	names      []string
	blocks     []map[string]any // content_block_start blocks
	thinking   map[int]string
	signatures map[int]string
	text       string
	textDeltas int
	json       map[int]string
	stop       string
	usage      map[string]any
	startUsage map[string]any
	stopped    bool
	padded     bool
	errEvent   map[string]any
}

func decodeANStream(t *testing.T, body []byte) anStream {
	t.Helper()
	events, complete := parseSSE(body)
	if !complete {
		t.Log("stream body does not end with a blank line")
	}
	s := anStream{thinking: map[int]string{}, signatures: map[int]string{}, json: map[int]string{}}
	open := -1
	for _, ev := range events {
		s.names = append(s.names, ev.Name)
		var m map[string]any
		if err := json.Unmarshal([]byte(ev.Data), &m); err != nil {
			continue
		}
		if strings.HasSuffix(ev.Data, " }") {
			s.padded = true
		}
		if str(m["type"]) != ev.Name {
			t.Errorf("event %q carries type %q", ev.Name, m["type"])
		}
		idx := num(m["index"])
		switch ev.Name {
		case "message_start":
			s.startUsage, _ = get(m, "message", "usage").(map[string]any)
		case "content_block_start":
			if idx != len(s.blocks) || open != -1 {
				t.Fatalf("block %d started out of order (open %d)", idx, open)
			}
			open = idx
			s.blocks = append(s.blocks, m["content_block"].(map[string]any))
		case "content_block_delta":
			if idx != open {
				t.Fatalf("delta for block %d while %d is open", idx, open)
			}
			d := m["delta"].(map[string]any)
			switch str(d["type"]) {
			case "thinking_delta":
				s.thinking[idx] += str(d["thinking"])
			case "signature_delta":
				s.signatures[idx] += str(d["signature"])
			case "text_delta":
				s.text += str(d["text"])
				s.textDeltas++
			case "input_json_delta":
				s.json[idx] += str(d["partial_json"])
			default:
				t.Errorf("unknown delta %v", d)
			}
		case "content_block_stop":
			if idx != open {
				t.Fatalf("stop for block %d while %d is open", idx, open)
			}
			open = -1
		case "message_delta":
			s.stop = str(get(m, "delta", "stop_reason"))
			s.usage, _ = m["usage"].(map[string]any)
		case "message_stop":
			s.stopped = true
		case "error":
			s.errEvent, _ = m["error"].(map[string]any)
		}
	}
	return s
}

func TestAnthropicStream(t *testing.T) {
	const args = `{"location":"Florence, Italy"}`
	srv := llmtest.NewServer()
	defer srv.Close()
	srv.Push(
		llmtest.Respond(llmtest.Reply{Reasoning: "Think hard.", Signature: "EqQBCkYIBx", Text: "Answer."}),
		llmtest.Respond(llmtest.Reply{
			Thinking:  []llm.ThinkingBlock{{Text: "a", Signature: "s1"}, {Text: "b", Signature: "s2"}},
			ToolCalls: []llm.ToolCall{{ID: "toolu_x", Name: "weather", Arguments: args}},
		}),
		llmtest.Respond(llmtest.Reply{Text: "cut", Finish: llm.FinishLength}),
	)
	c := newClient(t)
	body := anthropicEP.body(true)

	r := post(t, c, anthropicEP.url(srv, true), body)
	if ct := r.resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("content-type %q", ct)
	}
	s := decodeANStream(t, r.body)
	if s.names[0] != "message_start" || s.names[len(s.names)-1] != "message_stop" || s.names[len(s.names)-2] != "message_delta" {
		t.Errorf("event order %v", s.names)
	}
	if !contains(s.names, "ping") {
		t.Error("no ping event")
	}
	if !s.padded {
		t.Error("no data line padded with spaces before its closing brace, as Anthropic sends")
	}
	if len(s.blocks) != 2 || str(s.blocks[0]["type"]) != "thinking" || str(s.blocks[1]["type"]) != "text" {
		t.Fatalf("blocks %v", s.blocks)
	}
	if s.thinking[0] != "Think hard." || s.signatures[0] != "EqQBCkYIBx" || s.text != "Answer." || s.stop != "end_turn" {
		t.Errorf("thinking %q sig %q text %q stop %q", s.thinking[0], s.signatures[0], s.text, s.stop)
	}
	if num(s.startUsage["input_tokens"]) != len(body)/4 {
		t.Errorf("message_start input_tokens %v, want %d", s.startUsage["input_tokens"], len(body)/4)
	}
	// 11 bytes of thinking = 3 deltas, 7 bytes of text = 2 deltas.
	if num(s.usage["output_tokens"]) != 5 || num(s.usage["input_tokens"]) != len(body)/4 {
		t.Errorf("message_delta usage %v, want output 5", s.usage)
	}

	r = post(t, c, anthropicEP.url(srv, true), body)
	s = decodeANStream(t, r.body)
	if len(s.blocks) != 3 || str(s.blocks[2]["type"]) != "tool_use" || str(s.blocks[2]["id"]) != "toolu_x" || str(s.blocks[2]["name"]) != "weather" {
		t.Fatalf("blocks %v", s.blocks)
	}
	if s.signatures[0] != "s1" || s.signatures[1] != "s2" || s.thinking[1] != "b" {
		t.Errorf("per-block signatures %v thinking %v", s.signatures, s.thinking)
	}
	if s.json[2] != args || s.stop != "tool_use" || !s.stopped {
		t.Errorf("json %q stop %q stopped %v", s.json[2], s.stop, s.stopped)
	}

	r = post(t, c, anthropicEP.url(srv, true), body)
	if s = decodeANStream(t, r.body); s.stop != "max_tokens" {
		t.Errorf("stop_reason %q, want max_tokens", s.stop)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
