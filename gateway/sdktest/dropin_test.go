package sdktest

import (
	"encoding/json"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"google.golang.org/genai"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

// TestSDKsDropIn: each official Go SDK, configured with nothing but the
// gateway's base URL (and a gateway key), calls its provider's own model
// names, buffered, streamed and with tools, and each call reaches the
// provider of the SDK's own format under the name it gave.
func TestSDKsDropIn(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	lastModel := func(want llmtest.Format) string {
		reqs := f.up.Requests()
		r := reqs[len(reqs)-1]
		if r.Format != want {
			t.Fatalf("the upstream got format %s, want %s", r.Format, want)
		}
		return r.Model
	}

	oc := openai.NewClient(option.WithBaseURL(f.url+"/v1"), option.WithAPIKey("gk-good"), option.WithMaxRetries(0), option.WithHTTPClient(f.hc))
	f.up.Push(llmtest.Text("hi"), llmtest.Deltas("a", "b"), llmtest.Respond(llmtest.Reply{ToolCalls: []llm.ToolCall{{ID: "c1", Name: "get_weather", Arguments: `{"city":"Paris"}`}}}))
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}
	r, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: msgs})
	if err != nil || r.Choices[0].Message.Content != "hi" || r.Model != "gpt-4o-mini" || lastModel(llmtest.FormatOpenAI) != "gpt-4o-mini" {
		t.Fatalf("openai buffered: %v %+v", err, r)
	}
	st := oc.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: msgs})
	acc := openai.ChatCompletionAccumulator{}
	for st.Next() {
		acc.AddChunk(st.Current())
	}
	if st.Err() != nil || acc.Choices[0].Message.Content != "ab" {
		t.Fatalf("openai streamed: %v %+v", st.Err(), acc)
	}
	r, err = oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: msgs,
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "get_weather"})}})
	if err != nil || len(r.Choices[0].Message.ToolCalls) != 1 || r.Choices[0].Message.ToolCalls[0].Function.Name != "get_weather" {
		t.Fatalf("openai tools: %v %+v", err, r)
	}

	ac := anthropic.NewClient(aoption.WithBaseURL(f.url), aoption.WithAPIKey("gk-good"), aoption.WithMaxRetries(0), aoption.WithHTTPClient(f.hc))
	f.up.Push(llmtest.Text("hi"), llmtest.Deltas("a", "b"))
	am := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}
	m, err := ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 100, Messages: am})
	if err != nil || m.Content[0].Text != "hi" || string(m.Model) != "claude-sonnet-4-5" || lastModel(llmtest.FormatAnthropic) != "claude-sonnet-4-5" {
		t.Fatalf("anthropic buffered: %v %+v", err, m)
	}
	as := ac.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 100, Messages: am})
	aacc := anthropic.Message{}
	for as.Next() {
		if err := aacc.Accumulate(as.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if as.Err() != nil || aacc.Content[0].Text != "ab" {
		t.Fatalf("anthropic streamed: %v %+v", as.Err(), aacc)
	}

	gc, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: "gk-good", Backend: genai.BackendGeminiAPI, HTTPClient: f.hc, HTTPOptions: genai.HTTPOptions{BaseURL: f.url}})
	if err != nil {
		t.Fatal(err)
	}
	f.up.Push(llmtest.Text("hi"), llmtest.Deltas("a", "b"))
	gr, err := gc.Models.GenerateContent(ctx, "gemini-2.5-flash", genai.Text("hi"), &genai.GenerateContentConfig{TopK: genai.Ptr[float32](3)})
	if err != nil || gr.Text() != "hi" || lastModel(llmtest.FormatGemini) != "gemini-2.5-flash" {
		t.Fatalf("gemini buffered: %v %+v", err, gr)
	}
	var up struct {
		GenerationConfig struct {
			TopK float64 `json:"topK"`
		} `json:"generationConfig"`
	}
	reqs := f.up.Requests()
	if err := json.Unmarshal(reqs[len(reqs)-1].Body, &up); err != nil || up.GenerationConfig.TopK != 3 {
		t.Errorf("gemini topK did not arrive: %s", reqs[len(reqs)-1].Body)
	}
	text := ""
	for chunk, err := range gc.Models.GenerateContentStream(ctx, "gemini-2.5-flash", genai.Text("hi"), nil) {
		if err != nil {
			t.Fatalf("gemini streamed: %v", err)
		}
		text += chunk.Text()
	}
	if text != "ab" {
		t.Fatalf("gemini streamed text %q", text)
	}
}

// TestAnthropicSDKPromptCaching: an Anthropic SDK client that marks its
// system prompt with cache_control, through the gateway to an Anthropic
// upstream that caches as Anthropic does, writes the cache on its first
// call and reads it on its second (cache_read_input_tokens).
func TestAnthropicSDKPromptCaching(t *testing.T) {
	f := newFixture(t, llmtest.WithPromptCache())
	ctx := t.Context()
	ac := anthropic.NewClient(aoption.WithBaseURL(f.url), aoption.WithAPIKey("gk-good"), aoption.WithMaxRetries(0), aoption.WithHTTPClient(f.hc))
	long := ""
	for range 200 {
		long += "Follow the house rules to the letter. "
	}
	params := func(q string) anthropic.MessageNewParams {
		return anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 100,
			System:   []anthropic.TextBlockParam{{Text: long, CacheControl: anthropic.NewCacheControlEphemeralParam()}},
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(q))}}
	}
	m1, err := ac.Messages.New(ctx, params("first question"))
	if err != nil {
		t.Fatal(err)
	}
	if m1.Usage.CacheCreationInputTokens < 1000 || m1.Usage.CacheReadInputTokens != 0 {
		t.Fatalf("first call usage %+v", m1.Usage)
	}
	s := ac.Messages.NewStreaming(ctx, params("second question"))
	acc := anthropic.Message{}
	for s.Next() {
		if err := acc.Accumulate(s.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if s.Err() != nil || acc.Usage.CacheReadInputTokens != m1.Usage.CacheCreationInputTokens || acc.Usage.CacheCreationInputTokens != 0 {
		t.Fatalf("second call: %v usage %+v (first wrote %d)", s.Err(), acc.Usage, m1.Usage.CacheCreationInputTokens)
	}
}
