package llmtest_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

func TestOpenAIBuffered(t *testing.T) {
	tests := []struct {
		name   string
		step   llmtest.Step
		check  func(t *testing.T, msg map[string]any)
		finish string
	}{
		{
			name:   "text",
			step:   llmtest.Text("simulated reply"),
			finish: "stop",
			check: func(t *testing.T, msg map[string]any) {
				if got := str(msg["content"]); got != "simulated reply" {
					t.Errorf("content = %q", got)
				}
				if _, ok := msg["refusal"]; !ok {
					t.Error("refusal key missing (OpenAI sends refusal: null)")
				}
			},
		},
		{
			name: "tool calls",
			step: llmtest.ToolCalls(
				llm.ToolCall{ID: "call_a", Name: "weather", Arguments: `{"city":"Paris"}`},
				llm.ToolCall{Name: "time", Arguments: `{}`}),
			finish: "tool_calls",
			check: func(t *testing.T, msg map[string]any) {
				if msg["content"] != nil {
					t.Errorf("content = %v, want null with tool calls", msg["content"])
				}
				calls, _ := msg["tool_calls"].([]any)
				if len(calls) != 2 {
					t.Fatalf("tool_calls = %v", msg["tool_calls"])
				}
				if str(get(calls[0], "id")) != "call_a" || str(get(calls[0], "type")) != "function" ||
					str(get(calls[0], "function", "name")) != "weather" ||
					str(get(calls[0], "function", "arguments")) != `{"city":"Paris"}` {
					t.Errorf("call 0 = %v", calls[0])
				}
				if str(get(calls[1], "id")) != "call_llmtest_1" {
					t.Errorf("call 1 id = %v, want the deterministic call_llmtest_1", get(calls[1], "id"))
				}
			},
		},
		{
			name:   "reasoning and length",
			step:   llmtest.Respond(llmtest.Reply{Reasoning: "think", Text: "x", Finish: llm.FinishLength}),
			finish: "length",
			check: func(t *testing.T, msg map[string]any) {
				if str(msg["reasoning_content"]) != "think" {
					t.Errorf("reasoning_content = %v", msg["reasoning_content"])
				}
			},
		},
		{
			name:   "refusal",
			step:   llmtest.Respond(llmtest.Reply{Refusal: "I can't help with that."}),
			finish: "content_filter",
			check: func(t *testing.T, msg map[string]any) {
				if str(msg["refusal"]) != "I can't help with that." {
					t.Errorf("refusal = %v", msg["refusal"])
				}
			},
		},
		{
			name:   "raw finish",
			step:   llmtest.Respond(llmtest.Reply{Text: "x", RawFinish: "weird_reason"}),
			finish: "weird_reason",
			check:  func(*testing.T, map[string]any) {},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.NewServer()
			defer srv.Close()
			srv.Push(tc.step)
			body := openaiEP.body(false)
			r := post(t, newClient(t), openaiEP.url(srv, false), body)
			if r.resp.StatusCode != 200 || !strings.HasPrefix(r.resp.Header.Get("Content-Type"), "application/json") {
				t.Fatalf("status %d, content-type %q", r.resp.StatusCode, r.resp.Header.Get("Content-Type"))
			}
			m := obj(t, string(r.body))
			if str(m["object"]) != "chat.completion" || str(m["model"]) != model || !strings.HasPrefix(str(m["id"]), "chatcmpl-") {
				t.Errorf("envelope = object %v model %v id %v", m["object"], m["model"], m["id"])
			}
			if _, ok := m["created"].(float64); !ok {
				t.Error("created missing")
			}
			if got := str(get(m, "choices", 0, "finish_reason")); got != tc.finish {
				t.Errorf("finish_reason = %q, want %q", got, tc.finish)
			}
			if str(get(m, "choices", 0, "message", "role")) != "assistant" {
				t.Error("role is not assistant")
			}
			if num(get(m, "usage", "prompt_tokens")) != len(body)/4 {
				t.Errorf("prompt_tokens = %v, want len(body)/4 = %d", get(m, "usage", "prompt_tokens"), len(body)/4)
			}
			u := get(m, "usage").(map[string]any)
			if num(u["total_tokens"]) != num(u["prompt_tokens"])+num(u["completion_tokens"]) {
				t.Errorf("total_tokens mismatch: %v", u)
			}
			if r.resp.Header.Get("x-request-id") == "" {
				t.Error("x-request-id missing")
			}
			tc.check(t, get(m, "choices", 0, "message").(map[string]any))
		})
	}
}

// oaStream is an OpenAI stream put back together from its chunks.
type oaStream struct {
	chunks    []map[string]any
	content   string
	reasoning string
	refusal   string
	deltas    []string
	calls     []map[string]any // first fragment of each call
	args      []string
	argFrags  []int
	finish    string
	usage     map[string]any
	done      bool
	errChunk  map[string]any
}

func decodeOAStream(t *testing.T, body []byte) oaStream {
	t.Helper()
	events, _ := parseSSE(body)
	var s oaStream
	for i, ev := range events {
		if s.done {
			t.Fatalf("event after [DONE]: %q", ev.Data)
		}
		if ev.Data == "[DONE]" {
			s.done = true
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(ev.Data), &m); err != nil {
			continue // malformed lines are checked by the fault tests
		}
		if e, ok := m["error"].(map[string]any); ok {
			s.errChunk = e
			continue
		}
		if str(m["object"]) != "chat.completion.chunk" {
			t.Fatalf("chunk %d object = %v", i, m["object"])
		}
		s.chunks = append(s.chunks, m)
		if u, ok := m["usage"].(map[string]any); ok {
			if ch, _ := m["choices"].([]any); len(ch) != 0 {
				t.Errorf("usage chunk has choices %v, want []", ch)
			}
			s.usage = u
		}
		d, _ := get(m, "choices", 0, "delta").(map[string]any)
		if c := str(d["content"]); c != "" {
			s.content += c
			s.deltas = append(s.deltas, c)
		}
		s.reasoning += str(d["reasoning_content"])
		s.refusal += str(d["refusal"])
		for _, tcv := range asSlice(d["tool_calls"]) {
			tc := tcv.(map[string]any)
			idx := num(tc["index"])
			if _, hasID := tc["id"]; hasID {
				if idx != len(s.calls) {
					t.Fatalf("tool call index %d opened out of order", idx)
				}
				s.calls = append(s.calls, tc)
				s.args = append(s.args, "")
				s.argFrags = append(s.argFrags, 0)
			}
			if idx >= len(s.calls) {
				t.Fatalf("fragment for unopened call %d", idx)
			}
			if a := str(get(tc, "function", "arguments")); a != "" {
				s.args[idx] += a
				s.argFrags[idx]++
			}
		}
		if f := str(get(m, "choices", 0, "finish_reason")); f != "" {
			s.finish = f
		}
	}
	return s
}

func asSlice(v any) []any { a, _ := v.([]any); return a }

func TestOpenAIStream(t *testing.T) {
	const args = `{"location":"Florence, Italy","unit":"celsius"}`
	tests := []struct {
		name         string
		step         llmtest.Step
		includeUsage bool
		check        func(t *testing.T, s oaStream)
	}{
		{
			name: "text", step: llmtest.Text("Hello, wörld! ✓ done"), includeUsage: true,
			check: func(t *testing.T, s oaStream) {
				if s.content != "Hello, wörld! ✓ done" || s.finish != "stop" {
					t.Errorf("content %q finish %q", s.content, s.finish)
				}
				for _, d := range s.deltas {
					if !utf8.ValidString(d) || len(d) > 4+3 {
						t.Errorf("delta %q is not a ~4-byte rune-aligned chunk", d)
					}
				}
				if len(s.deltas) < 5 {
					t.Errorf("only %d deltas", len(s.deltas))
				}
				if num(s.usage["completion_tokens"]) != len(s.deltas) {
					t.Errorf("completion_tokens %v, want the delta count %d", s.usage["completion_tokens"], len(s.deltas))
				}
			},
		},
		{
			name: "explicit deltas without usage", step: llmtest.Deltas("a", "bc", "def"),
			check: func(t *testing.T, s oaStream) {
				if strings.Join(s.deltas, "|") != "a|bc|def" {
					t.Errorf("deltas %q", s.deltas)
				}
				if s.usage != nil {
					t.Error("usage chunk sent without stream_options.include_usage")
				}
				for _, c := range s.chunks {
					if _, ok := c["usage"]; ok {
						t.Error("usage key present without include_usage")
						break
					}
				}
			},
		},
		{
			name: "tool calls", includeUsage: true,
			step: llmtest.ToolCalls(llm.ToolCall{ID: "call_1", Name: "weather", Arguments: args},
				llm.ToolCall{ID: "call_2", Name: "clock", Arguments: `{"tz":"UTC"}`}),
			check: func(t *testing.T, s oaStream) {
				if len(s.calls) != 2 || s.finish != "tool_calls" {
					t.Fatalf("calls %v finish %q", s.calls, s.finish)
				}
				for i, want := range []string{"weather", "clock"} {
					c := s.calls[i]
					if str(get(c, "function", "name")) != want || str(c["type"]) != "function" || str(c["id"]) != []string{"call_1", "call_2"}[i] {
						t.Errorf("first fragment %d = %v", i, c)
					}
				}
				if s.args[0] != args || s.args[1] != `{"tz":"UTC"}` {
					t.Errorf("args %q", s.args)
				}
				if s.argFrags[0] < 5 {
					t.Errorf("arguments came in %d fragments, want several", s.argFrags[0])
				}
			},
		},
		{
			name: "reasoning", includeUsage: true,
			step: llmtest.Respond(llmtest.Reply{Reasoning: "Let me think.", Text: "42"}),
			check: func(t *testing.T, s oaStream) {
				if s.reasoning != "Let me think." || s.content != "42" {
					t.Errorf("reasoning %q content %q", s.reasoning, s.content)
				}
				if r := num(get(s.usage, "completion_tokens_details", "reasoning_tokens")); r != 4 {
					t.Errorf("reasoning_tokens = %d, want 4 (deltas of 13 bytes)", r)
				}
			},
		},
		{
			name: "refusal", includeUsage: true,
			step: llmtest.Respond(llmtest.Reply{Refusal: "No can do."}),
			check: func(t *testing.T, s oaStream) {
				if s.refusal != "No can do." || s.finish != "content_filter" {
					t.Errorf("refusal %q finish %q", s.refusal, s.finish)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.NewServer()
			defer srv.Close()
			srv.Push(tc.step)
			body := `{"model":"m1","stream":true,"messages":[]}`
			if tc.includeUsage {
				body = `{"model":"m1","stream":true,"stream_options":{"include_usage":true},"messages":[]}`
			}
			r := post(t, newClient(t), srv.OpenAIBaseURL()+"/chat/completions", body)
			if r.readErr != nil || r.resp.StatusCode != 200 {
				t.Fatalf("status %d err %v", r.resp.StatusCode, r.readErr)
			}
			if ct := r.resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
				t.Fatalf("content-type %q", ct)
			}
			s := decodeOAStream(t, r.body)
			if !s.done {
				t.Fatal("no data: [DONE]")
			}
			first := s.chunks[0]
			if str(get(first, "choices", 0, "delta", "role")) != "assistant" || str(first["model"]) != "m1" {
				t.Errorf("first chunk %v", first)
			}
			id := str(first["id"])
			for _, c := range s.chunks {
				if str(c["id"]) != id {
					t.Fatalf("chunk ids differ: %v vs %v", c["id"], id)
				}
			}
			if tc.includeUsage && num(s.usage["prompt_tokens"]) != len(body)/4 {
				t.Errorf("prompt_tokens %v, want %d", s.usage["prompt_tokens"], len(body)/4)
			}
			tc.check(t, s)
		})
	}
}
