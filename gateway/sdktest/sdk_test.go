package sdktest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"go.uber.org/goleak"
	"google.golang.org/genai"

	"github.com/chorusrt/chorus/gateway"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const providerKey = "sk-provider-SECRET-sdktest"

type fixture struct {
	up  *llmtest.Server
	rt  *runtime.Runtime
	url string
	// hc is the HTTP client every SDK in a test uses: its own transport,
	// whose idle keep-alive connections the cleanup closes, so no SDK
	// leaves a persistConn read or write loop behind for goleak to find.
	hc *http.Client
}

func newFixture(t *testing.T, upOpts ...llmtest.Option) *fixture {
	t.Helper()
	up := llmtest.NewServer(upOpts...)
	rt, err := runtime.New(
		runtime.WithProvider(providers.Config{ID: "openai", Format: providers.FormatOpenAI, BaseURL: up.OpenAIBaseURL(), APIKey: providerKey}),
		runtime.WithProvider(providers.Config{ID: "anthropic", Format: providers.FormatAnthropic, BaseURL: up.AnthropicBaseURL(), APIKey: providerKey}),
		runtime.WithProvider(providers.Config{ID: "gemini", Format: providers.FormatGemini, BaseURL: up.GeminiBaseURL(), APIKey: providerKey}),
		runtime.WithClientOptions(providers.WithRetryPolicy(providers.RetryPolicy{MaxAttempts: 1}), providers.WithTimeout(3*time.Minute), providers.WithIdleTimeout(2*time.Minute)),
		runtime.WithAlias("gem", "gemini/gemini-2.5-flash"),
		runtime.WithAlias("gpt", "openai/gpt-4.1-mini"),
	)
	if err != nil {
		t.Fatal(err)
	}
	h, err := gateway.New(rt, gateway.Options{FanOut: map[string][]string{"both": {"openai/gpt-4.1-mini", "anthropic/claude-haiku-4-5"}}, Keys: []gateway.Key{
		{Name: "good", SHA256: gateway.HashKey("gk-good")},
		{Name: "limited", SHA256: gateway.HashKey("gk-limited"), RPM: 1},
	}})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(h)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	hc := &http.Client{Transport: tr}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		gw.CloseClientConnections()
		gw.Close()
		if err := h.Close(context.Background()); err != nil {
			t.Errorf("closing the gateway: %v", err)
		}
		rt.Close(context.Background())
		up.Close()
	})
	return &fixture{up: up, rt: rt, url: gw.URL, hc: hc}
}

func (f *fixture) waitNoneInFlight(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		busy := 0
		for _, s := range f.rt.Stats() {
			busy += s.InFlight
		}
		if busy == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d upstream call(s) outlived their cancelled clients", busy)
		}
	}
}

func stall() llmtest.Step {
	return llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultStall, After: 1, Stall: 5 * time.Minute, Reply: &llmtest.Reply{Deltas: []string{"first", "never"}}})
}

func midStream() llmtest.Step {
	return llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultResetMidStream, After: 2, Reply: &llmtest.Reply{Deltas: []string{"a", "b", "c", "d"}}})
}

func TestOpenAIGoSDK(t *testing.T) {
	f := newFixture(t)
	// Canceled when the test ends: a response body an SDK left open
	// releases its connection's read loop then, not never.
	ctx := t.Context()
	c := openai.NewClient(option.WithBaseURL(f.url+"/v1"), option.WithAPIKey("gk-good"), option.WithMaxRetries(0), option.WithHTTPClient(f.hc))
	call := llm.ToolCall{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}
	f.up.Push(llmtest.Text("hello"), llmtest.Deltas("one ", "two"), llmtest.ToolCalls(call), midStream(), stall())
	user := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}

	r, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt", Messages: user})
	if err != nil || r.Choices[0].Message.Content != "hello" {
		t.Fatalf("buffered: %v %+v", err, r)
	}
	s := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "openai/gpt-4.1-mini", Messages: user,
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}})
	acc := openai.ChatCompletionAccumulator{}
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if s.Err() != nil || acc.Choices[0].Message.Content != "one two" || acc.Usage.TotalTokens == 0 {
		t.Fatalf("stream: %v %+v", s.Err(), acc.ChatCompletion)
	}
	s = c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "openai/gpt-4.1-mini", Messages: user,
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "get_weather", Parameters: openai.FunctionParameters{"type": "object"}})}})
	acc = openai.ChatCompletionAccumulator{}
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if tc := acc.Choices[0].Message.ToolCalls; s.Err() != nil || len(tc) != 1 || tc[0].ID != "call_1" || tc[0].Function.Arguments != call.Arguments {
		t.Fatalf("tools: %v %+v", s.Err(), acc.ChatCompletion)
	}
	s = c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "openai/gpt-4.1-mini", Messages: user})
	text := ""
	for s.Next() {
		if len(s.Current().Choices) > 0 {
			text += s.Current().Choices[0].Delta.Content
		}
	}
	if s.Err() == nil || text != "ab" {
		t.Fatalf("mid-stream failure: text %q err %v", text, s.Err())
	}
	cctx, cancel := context.WithCancel(ctx)
	s = c.Chat.Completions.NewStreaming(cctx, openai.ChatCompletionNewParams{Model: "openai/gpt-4.1-mini", Messages: user})
	if !s.Next() {
		t.Fatalf("cancel: no first chunk: %v", s.Err())
	}
	cancel()
	for s.Next() {
	}
	s.Close()
	f.waitNoneInFlight(t)

	e, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "openai/text-embedding-3-small", Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"a", "b"}}})
	if err != nil || len(e.Data) != 2 || float32(e.Data[1].Embedding[0]) != llmtest.EmbeddingFor("b", len(e.Data[1].Embedding))[0] {
		t.Fatalf("embeddings: %v %+v", err, e)
	}
	page, err := c.Models.List(ctx)
	if err != nil || len(page.Data) < 2 {
		t.Fatalf("models: %v %+v", err, page)
	}
	for _, id := range []string{"gpt", page.Data[len(page.Data)-1].ID} { // an alias, a provider/model (with its slash)
		if m, err := c.Models.Get(ctx, id); err != nil || m.ID != id {
			t.Fatalf("model %s: %v %+v", id, err, m)
		}
	}
	if _, err := c.Models.Get(ctx, "openai/no-such-model"); !errors.As(err, new(*openai.Error)) || err.(*openai.Error).StatusCode != 404 {
		t.Fatalf("unknown model: %v", err)
	}
	var apiErr *openai.Error
	bad := openai.NewClient(option.WithBaseURL(f.url+"/v1"), option.WithAPIKey("gk-bad"), option.WithMaxRetries(0), option.WithHTTPClient(f.hc))
	_, err = bad.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt", Messages: user})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 {
		t.Fatalf("auth: %v", err)
	}
	// A fan-out alias: a choice per model, buffered and streamed (the
	// scripted answers are spent: both models give the default reply).
	r, err = c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "both", Messages: user})
	if err != nil || len(r.Choices) != 2 || r.Choices[0].Index != 0 || r.Choices[1].Index != 1 || r.Choices[0].Message.Content == "" ||
		r.Choices[0].Message.Content != r.Choices[1].Message.Content {
		t.Fatalf("fan-out: %v %+v", err, r)
	}
	s = c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "both", Messages: user,
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}})
	acc = openai.ChatCompletionAccumulator{}
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if s.Err() != nil || len(acc.Choices) != 2 || acc.Choices[0].Message.Content != r.Choices[0].Message.Content ||
		acc.Choices[1].Message.Content != r.Choices[1].Message.Content || acc.Usage.TotalTokens == 0 {
		t.Fatalf("fan-out stream: %v %+v", s.Err(), acc.ChatCompletion)
	}
	lim := openai.NewClient(option.WithBaseURL(f.url+"/v1"), option.WithAPIKey("gk-limited"), option.WithMaxRetries(0), option.WithHTTPClient(f.hc))
	if _, err := lim.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt", Messages: user}); err != nil {
		t.Fatal(err)
	}
	_, err = lim.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt", Messages: user})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Response.Header.Get("retry-after") == "" {
		t.Fatalf("429: %v", err)
	}
}

func TestAnthropicGoSDK(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context() // canceled when the test ends, as above
	c := anthropic.NewClient(aoption.WithBaseURL(f.url), aoption.WithAPIKey("gk-good"), aoption.WithMaxRetries(0), aoption.WithHTTPClient(f.hc))
	f.up.Push(llmtest.Respond(llmtest.Reply{Text: "hello", Reasoning: "hm", Signature: "sig-1"}),
		llmtest.Respond(llmtest.Reply{Thinking: []llm.ThinkingBlock{{Text: "first", Signature: "sig-A"}, {Text: "second", Signature: "sig-B"}}, Text: "done"}),
		llmtest.Deltas("one ", "two"), midStream(), stall())
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}

	m, err := c.Messages.New(ctx, anthropic.MessageNewParams{Model: "anthropic/claude-haiku-4-5", MaxTokens: 2048, Messages: msgs,
		Thinking: anthropic.ThinkingConfigParamOfEnabled(1024)})
	if err != nil || len(m.Content) != 2 || m.Content[0].Signature != "sig-1" || m.Content[1].Text != "hello" {
		t.Fatalf("buffered: %v %+v", err, m)
	}
	// Streamed thinking: each block keeps its own signature (signature_delta).
	s := c.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "anthropic/claude-haiku-4-5", MaxTokens: 2048, Messages: msgs,
		Thinking: anthropic.ThinkingConfigParamOfEnabled(1024)})
	acc := anthropic.Message{}
	for s.Next() {
		if err := acc.Accumulate(s.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if s.Err() != nil || len(acc.Content) != 3 || acc.Content[0].Thinking != "first" || acc.Content[0].Signature != "sig-A" ||
		acc.Content[1].Thinking != "second" || acc.Content[1].Signature != "sig-B" || acc.Content[2].Text != "done" {
		t.Fatalf("streamed thinking: %v %+v", s.Err(), acc.Content)
	}
	// Streamed, cross-format: an OpenAI-format model behind the Anthropic SDK.
	s = c.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "gpt", MaxTokens: 100, Messages: msgs})
	acc = anthropic.Message{}
	for s.Next() {
		if err := acc.Accumulate(s.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if s.Err() != nil || len(acc.Content) != 1 || acc.Content[0].Text != "one two" || acc.StopReason != "end_turn" {
		t.Fatalf("stream: %v %+v", s.Err(), acc)
	}
	s = c.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "anthropic/claude-haiku-4-5", MaxTokens: 100, Messages: msgs})
	for s.Next() {
	}
	if s.Err() == nil {
		t.Fatal("mid-stream failure: no error")
	}
	cctx, cancel := context.WithCancel(ctx)
	s = c.Messages.NewStreaming(cctx, anthropic.MessageNewParams{Model: "anthropic/claude-haiku-4-5", MaxTokens: 100, Messages: msgs})
	if !s.Next() {
		t.Fatalf("cancel: no first event: %v", s.Err())
	}
	cancel()
	for s.Next() {
	}
	s.Close()
	f.waitNoneInFlight(t)

	// The model list, in Anthropic's pages (one model a page: the SDK's
	// pager follows has_more and last_id), and one model.
	var ids []string
	pager := c.Models.ListAutoPaging(ctx, anthropic.ModelListParams{Limit: anthropic.Int(1)})
	for pager.Next() {
		m := pager.Current()
		if m.Type != "model" || m.DisplayName == "" || m.CreatedAt.IsZero() {
			t.Fatalf("model entry %+v", m)
		}
		ids = append(ids, m.ID)
	}
	if pager.Err() != nil || len(ids) < 3 || ids[0] != "gem" || ids[1] != "gpt" {
		t.Fatalf("models: %v %v", pager.Err(), ids)
	}
	for _, id := range []string{"gpt", ids[len(ids)-1]} {
		if m, err := c.Models.Get(ctx, id, anthropic.ModelGetParams{}); err != nil || m.ID != id || m.Type != "model" {
			t.Fatalf("model %s: %v %+v", id, err, m)
		}
	}
	var apiErr *anthropic.Error
	if _, err := c.Models.Get(ctx, "anthropic/no-such-model", anthropic.ModelGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Type() != "not_found_error" {
		t.Fatalf("unknown model: %v", err)
	}
	bad := anthropic.NewClient(aoption.WithBaseURL(f.url), aoption.WithAPIKey("gk-bad"), aoption.WithMaxRetries(0), aoption.WithHTTPClient(f.hc))
	_, err = bad.Messages.New(ctx, anthropic.MessageNewParams{Model: "gpt", MaxTokens: 5, Messages: msgs})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 {
		t.Fatalf("auth: %v", err)
	}
	lim := anthropic.NewClient(aoption.WithBaseURL(f.url), aoption.WithAPIKey("gk-limited"), aoption.WithMaxRetries(0), aoption.WithHTTPClient(f.hc))
	if _, err := lim.Messages.New(ctx, anthropic.MessageNewParams{Model: "gpt", MaxTokens: 5, Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	_, err = lim.Messages.New(ctx, anthropic.MessageNewParams{Model: "gpt", MaxTokens: 5, Messages: msgs})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 {
		t.Fatalf("429: %v", err)
	}
}

func TestGenAIGoSDK(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context() // canceled when the test ends, as above
	newClient := func(key string) *genai.Client {
		c, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: key, Backend: genai.BackendGeminiAPI, HTTPClient: f.hc, HTTPOptions: genai.HTTPOptions{BaseURL: f.url}})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := newClient("gk-good")
	f.up.Push(llmtest.Text("hello"), llmtest.Deltas("one ", "two"), midStream(), stall())
	r, err := c.Models.GenerateContent(ctx, "gem", genai.Text("hi"), nil)
	if err != nil || r.Text() != "hello" {
		t.Fatalf("buffered: %v %+v", err, r)
	}
	text := ""
	for chunk, err := range c.Models.GenerateContentStream(ctx, "gpt", genai.Text("hi"), nil) {
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		text += chunk.Text()
	}
	if text != "one two" {
		t.Fatalf("stream text %q", text)
	}
	text, err = "", nil
	for chunk, e := range c.Models.GenerateContentStream(ctx, "gem", genai.Text("hi"), nil) {
		if e != nil {
			err = e
			break
		}
		text += chunk.Text()
	}
	if err == nil || text != "ab" {
		t.Fatalf("mid-stream failure: text %q err %v", text, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	for range c.Models.GenerateContentStream(cctx, "gem", genai.Text("hi"), nil) {
		cancel()
		break
	}
	cancel()
	f.waitNoneInFlight(t)

	e, err := c.Models.EmbedContent(ctx, "gem", []*genai.Content{genai.NewContentFromText("a", genai.RoleUser), genai.NewContentFromText("b", genai.RoleUser)}, nil)
	if err != nil || len(e.Embeddings) != 2 || e.Embeddings[1].Values[0] != llmtest.EmbeddingFor("b", len(e.Embeddings[1].Values))[0] {
		t.Fatalf("embeddings: %v %+v", err, e)
	}
	// The model list, page by page (pageSize 1: the SDK follows
	// nextPageToken), and one model.
	var names []string
	for m, err := range c.Models.All(ctx) {
		if err != nil {
			t.Fatalf("models: %v", err)
		}
		names = append(names, m.Name)
	}
	if len(names) < 3 || names[0] != "models/gem" || names[1] != "models/gpt" {
		t.Fatalf("models %v", names)
	}
	page, err := c.Models.List(ctx, &genai.ListModelsConfig{PageSize: 1})
	if err != nil || len(page.Items) != 1 || page.NextPageToken == "" {
		t.Fatalf("first page: %v %+v", err, page)
	}
	if page, err = page.Next(ctx); err != nil || len(page.Items) != 1 || page.Items[0].Name != "models/gpt" {
		t.Fatalf("second page: %v %+v", err, page)
	}
	m, err := c.Models.Get(ctx, "gem", nil)
	if err != nil || m.Name != "models/gem" || !slices.Contains(m.SupportedActions, "generateContent") {
		t.Fatalf("model: %v %+v", err, m)
	}
	var apiErr genai.APIError
	if _, err := c.Models.Get(ctx, "no-such-model", nil); !errors.As(err, &apiErr) || apiErr.Code != 404 {
		t.Fatalf("unknown model: %v", err)
	}
	_, err = newClient("gk-bad").Models.GenerateContent(ctx, "gem", genai.Text("hi"), nil)
	if !errors.As(err, &apiErr) || apiErr.Code != 401 || !strings.Contains(apiErr.Status, "UNAUTHENTICATED") {
		t.Fatalf("auth: %v", err)
	}
	lim := newClient("gk-limited")
	if _, err := lim.Models.GenerateContent(ctx, "gem", genai.Text("hi"), nil); err != nil {
		t.Fatal(err)
	}
	_, err = lim.Models.GenerateContent(ctx, "gem", genai.Text("hi"), nil)
	if !errors.As(err, &apiErr) || apiErr.Code != 429 {
		t.Fatalf("429: %v", err)
	}
}

// TestOpenAIGoSDKResponses drives POST /v1/responses with openai-go:
// Responses.New buffered, NewStreaming on an OpenAI-format model and with
// tools on an Anthropic-format one, and a mid-stream failure.
func TestOpenAIGoSDKResponses(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context() // canceled when the test ends, as above
	c := openai.NewClient(option.WithBaseURL(f.url+"/v1"), option.WithAPIKey("gk-good"), option.WithMaxRetries(0), option.WithHTTPClient(f.hc))
	call := llm.ToolCall{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}
	f.up.Push(llmtest.Text("hello"), llmtest.Deltas("one ", "two"), llmtest.ToolCalls(call), midStream())
	in := responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}

	r, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt", Input: in, Instructions: openai.String("be brief")})
	if err != nil || r.OutputText() != "hello" || r.Status != "completed" {
		t.Fatalf("buffered: %v %+v", err, r)
	}
	s := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "openai/gpt-4.1-mini", Input: in})
	text, final := "", responses.Response{}
	for s.Next() {
		switch ev := s.Current(); ev.Type {
		case "response.output_text.delta":
			text += ev.Delta
		case "response.completed":
			final = ev.Response
		}
	}
	if s.Err() != nil || text != "one two" || final.OutputText() != "one two" || final.Usage.TotalTokens == 0 {
		t.Fatalf("stream: %v %q %+v", s.Err(), text, final)
	}
	tool := responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{Name: "get_weather", Parameters: map[string]any{"type": "object"}, Strict: openai.Bool(false)}}
	s = c.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "anthropic/claude-haiku-4-5", Input: in, Tools: []responses.ToolUnionParam{tool}})
	final = responses.Response{}
	for s.Next() {
		if ev := s.Current(); ev.Type == "response.completed" {
			final = ev.Response
		}
	}
	if s.Err() != nil || len(final.Output) != 1 || final.Output[0].Type != "function_call" || final.Output[0].CallID != "call_1" ||
		final.Output[0].Arguments.OfString != call.Arguments {
		t.Fatalf("tools: %v %+v", s.Err(), final)
	}
	s = c.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "openai/gpt-4.1-mini", Input: in})
	text = ""
	for s.Next() {
		if ev := s.Current(); ev.Type == "response.output_text.delta" {
			text += ev.Delta
		}
	}
	if s.Err() == nil || text != "ab" {
		t.Fatalf("mid-stream failure: text %q err %v", text, s.Err())
	}
	f.waitNoneInFlight(t)
}

// TestOpenAIGoSDKBatches runs an OpenAI batch job through the gateway with
// openai-go: Files.New, Batches.New, Batches.Get polling, Files.Content of
// the output and error files.
func TestOpenAIGoSDKBatches(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context() // canceled when the test ends, as above
	c := openai.NewClient(option.WithBaseURL(f.url+"/v1"), option.WithAPIKey("gk-good"), option.WithMaxRetries(0), option.WithHTTPClient(f.hc))
	in := `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"openai/gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}}
{"custom_id":"b","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt","messages":[{"role":"wizard","content":"hi"}]}}
`
	file, err := c.Files.New(ctx, openai.FileNewParams{File: openai.File(strings.NewReader(in), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil || file.Purpose != "batch" || file.Bytes != int64(len(in)) {
		t.Fatalf("upload: %v %+v", err, file)
	}
	b, err := c.Batches.New(ctx, openai.BatchNewParams{InputFileID: file.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); b.Status != openai.BatchStatusCompleted; time.Sleep(20 * time.Millisecond) {
		if b, err = c.Batches.Get(ctx, b.ID); err != nil || time.Now().After(deadline) || b.Status == openai.BatchStatusFailed {
			t.Fatalf("poll: %v %+v", err, b)
		}
	}
	if b.RequestCounts.Total != 2 || b.RequestCounts.Completed != 1 || b.RequestCounts.Failed != 1 {
		t.Fatalf("counts %+v", b.RequestCounts)
	}
	read := func(id string) string {
		resp, err := c.Files.Content(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var sb strings.Builder
		_, _ = io.Copy(&sb, resp.Body)
		return sb.String()
	}
	if out := read(b.OutputFileID); !strings.Contains(out, `"custom_id":"a"`) || !strings.Contains(out, `"status_code":200`) {
		t.Errorf("output file %s", out)
	}
	if e := read(b.ErrorFileID); !strings.Contains(e, `"custom_id":"b"`) || !strings.Contains(e, `"error":{`) {
		t.Errorf("error file %s", e)
	}
}
