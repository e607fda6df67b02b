package langchaingo_test

import (
	"context"

	"github.com/tmc/langchaingo/agents"
	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/tools"

	choruslc "github.com/chorusrt/chorus/integrations/langchaingo"
	"github.com/chorusrt/chorus/runtime"
)

// docsLangChainGo backs docs/frameworks.md's LangChainGo block
// (internal/readmecheck finds the block's tokens here): it compiles, so
// the guide's code does.
func docsLangChainGo(ctx context.Context, rt *runtime.Runtime, tools []tools.Tool) (string, error) {
	llm, err := choruslc.New(rt, choruslc.Config{Model: "smart"})
	agent := agents.NewOpenAIFunctionsAgent(llm, tools)
	out, err := chains.Run(ctx, agents.NewExecutor(agent), "What's the weather in Oslo?")
	return out, err
}

var _ = docsLangChainGo
