package langchaingo_test

import (
	"context"
	"fmt"

	"github.com/tmc/langchaingo/agents"
	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/tools"

	chorus "github.com/chorusrt/chorus/integrations/langchaingo"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
)

// weather is a LangChainGo tool.
type weather struct{}

func (weather) Name() string        { return "get_weather" }
func (weather) Description() string { return "Current weather in a city" }
func (weather) Call(ctx context.Context, city string) (string, error) {
	return `{"celsius":21}`, nil
}

// Example runs LangChainGo's functions agent with Chorus as its model, on
// an llmtest server standing in for Anthropic: the model calls a tool, the
// executor runs it, and the model answers from the result.
func Example() {
	srv := llmtest.NewServer()
	defer srv.Close()
	srv.Push(
		llmtest.ToolCalls(llm.ToolCall{Name: "get_weather", Arguments: `{"__arg1":"Oslo"}`}),
		llmtest.Text("It is 21 degrees in Oslo."),
	)

	ctx := context.Background()
	rt, err := runtime.New(runtime.WithProvider(providers.Config{ID: "anthropic", Format: providers.FormatAnthropic,
		BaseURL: srv.AnthropicBaseURL(), APIKey: "sk-example"}))
	if err != nil {
		panic(err)
	}
	defer rt.Close(ctx)

	model, err := chorus.New(rt, chorus.Config{Model: "anthropic/claude-sonnet-4-5", MaxTokens: 1024})
	if err != nil {
		panic(err)
	}
	agent := agents.NewOpenAIFunctionsAgent(model, []tools.Tool{weather{}})
	out, err := chains.Run(ctx, agents.NewExecutor(agent), "Weather in Oslo?")
	if err != nil {
		panic(err)
	}
	fmt.Println(out)
	fmt.Println(srv.Count(), "model calls")
	// Output:
	// It is 21 degrees in Oslo.
	// 2 model calls
}
