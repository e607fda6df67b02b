package gateway

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/anthropic"
	"github.com/chorusrt/chorus/providers/gemini"
	"github.com/chorusrt/chorus/providers/openai"
)

func marshalString(t testing.TB, s string) []byte {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	var cases []string
	for b := range 256 {
		cases = append(cases, string([]byte{byte(b)}), "a"+string([]byte{byte(b)})+"z")
	}
	for _, r := range []rune{0x7f, 0x80, 0x7ff, 0x800, 0x2027, 0x2028, 0x2029, 0x202a, 0xfffd, 0xffff, 0x10000, 0x10ffff, utf8.RuneError} {
		cases = append(cases, string(r), "x"+string(r)+"y")
	}
	cases = append(cases, "", "plain text ", `quote " and \ backslash`, "<script>&amp;</script>", "line\nbreak\r\ttab\b\f",
		"\xed\xa0\x80", "\xf4\x90\x80\x80", "\xc0\xaf", "\xe2\x80", "ok\xffok", strings.Repeat("héllo wörld ", 50), "日本語のテキスト", "emoji 😀 done")
	for _, s := range cases {
		got, want := appendJSONString([]byte("prefix:"), s), append([]byte("prefix:"), marshalString(t, s)...)
		if !bytes.Equal(got, want) {
			t.Errorf("appendJSONString(%q) = %s, encoding/json writes %s", s, got, want)
		}
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "tok ", "<&>", "\u2028\u2029", "\xff\xfe", "é\n\"\\", "\x00\x1f\x7f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := appendJSONString(nil, s), marshalString(t, s); !bytes.Equal(got, want) {
			t.Fatalf("appendJSONString(%q) = %s, encoding/json writes %s", s, got, want)
		}
	})
}

// TestOpenAIStreamMatchesCodec: the gateway's chunk encoder writes the
// codec's bytes exactly, for every kind of event, with the text frame and
// without it (as when its check fails: the codec writes every chunk).
func TestOpenAIStreamMatchesCodec(t *testing.T) {
	events := []llm.Event{
		{Type: llm.EventReasoning, Text: ""},
		{Type: llm.EventText, Text: "Hello"},
		{Type: llm.EventText, Text: ", <world> & \"friends\"\n"},
		{Type: llm.EventText, Text: ""},
		{Type: llm.EventReasoning, Text: "thinking é"},
		{Type: llm.EventRefusal, Text: "no"},
		{Type: llm.EventText, Text: "\u2028 日本 \xff"},
		{Type: llm.EventToolCallStart, ToolIndex: 0, ToolCallID: "call_1", ToolName: "get_weather", Text: ""},
		{Type: llm.EventToolCallDelta, ToolIndex: 0, Text: `{"city":`},
		{Type: llm.EventText, Text: "after the call"},
		{Type: llm.EventUsage, Usage: &llm.Usage{PromptTokens: 3, CompletionTokens: 5}},
		{Type: llm.EventFinish, Finish: llm.FinishToolCalls},
	}
	for _, tc := range []struct {
		name, model string
		first       llm.EventType
		noFrame     bool
	}{
		{"text first", "openai/gpt-4.1-mini", llm.EventText, false},
		{"tool call first", "m", llm.EventToolCallStart, false},
		{"model with escapes", "a<b>\"c\"\u2028", llm.EventText, false},
		{"model named like a probe", probeA, llm.EventText, false},
		{"model named like the other probe", probeB, llm.EventText, false},
		{"no frame", "openai/gpt-4.1-mini", llm.EventText, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs := events
			if tc.first == llm.EventToolCallStart {
				evs = append([]llm.Event{{Type: llm.EventToolCallStart, ToolIndex: 0, ToolCallID: "c0", ToolName: "f"}}, events...)
			}
			want := openai.NewServerStream("chatcmpl-x", tc.model, 1700000000, true)
			got := &openAIStream{s: openai.NewServerStream("chatcmpl-x", tc.model, 1700000000, true)}
			got.text.tried = tc.noFrame // a failed check leaves tried set and ok unset
			var w, g []byte
			for i := range evs {
				w = want.Event(w, &evs[i])
				g = got.event(g, &evs[i])
				if !bytes.Equal(g, w) {
					t.Fatalf("after event %d (%+v):\n got %s\nwant %s", i, evs[i], g, w)
				}
			}
			res := &llm.ChatResult{Content: "x", FinishReason: llm.FinishToolCalls}
			if g, w = got.end(g, res), want.End(w, res); !bytes.Equal(g, w) {
				t.Fatalf("end:\n got %s\nwant %s", g, w)
			}
			if got.text.ok == tc.noFrame {
				t.Fatalf("text frame used: %t, want %t", got.text.ok, !tc.noFrame)
			}
			// Every frame is SSE data holding one JSON object.
			for _, d := range bytes.Split(bytes.TrimSpace(g), []byte("\n\n")) {
				d = bytes.TrimPrefix(d, []byte("data: "))
				if string(d) != "[DONE]" && !json.Valid(d) {
					t.Fatalf("invalid chunk %s", d)
				}
			}
		})
	}
}

// codecEvents is a stream of every kind of event, text runs broken by
// reasoning, signatures, refusals and tool calls, with usage and finish
// events inside text runs.
var codecEvents = []llm.Event{
	{Type: llm.EventReasoning, Text: "let me think"},
	{Type: llm.EventReasoning, Signature: "sig-1"},
	{Type: llm.EventText, Text: "Hello"},
	{Type: llm.EventText, Text: ", <world> & \"friends\"\n"},
	{Type: llm.EventUsage, Usage: &llm.Usage{PromptTokens: 3}},
	{Type: llm.EventText, Text: ""},
	{Type: llm.EventRefusal, Text: "no"},
	{Type: llm.EventText, Text: "\u2028 日本 \xff"},
	{Type: llm.EventReasoning, Text: "more thought é"},
	{Type: llm.EventText, Text: "second block"},
	{Type: llm.EventText, Text: " goes on"},
	{Type: llm.EventToolCallStart, ToolIndex: 0, ToolCallID: "call_1", ToolName: "get_weather", Text: ""},
	{Type: llm.EventToolCallDelta, ToolIndex: 0, Text: `{"city":"Paris"}`},
	{Type: llm.EventText, Text: "third block"},
	{Type: llm.EventText, Text: " and more"},
	{Type: llm.EventToolCallStart, ToolIndex: 1, ToolCallID: "call_2", ToolName: "f", Text: `{}`},
	{Type: llm.EventText, Text: "fourth"},
	{Type: llm.EventFinish, Finish: llm.FinishToolCalls},
	{Type: llm.EventText, Text: "after finish"},
	{Type: llm.EventUsage, Usage: &llm.Usage{PromptTokens: 3, CompletionTokens: 9}},
}

// TestStreamEncodersMatchCodecs: each format's stream encoder writes its
// codec's bytes exactly, event after event and at the end, and its text
// frame is used.
func TestStreamEncodersMatchCodecs(t *testing.T) {
	type pair struct {
		codec, gw streamEncoder
		frames    *int // text deltas the gateway's encoder framed itself
	}
	formats := map[string]func(model string) pair{
		"openai": func(model string) pair {
			g := &openAIStream{s: openai.NewServerStream("chatcmpl-x", model, 1700000000, true)}
			return pair{&codecOnly{s: openai.NewServerStream("chatcmpl-x", model, 1700000000, true)}, g, &g.text.frames}
		},
		"anthropic": func(model string) pair {
			g := &anthropicStream{s: anthropic.NewServerStream("msg_x", model)}
			return pair{&codecOnly{s: anthropic.NewServerStream("msg_x", model)}, g, &g.text.frames}
		},
		"gemini": func(model string) pair {
			g := &geminiStream{s: gemini.NewServerStream("resp-x", model)}
			return pair{&codecOnly{s: gemini.NewServerStream("resp-x", model)}, g, &g.text.frames}
		},
	}
	for name, mk := range formats {
		for _, model := range []string{"openai/gpt-4.1-mini", "a<b>\"c\"\u2028", probeA} {
			t.Run(name+"/"+model, func(t *testing.T) {
				p := mk(model)
				var w, g []byte
				for i := range codecEvents {
					w = p.codec.event(w, &codecEvents[i])
					g = p.gw.event(g, &codecEvents[i])
					if !bytes.Equal(g, w) {
						t.Fatalf("after event %d (%+v):\n got %s\nwant %s", i, codecEvents[i], g, w)
					}
				}
				res := &llm.ChatResult{Content: "x", FinishReason: llm.FinishToolCalls}
				if g, w = p.gw.end(g, res), p.codec.end(w, res); !bytes.Equal(g, w) {
					t.Fatalf("end:\n got %s\nwant %s", g, w)
				}
				if *p.frames == 0 {
					t.Fatal("the text frame was never used")
				}
			})
		}
	}
}

// codecOnly is a format's codec as a streamEncoder, every event through it.
type codecOnly struct {
	s interface {
		Event(dst []byte, ev *llm.Event) []byte
		End(dst []byte, res *llm.ChatResult) []byte
	}
}

func (c *codecOnly) event(dst []byte, ev *llm.Event) []byte     { return c.s.Event(dst, ev) }
func (c *codecOnly) end(dst []byte, res *llm.ChatResult) []byte { return c.s.End(dst, res) }
func (c *codecOnly) fail(dst []byte, e *Error) []byte           { return dst }

func TestTextFrameRefusesACodecThatEscapesOtherwise(t *testing.T) {
	var tf textFrame
	// A codec that writes non-ASCII as \u escapes: probe B differs.
	tf.derive(func(text string) []byte {
		var b bytes.Buffer
		b.WriteString(`data: {"t":"`)
		for _, r := range text {
			if r >= 0x80 {
				b.WriteString(`\u00e9`)
				continue
			}
			b.Write(appendJSONString(nil, string(r))[1:2])
		}
		b.WriteString(`"}` + "\n\n")
		return b.Bytes()
	})
	if tf.ok || !tf.tried {
		t.Fatalf("frame accepted from a codec that escapes otherwise: ok %t tried %t", tf.ok, tf.tried)
	}
	tf = textFrame{}
	tf.derive(func(text string) []byte { return append(appendJSONString([]byte("data: "), text), "\n\n"...) })
	if !tf.ok || string(tf.append(nil, "x<")) != "data: \"x\\u003c\"\n\n" {
		t.Fatalf("frame from a plain codec: ok %t, %q", tf.ok, tf.append(nil, "x<"))
	}
}
