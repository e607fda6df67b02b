package langchaingo_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tmc/langchaingo/llms"

	chorus "github.com/chorusrt/chorus/integrations/langchaingo"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
)

var (
	_ chorus.Client = (*runtime.Runtime)(nil)
	_ chorus.Client = (*providers.Client)(nil)
)

func newLLM(t *testing.T, c chorus.Client, cfg chorus.Config) *chorus.LLM {
	t.Helper()
	m, err := chorus.New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

var human = []llms.MessageContent{llms.TextParts(llms.ChatMessageTypeHuman, "hi")}

// TestOptionsReachTheRequest: LangChainGo's call options, tools and tool
// choice, thinking config and WithRequest are what the provider receives.
func TestOptionsReachTheRequest(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rt := newRT(t, runtime.WithProvider(wires[0].cfg(srv)))
	m := newLLM(t, rt, chorus.Config{Model: "openai/gpt-default", MaxTokens: 10})
	srv.Push(llmtest.Text("ok"))
	_, err := m.GenerateContent(ctxT(t, 5*time.Second), human,
		llms.WithModel("openai/gpt-other"), llms.WithTemperature(0.7), llms.WithMaxTokens(77), llms.WithTopP(0.5),
		llms.WithStopWords([]string{"END"}), llms.WithSeed(42), llms.WithJSONMode(),
		llms.WithTools([]llms.Tool{{Type: "function", Function: &llms.FunctionDefinition{Name: "get_weather", Description: "weather",
			Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}}),
		llms.WithToolChoice(llms.ToolChoice{Type: "function", Function: &llms.FunctionReference{Name: "get_weather"}}),
		chorus.WithRequest(func(r *llm.ChatRequest) { r.Headers = map[string]string{"X-Trace": "t-2"} }))
	if err != nil {
		t.Fatal(err)
	}
	r := srv.Requests()[0]
	b := body(t, r)
	if b["model"] != "gpt-other" || b["temperature"] != 0.7 || b["top_p"] != 0.5 || b["seed"] != 42.0 {
		t.Errorf("fields: %s", r.Body)
	}
	if b["max_tokens"] != 77.0 && b["max_completion_tokens"] != 77.0 {
		t.Errorf("max tokens: %s", r.Body)
	}
	for _, want := range []string{`"stop":["END"]`, `"json_object"`, `"name":"get_weather"`, `"city"`} {
		if !strings.Contains(string(r.Body), want) {
			t.Errorf("request lacks %s: %s", want, r.Body)
		}
	}
	if tc, _ := json.Marshal(b["tool_choice"]); !strings.Contains(string(tc), `"get_weather"`) {
		t.Errorf("tool choice %s", tc)
	}
	if r.Header.Get("X-Trace") != "t-2" {
		t.Errorf("WithRequest header missing")
	}
	for _, o := range []llms.CallOption{llms.WithTopK(3), llms.WithN(2), llms.WithFrequencyPenalty(0.5), llms.WithToolChoice(7)} {
		var ue *chorus.UnsupportedError
		if _, err := m.GenerateContent(ctxT(t, 5*time.Second), human, o); !errors.As(err, &ue) || ue.Message != -1 {
			t.Errorf("an option Chorus lacks: %v", err)
		}
	}
	if srv.Count() != 1 {
		t.Errorf("%d requests; refused options must send nothing", srv.Count())
	}

	// LangChainGo's thinking config becomes Chorus reasoning (here an
	// Anthropic thinking budget).
	an := llmtest.NewServer()
	defer an.Close()
	m = newLLM(t, newRT(t, runtime.WithProvider(wires[1].cfg(an))), chorus.Config{Model: wires[1].model, MaxTokens: 4096})
	an.Push(llmtest.Text("ok"))
	if _, err := m.GenerateContent(ctxT(t, 5*time.Second), human, llms.WithThinkingBudget(2048)); err != nil {
		t.Fatal(err)
	}
	if got := string(an.Requests()[0].Body); !strings.Contains(got, `"budget_tokens":2048`) {
		t.Errorf("thinking budget not sent: %s", got)
	}
}

// TestResponseMaps: text, reasoning, tool calls, the finish reason and the
// usage (with cached tokens) in LangChainGo's fields, on every format.
func TestResponseMaps(t *testing.T) {
	u := llm.Usage{PromptTokens: 10, CacheReadTokens: 30, CompletionTokens: 5, ReasoningTokens: 2}
	for _, w := range wires {
		t.Run(w.name, func(t *testing.T) {
			srv := llmtest.NewServer()
			defer srv.Close()
			rt := newRT(t, runtime.WithProvider(w.cfg(srv)))
			m := newLLM(t, rt, chorus.Config{Model: w.model})
			srv.Push(llmtest.Respond(llmtest.Reply{Reasoning: "let me think", Text: "checking", Usage: &u,
				ToolCalls: []llm.ToolCall{{Name: "get_weather", Arguments: `{"city":"Oslo"}`}, {Name: "get_weather", Arguments: `{"city":"Bergen"}`}}}))
			res, err := m.GenerateContent(ctxT(t, 5*time.Second), human)
			if err != nil {
				t.Fatal(err)
			}
			c := res.Choices[0]
			if c.Content != "checking" || c.ReasoningContent != "let me think" || c.StopReason != "tool_calls" {
				t.Errorf("choice %+v", c)
			}
			if len(c.ToolCalls) != 2 || c.ToolCalls[1].FunctionCall.Arguments != `{"city":"Bergen"}` || c.ToolCalls[0].ID == c.ToolCalls[1].ID {
				t.Errorf("tool calls %+v", c.ToolCalls)
			}
			gi := c.GenerationInfo
			reasoning := 2
			if w.name == "anthropic" {
				reasoning = 0
			}
			if gi["PromptTokens"] != 40 || gi["PromptCachedTokens"] != 30 || gi["CacheReadInputTokens"] != 30 || gi["InputTokens"] != 10 ||
				gi["CompletionTokens"] != 5 || gi["TotalTokens"] != 45 || gi["ReasoningTokens"] != reasoning {
				t.Errorf("generation info %v", gi)
			}
		})
	}
}

// TestStreamingFuncs: text deltas reach StreamingFunc, reasoning and text
// deltas StreamingReasoningFunc, in order; the response is the whole answer.
func TestStreamingFuncs(t *testing.T) {
	for _, w := range wires {
		t.Run(w.name, func(t *testing.T) {
			srv := llmtest.NewServer()
			defer srv.Close()
			rt := newRT(t, runtime.WithProvider(w.cfg(srv)))
			m := newLLM(t, rt, chorus.Config{Model: w.model})
			srv.Push(llmtest.Respond(llmtest.Reply{Reasoning: "think first", Deltas: []string{"Hel", "lo."}}))
			var text, both []string
			res, err := m.GenerateContent(ctxT(t, 5*time.Second), human,
				llms.WithStreamingFunc(func(ctx context.Context, chunk []byte) error { text = append(text, string(chunk)); return nil }),
				llms.WithStreamingReasoningFunc(func(ctx context.Context, r, c []byte) error {
					if len(r) > 0 {
						both = append(both, "r:"+string(r))
					}
					if len(c) > 0 {
						both = append(both, "c:"+string(c))
					}
					return nil
				}))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(text, "|") != "Hel|lo." {
				t.Errorf("streaming func got %q", text)
			}
			joined := strings.Join(both, "")
			if !strings.HasPrefix(joined, "r:") || strings.ReplaceAll(strings.ReplaceAll(joined, "r:", ""), "c:", "") != "think firstHello." {
				t.Errorf("reasoning func got %q", both)
			}
			if c := res.Choices[0]; c.Content != "Hello." || c.ReasoningContent != "think first" || c.StopReason != "stop" || !srv.Requests()[0].Stream {
				t.Errorf("streamed choice %+v", c)
			}
		})
	}
}

// TestStreamingFuncErrorStops: an error from the streaming func stops the
// call, is returned, and releases the connection.
func TestStreamingFuncErrorStops(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rt := newRT(t, runtime.WithProvider(wires[0].cfg(srv)))
	m := newLLM(t, rt, chorus.Config{Model: wires[0].model})
	srv.Push(llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultStall, After: 1, Stall: time.Minute, Reply: &llmtest.Reply{Deltas: []string{"one", "two"}}}))
	stop := errors.New("enough")
	_, err := m.GenerateContent(ctxT(t, 10*time.Second), human,
		llms.WithStreamingFunc(func(ctx context.Context, chunk []byte) error { return stop }))
	if !errors.Is(err, stop) {
		t.Fatalf("got %v, want the streaming func's error", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for srv.OpenConns() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if srv.OpenConns() > 0 {
		t.Errorf("%d connections open", srv.OpenConns())
	}
}

// TestReplayRoundTrips: appending the Replay part to the assistant message
// sends signed reasoning back (Anthropic signatures, Gemini tool-call
// signatures).
func TestReplayRoundTrips(t *testing.T) {
	cases := []struct {
		w     wire
		reply llmtest.Reply
		want  string
	}{
		{wires[1], llmtest.Reply{Reasoning: "thinking hard", Signature: "sig-anthropic-2", Text: "done"}, `"signature":"sig-anthropic-2"`},
		{wires[2], llmtest.Reply{ToolCalls: []llm.ToolCall{{Name: "get_weather", Arguments: `{"city":"Oslo"}`, Signature: "sig-gemini-2"}}}, `"thoughtSignature":"sig-gemini-2"`},
	}
	for _, c := range cases {
		srv := llmtest.NewServer()
		rt := newRT(t, runtime.WithProvider(c.w.cfg(srv)))
		m := newLLM(t, rt, chorus.Config{Model: c.w.model})
		srv.Push(llmtest.Respond(c.reply), llmtest.Text("next"))
		res, err := m.GenerateContent(ctxT(t, 5*time.Second), human)
		if err != nil {
			t.Fatal(err)
		}
		ch := res.Choices[0]
		ai := llms.MessageContent{Role: llms.ChatMessageTypeAI}
		if ch.Content != "" {
			ai.Parts = append(ai.Parts, llms.TextPart(ch.Content))
		}
		var results []llms.MessageContent
		for _, tc := range ch.ToolCalls {
			ai.Parts = append(ai.Parts, tc)
			results = append(results, llms.MessageContent{Role: llms.ChatMessageTypeTool,
				Parts: []llms.ContentPart{llms.ToolCallResponse{ToolCallID: tc.ID, Name: tc.FunctionCall.Name, Content: "sunny"}}})
		}
		ai.Parts = append(ai.Parts, ch.GenerationInfo[chorus.GenerationReplay].(chorus.Replay))
		hist := append(append(append(human, ai), results...), llms.TextParts(llms.ChatMessageTypeHuman, "and?"))
		if _, err := m.GenerateContent(ctxT(t, 5*time.Second), hist); err != nil {
			t.Fatal(err)
		}
		if second := string(srv.Requests()[1].Body); !strings.Contains(second, c.want) {
			t.Errorf("%s: replay lacks %s: %s", c.w.name, c.want, second)
		}
		srv.Close()
	}
}

// TestImagesAndUnsupportedParts: images (URL, data URL, binary) and PDFs
// are sent; a role or part Chorus cannot express is an error naming it and
// nothing is sent.
func TestImagesAndUnsupportedParts(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rt := newRT(t, runtime.WithProvider(wires[1].cfg(srv)))
	m := newLLM(t, rt, chorus.Config{Model: wires[1].model})
	gif := base64.StdEncoding.EncodeToString([]byte("gif-bytes"))
	srv.Push(llmtest.Text("a cat"))
	_, err := m.GenerateContent(ctxT(t, 5*time.Second), []llms.MessageContent{{Role: llms.ChatMessageTypeHuman, Parts: []llms.ContentPart{
		llms.TextPart("what is this?"), llms.ImageURLPart("https://example.test/cat.jpg"), llms.ImageURLPart("data:image/gif;base64," + gif),
		llms.BinaryPart("image/png", []byte("png-bytes")), llms.BinaryPart("application/pdf", []byte("%PDF-1.4")),
	}}})
	if err != nil {
		t.Fatal(err)
	}
	got := string(srv.Requests()[0].Body)
	for _, want := range []string{"what is this?", "https://example.test/cat.jpg", gif, `"image/gif"`, base64.StdEncoding.EncodeToString([]byte("png-bytes")),
		`"application/pdf"`, base64.StdEncoding.EncodeToString([]byte("%PDF-1.4"))} {
		if !strings.Contains(got, want) {
			t.Errorf("request lacks %s: %s", want, got)
		}
	}
	bad := []struct {
		mc   llms.MessageContent
		want string
	}{
		{llms.MessageContent{Role: "critic", Parts: []llms.ContentPart{llms.TextPart("x")}}, `role "critic"`},
		{llms.MessageContent{Role: llms.ChatMessageTypeHuman, Parts: []llms.ContentPart{llms.BinaryPart("audio/wav", []byte("wav"))}}, `"audio/wav"`},
		{llms.MessageContent{Role: llms.ChatMessageTypeHuman, Parts: []llms.ContentPart{llms.ToolCallResponse{ToolCallID: "c", Content: "x"}}}, "a tool result in a human message"},
		{llms.MessageContent{Role: llms.ChatMessageTypeTool, Parts: []llms.ContentPart{llms.TextPart("x")}}, "in a tool message"},
		{llms.MessageContent{Role: llms.ChatMessageTypeHuman, Parts: []llms.ContentPart{llms.ToolCall{ID: "c", FunctionCall: &llms.FunctionCall{Name: "f"}}}}, "a tool call in a human message"},
	}
	for _, b := range bad {
		var ue *chorus.UnsupportedError
		_, err := m.GenerateContent(ctxT(t, 5*time.Second), append(append([]llms.MessageContent(nil), human...), b.mc))
		if !errors.As(err, &ue) || ue.Message != 1 || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s: got %v", b.want, err)
		}
	}
	if srv.Count() != 1 {
		t.Errorf("%d requests were sent", srv.Count())
	}
}

// TestCallOverAProvidersClient: Call works, over a plain providers.Client.
func TestCallOverAProvidersClient(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	pc, err := providers.New(wires[0].cfg(srv), providers.WithRetryPolicy(fast), providers.WithIdleTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	m := newLLM(t, pc, chorus.Config{Model: "gpt-plain"})
	srv.Push(llmtest.Text("plain answer"))
	out, err := m.Call(ctxT(t, 5*time.Second), "say something")
	if err != nil || out != "plain answer" {
		t.Fatalf("Call: %q %v", out, err)
	}
	if r := srv.Requests()[0]; r.Model != "gpt-plain" || !strings.Contains(string(r.Body), "say something") {
		t.Errorf("request %s", r.Body)
	}
}

// TestFinishReasonsAndRefusal: a cut answer stops "length", a refusal
// "content_filter" with its text as the content and under Refusal,
// buffered and streamed.
func TestFinishReasonsAndRefusal(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rt := newRT(t, runtime.WithProvider(wires[0].cfg(srv)))
	m := newLLM(t, rt, chorus.Config{Model: wires[0].model})
	for _, streamed := range []bool{false, true} {
		srv.Push(llmtest.Respond(llmtest.Reply{Text: "cut sho", Finish: llm.FinishLength}), llmtest.Respond(llmtest.Reply{Refusal: "I cannot help with that."}))
		for _, want := range []struct{ content, finish, refusal string }{{"cut sho", "length", ""}, {"I cannot help with that.", "content_filter", "I cannot help with that."}} {
			var opts []llms.CallOption
			var streamedText string
			if streamed {
				opts = append(opts, llms.WithStreamingFunc(func(ctx context.Context, c []byte) error { streamedText += string(c); return nil }))
			}
			res, err := m.GenerateContent(ctxT(t, 5*time.Second), human, opts...)
			if err != nil {
				t.Fatal(err)
			}
			c := res.Choices[0]
			refusal, _ := c.GenerationInfo[chorus.GenerationRefusal].(string)
			if c.Content != want.content || c.StopReason != want.finish || refusal != want.refusal || streamed && streamedText != want.content {
				t.Errorf("streamed=%v: content %q (streamed %q) stop %q refusal %q, want %+v", streamed, c.Content, streamedText, c.StopReason, refusal, want)
			}
		}
	}
}
