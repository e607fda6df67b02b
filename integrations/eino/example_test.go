package eino_test

import (
	"context"
	"fmt"

	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/components/tool/utils"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"

	chorus "github.com/chorusrt/chorus/integrations/eino"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
)

// Example runs eino's ReAct agent with Chorus as its model layer, on an
// llmtest server standing in for OpenAI: the model calls a tool, eino runs
// it, and the model answers from the result.
func Example() {
	srv := llmtest.NewServer()
	defer srv.Close()
	srv.Push(
		llmtest.ToolCalls(llm.ToolCall{Name: "get_weather", Arguments: `{"city":"Oslo"}`}),
		llmtest.Text("It is 21 degrees in Oslo."),
	)

	ctx := context.Background()
	rt, err := runtime.New(runtime.WithProvider(providers.Config{ID: "openai", Format: providers.FormatOpenAI,
		BaseURL: srv.OpenAIBaseURL(), APIKey: "sk-example"}))
	if err != nil {
		panic(err)
	}
	defer rt.Close(ctx)

	cm, err := chorus.New(rt, chorus.Config{Model: "openai/gpt-4.1-mini"})
	if err != nil {
		panic(err)
	}
	type weatherIn struct {
		City string `json:"city"`
	}
	weather, err := utils.InferTool("get_weather", "Current weather in a city", func(ctx context.Context, in weatherIn) (string, error) {
		return `{"celsius":21}`, nil
	})
	if err != nil {
		panic(err)
	}
	agent, err := react.NewAgent(ctx, &react.AgentConfig{
		ToolCallingModel: cm,
		ToolsConfig:      compose.ToolsNodeConfig{Tools: []tool.BaseTool{weather}},
	})
	if err != nil {
		panic(err)
	}
	out, err := agent.Generate(ctx, []*schema.Message{schema.UserMessage("Weather in Oslo?")})
	if err != nil {
		panic(err)
	}
	fmt.Println(out.Content)
	fmt.Println(srv.Count(), "model calls")
	// Output:
	// It is 21 degrees in Oslo.
	// 2 model calls
}
