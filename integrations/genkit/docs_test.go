package genkit_test

import (
	"context"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"

	chorusgenkit "github.com/chorusrt/chorus/integrations/genkit"
	"github.com/chorusrt/chorus/runtime"
)

// docsGenkit backs docs/frameworks.md's Genkit block (internal/readmecheck
// finds the block's tokens here): it compiles, so the guide's code does.
func docsGenkit(ctx context.Context, rt *runtime.Runtime, weatherTool ai.ToolRef) (string, error) {
	g := genkit.Init(ctx, genkit.WithPlugins(&chorusgenkit.Plugin{Client: rt}))
	text, err := genkit.GenerateText(ctx, g,
		ai.WithModel(chorusgenkit.Model(g, "smart")), // Genkit name "chorus/smart"
		ai.WithPrompt("What's the weather in Oslo?"), ai.WithTools(weatherTool))
	return text, err
}

var _ = docsGenkit
