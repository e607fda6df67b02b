package genkit_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"

	chorus "github.com/chorusrt/chorus/integrations/genkit"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
)

var (
	_ chorus.Client = (*runtime.Runtime)(nil)
	_ chorus.Client = (*providers.Client)(nil)
)

// TestPluginDefinesModelsAndAliases: Init defines the configured models and
// every alias of the runtime; other provider/model names resolve on use.
func TestPluginDefinesModelsAndAliases(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rt := newRT(t, runtime.WithProvider(wires[0].cfg(srv)), runtime.WithAlias("fast", "openai/gpt-a"), runtime.WithAlias("smart", "openai/gpt-b"))
	p := &chorus.Plugin{Client: rt, Models: []string{"openai/gpt-listed"}}
	g := initGenkit(t, p)
	var names []string
	for _, d := range p.ListActions(context.Background()) {
		names = append(names, d.Name)
	}
	if strings.Join(names, ",") != "chorus/openai/gpt-listed,chorus/fast,chorus/smart" {
		t.Errorf("listed %q", names)
	}
	desc := p.ListActions(context.Background())[0]
	opts, _ := desc.Metadata["model"].(map[string]any)
	if schema, _ := json.Marshal(opts["customOptions"]); !strings.Contains(string(schema), `"maxOutputTokens"`) || !strings.Contains(string(schema), `"parallelToolCalls"`) {
		t.Errorf("the models do not declare Config's schema: %s", schema)
	}
	srv.Push(llmtest.Text("from b"), llmtest.Text("from dynamic"))
	for model, want := range map[string]string{"smart": "gpt-b", "openai/gpt-dynamic": "gpt-dynamic"} {
		m := chorus.Model(g, model)
		if m == nil || m.Name() != "chorus/"+model {
			t.Fatalf("model %s: %v", model, m)
		}
		if _, err := genkit.GenerateText(ctxT(t, 5*time.Second), g, ai.WithModel(m), ai.WithPrompt("hi")); err != nil {
			t.Fatal(err)
		}
		if got := srv.Requests()[srv.Count()-1].Model; got != want {
			t.Errorf("%s sent model %q, want %q", model, got, want)
		}
	}
}

// TestConfigAndStructuredOutput: Genkit's common config and Chorus's own
// reach the request, structured output is a native JSON schema, and an
// unknown config field is an error.
func TestConfigAndStructuredOutput(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rt := newRT(t, runtime.WithProvider(wires[0].cfg(srv)))
	g := initGenkit(t, &chorus.Plugin{Client: rt})
	m := chorus.Model(g, wires[0].model)
	type city struct {
		City    string `json:"city"`
		Celsius int    `json:"celsius"`
	}
	srv.Push(llmtest.Text(`{"city":"Oslo","celsius":21}`))
	out, _, err := genkit.GenerateData[city](ctxT(t, 5*time.Second), g, ai.WithModel(m), ai.WithPrompt("Oslo weather as JSON"),
		ai.WithConfig(map[string]any{"maxOutputTokens": 55, "temperature": 0.3, "topP": 0.9, "stopSequences": []string{"END"}, "seed": 7}))
	if err != nil {
		t.Fatal(err)
	}
	if out.City != "Oslo" || out.Celsius != 21 {
		t.Errorf("data %+v", out)
	}
	got := string(srv.Requests()[0].Body)
	for _, want := range []string{`"json_schema"`, `"celsius"`, `"temperature":0.3`, `"top_p":0.9`, `"stop":["END"]`, `"seed":7`, `55`} {
		if !strings.Contains(got, want) {
			t.Errorf("request lacks %s: %s", want, got)
		}
	}
	// An unknown field is refused by Genkit against the models' config
	// schema; topK, which Genkit's common config has, by the plugin.
	_, err = genkit.GenerateText(ctxT(t, 5*time.Second), g, ai.WithModel(m), ai.WithPrompt("hi"), ai.WithConfig(map[string]any{"frequencyPenalty": 1}))
	if err == nil || !strings.Contains(err.Error(), "frequencyPenalty") {
		t.Errorf("unknown config field: got %v", err)
	}
	_, err = genkit.GenerateText(ctxT(t, 5*time.Second), g, ai.WithModel(m), ai.WithPrompt("hi"), ai.WithConfig(&ai.GenerationCommonConfig{TopK: 3}))
	var ue *chorus.UnsupportedError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "topK") {
		t.Errorf("topK: got %v", err)
	}
	if srv.Count() != 1 {
		t.Errorf("%d requests; refused configs must send nothing", srv.Count())
	}
}

// TestResponseMaps: reasoning, text, finish reason and usage (cached
// tokens, reasoning tokens) in Genkit's response, on every format.
func TestResponseMaps(t *testing.T) {
	u := llm.Usage{PromptTokens: 10, CacheReadTokens: 30, CompletionTokens: 5, ReasoningTokens: 2}
	for _, w := range wires {
		t.Run(w.name, func(t *testing.T) {
			srv := llmtest.NewServer()
			defer srv.Close()
			rt := newRT(t, runtime.WithProvider(w.cfg(srv)))
			g := initGenkit(t, &chorus.Plugin{Client: rt})
			srv.Push(llmtest.Respond(llmtest.Reply{Reasoning: "let me think", Text: "done", Usage: &u}))
			resp, err := genkit.Generate(ctxT(t, 5*time.Second), g, ai.WithModel(chorus.Model(g, w.model)), ai.WithPrompt("hi"))
			if err != nil {
				t.Fatal(err)
			}
			if resp.Text() != "done" || resp.Reasoning() != "let me think" || resp.FinishReason != ai.FinishReasonStop {
				t.Errorf("text %q reasoning %q finish %q", resp.Text(), resp.Reasoning(), resp.FinishReason)
			}
			want := ai.GenerationUsage{InputTokens: 40, OutputTokens: 5, TotalTokens: 45, CachedContentTokens: 30, ThoughtsTokens: 2,
				Custom: map[string]float64{"uncachedInputTokens": 10, "cacheWriteTokens": 0}}
			if w.name == "anthropic" {
				want.ThoughtsTokens = 0
			}
			got := resp.Usage
			if got == nil || got.InputTokens != want.InputTokens || got.OutputTokens != want.OutputTokens || got.TotalTokens != want.TotalTokens ||
				got.CachedContentTokens != want.CachedContentTokens || got.ThoughtsTokens != want.ThoughtsTokens || got.Custom["uncachedInputTokens"] != 10 {
				t.Errorf("usage %+v, want %+v", got, want)
			}
		})
	}
}

// TestReasoningRoundTrips: Genkit's history of an answer with signed
// reasoning sends the signatures back (Anthropic thinking, Gemini thought
// signatures on tool calls), streamed or not.
func TestReasoningRoundTrips(t *testing.T) {
	cases := []struct {
		w     wire
		reply llmtest.Reply
		want  string
	}{
		{wires[1], llmtest.Reply{Reasoning: "thinking hard", Signature: "sig-anthropic-3", Text: "done"}, `"signature":"sig-anthropic-3"`},
		{wires[2], llmtest.Reply{ToolCalls: []llm.ToolCall{{Name: "get_weather", Arguments: `{"city":"Oslo"}`, Signature: "sig-gemini-3"}}}, `"thoughtSignature":"sig-gemini-3"`},
	}
	for _, c := range cases {
		for _, streamed := range []bool{false, true} {
			srv := llmtest.NewServer()
			rt := newRT(t, runtime.WithProvider(c.w.cfg(srv)))
			g := initGenkit(t, &chorus.Plugin{Client: rt})
			m := chorus.Model(g, c.w.model)
			weather := genkit.DefineTool(g, "get_weather", "weather", func(ctx *ai.ToolContext, in weatherIn) (string, error) { return "sunny", nil })
			srv.Push(llmtest.Respond(c.reply), llmtest.Text("next"), llmtest.Text("last"))
			opts := []ai.GenerateOption{ai.WithModel(m), ai.WithPrompt("hi"), ai.WithTools(weather)}
			if streamed {
				opts = append(opts, ai.WithStreaming(func(context.Context, *ai.ModelResponseChunk) error { return nil }))
			}
			resp, err := genkit.Generate(ctxT(t, 5*time.Second), g, opts...)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := genkit.Generate(ctxT(t, 5*time.Second), g, ai.WithModel(m), ai.WithTools(weather),
				ai.WithMessages(append(resp.History(), ai.NewUserTextMessage("and?"))...)); err != nil {
				t.Fatal(err)
			}
			reqs := srv.Requests()
			if last := string(reqs[len(reqs)-1].Body); !strings.Contains(last, c.want) {
				t.Errorf("%s streamed=%v: replay lacks %s: %s", c.w.name, streamed, c.want, last)
			}
			srv.Close()
		}
	}
}

// TestMediaAndUnsupportedParts: images and PDFs are sent; a role or part
// Chorus cannot express is an error naming it, and nothing is sent.
func TestMediaAndUnsupportedParts(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rt := newRT(t, runtime.WithProvider(wires[1].cfg(srv)))
	g := initGenkit(t, &chorus.Plugin{Client: rt})
	m := chorus.Model(g, wires[1].model)
	png := base64.StdEncoding.EncodeToString([]byte("png-bytes"))
	pdf := base64.StdEncoding.EncodeToString([]byte("%PDF-1.4"))
	srv.Push(llmtest.Text("a cat"))
	_, err := genkit.Generate(ctxT(t, 5*time.Second), g, ai.WithModel(m), ai.WithMessages(ai.NewUserMessage(
		ai.NewTextPart("what is this?"), ai.NewMediaPart("image/png", "data:image/png;base64,"+png),
		ai.NewMediaPart("image/jpeg", "https://example.test/cat.jpg"), ai.NewMediaPart("application/pdf", "data:application/pdf;base64,"+pdf))))
	if err != nil {
		t.Fatal(err)
	}
	got := string(srv.Requests()[0].Body)
	for _, want := range []string{"what is this?", png, "https://example.test/cat.jpg", pdf, `"application/pdf"`} {
		if !strings.Contains(got, want) {
			t.Errorf("request lacks %s: %s", want, got)
		}
	}
	bad := []struct {
		msg  *ai.Message
		want string
	}{
		{ai.NewUserMessage(ai.NewMediaPart("audio/wav", "data:audio/wav;base64,"+png)), `"audio/wav"`},
		{ai.NewUserMessage(ai.NewCustomPart(map[string]any{"x": 1})), "a custom part in a user message"},
		{ai.NewUserMessage(ai.NewDataPart("raw")), "a data part in a user message"},
		{&ai.Message{Role: "critic", Content: []*ai.Part{ai.NewTextPart("x")}}, `role "critic"`},
		{&ai.Message{Role: ai.RoleTool, Content: []*ai.Part{ai.NewTextPart("x")}}, "a text part in a tool message"},
	}
	for _, b := range bad {
		_, err := genkit.Generate(ctxT(t, 5*time.Second), g, ai.WithModel(m), ai.WithMessages(ai.NewUserTextMessage("hi"), b.msg))
		var ue *chorus.UnsupportedError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s: got %v", b.want, err)
		}
	}
	if srv.Count() != 1 {
		t.Errorf("%d requests were sent", srv.Count())
	}
}

// TestOverAProvidersClient: the plugin works over a plain providers.Client.
func TestOverAProvidersClient(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	pc, err := providers.New(wires[1].cfg(srv), providers.WithRetryPolicy(fast), providers.WithIdleTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	g := initGenkit(t, &chorus.Plugin{Client: pc, Models: []string{"claude-plain"}})
	srv.Push(llmtest.Text("plain answer"))
	out, err := genkit.GenerateText(ctxT(t, 5*time.Second), g, ai.WithModel(chorus.Model(g, "claude-plain")), ai.WithPrompt("hi"),
		ai.WithConfig(&ai.GenerationCommonConfig{MaxOutputTokens: 64}))
	if err != nil || out != "plain answer" {
		t.Fatalf("%q %v", out, err)
	}
	if srv.Requests()[0].Model != "claude-plain" {
		t.Errorf("model %q", srv.Requests()[0].Model)
	}
}

// TestFinishReasonsAndRefusal: a cut answer finishes "length"; a refusal
// is "blocked" with its text as the finish message and no content,
// buffered and streamed.
func TestFinishReasonsAndRefusal(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rt := newRT(t, runtime.WithProvider(wires[0].cfg(srv)))
	g := initGenkit(t, &chorus.Plugin{Client: rt})
	m := chorus.Model(g, wires[0].model)
	for _, streamed := range []bool{false, true} {
		srv.Push(llmtest.Respond(llmtest.Reply{Text: "cut sho", Finish: llm.FinishLength}), llmtest.Respond(llmtest.Reply{Refusal: "I cannot help with that."}))
		for _, want := range []struct {
			text    string
			finish  ai.FinishReason
			message string
		}{{"cut sho", ai.FinishReasonLength, ""}, {"", ai.FinishReasonBlocked, "I cannot help with that."}} {
			opts := []ai.GenerateOption{ai.WithModel(m), ai.WithPrompt("hi")}
			if streamed {
				opts = append(opts, ai.WithStreaming(func(context.Context, *ai.ModelResponseChunk) error { return nil }))
			}
			resp, err := genkit.Generate(ctxT(t, 5*time.Second), g, opts...)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Text() != want.text || resp.FinishReason != want.finish || resp.FinishMessage != want.message {
				t.Errorf("streamed=%v: text %q finish %q message %q, want %+v", streamed, resp.Text(), resp.FinishReason, resp.FinishMessage, want)
			}
		}
	}
}

// TestStreamChunks: text and reasoning deltas reach Genkit's callback one
// chunk each, in order, and the answer's tool requests follow in one chunk,
// whole; an error from the callback stops the call.
func TestStreamChunks(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rt := newRT(t, runtime.WithProvider(wires[1].cfg(srv)))
	g := initGenkit(t, &chorus.Plugin{Client: rt})
	m := chorus.Model(g, wires[1].model)
	srv.Push(llmtest.Respond(llmtest.Reply{Reasoning: "hmm", Deltas: []string{"Look", "ing"},
		ToolCalls: []llm.ToolCall{{Name: "get_weather", Arguments: `{"city":"Oslo"}`}, {Name: "get_weather", Arguments: `{"city":"Bergen"}`}}}))
	var seen []string
	_, err := genkit.Generate(ctxT(t, 5*time.Second), g, ai.WithModel(m), ai.WithPrompt("hi"), ai.WithReturnToolRequests(true),
		ai.WithTools(genkit.DefineTool(g, "get_weather", "weather", func(ctx *ai.ToolContext, in weatherIn) (string, error) { return "sunny", nil })),
		ai.WithStreaming(func(ctx context.Context, c *ai.ModelResponseChunk) error {
			var kinds []string
			for _, p := range c.Content {
				switch {
				case p.IsReasoning():
					kinds = append(kinds, "r:"+p.Text)
				case p.IsText():
					kinds = append(kinds, "t:"+p.Text)
				case p.IsToolRequest():
					kinds = append(kinds, "call:"+p.ToolRequest.Name+":"+p.ToolRequest.Ref)
				}
			}
			seen = append(seen, strings.Join(kinds, "+"))
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(seen, " | ")
	if !strings.HasPrefix(got, "r:hmm | t:Look | t:ing | call:get_weather:toolu_") || strings.Count(seen[len(seen)-1], "call:") != 2 {
		t.Errorf("chunks %q", seen)
	}

	stop := errors.New("enough")
	srv.Push(llmtest.Text("a long answer"))
	_, err = genkit.Generate(ctxT(t, 5*time.Second), g, ai.WithModel(m), ai.WithPrompt("hi"),
		ai.WithStreaming(func(ctx context.Context, c *ai.ModelResponseChunk) error { return stop }))
	if !errors.Is(err, stop) {
		t.Errorf("got %v, want the callback's error", err)
	}
}
