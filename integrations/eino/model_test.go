package eino_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudwego/eino/callbacks"
	"github.com/cloudwego/eino/components"
	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/schema"

	chorus "github.com/chorusrt/chorus/integrations/eino"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
)

var (
	_ chorus.Client = (*runtime.Runtime)(nil)
	_ chorus.Client = (*providers.Client)(nil)
)

var weatherInfo = &schema.ToolInfo{Name: "get_weather", Desc: "Current weather",
	ParamsOneOf: schema.NewParamsOneOfByParams(map[string]*schema.ParameterInfo{"city": {Type: schema.String, Required: true}})}
var otherInfo = &schema.ToolInfo{Name: "other_tool", Desc: "Something else"}

func newModel(t *testing.T, c chorus.Client, cfg chorus.Config) *chorus.ChatModel {
	t.Helper()
	m, err := chorus.New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestOptionsReachTheRequest: eino's common options and Chorus's own
// (implementation-specific) options are what the provider receives.
func TestOptionsReachTheRequest(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rt := newRT(t, runtime.WithProvider(wires[0].cfg(srv)))
	base := newModel(t, rt, chorus.Config{Model: "openai/gpt-default", MaxTokens: 10, Temperature: llm.Ptr(0.1)})
	tm, err := base.WithTools([]*schema.ToolInfo{weatherInfo, otherInfo})
	if err != nil {
		t.Fatal(err)
	}
	srv.Push(llmtest.Text("ok"))
	_, err = tm.Generate(ctxT(t, 5*time.Second), []*schema.Message{schema.UserMessage("hi")},
		model.WithTemperature(0.7), model.WithMaxTokens(77), model.WithTopP(0.5), model.WithStop([]string{"END"}),
		model.WithModel("openai/gpt-other"), model.WithToolChoice(schema.ToolChoiceForced, "get_weather"),
		chorus.WithSeed(42), chorus.WithParallelToolCalls(false), chorus.WithHeaders(map[string]string{"X-Trace": "t-1"}))
	if err != nil {
		t.Fatal(err)
	}
	r := srv.Requests()[0]
	b := body(t, r)
	if b["model"] != "gpt-other" || b["temperature"] != 0.7 || b["top_p"] != 0.5 || b["seed"] != 42.0 || b["parallel_tool_calls"] != false {
		t.Errorf("sampling fields: %s", r.Body)
	}
	if b["max_tokens"] != 77.0 && b["max_completion_tokens"] != 77.0 {
		t.Errorf("max tokens: %s", r.Body)
	}
	if stop, _ := json.Marshal(b["stop"]); string(stop) != `["END"]` {
		t.Errorf("stop %s", stop)
	}
	if tc, _ := json.Marshal(b["tool_choice"]); !strings.Contains(string(tc), `"name":"get_weather"`) {
		t.Errorf("tool choice %s", tc)
	}
	if tools, _ := b["tools"].([]any); len(tools) != 1 || !strings.Contains(string(r.Body), `"city"`) {
		t.Errorf("tools: want only the allowed get_weather with its schema: %s", r.Body)
	}
	if r.Header.Get("X-Trace") != "t-1" {
		t.Errorf("header X-Trace = %q", r.Header.Get("X-Trace"))
	}

	// The defaults, with tool choice forbidden and no per-call options.
	srv.Push(llmtest.Text("ok"))
	if _, err := tm.Generate(ctxT(t, 5*time.Second), []*schema.Message{schema.UserMessage("hi")},
		model.WithToolChoice(schema.ToolChoiceForbidden)); err != nil {
		t.Fatal(err)
	}
	r = srv.Requests()[1]
	b = body(t, r)
	if b["model"] != "gpt-default" || b["temperature"] != 0.1 || b["tool_choice"] != "none" {
		t.Errorf("defaults: %s", r.Body)
	}
	if tools, _ := b["tools"].([]any); len(tools) != 2 {
		t.Errorf("tools: want both: %s", r.Body)
	}
	if _, err := tm.Generate(ctxT(t, 5*time.Second), []*schema.Message{schema.UserMessage("hi")},
		model.WithToolChoice(schema.ToolChoiceForced, "missing_tool")); err == nil || !strings.Contains(err.Error(), "missing_tool") {
		t.Errorf("an allowed tool the model lacks: %v", err)
	}
	if srv.Count() != 2 {
		t.Errorf("%d requests, the refused call must not send", srv.Count())
	}
}

// TestWithToolsReturnsANewModel: WithTools never changes the model it is
// called on.
func TestWithToolsReturnsANewModel(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rt := newRT(t, runtime.WithProvider(wires[0].cfg(srv)))
	base := newModel(t, rt, chorus.Config{Model: "openai/gpt-test"})
	withT, err := base.WithTools([]*schema.ToolInfo{weatherInfo})
	if err != nil {
		t.Fatal(err)
	}
	if any(withT) == any(base) {
		t.Fatal("WithTools returned the same model")
	}
	srv.Push(llmtest.Text("a"), llmtest.Text("b"))
	for _, m := range []model.ToolCallingChatModel{base, withT} {
		if _, err := m.Generate(ctxT(t, 5*time.Second), []*schema.Message{schema.UserMessage("hi")}); err != nil {
			t.Fatal(err)
		}
	}
	reqs := srv.Requests()
	if strings.Contains(string(reqs[0].Body), "get_weather") {
		t.Errorf("the base model sent the tools of its copy: %s", reqs[0].Body)
	}
	if !strings.Contains(string(reqs[1].Body), "get_weather") {
		t.Errorf("the copy did not send its tools: %s", reqs[1].Body)
	}
}

// TestGenerateMapsTheAnswer: tool calls, reasoning, usage with cached
// tokens and the finish reason arrive in eino's fields, on every format.
func TestGenerateMapsTheAnswer(t *testing.T) {
	u := llm.Usage{PromptTokens: 10, CacheReadTokens: 30, CompletionTokens: 5, ReasoningTokens: 2}
	for _, w := range wires {
		t.Run(w.name, func(t *testing.T) {
			srv := llmtest.NewServer()
			defer srv.Close()
			rt := newRT(t, runtime.WithProvider(w.cfg(srv)))
			m := newModel(t, rt, chorus.Config{Model: w.model})
			srv.Push(llmtest.Respond(llmtest.Reply{Reasoning: "let me think", Signature: "sig-1", Usage: &u,
				ToolCalls: []llm.ToolCall{{Name: "get_weather", Arguments: `{"city":"Oslo"}`}, {Name: "get_weather", Arguments: `{"city":"Bergen"}`}}}))
			out, err := m.Generate(ctxT(t, 5*time.Second), []*schema.Message{schema.UserMessage("hi")})
			if err != nil {
				t.Fatal(err)
			}
			if out.ReasoningContent != "let me think" {
				t.Errorf("reasoning %q", out.ReasoningContent)
			}
			if len(out.ToolCalls) != 2 || out.ToolCalls[1].Function.Name != "get_weather" || out.ToolCalls[1].Function.Arguments != `{"city":"Bergen"}` ||
				out.ToolCalls[0].ID == "" || out.ToolCalls[0].ID == out.ToolCalls[1].ID || out.ToolCalls[1].Type != "function" {
				t.Errorf("tool calls %+v", out.ToolCalls)
			}
			meta := out.ResponseMeta
			if meta == nil || meta.FinishReason != "tool_calls" || meta.Usage == nil {
				t.Fatalf("response meta %+v", meta)
			}
			want := schema.TokenUsage{PromptTokens: 40, PromptTokenDetails: schema.PromptTokenDetails{CachedTokens: 30},
				CompletionTokens: 5, TotalTokens: 45, CompletionTokensDetails: schema.CompletionTokensDetails{ReasoningTokens: 2}}
			if w.name == "anthropic" {
				want.CompletionTokensDetails.ReasoningTokens = 0 // Anthropic reports no reasoning count
			}
			if *meta.Usage != want {
				t.Errorf("usage %+v, want %+v", *meta.Usage, want)
			}
		})
	}
}

// TestStreamChunks: a streamed answer arrives as one chunk per delta, the
// tool calls indexed by position, and the last chunk has the finish reason
// and the usage; eino's own concatenation gives the whole answer.
func TestStreamChunks(t *testing.T) {
	for _, w := range wires {
		t.Run(w.name, func(t *testing.T) {
			srv := llmtest.NewServer()
			defer srv.Close()
			rt := newRT(t, runtime.WithProvider(w.cfg(srv)))
			m := newModel(t, rt, chorus.Config{Model: w.model})
			srv.Push(llmtest.Respond(llmtest.Reply{Reasoning: "hmm, tools", Deltas: []string{"Look", "ing up."},
				ToolCalls: []llm.ToolCall{{Name: "get_weather", Arguments: `{"city":"Oslo"}`}, {Name: "convert_temperature", Arguments: `{"value":21}`}}}))
			sr, err := m.Stream(ctxT(t, 5*time.Second), []*schema.Message{schema.UserMessage("hi")})
			if err != nil {
				t.Fatal(err)
			}
			var chunks []*schema.Message
			for {
				c, err := sr.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				chunks = append(chunks, c)
			}
			sr.Close()
			if len(chunks) < 5 {
				t.Fatalf("%d chunks, want one per delta", len(chunks))
			}
			last := chunks[len(chunks)-1]
			if last.ResponseMeta == nil || last.ResponseMeta.FinishReason != "tool_calls" || last.ResponseMeta.Usage == nil || last.ResponseMeta.Usage.CompletionTokens == 0 {
				t.Errorf("last chunk %+v", last.ResponseMeta)
			}
			for _, c := range chunks[:len(chunks)-1] {
				if c.ResponseMeta != nil {
					t.Errorf("a delta chunk carries response meta: %+v", c)
				}
				for _, tc := range c.ToolCalls {
					if tc.Index == nil {
						t.Errorf("tool call chunk without an index: %+v", tc)
					}
				}
			}
			out, err := schema.ConcatMessages(chunks)
			if err != nil {
				t.Fatal(err)
			}
			if out.Content != "Looking up." || out.ReasoningContent != "hmm, tools" {
				t.Errorf("content %q reasoning %q", out.Content, out.ReasoningContent)
			}
			if len(out.ToolCalls) != 2 || out.ToolCalls[0].Function.Arguments != `{"value":21}` && out.ToolCalls[0].Function.Arguments != `{"city":"Oslo"}` ||
				out.ToolCalls[0].Function.Name != "get_weather" || out.ToolCalls[0].Function.Arguments != `{"city":"Oslo"}` ||
				out.ToolCalls[1].Function.Name != "convert_temperature" || out.ToolCalls[1].Function.Arguments != `{"value":21}` {
				t.Errorf("tool calls %+v", out.ToolCalls)
			}
		})
	}
}

// TestReasoningRoundTrips: signed reasoning (Anthropic thinking signatures,
// Gemini thought signatures on tool calls) comes back to the provider when
// eino replays the assistant message, buffered or streamed.
func TestReasoningRoundTrips(t *testing.T) {
	cases := []struct {
		w     wire
		reply llmtest.Reply
		want  string
	}{
		{wires[1], llmtest.Reply{Reasoning: "thinking hard", Signature: "sig-anthropic-1", Text: "done"}, `"signature":"sig-anthropic-1"`},
		{wires[2], llmtest.Reply{ToolCalls: []llm.ToolCall{{Name: "get_weather", Arguments: `{"city":"Oslo"}`, Signature: "sig-gemini-1"}}}, `"thoughtSignature":"sig-gemini-1"`},
	}
	for _, c := range cases {
		for _, streamed := range []bool{false, true} {
			srv := llmtest.NewServer()
			rt := newRT(t, runtime.WithProvider(c.w.cfg(srv)))
			m := newModel(t, rt, chorus.Config{Model: c.w.model})
			srv.Push(llmtest.Respond(c.reply), llmtest.Text("next"))
			hist := []*schema.Message{schema.UserMessage("hi")}
			var out *schema.Message
			var err error
			if streamed {
				var sr *schema.StreamReader[*schema.Message]
				if sr, err = m.Stream(ctxT(t, 5*time.Second), hist); err == nil {
					out, err = schema.ConcatMessageStream(sr)
				}
			} else {
				out, err = m.Generate(ctxT(t, 5*time.Second), hist)
			}
			if err != nil {
				t.Fatal(err)
			}
			hist = append(hist, out)
			for _, tc := range out.ToolCalls {
				hist = append(hist, schema.ToolMessage("sunny", tc.ID, schema.WithToolName(tc.Function.Name)))
			}
			hist = append(hist, schema.UserMessage("and?"))
			if _, err := m.Generate(ctxT(t, 5*time.Second), hist); err != nil {
				t.Fatal(err)
			}
			if second := string(srv.Requests()[1].Body); !strings.Contains(second, c.want) {
				t.Errorf("%s streamed=%v: replay lacks %s: %s", c.w.name, streamed, c.want, second)
			}
			srv.Close()
		}
	}
}

// TestImagesAndDocuments: inline, data-URL and remote images and inline PDF
// files reach the provider, from both of eino's multi-content fields.
func TestImagesAndDocuments(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rt := newRT(t, runtime.WithProvider(wires[1].cfg(srv)))
	m := newModel(t, rt, chorus.Config{Model: wires[1].model})
	png := base64.StdEncoding.EncodeToString([]byte("png-bytes-1"))
	pdf := base64.StdEncoding.EncodeToString([]byte("%PDF-1.4 doc"))
	msg := &schema.Message{Role: schema.User, UserInputMultiContent: []schema.MessageInputPart{
		{Type: schema.ChatMessagePartTypeText, Text: "what is this?"},
		{Type: schema.ChatMessagePartTypeImageURL, Image: &schema.MessageInputImage{MessagePartCommon: schema.MessagePartCommon{Base64Data: &png, MIMEType: "image/png"}}},
		{Type: schema.ChatMessagePartTypeImageURL, Image: &schema.MessageInputImage{MessagePartCommon: schema.MessagePartCommon{URL: llm.Ptr("https://example.test/cat.jpg")}}},
		{Type: schema.ChatMessagePartTypeFileURL, File: &schema.MessageInputFile{MessagePartCommon: schema.MessagePartCommon{Base64Data: &pdf, MIMEType: "application/pdf"}}},
	}}
	old := &schema.Message{Role: schema.User, MultiContent: []schema.ChatMessagePart{
		{Type: schema.ChatMessagePartTypeImageURL, ImageURL: &schema.ChatMessageImageURL{URL: "data:image/gif;base64," + base64.StdEncoding.EncodeToString([]byte("gif-bytes-2"))}},
	}}
	srv.Push(llmtest.Text("a cat"))
	if _, err := m.Generate(ctxT(t, 5*time.Second), []*schema.Message{old, schema.AssistantMessage("ok", nil), msg}); err != nil {
		t.Fatal(err)
	}
	got := string(srv.Requests()[0].Body)
	for _, want := range []string{"what is this?", png, `"media_type":"image/png"`, "https://example.test/cat.jpg", pdf,
		`"media_type":"application/pdf"`, base64.StdEncoding.EncodeToString([]byte("gif-bytes-2")), `"media_type":"image/gif"`} {
		if !strings.Contains(got, want) {
			t.Errorf("request lacks %s: %s", want, got)
		}
	}
}

// TestUnexpressibleInputIsAnError: a message Chorus cannot express is an
// error naming what, and nothing is sent.
func TestUnexpressibleInputIsAnError(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rt := newRT(t, runtime.WithProvider(wires[0].cfg(srv)))
	m := newModel(t, rt, chorus.Config{Model: wires[0].model})
	audio := base64.StdEncoding.EncodeToString([]byte("wav"))
	cases := []struct {
		msg  *schema.Message
		want string
	}{
		{&schema.Message{Role: "developer", Content: "x"}, `role "developer"`},
		{&schema.Message{Role: schema.User, UserInputMultiContent: []schema.MessageInputPart{{Type: schema.ChatMessagePartTypeAudioURL,
			Audio: &schema.MessageInputAudio{MessagePartCommon: schema.MessagePartCommon{Base64Data: &audio}}}}}, `part type "audio_url"`},
		{&schema.Message{Role: schema.User, MultiContent: []schema.ChatMessagePart{{Type: schema.ChatMessagePartTypeVideoURL,
			VideoURL: &schema.ChatMessageVideoURL{URL: "https://example.test/v.mp4"}}}}, `part type "video_url"`},
		{&schema.Message{Role: schema.User, UserInputMultiContent: []schema.MessageInputPart{{Type: schema.ChatMessagePartTypeFileURL,
			File: &schema.MessageInputFile{MessagePartCommon: schema.MessagePartCommon{Base64Data: &audio, MIMEType: "text/csv"}}}}}, `"text/csv"`},
		{&schema.Message{Role: schema.Tool, ToolCallID: "c1", UserInputMultiContent: []schema.MessageInputPart{{Type: schema.ChatMessagePartTypeImageURL,
			Image: &schema.MessageInputImage{MessagePartCommon: schema.MessagePartCommon{URL: llm.Ptr("https://example.test/a.png")}}}}}, "tool result with non-text parts"},
		{&schema.Message{Role: schema.User, Content: "x", ToolCalls: []schema.ToolCall{{ID: "c", Function: schema.FunctionCall{Name: "f"}}}}, "tool calls on a user message"},
	}
	for _, c := range cases {
		for _, streamed := range []bool{false, true} {
			in := []*schema.Message{schema.UserMessage("hi"), c.msg}
			var err error
			if streamed {
				var sr *schema.StreamReader[*schema.Message]
				if sr, err = m.Stream(ctxT(t, 5*time.Second), in); sr != nil {
					sr.Close()
				}
			} else {
				_, err = m.Generate(ctxT(t, 5*time.Second), in)
			}
			var ue *chorus.UnsupportedError
			if !errors.As(err, &ue) || ue.Message != 1 || !strings.Contains(err.Error(), c.want) {
				t.Errorf("streamed=%v %s: got %v", streamed, c.want, err)
			}
		}
	}
	if srv.Count() != 0 {
		t.Errorf("%d requests were sent", srv.Count())
	}
}

// recorder is an eino callback handler that records what the model
// reported.
type recorder struct {
	mu     sync.Mutex
	events []string
	usage  *model.TokenUsage
	text   string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, s)
}

func (r *recorder) handler() callbacks.Handler {
	return callbacks.NewHandlerBuilder().
		OnStartFn(func(ctx context.Context, info *callbacks.RunInfo, in callbacks.CallbackInput) context.Context {
			ci := model.ConvCallbackInput(in)
			r.add("start:" + info.Type + ":" + ci.Config.Model + ":" + ci.Messages[0].Content)
			return ctx
		}).
		OnEndFn(func(ctx context.Context, info *callbacks.RunInfo, out callbacks.CallbackOutput) context.Context {
			co := model.ConvCallbackOutput(out)
			r.mu.Lock()
			r.usage, r.text = co.TokenUsage, co.Message.Content
			r.mu.Unlock()
			r.add("end")
			return ctx
		}).
		OnEndWithStreamOutputFn(func(ctx context.Context, info *callbacks.RunInfo, out *schema.StreamReader[callbacks.CallbackOutput]) context.Context {
			go func() {
				defer out.Close()
				var text strings.Builder
				var u *model.TokenUsage
				for {
					o, err := out.Recv()
					if err != nil {
						break
					}
					co := model.ConvCallbackOutput(o)
					text.WriteString(co.Message.Content)
					if co.TokenUsage != nil {
						u = co.TokenUsage
					}
				}
				r.mu.Lock()
				r.usage, r.text = u, text.String()
				r.mu.Unlock()
				r.add("end-stream")
			}()
			return ctx
		}).
		OnErrorFn(func(ctx context.Context, info *callbacks.RunInfo, err error) context.Context {
			r.add("error:" + err.Error())
			return ctx
		}).Build()
}

// TestCallbacks: the model declares its own callbacks and runs them with
// eino's typed model input and output, usage included; a failed call runs
// OnError.
func TestCallbacks(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rt := newRT(t, runtime.WithProvider(wires[0].cfg(srv)))
	m := newModel(t, rt, chorus.Config{Model: wires[0].model})
	if typ, ok := components.GetType(m); !ok || typ != "Chorus" || !components.IsCallbacksEnabled(m) {
		t.Fatalf("type %q %v, callbacks enabled %v", typ, ok, components.IsCallbacksEnabled(m))
	}
	u := &llm.Usage{PromptTokens: 3, CacheReadTokens: 4, CompletionTokens: 2}
	info := &callbacks.RunInfo{Name: "test", Type: chorus.Type, Component: components.ComponentOfChatModel}

	rec := &recorder{}
	ctx := callbacks.InitCallbacks(ctxT(t, 5*time.Second), info, rec.handler())
	srv.Push(llmtest.Respond(llmtest.Reply{Text: "buffered", Usage: u}))
	if _, err := m.Generate(ctx, []*schema.Message{schema.UserMessage("q1")}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(rec.events, ",") != "start:Chorus:openai/gpt-test:q1,end" || rec.text != "buffered" ||
		rec.usage == nil || rec.usage.PromptTokens != 7 || rec.usage.PromptTokenDetails.CachedTokens != 4 {
		t.Errorf("buffered callbacks %q text %q usage %+v", rec.events, rec.text, rec.usage)
	}

	rec = &recorder{}
	ctx = callbacks.InitCallbacks(ctxT(t, 5*time.Second), info, rec.handler())
	srv.Push(llmtest.Respond(llmtest.Reply{Text: "streamed", Usage: u}))
	sr, err := m.Stream(ctx, []*schema.Message{schema.UserMessage("q2")})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := schema.ConcatMessageStream(sr); err != nil || out.Content != "streamed" {
		t.Fatalf("stream %v %v", out, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		rec.mu.Lock()
		n := len(rec.events)
		rec.mu.Unlock()
		if n == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	rec.mu.Lock()
	if strings.Join(rec.events, ",") != "start:Chorus:openai/gpt-test:q2,end-stream" || rec.text != "streamed" ||
		rec.usage == nil || rec.usage.TotalTokens != 9 {
		t.Errorf("stream callbacks %q text %q usage %+v", rec.events, rec.text, rec.usage)
	}
	rec.mu.Unlock()

	rec = &recorder{}
	ctx = callbacks.InitCallbacks(ctxT(t, 5*time.Second), info, rec.handler())
	srv.Push(llmtest.Fail(llmtest.Fault{Status: 400, Message: "bad thing"}))
	if _, err := m.Generate(ctx, []*schema.Message{schema.UserMessage("q3")}); err == nil {
		t.Fatal("a 400 succeeded")
	}
	if len(rec.events) != 2 || !strings.HasPrefix(rec.events[1], "error:") || !strings.Contains(rec.events[1], "bad thing") {
		t.Errorf("error callbacks %q", rec.events)
	}
}

// TestStreamCloseEarly: closing the reader after the first chunk ends the
// call; no goroutine or connection is left (goleak checks the first).
func TestStreamCloseEarly(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rt := newRT(t, runtime.WithProvider(wires[0].cfg(srv)))
	m := newModel(t, rt, chorus.Config{Model: wires[0].model})
	srv.Push(llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultStall, After: 1, Stall: time.Minute, Reply: &llmtest.Reply{Deltas: []string{"one", "two"}}}))
	sr, err := m.Stream(ctxT(t, 10*time.Second), []*schema.Message{schema.UserMessage("hi")})
	if err != nil {
		t.Fatal(err)
	}
	c, err := sr.Recv()
	if err != nil || c.Content != "one" {
		t.Fatalf("first chunk %v %v", c, err)
	}
	sr.Close()
	deadline := time.Now().Add(5 * time.Second)
	for srv.OpenConns() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := srv.OpenConns(); n > 0 {
		t.Errorf("%d connections still open after Close", n)
	}
}

// TestStreamErrorAfterFirstChunk: a failure mid-stream arrives as the
// reader's error after the chunks already sent.
func TestStreamErrorAfterFirstChunk(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rt := newRT(t, runtime.WithProvider(wires[1].cfg(srv)))
	m := newModel(t, rt, chorus.Config{Model: wires[1].model})
	srv.Push(llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultResetMidStream, After: 2, Reply: &llmtest.Reply{Deltas: []string{"a", "b", "c"}}}))
	sr, err := m.Stream(ctxT(t, 10*time.Second), []*schema.Message{schema.UserMessage("hi")})
	if err != nil {
		t.Fatal(err)
	}
	defer sr.Close()
	var text string
	for {
		c, err := sr.Recv()
		if err != nil {
			var se *llm.StreamError
			if errors.Is(err, io.EOF) || !errors.As(err, &se) {
				t.Fatalf("got %v, want a stream error", err)
			}
			break
		}
		text += c.Content
	}
	if text != "ab" {
		t.Errorf("chunks before the error %q", text)
	}
}

// TestOverAProvidersClient: the same model works over a plain
// providers.Client, without a runtime.
func TestOverAProvidersClient(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	pc, err := providers.New(wires[2].cfg(srv), providers.WithRetryPolicy(fast), providers.WithIdleTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	m := newModel(t, pc, chorus.Config{Model: "gemini-test"})
	srv.Push(llmtest.Text("plain"), llmtest.Text("streamed plain"))
	out, err := m.Generate(ctxT(t, 5*time.Second), []*schema.Message{schema.UserMessage("hi")})
	if err != nil || out.Content != "plain" || out.ResponseMeta.FinishReason != "stop" {
		t.Fatalf("generate %v %v", out, err)
	}
	sr, err := m.Stream(ctxT(t, 5*time.Second), []*schema.Message{schema.UserMessage("hi")})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := schema.ConcatMessageStream(sr); err != nil || out.Content != "streamed plain" {
		t.Fatalf("stream %v %v", out, err)
	}
	if srv.Requests()[0].Model != "gemini-test" {
		t.Errorf("model %q", srv.Requests()[0].Model)
	}
}

// TestFinishReasonsAndRefusal: a cut answer finishes "length", a refusal
// "content_filter" with its text as the content and under ExtraRefusal,
// buffered and streamed.
func TestFinishReasonsAndRefusal(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rt := newRT(t, runtime.WithProvider(wires[0].cfg(srv)))
	m := newModel(t, rt, chorus.Config{Model: wires[0].model})
	for _, streamed := range []bool{false, true} {
		srv.Push(llmtest.Respond(llmtest.Reply{Text: "cut sho", Finish: llm.FinishLength}), llmtest.Respond(llmtest.Reply{Refusal: "I cannot help with that."}))
		for _, want := range []struct{ content, finish, refusal string }{{"cut sho", "length", ""}, {"I cannot help with that.", "content_filter", "I cannot help with that."}} {
			var out *schema.Message
			var err error
			if streamed {
				var sr *schema.StreamReader[*schema.Message]
				if sr, err = m.Stream(ctxT(t, 5*time.Second), []*schema.Message{schema.UserMessage("hi")}); err == nil {
					out, err = schema.ConcatMessageStream(sr)
				}
			} else {
				out, err = m.Generate(ctxT(t, 5*time.Second), []*schema.Message{schema.UserMessage("hi")})
			}
			if err != nil {
				t.Fatal(err)
			}
			refusal, _ := out.Extra[chorus.ExtraRefusal].(string)
			if out.Content != want.content || out.ResponseMeta.FinishReason != want.finish || refusal != want.refusal {
				t.Errorf("streamed=%v: content %q finish %q refusal %q, want %+v", streamed, out.Content, out.ResponseMeta.FinishReason, refusal, want)
			}
		}
	}
}
