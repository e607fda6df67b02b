package genkit_test

import (
	"context"
	"fmt"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"

	chorus "github.com/chorusrt/chorus/integrations/genkit"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
)

// Example runs a Genkit flow with a tool on a Chorus model, on an llmtest
// server standing in for Gemini: the model calls the tool, Genkit runs it,
// and the model answers from the result.
func Example() {
	srv := llmtest.NewServer()
	defer srv.Close()
	srv.Push(
		llmtest.ToolCalls(llm.ToolCall{Name: "get_weather", Arguments: `{"city":"Oslo"}`}),
		llmtest.Text("It is 21 degrees in Oslo."),
	)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt, err := runtime.New(runtime.WithProvider(providers.Config{ID: "gemini", Format: providers.FormatGemini,
		BaseURL: srv.GeminiBaseURL(), APIKey: "example-key"}))
	if err != nil {
		panic(err)
	}
	defer rt.Close(ctx)

	g := genkit.Init(ctx, genkit.WithPlugins(&chorus.Plugin{Client: rt}))
	type weatherIn struct {
		City string `json:"city"`
	}
	weather := genkit.DefineTool(g, "get_weather", "Current weather in a city", func(ctx *ai.ToolContext, in weatherIn) (string, error) {
		return `{"celsius":21}`, nil
	})
	flow := genkit.DefineFlow(g, "weather", func(ctx context.Context, city string) (string, error) {
		return genkit.GenerateText(ctx, g, ai.WithModel(chorus.Model(g, "gemini/gemini-2.5-flash")),
			ai.WithPrompt("Weather in %s?", city), ai.WithTools(weather))
	})
	out, err := flow.Run(ctx, "Oslo")
	if err != nil {
		panic(err)
	}
	fmt.Println(out)
	fmt.Println(srv.Count(), "model calls")
	// Output:
	// It is 21 degrees in Oslo.
	// 2 model calls
}
