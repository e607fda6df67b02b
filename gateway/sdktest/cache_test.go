package sdktest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/chorusrt/chorus/cache"
	"github.com/chorusrt/chorus/gateway"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
)

// cachedGateway is a gateway over a runtime with an in-memory response
// cache, in front of an llmtest fake of each format.
func cachedGateway(t *testing.T) (*llmtest.Server, string, *http.Client) {
	t.Helper()
	up := llmtest.NewServer()
	s, _ := cache.NewMemory(cache.Limits{MaxEntries: 100})
	c, err := cache.New(s, cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := runtime.New(
		runtime.WithProvider(providers.Config{ID: "openai", Format: providers.FormatOpenAI, BaseURL: up.OpenAIBaseURL(), APIKey: providerKey}),
		runtime.WithProvider(providers.Config{ID: "anthropic", Format: providers.FormatAnthropic, BaseURL: up.AnthropicBaseURL(), APIKey: providerKey}),
		runtime.WithClientOptions(providers.WithIdleTimeout(2*time.Minute)),
		runtime.WithCache(c, runtime.CacheOptions{}),
	)
	if err != nil {
		t.Fatal(err)
	}
	h, err := gateway.New(rt, gateway.Options{Keys: []gateway.Key{{Name: "good", SHA256: gateway.HashKey("gk-good")}}})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(h)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		gw.CloseClientConnections()
		gw.Close()
		h.Close(context.Background())
		rt.Close(context.Background())
		c.Close()
		up.Close()
	})
	return up, gw.URL, &http.Client{Transport: tr}
}

// TestCacheGoSDKs: openai-go (buffered and streamed, with tools) and
// anthropic-sdk-go (streamed, with tools) ask each question twice; the
// second is a hit (nothing sent upstream) and the SDK reads the same
// text, tool calls, finish and usage as from the provider.
func TestCacheGoSDKs(t *testing.T) {
	up, url, hc := cachedGateway(t)
	ctx := t.Context()
	up.Push(
		llmtest.Respond(llmtest.Reply{Text: "checking", ToolCalls: []llm.ToolCall{{ID: "call_p", Name: "get_weather", Arguments: `{"city":"Paris"}`}}, Usage: &llm.Usage{PromptTokens: 20, CompletionTokens: 9}}),
		llmtest.Respond(llmtest.Reply{Deltas: []string{"one, ", "two, ", "three"}, ToolCalls: []llm.ToolCall{{ID: "call_q", Name: "get_weather", Arguments: `{"city":"Oslo"}`}}, Usage: &llm.Usage{PromptTokens: 8, CompletionTokens: 3}}),
		llmtest.Respond(llmtest.Reply{Text: "let me look", ToolCalls: []llm.ToolCall{{ID: "toolu_r", Name: "get_weather", Arguments: `{"city":"Rome"}`}}, Usage: &llm.Usage{PromptTokens: 30, CompletionTokens: 12}}),
	)
	oc := openai.NewClient(option.WithBaseURL(url+"/v1"), option.WithAPIKey("gk-good"), option.WithMaxRetries(0), option.WithHTTPClient(hc))
	tools := []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "get_weather",
		Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}})}
	type seen struct {
		text, finish string
		calls        [][3]string
		usage        [3]int64
	}
	var got [2]seen
	var hdr [2]string
	for i := range 2 {
		var resp *http.Response
		r, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "openai/gpt-4.1-mini", Tools: tools,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("weather in Paris?")}}, option.WithResponseInto(&resp))
		if err != nil {
			t.Fatal(err)
		}
		m := r.Choices[0].Message
		got[i] = seen{text: m.Content, finish: r.Choices[0].FinishReason, usage: [3]int64{r.Usage.PromptTokens, r.Usage.CompletionTokens, r.Usage.TotalTokens}}
		for _, tc := range m.ToolCalls {
			got[i].calls = append(got[i].calls, [3]string{tc.ID, tc.Function.Name, tc.Function.Arguments})
		}
		hdr[i] = resp.Header.Get("x-chorus-cache")
	}
	if hdr != [2]string{"miss", "hit"} || !reflect.DeepEqual(got[0], got[1]) || len(got[0].calls) != 1 || got[0].usage[2] != 29 {
		t.Fatalf("openai-go buffered: %v\n%+v\n%+v", hdr, got[0], got[1])
	}
	for i := range 2 {
		var resp *http.Response
		s := oc.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "openai/gpt-4.1-mini", Tools: tools,
			Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("count, then weather in Oslo")},
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}}, option.WithResponseInto(&resp))
		acc := openai.ChatCompletionAccumulator{}
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		m := acc.Choices[0].Message
		got[i] = seen{text: m.Content, finish: acc.Choices[0].FinishReason, usage: [3]int64{acc.Usage.PromptTokens, acc.Usage.CompletionTokens, acc.Usage.TotalTokens}}
		for _, tc := range m.ToolCalls {
			got[i].calls = append(got[i].calls, [3]string{tc.ID, tc.Function.Name, tc.Function.Arguments})
		}
		hdr[i] = resp.Header.Get("x-chorus-cache")
	}
	if hdr != [2]string{"miss", "hit"} || !reflect.DeepEqual(got[0], got[1]) || got[0].text != "one, two, three" || len(got[0].calls) != 1 || got[0].usage[2] != 11 {
		t.Fatalf("openai-go streamed: %v\n%+v\n%+v", hdr, got[0], got[1])
	}
	ac := anthropic.NewClient(aoption.WithBaseURL(url), aoption.WithAPIKey("gk-good"), aoption.WithMaxRetries(0), aoption.WithHTTPClient(hc))
	for i := range 2 {
		var resp *http.Response
		s := ac.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "anthropic/claude-sonnet-4-5", MaxTokens: 256,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("weather in Rome?"))},
			Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "get_weather",
				InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}}}}}},
			aoption.WithResponseInto(&resp))
		acc := anthropic.Message{}
		for s.Next() {
			if err := acc.Accumulate(s.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		got[i] = seen{finish: string(acc.StopReason), usage: [3]int64{acc.Usage.InputTokens, acc.Usage.OutputTokens}}
		for _, b := range acc.Content {
			switch b.Type {
			case "text":
				got[i].text += b.Text
			case "tool_use":
				got[i].calls = append(got[i].calls, [3]string{b.ID, b.Name, string(b.Input)})
			}
		}
		hdr[i] = resp.Header.Get("x-chorus-cache")
	}
	if hdr != [2]string{"miss", "hit"} || !reflect.DeepEqual(got[0], got[1]) || got[0].text != "let me look" || len(got[0].calls) != 1 || got[0].usage[1] != 12 {
		t.Fatalf("anthropic-sdk-go streamed: %v\n%+v\n%+v", hdr, got[0], got[1])
	}
	if up.Count() != 3 {
		t.Fatalf("upstream requests = %d, want 3", up.Count())
	}
}
