package openai

import (
	"errors"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// feed runs hand-written data payloads through a fresh decoder. An entry
// starting with "event: NAME\n" sets the SSE event name.
func feed(t *testing.T, chunks ...string) (evs []llm.Event, d wire.StreamDecoder, done bool, err error) {
	t.Helper()
	d = Codec{}.NewStreamDecoder()
	for _, c := range chunks {
		var name []byte
		if rest, ok := strings.CutPrefix(c, "event: "); ok {
			n, data, _ := strings.Cut(rest, "\n")
			name, c = []byte(n), data
		}
		done, err = d.Feed(name, []byte(c), func(ev llm.Event) bool {
			evs = append(evs, ev)
			return true
		})
		if err != nil || done {
			return evs, d, done, err
		}
	}
	return evs, d, done, nil
}

func ch(delta string) string { return `{"choices":[{"index":0,"delta":` + delta + `}]}` }

func tc(s string) string { return ch(`{"tool_calls":[` + s + `]}`) }

func fin(reason string) string {
	return `{"choices":[{"index":0,"delta":{},"finish_reason":"` + reason + `"}]}`
}

// summary renders events compactly for comparison.
func summary(evs []llm.Event) []string {
	var out []string
	for _, ev := range evs {
		s := ev.Type.String()
		switch ev.Type {
		case llm.EventToolCallStart:
			s += "#" + itoa(ev.ToolIndex) + ":" + ev.ToolCallID + ":" + ev.ToolName + ":" + ev.Text
		case llm.EventToolCallDelta:
			s += "#" + itoa(ev.ToolIndex) + ":" + ev.Text
		case llm.EventFinish:
			s += ":" + string(ev.Finish)
		case llm.EventUsage:
		default:
			s += ":" + ev.Text
		}
		out = append(out, s)
	}
	return out
}

func itoa(i int) string {
	if i < 0 {
		return "-" + itoa(-i)
	}
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

func TestStreamDecoderEvents(t *testing.T) {
	tests := []struct {
		name   string
		chunks []string
		want   []string
		calls  []llm.ToolCall
		finish llm.FinishReason
	}{
		{
			name:   "text and finish",
			chunks: []string{ch(`{"role":"assistant","content":"","refusal":null}`), ch(`{"content":"Hel"}`), ch(`{"content":"lo \"x\"\n"}`), fin("stop"), `[DONE]`},
			want:   []string{"text:Hel", `text:lo "x"` + "\n", "finish:stop"},
			finish: llm.FinishStop,
		},
		{
			name: "split tool arguments",
			chunks: []string{
				tc(`{"index":0,"id":"call_1","type":"function","function":{"name":"weather","arguments":""}}`),
				tc(`{"index":0,"function":{"arguments":"{\"ci"}}`),
				tc(`{"index":0,"function":{"arguments":"ty\":\"Rome\"}"}}`),
				fin("tool_calls"),
			},
			want:   []string{"tool_call_start#0:call_1:weather:", `tool_call_delta#0:{"ci`, `tool_call_delta#0:ty":"Rome"}`, "finish:tool_calls"},
			calls:  []llm.ToolCall{{ID: "call_1", Name: "weather", Arguments: `{"city":"Rome"}`}},
			finish: llm.FinishToolCalls,
		},
		{
			name: "arguments null, missing and empty; whole {} in one chunk",
			chunks: []string{
				tc(`{"index":0,"id":"0","function":{"name":"now","arguments":null}}`),
				tc(`{"index":0,"id":"0","function":{"name":"now"}}`),
				tc(`{"index":0,"id":"0","function":{"name":"now","arguments":""}}`),
				tc(`{"index":0,"id":"0","function":{"name":"now","arguments":"{}"}}`),
				fin("tool_calls"),
			},
			want:   []string{"tool_call_start#0:0:now:", "tool_call_delta#0:{}", "finish:tool_calls"},
			calls:  []llm.ToolCall{{ID: "0", Name: "now", Arguments: "{}"}},
			finish: llm.FinishToolCalls,
		},
		{
			name: "a call whose arguments never arrive gets {}",
			chunks: []string{
				tc(`{"index":0,"id":"functions.now:0","function":{"name":"now","arguments":null}}`),
				`[DONE]`,
			},
			want:  []string{"tool_call_start#0:functions.now:0:now:", "tool_call_delta#0:{}"},
			calls: []llm.ToolCall{{ID: "functions.now:0", Name: "now", Arguments: "{}"}},
		},
		{
			name: "ids and names repeated in every chunk (Kimi via gateways)",
			chunks: []string{
				ch(`{"role":"assistant","content":""}`),
				tc(`{"index":0,"id":"functions.get_weather:0","type":"function","function":{"name":"get_weather","arguments":"{\"city\":"}}`),
				tc(`{"index":0,"id":"functions.get_weather:0","type":"function","function":{"name":"get_weather","arguments":"\"Paris\"}"}}`),
				tc(`{"index":1,"id":"functions.get_time:1","type":"function","function":{"name":"get_time","arguments":"{}"}}`),
				tc(`{"index":1,"id":"functions.get_time:1","type":"function","function":{"name":"get_time","arguments":""}}`),
				fin("stop"),
			},
			want: []string{
				`tool_call_start#0:functions.get_weather:0:get_weather:{"city":`, `tool_call_delta#0:"Paris"}`,
				"tool_call_start#1:functions.get_time:1:get_time:{}", "finish:tool_calls",
			},
			calls: []llm.ToolCall{
				{ID: "functions.get_weather:0", Name: "get_weather", Arguments: `{"city":"Paris"}`},
				{ID: "functions.get_time:1", Name: "get_time", Arguments: "{}"},
			},
			finish: llm.FinishToolCalls,
		},
		{
			name: "index reused with a new id opens a new call",
			chunks: []string{
				tc(`{"index":0,"id":"call_a","function":{"name":"f","arguments":"{\"n\":1}"}}`),
				tc(`{"index":0,"id":"call_b","function":{"name":"g","arguments":"{"}}`),
				tc(`{"index":0,"function":{"arguments":"}"}}`),
				fin("tool_calls"),
			},
			want: []string{`tool_call_start#0:call_a:f:{"n":1}`, "tool_call_start#1:call_b:g:{", "tool_call_delta#1:}", "finish:tool_calls"},
			calls: []llm.ToolCall{
				{ID: "call_a", Name: "f", Arguments: `{"n":1}`},
				{ID: "call_b", Name: "g", Arguments: "{}"},
			},
			finish: llm.FinishToolCalls,
		},
		{
			name: "missing index defaults to 0; text before the call; stop becomes tool_calls",
			chunks: []string{
				ch(`{"content":"Let me check."}`),
				tc(`{"id":"c1","function":{"name":"f","arguments":"{\"a\""}}`),
				tc(`{"function":{"arguments":":2}"}}`),
				fin("stop"),
			},
			want:   []string{"text:Let me check.", `tool_call_start#0:c1:f:{"a"`, "tool_call_delta#0::2}", "finish:tool_calls"},
			calls:  []llm.ToolCall{{ID: "c1", Name: "f", Arguments: `{"a":2}`}},
			finish: llm.FinishToolCalls,
		},
		{
			name: "a call with no id gets a synthetic one",
			chunks: []string{
				tc(`{"index":0,"function":{"name":"f","arguments":"{}"}}`),
				fin("tool_calls"),
			},
			want:   []string{"tool_call_start#0:call_0:f:{}", "finish:tool_calls"},
			calls:  []llm.ToolCall{{ID: "call_0", Name: "f", Arguments: "{}"}},
			finish: llm.FinishToolCalls,
		},
		{
			name: "legacy function_call delta",
			chunks: []string{
				ch(`{"function_call":{"name":"get_weather","arguments":""}}`),
				ch(`{"function_call":{"arguments":"{\"location\":\"Boston\"}"}}`),
				fin("function_call"),
			},
			want:   []string{"tool_call_start#0:call_0:get_weather:", `tool_call_delta#0:{"location":"Boston"}`, "finish:tool_calls"},
			calls:  []llm.ToolCall{{ID: "call_0", Name: "get_weather", Arguments: `{"location":"Boston"}`}},
			finish: llm.FinishToolCalls,
		},
		{
			name: "tool calls from another choice are kept apart",
			chunks: []string{
				`{"choices":[{"index":0,"delta":{"content":"zero","tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{}"}}]}},` +
					`{"index":1,"delta":{"content":"one","tool_calls":[{"index":0,"id":"b","function":{"name":"g","arguments":"{}"}}]}}]}`,
				fin("tool_calls"),
			},
			want:   []string{"text:zero", "tool_call_start#0:a:f:{}", "tool_call_start#1:b:g:{}", "finish:tool_calls"},
			calls:  []llm.ToolCall{{ID: "a", Name: "f", Arguments: "{}"}, {ID: "b", Name: "g", Arguments: "{}"}},
			finish: llm.FinishToolCalls,
		},
		{
			name: "reasoning precedence per chunk",
			chunks: []string{
				ch(`{"reasoning_content":"rc","reasoning":"r","reasoning_details":[{"type":"reasoning.text","text":"d"}]}`),
				ch(`{"reasoning_content":null,"reasoning":"r","reasoning_details":[{"type":"reasoning.text","text":"d"}]}`),
				ch(`{"reasoning_content":"","reasoning":null,"reasoning_details":[{"type":"reasoning.encrypted","data":"x"},{"type":"reasoning.summary","summary":"s"}]}`),
				ch(`{"reasoning":{"unexpected":1},"content":"answer"}`),
				fin("stop"),
			},
			want:   []string{"reasoning:rc", "reasoning:r", "reasoning:s", "text:answer", "finish:stop"},
			finish: llm.FinishStop,
		},
		{
			name:   "refusal",
			chunks: []string{ch(`{"refusal":"I can't"}`), ch(`{"refusal":" help."}`), fin("stop")},
			want:   []string{"refusal:I can't", "refusal: help.", "finish:content_filter"},
			finish: llm.FinishContentFilter,
		},
		{
			name:   "refusal in the finishing chunk",
			chunks: []string{`{"choices":[{"index":0,"delta":{"refusal":"No."},"finish_reason":"stop"}]}`, `[DONE]`},
			want:   []string{"refusal:No.", "finish:content_filter"},
			finish: llm.FinishContentFilter,
		},
		{
			name:   "refusal cut short keeps length",
			chunks: []string{ch(`{"refusal":"I can"}`), fin("length")},
			want:   []string{"refusal:I can", "finish:length"},
			finish: llm.FinishLength,
		},
		{
			name:   "unknown finish reason maps to empty",
			chunks: []string{ch(`{"content":"x"}`), fin("eos"), `[DONE]`},
			want:   []string{"text:x", "finish:"},
		},
		{
			name:   "content from other choices is ignored",
			chunks: []string{`{"choices":[{"index":1,"delta":{"content":"other"},"finish_reason":"length"},{"index":0,"delta":{"content":"mine"}}]}`, fin("stop")},
			want:   []string{"text:mine", "finish:stop"},
			finish: llm.FinishStop,
		},
		{
			name: "a repeated finish is reported once",
			chunks: []string{ch(`{"content":"x"}`), fin("length"),
				`{"choices":[{"index":0,"delta":{"content":""},"finish_reason":"length"}]}`},
			want:   []string{"text:x", "finish:length"},
			finish: llm.FinishLength,
		},
		{
			name: "unknown fields and obfuscation are skipped; logprobs are read",
			chunks: []string{
				`{"id":"x","obfuscation":"q{]\"","choices":[{"index":0,"logprobs":{"content":[{"token":"}"}]},"content_filter_results":{},"delta":{"channel":"analysis","content":"ok"},"native_finish_reason":null}],"x_unknown":[1,{"a":null}]}`,
				fin("stop"),
			},
			want:   []string{"text:ok", "logprobs:", "finish:stop"},
			finish: llm.FinishStop,
		},
		{
			name:   "whitespace around payloads and empty events",
			chunks: []string{"  ", "\n" + ch(`{"content":"a"}`) + "\n", " [DONE] "},
			want:   []string{"text:a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, d, _, err := feed(t, tt.chunks...)
			if err != nil {
				t.Fatalf("Feed: %v", err)
			}
			got := summary(evs)
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("events\n got: %q\nwant: %q", got, tt.want)
			}
			res := d.Result()
			if len(res.ToolCalls) != len(tt.calls) {
				t.Fatalf("calls %+v, want %+v", res.ToolCalls, tt.calls)
			}
			for i := range tt.calls {
				if res.ToolCalls[i] != tt.calls[i] {
					t.Errorf("call %d = %+v, want %+v", i, res.ToolCalls[i], tt.calls[i])
				}
			}
			if res.FinishReason != tt.finish {
				t.Errorf("finish = %q, want %q", res.FinishReason, tt.finish)
			}
			if !d.Complete() {
				t.Error("not complete")
			}
		})
	}
}

func TestStreamDecoderDone(t *testing.T) {
	d := Codec{}.NewStreamDecoder()
	if d.Complete() {
		t.Fatal("fresh decoder is complete")
	}
	nop := func(llm.Event) bool { return true }
	if done, err := d.Feed(nil, []byte(ch(`{"content":"x"}`)), nop); done || err != nil {
		t.Fatalf("chunk: done=%v err=%v", done, err)
	}
	if d.Complete() {
		t.Fatal("complete before a finish or [DONE]")
	}
	if done, err := d.Feed(nil, []byte("[DONE]"), nop); !done || err != nil {
		t.Fatalf("[DONE]: done=%v err=%v", done, err)
	}
	if !d.Complete() {
		t.Fatal("[DONE] did not complete the stream")
	}

	d = Codec{}.NewStreamDecoder()
	if done, err := d.Feed(nil, []byte(fin("stop")), nop); done || err != nil || !d.Complete() {
		t.Fatalf("finish chunk: done=%v err=%v complete=%v", done, err, d.Complete())
	}
}

func TestStreamDecoderUsage(t *testing.T) {
	// OpenAI include_usage: a chunk with empty choices after the finish.
	evs, d, _, err := feed(t,
		`{"id":"chatcmpl-1","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}],"usage":null}`,
		`{"id":"chatcmpl-1","model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}`,
		`{"id":"chatcmpl-1","model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":2,"total_tokens":22,"prompt_tokens_details":{"cached_tokens":8}}}`,
		`[DONE]`)
	if err != nil {
		t.Fatal(err)
	}
	want := llm.Usage{PromptTokens: 12, CacheReadTokens: 8, CompletionTokens: 2}
	last := evs[len(evs)-1]
	if last.Type != llm.EventUsage || last.Usage == nil || *last.Usage != want {
		t.Fatalf("last event = %+v", last)
	}
	res := d.Result()
	if res.Usage != want || res.ID != "chatcmpl-1" || res.Model != "gpt-4o-mini" || res.FinishReason != llm.FinishStop {
		t.Errorf("result = %+v", res)
	}

	// Groq without stream_options: usage under x_groq.
	groq := []string{
		ch(`{"content":"a"}`),
		`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"x_groq":{"id":"req_1","usage":{"queue_time":0.2,"prompt_tokens":20,"completion_tokens":4,"total_tokens":24}}}`,
	}
	_, d, _, err = feed(t, groq...)
	if err != nil {
		t.Fatal(err)
	}
	if u := d.Result().Usage; u != (llm.Usage{PromptTokens: 20, CompletionTokens: 4}) {
		t.Errorf("x_groq usage = %+v", u)
	}
	// Identical usage repeated in a later chunk is reported once; a
	// changed one is reported again.
	evs, d, _, err = feed(t, append(groq,
		`{"choices":[],"usage":{"prompt_tokens":20,"completion_tokens":4,"total_tokens":24}}`,
		`{"choices":[],"usage":{"prompt_tokens":20,"completion_tokens":5,"total_tokens":25}}`)...)
	if err != nil {
		t.Fatal(err)
	}
	if n := countEvents(evs, llm.EventUsage); n != 2 {
		t.Errorf("%d usage events, want 2", n)
	}
	if u := d.Result().Usage; u.CompletionTokens != 5 {
		t.Errorf("usage = %+v", u)
	}
}

func TestStreamDecoderErrors(t *testing.T) {
	t.Run("error chunk (OpenRouter)", func(t *testing.T) {
		evs, d, _, err := feed(t,
			ch(`{"content":"partial"}`),
			`{"id":"gen-1","error":{"code":502,"message":"Provider returned error"},"choices":[{"index":0,"delta":{"content":""},"finish_reason":null}]}`)
		var ae *llm.APIError
		if !errors.As(err, &ae) {
			t.Fatalf("err = %v", err)
		}
		if ae.Status != 0 || ae.Code != "502" || ae.Message != "Provider returned error" || !ae.Retryable {
			t.Errorf("APIError = %+v", *ae)
		}
		if d.Result().Content != "partial" || len(evs) != 1 {
			t.Errorf("partial result lost: %q, %d events", d.Result().Content, len(evs))
		}
	})
	t.Run("non-retryable error chunk", func(t *testing.T) {
		_, _, _, err := feed(t, `{"error":{"message":"This model's maximum context length is 8192 tokens","type":"invalid_request_error","code":"context_length_exceeded"}}`)
		var ae *llm.APIError
		if !errors.As(err, &ae) || ae.Retryable || ae.Code != "context_length_exceeded" {
			t.Errorf("err = %#v", err)
		}
	})
	t.Run("null error is no error", func(t *testing.T) {
		_, _, _, err := feed(t, `{"error":null,"choices":[{"index":0,"delta":{"content":"x"}}]}`)
		if err != nil {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("event: error (Groq)", func(t *testing.T) {
		_, _, _, err := feed(t, "event: error\n"+`{"error":{"message":"Tool call validation failed","type":"invalid_request_error","code":"tool_use_failed","status_code":400}}`)
		var ae *llm.APIError
		if !errors.As(err, &ae) || ae.Retryable || ae.Code != "tool_use_failed" || ae.Type != "invalid_request_error" {
			t.Errorf("err = %#v", err)
		}
	})
	t.Run("event: error with an unknown body", func(t *testing.T) {
		_, _, _, err := feed(t, "event: error\nupstream went away")
		var ae *llm.APIError
		if !errors.As(err, &ae) || ae.Message != "upstream went away" || !ae.Retryable {
			t.Errorf("err = %#v", err)
		}
	})
	for _, bad := range []string{
		`{"choices":[{"index":0,"delta":{"content":"x"}}`,
		`{"choices":[{"index":0,"delta":{"content":"x}}]}`,
		`not json`,
		`{"choices":{"index":0}}`,
		`{"choices":[{"index":"zero","delta":{}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\x"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"content":"bad \u12"}}]}`,
	} {
		t.Run("malformed "+bad, func(t *testing.T) {
			_, _, _, err := feed(t, bad)
			var de *llm.DecodeError
			if !errors.As(err, &de) {
				t.Errorf("err = %v, want *llm.DecodeError", err)
			}
		})
	}
}

func TestStreamDecoderAbort(t *testing.T) {
	d := Codec{}.NewStreamDecoder()
	calls := 0
	stop := func(llm.Event) bool { calls++; return false }
	_, err := d.Feed(nil, []byte(ch(`{"content":"x"}`)), stop)
	if !errors.Is(err, wire.ErrAborted) || calls != 1 {
		t.Fatalf("err = %v after %d emits, want wire.ErrAborted after 1", err, calls)
	}
	// Tool starts, finishes and usage abort the same way.
	for _, c := range []string{
		tc(`{"index":0,"id":"a","function":{"name":"f","arguments":"{}"}}`),
		fin("stop"),
		`{"choices":[],"usage":{"prompt_tokens":1}}`,
	} {
		d := Codec{}.NewStreamDecoder()
		if _, err := d.Feed(nil, []byte(c), stop); !errors.Is(err, wire.ErrAborted) {
			t.Errorf("%s: err = %v", c, err)
		}
	}
}

// TestStreamDecoderAllocsPerDelta holds the hot-path budget: at most two
// allocations per content delta (one is the delta string).
func TestStreamDecoderAllocsPerDelta(t *testing.T) {
	chunks := benchStream()
	d := Codec{}.NewStreamDecoder()
	emit := func(llm.Event) bool { return true }
	for _, c := range chunks[:10] {
		if _, err := d.Feed(nil, c, emit); err != nil {
			t.Fatal(err)
		}
	}
	delta := chunks[5]
	allocs := testing.AllocsPerRun(2000, func() {
		if _, err := d.Feed(nil, delta, emit); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 2 {
		t.Errorf("%.2f allocations per content delta, budget 2", allocs)
	}
}

// FuzzStreamDecoder: any payload decodes to events or a typed error, never
// a panic, and tool events always point at a known call.
func FuzzStreamDecoder(f *testing.F) {
	for _, c := range benchStream()[:3] {
		f.Add(string(c))
	}
	f.Add(tc(`{"index":0,"id":"a","function":{"name":"f","arguments":"{\"x\":1}"}}`))
	f.Add(`{"error":{"code":400,"message":"m"},"choices":[]}`)
	f.Add(ch(`{"reasoning_details":[{"type":"reasoning.text","text":"t"}]}`))
	f.Add(`{"choices":[],"usage":{"prompt_tokens":1,"prompt_tokens_details":{"cached_tokens":2}}}`)
	f.Fuzz(func(t *testing.T, data string) {
		d := Codec{}.NewStreamDecoder()
		calls := 0
		_, err := d.Feed(nil, []byte(data), func(ev llm.Event) bool {
			switch ev.Type {
			case llm.EventToolCallStart:
				if ev.ToolIndex != calls {
					t.Fatalf("start at %d with %d calls", ev.ToolIndex, calls)
				}
				calls++
			case llm.EventToolCallDelta:
				if ev.ToolIndex < 0 || ev.ToolIndex >= calls {
					t.Fatalf("delta for %d with %d calls", ev.ToolIndex, calls)
				}
			}
			return true
		})
		if err != nil {
			var de *llm.DecodeError
			var ae *llm.APIError
			if !errors.As(err, &de) && !errors.As(err, &ae) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
		}
		_ = d.Result()
	})
}

// A streamed tool call whose first chunk names no function is malformed:
// a *llm.DecodeError, never a nameless call (as in a buffered answer).
func TestStreamNamelessToolCall(t *testing.T) {
	for _, first := range []string{`{"index":0}`, `{"index":0,"id":"c1","type":"function","function":{"arguments":"{}"}}`} {
		evs, _, _, err := feed(t, tc(first), fin("tool_calls"), "[DONE]")
		var de *llm.DecodeError
		if !errors.As(err, &de) {
			t.Errorf("%s: events %+v, err %v; want *llm.DecodeError", first, evs, err)
		}
		for _, ev := range evs {
			if ev.Type == llm.EventToolCallStart {
				t.Errorf("%s: a nameless call started: %+v", first, ev)
			}
		}
	}
}
