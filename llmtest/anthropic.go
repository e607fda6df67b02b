package llmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/chorusrt/chorus/llm"
)

// anthropic renders the Anthropic Messages format.
type anthropic struct{}

type anUsage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

type anMessage struct {
	Model        string  `json:"model"`
	ID           string  `json:"id"`
	Type         string  `json:"type"`
	Role         string  `json:"role"`
	Content      []any   `json:"content"`
	StopReason   *string `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
	Usage        anUsage `json:"usage"`
}

type anThinking struct {
	Type      string `json:"type"`
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
}

type anRedacted struct {
	Type string `json:"type"`
	Data string `json:"data"`
}

type anText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type anToolUse struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type anError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

func anUsageOf(u llm.Usage) anUsage {
	return anUsage{
		InputTokens:              u.PromptTokens,
		CacheCreationInputTokens: u.CacheWriteTokens,
		CacheReadInputTokens:     u.CacheReadTokens,
		OutputTokens:             u.CompletionTokens,
	}
}

func anStop(p *plan) string {
	if p.rawFinish != "" {
		return p.rawFinish
	}
	switch p.finish {
	case llm.FinishLength:
		return "max_tokens"
	case llm.FinishToolCalls:
		return "tool_use"
	case llm.FinishContentFilter:
		return "refusal"
	default:
		return "end_turn"
	}
}

func (p *plan) anID() string { return fmt.Sprintf("msg_llmtest_%d", p.seq) }

func (p *plan) anToolID(i int) string { return p.toolID(i, "toolu_llmtest_") }

func (anthropic) contentType() string { return "text/event-stream; charset=utf-8" }

func (anthropic) buffered(p *plan) []byte {
	m := anMessage{Model: p.model, ID: p.anID(), Type: "message", Role: "assistant", Content: []any{},
		StopReason: strp(anStop(p)), Usage: anUsageOf(p.usage)}
	for _, t := range p.thoughts {
		if t.redacted {
			m.Content = append(m.Content, anRedacted{Type: "redacted_thinking", Data: t.data})
		} else {
			m.Content = append(m.Content, anThinking{Type: "thinking", Thinking: t.text, Signature: t.signature})
		}
	}
	if text := join(p.refusal) + p.textString(); text != "" {
		m.Content = append(m.Content, anText{Type: "text", Text: text})
	}
	for i, t := range p.tools {
		m.Content = append(m.Content, anToolUse{Type: "tool_use", ID: p.anToolID(i), Name: t.name, Input: argsObject(t.args)})
	}
	return marshal(m)
}

// pad reproduces Anthropic's habit of padding some data lines with spaces
// before the closing brace, deterministically by event number.
func pad(b []byte, n int) []byte {
	spaces := (n * 7) % 13
	if n%3 != 0 || spaces == 0 || len(b) == 0 || b[len(b)-1] != '}' {
		return b
	}
	out := make([]byte, 0, len(b)+spaces)
	out = append(out, b[:len(b)-1]...)
	out = append(out, bytes.Repeat([]byte{' '}, spaces)...)
	return append(out, '}')
}

func (anthropic) frames(p *plan, _ *exchange) []frame {
	var out []frame
	n := 0
	add := func(kind frameKind, event string, v any) {
		n++
		out = append(out, frame{kind: kind, event: event, data: pad(marshal(v), n)})
	}
	type blockStart struct {
		Type         string `json:"type"`
		Index        int    `json:"index"`
		ContentBlock any    `json:"content_block"`
	}
	type blockDelta struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
		Delta any    `json:"delta"`
	}
	type blockStop struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
	}
	type textDelta struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	type thinkingDelta struct {
		Type     string `json:"type"`
		Thinking string `json:"thinking"`
	}
	type signatureDelta struct {
		Type      string `json:"type"`
		Signature string `json:"signature"`
	}
	type jsonDelta struct {
		Type        string `json:"type"`
		PartialJSON string `json:"partial_json"`
	}
	start := anUsageOf(p.usage)
	start.OutputTokens = 1
	add(fHead, "message_start", struct {
		Type    string    `json:"type"`
		Message anMessage `json:"message"`
	}{"message_start", anMessage{Model: p.model, ID: p.anID(), Type: "message", Role: "assistant",
		Content: []any{}, Usage: start}})
	idx := 0
	pinged := false
	open := func(block any) {
		add(fMid, "content_block_start", blockStart{"content_block_start", idx, block})
		if !pinged {
			pinged = true
			n++
			out = append(out, frame{kind: fMid, event: "ping", data: []byte(`{"type": "ping"}`)})
		}
	}
	closeBlock := func() {
		add(fMid, "content_block_stop", blockStop{"content_block_stop", idx})
		idx++
	}
	for _, t := range p.thoughts {
		if t.redacted {
			open(anRedacted{Type: "redacted_thinking", Data: t.data})
			closeBlock()
			continue
		}
		open(anThinking{Type: "thinking"})
		for _, d := range t.deltas {
			add(fDelta, "content_block_delta", blockDelta{"content_block_delta", idx, thinkingDelta{"thinking_delta", d}})
		}
		if t.signature != "" {
			add(fMid, "content_block_delta", blockDelta{"content_block_delta", idx, signatureDelta{"signature_delta", t.signature}})
		}
		closeBlock()
	}
	if len(p.refusal)+len(p.text) > 0 {
		open(anText{Type: "text"})
		for _, d := range append(append([]string(nil), p.refusal...), p.text...) {
			add(fDelta, "content_block_delta", blockDelta{"content_block_delta", idx, textDelta{"text_delta", d}})
		}
		closeBlock()
	}
	for i, t := range p.tools {
		open(anToolUse{Type: "tool_use", ID: p.anToolID(i), Name: t.name, Input: json.RawMessage(`{}`)})
		add(fMid, "content_block_delta", blockDelta{"content_block_delta", idx, jsonDelta{"input_json_delta", ""}})
		for _, f := range t.frags {
			add(fDelta, "content_block_delta", blockDelta{"content_block_delta", idx, jsonDelta{"input_json_delta", f}})
		}
		closeBlock()
	}
	if !pinged {
		out = append(out, frame{kind: fMid, event: "ping", data: []byte(`{"type": "ping"}`)})
	}
	add(fTail, "message_delta", struct {
		Type  string `json:"type"`
		Delta struct {
			StopReason   string  `json:"stop_reason"`
			StopSequence *string `json:"stop_sequence"`
		} `json:"delta"`
		Usage anUsage `json:"usage"`
	}{Type: "message_delta", Delta: struct {
		StopReason   string  `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
	}{StopReason: anStop(p)}, Usage: anUsageOf(p.usage)})
	add(fTail, "message_stop", struct {
		Type string `json:"type"`
	}{"message_stop"})
	return out
}

func anErrorFields(status int, f *Fault) anError {
	e := anError{Type: f.Type, Message: f.Message}
	if e.Type == "" {
		switch status {
		case http.StatusBadRequest:
			e.Type = "invalid_request_error"
		case http.StatusUnauthorized:
			e.Type = "authentication_error"
		case http.StatusForbidden:
			e.Type = "permission_error"
		case http.StatusNotFound:
			e.Type = "not_found_error"
		case http.StatusRequestEntityTooLarge:
			e.Type = "request_too_large"
		case http.StatusTooManyRequests:
			e.Type = "rate_limit_error"
		case 529:
			e.Type = "overloaded_error"
		default:
			e.Type = "api_error"
		}
	}
	if e.Message == "" {
		switch e.Type {
		case "rate_limit_error":
			e.Message = "This request would exceed the rate limit for your organization. Please try again later."
		case "overloaded_error":
			e.Message = "Overloaded"
		case "authentication_error":
			e.Message = "invalid x-api-key"
		case "api_error":
			e.Message = "Internal server error"
		default:
			e.Message = http.StatusText(status)
		}
	}
	return e
}

func (anthropic) errorBody(status int, f *Fault) []byte {
	return marshal(struct {
		Type  string  `json:"type"`
		Error anError `json:"error"`
	}{"error", anErrorFields(status, f)})
}

func (a anthropic) streamError(f *Fault) frame {
	status := f.Status
	if status == 0 {
		status = 529
	}
	return frame{kind: fTail, event: "error", data: a.errorBody(status, f)}
}

func (anthropic) malformed() frame {
	return frame{event: "content_block_delta", data: []byte("{not json")}
}

func (anthropic) oversize(_ *plan, padding string) frame {
	return frame{event: "ping", data: marshal(struct {
		Type    string `json:"type"`
		Padding string `json:"padding"`
	}{"ping", padding})}
}

func (anthropic) rateHeaders(h http.Header, st *rlState) {
	set := func(name string, d dimState) {
		h.Set("anthropic-ratelimit-"+name+"-limit", itoa(d.limit))
		h.Set("anthropic-ratelimit-"+name+"-remaining", itoa(d.remaining))
		h.Set("anthropic-ratelimit-"+name+"-reset", st.resetTime(d).UTC().Format(rfc3339Milli))
	}
	if st.cfg.Requests > 0 {
		set("requests", st.req)
	}
	if st.cfg.Tokens > 0 {
		set("tokens", st.tok)
		set("input-tokens", st.in)
		set("output-tokens", st.out)
	}
}
