package gemini

import (
	"errors"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/llm"
)

// TestParseChatFixtures parses every buffered generateContent answer of the
// corpus and checks it against the reference decoder.
func TestParseChatFixtures(t *testing.T) {
	n := 0
	for _, x := range geminiExchanges(t) {
		if chatKind(x.ex) != kindBuffered {
			continue
		}
		n++
		t.Run(x.name, func(t *testing.T) {
			res, err := Codec{}.ParseChat(x.ex.Response.Body)
			if err != nil {
				t.Fatalf("ParseChat: %v", err)
			}
			checkResult(t, res, reference(t, [][]byte{x.ex.Response.Body}))
		})
	}
	if n < 20 {
		t.Fatalf("only %d buffered answers found; the corpus has more", n)
	}
}

// TestParseChatOtherBodies feeds the corpus's other JSON bodies (embeddings,
// model lists, countTokens, cachedContents, errors) to ParseChat: an error
// envelope is an *llm.APIError, anything else parses to an empty result with
// no content, call or finish invented.
func TestParseChatOtherBodies(t *testing.T) {
	n := 0
	for _, x := range geminiExchanges(t) {
		body := strings.TrimSpace(string(x.ex.Response.Body))
		if chatKind(x.ex) != kindNone || x.ex.Response.Stream || !strings.HasPrefix(body, "{") {
			continue
		}
		n++
		t.Run(x.name, func(t *testing.T) {
			res, err := Codec{}.ParseChat(x.ex.Response.Body)
			if strings.Contains(body[:min(len(body), 40)], `"error"`) {
				var ae *llm.APIError
				if !errors.As(err, &ae) || ae.Message == "" {
					t.Fatalf("error body gave %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseChat: %v", err)
			}
			// Usage is read where the body has usageMetadata (embeddings do).
			if res.Content != "" || res.ToolCalls != nil || res.FinishReason != "" || res.ThinkingBlocks != nil || res.ID != "" {
				t.Errorf("a non-chat body produced %+v", res)
			}
		})
	}
	if n < 10 {
		t.Fatalf("only %d other bodies", n)
	}
}

// TestStreamFixtures decodes every streamed answer of the corpus: alt=sse
// bodies through the SSE reader, JSON-array bodies (recorded without
// alt=sse) element by element.
func TestStreamFixtures(t *testing.T) {
	counts := map[int]int{}
	for _, x := range geminiExchanges(t) {
		kind := chatKind(x.ex)
		if kind != kindSSE && kind != kindArray {
			continue
		}
		counts[kind]++
		t.Run(x.name, func(t *testing.T) {
			var run streamRun
			if kind == kindSSE {
				run = runSSE(t, x.ex.Response.Body)
			} else {
				run = runArray(t, x.ex.Response.Body)
			}
			ref := reference(t, run.chunks)
			res := run.dec.Result()
			checkResult(t, res, ref)
			if run.dec.Complete() != ref.finished {
				t.Errorf("Complete() = %v, want %v", run.dec.Complete(), ref.finished)
			}
			if !run.dec.Complete() {
				t.Error("every recorded stream finishes; Complete() is false")
			}
			checkEvents(t, run.events, res, run.dec.Complete())
			if kind == kindArray {
				// The same body through ParseChat gives the same answer.
				buf, err := Codec{}.ParseChat(x.ex.Response.Body)
				if err != nil {
					t.Fatalf("ParseChat(array): %v", err)
				}
				checkResult(t, buf, ref)
			}
		})
	}
	if counts[kindSSE] < 20 || counts[kindArray] < 10 {
		t.Fatalf("found %d SSE and %d array streams; the corpus has more", counts[kindSSE], counts[kindArray])
	}
}

// TestLegacyIntEnumTraces checks langchaingo's enum-encoding=int traces: the
// integer finishReason 1 is STOP (tool_calls with calls), in a buffered body
// and in a JSON-array stream.
func TestLegacyIntEnumTraces(t *testing.T) {
	x := findExchange(t, "TestGoogleAIToolCallResponse.httprr", 0)
	if !strings.Contains(string(x.Response.Body), `"finishReason": 1`) {
		t.Fatal("fixture no longer holds an integer finishReason")
	}
	res, err := Codec{}.ParseChat(x.Response.Body)
	if err != nil {
		t.Fatal(err)
	}
	if res.FinishReason != llm.FinishToolCalls {
		t.Errorf("FinishReason = %q, want tool_calls", res.FinishReason)
	}
	if len(res.ToolCalls) != 1 || res.ToolCalls[0].Name != "calculate" || res.ToolCalls[0].Arguments != `{"expression":"15 * 7"}` || res.ToolCalls[0].ID != "call_0" {
		t.Errorf("ToolCalls = %+v", res.ToolCalls)
	}
	if want := (llm.Usage{PromptTokens: 21, CompletionTokens: 7}); res.Usage != want {
		t.Errorf("Usage = %+v, want %+v", res.Usage, want)
	}

	run := runArray(t, findExchange(t, "TestGoogleAIToolCallResponse.httprr", 1).Response.Body)
	if !run.dec.Complete() || run.dec.Result().FinishReason != llm.FinishStop {
		t.Errorf("array stream: Complete %v, finish %q", run.dec.Complete(), run.dec.Result().FinishReason)
	}
	if got := run.dec.Result().Content; got != "15 * 7 is 105.\n" {
		t.Errorf("Content = %q", got)
	}
}

// TestStreamThoughtSignatures checks that signatures stay on their parts in
// the recordings that show them.
func TestStreamThoughtSignatures(t *testing.T) {
	t.Run("pydantic-ai test_google_streaming_tool_call_thought_signature", func(t *testing.T) {
		x := findExchange(t, "test_google_streaming_tool_call_thought_signature.yaml", 0)
		run := runSSE(t, x.Response.Body)
		res := run.dec.Result()
		if len(res.ToolCalls) != 1 {
			t.Fatalf("calls %+v", res.ToolCalls)
		}
		tc := res.ToolCalls[0]
		if tc.Name != "get_country" || tc.Arguments != "{}" || !strings.HasPrefix(tc.Signature, "EpwICpkIAXLI2nx") {
			t.Errorf("call = %q %q sig %.20q", tc.Name, tc.Arguments, tc.Signature)
		}
		if res.FinishReason != llm.FinishToolCalls {
			t.Errorf("finish %q", res.FinishReason)
		}
		var start *llm.Event
		for i := range run.events {
			if run.events[i].Type == llm.EventToolCallStart {
				start = &run.events[i]
			}
		}
		if start == nil || start.Signature != tc.Signature || start.Text != "{}" {
			t.Errorf("start event %+v", start)
		}
		if len(res.ThinkingBlocks) != 0 {
			t.Errorf("no text part carried a signature, got blocks %+v", res.ThinkingBlocks)
		}
	})
	t.Run("fantasy gemini-2.5-pro thinking-streaming", func(t *testing.T) {
		x := findExchange(t, "TestGoogleThinking/gemini-2.5-pro/thinking-streaming.yaml", 0)
		res := runSSE(t, x.Response.Body).dec.Result()
		if len(res.ThinkingBlocks) != 1 || !strings.HasPrefix(res.ThinkingBlocks[0].Text, "**Mapping the Inquiry**") || res.ThinkingBlocks[0].Signature != "" {
			t.Errorf("thinking blocks %+v", res.ThinkingBlocks)
		}
		if len(res.ToolCalls) != 1 || res.ToolCalls[0].Signature == "" || res.ToolCalls[0].ID != "call_0" {
			t.Errorf("calls %+v", res.ToolCalls)
		}
	})
	t.Run("fantasy gemini-3-pro-preview thinking-streaming", func(t *testing.T) {
		x := findExchange(t, "TestGoogleThinking/gemini-3-pro-preview/thinking-streaming.yaml", 0)
		res := runSSE(t, x.Response.Body).dec.Result()
		if len(res.ToolCalls) != 1 || res.ToolCalls[0].ID != "9d532gc9" || !strings.HasPrefix(res.ToolCalls[0].Signature, "Eu0DCuoDAb4") {
			t.Errorf("calls %+v", res.ToolCalls)
		}
		// The answer's signature arrives on a final empty text part.
		x = findExchange(t, "TestGoogleThinking/gemini-3-pro-preview/thinking-streaming.yaml", 1)
		res = runSSE(t, x.Response.Body).dec.Result()
		if len(res.ThinkingBlocks) != 1 || res.ThinkingBlocks[0].Text != "" || !strings.HasPrefix(res.ThinkingBlocks[0].Signature, "EtACCs0CAb4") {
			t.Errorf("thinking blocks %+v", res.ThinkingBlocks)
		}
		if !strings.HasPrefix(res.Content, "The current weather in Florence") {
			t.Errorf("Content %q", res.Content)
		}
	})
	t.Run("pydantic-ai thinking_part_iter: signature on the first answer part", func(t *testing.T) {
		x := findExchange(t, "test_google_model_thinking_part_iter.yaml", 0)
		res := runSSE(t, x.Response.Body).dec.Result()
		if len(res.ThinkingBlocks) != 2 {
			t.Fatalf("%d blocks, want the merged thoughts and the text signature", len(res.ThinkingBlocks))
		}
		if b := res.ThinkingBlocks[0]; b.Text != res.Reasoning || b.Signature != "" {
			t.Errorf("first block should hold every thought chunk, unsigned: %.40q sig %q", b.Text, b.Signature)
		}
		if b := res.ThinkingBlocks[1]; b.Text != "" || b.Signature == "" {
			t.Errorf("second block should be the text part's signature: %+v", b)
		}
	})
}

// TestStreamPartialArgs checks Vertex AI's streamed function-call arguments
// (partialArgs) against the exact arguments they spell.
func TestStreamPartialArgs(t *testing.T) {
	cases := []struct {
		file  string
		names []string
		args  []string
	}{
		{"google-stream-tool-call-arguments.chunks.txt", []string{"getWeather", "getWeather"},
			[]string{`{"location":"Boston"}`, `{"location":"San Francisco"}`}},
		{"google-stream-no-args-tool-call.chunks.txt", []string{"read_theme", "read_screen", "read_screen", "read_screen"},
			[]string{`{}`, `{"id":"A"}`, `{"id":"B"}`, `{"id":"C"}`}},
		{"google-stream-tool-call-array-arguments-missing-terminal-function-call.chunks.txt", []string{"writeItems"},
			[]string{`{"operations":[{"action":"add","description":"Fresh red apple","itemid":"apple_001","price":0.5},{"action":"add","description":"Ripe yellow banana","itemid":"banana_001","price":0.3}]}`}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			run := runSSE(t, findExchange(t, c.file, 0).Response.Body)
			res := run.dec.Result()
			if len(res.ToolCalls) != len(c.names) {
				t.Fatalf("%d calls, want %d: %+v", len(res.ToolCalls), len(c.names), res.ToolCalls)
			}
			for i, tc := range res.ToolCalls {
				if tc.Name != c.names[i] || tc.Arguments != c.args[i] {
					t.Errorf("call %d = %s %s, want %s %s", i, tc.Name, tc.Arguments, c.names[i], c.args[i])
				}
			}
			if res.ToolCalls[0].Signature == "" {
				t.Error("the first call's signature was lost")
			}
			if res.FinishReason != llm.FinishToolCalls || !run.dec.Complete() {
				t.Errorf("finish %q complete %v", res.FinishReason, run.dec.Complete())
			}
			deltas := 0
			for _, ev := range run.events {
				if ev.Type == llm.EventToolCallDelta {
					deltas++
				}
			}
			if deltas < len(c.names)-1 {
				t.Errorf("only %d argument deltas: arguments did not stream", deltas)
			}
		})
	}
	t.Run("nested recipe", func(t *testing.T) {
		res := runSSE(t, findExchange(t, "google-vertex-stream-tool-call-arguments-nested.1.chunks.txt", 0).Response.Body).dec.Result()
		if len(res.ToolCalls) != 1 {
			t.Fatalf("calls %+v", res.ToolCalls)
		}
		args := res.ToolCalls[0].Arguments
		for _, want := range []string{`{"recipe":{"ingredients":[{"amount":"16 oz","name":"Lasagna noodles"},`, `"name":"Lasagna","steps":["Preheat oven to 375°F (190°C).",`, `"In a 9x13 baking dish, spread a thin layer of meat sauce.",`, `"Let stand for 15 minutes before serving."]}}`} {
			if !strings.Contains(args, want) {
				t.Errorf("arguments lack %s:\n%s", want, args)
			}
		}
	})
}

// TestErrorFixtures reads the recorded error bodies.
func TestErrorFixtures(t *testing.T) {
	cases := []struct {
		file, status string
	}{
		{"TestGoogleAIErrorHandling.httprr", "PERMISSION_DENIED"},
		{"test_model_name_suggestion[google].yaml", "NOT_FOUND"},
		{"TestGoogle.test_count_tokens_error.yaml", "NOT_FOUND"},
		{"google-429-retry-info.json", "RESOURCE_EXHAUSTED"},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			x := findExchange(t, c.file, 0)
			info := Codec{}.ParseError(x.Response.Status, x.Response.Body)
			if info.Type != c.status || info.Code != c.status || info.Message == "" {
				t.Errorf("ParseError = %+v", info)
			}
			_, err := Codec{}.ParseChat(x.Response.Body)
			var ae *llm.APIError
			if !errors.As(err, &ae) || ae.Type != c.status || ae.Message != info.Message {
				t.Errorf("ParseChat error = %v", err)
			}
			if want := c.status == "RESOURCE_EXHAUSTED"; ae != nil && ae.Retryable != want {
				t.Errorf("Retryable = %v, want %v", ae.Retryable, want)
			}
		})
	}
	x := findExchange(t, "google-429-retry-info.json", 0)
	if d := RetryDelay(x.Response.Body); d.String() != "34.4s" {
		t.Errorf("RetryDelay = %v, want 34.4s", d)
	}
}
