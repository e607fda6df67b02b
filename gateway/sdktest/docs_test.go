package sdktest

import (
	"context"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"google.golang.org/genai"
)

// docsSDKs is the gateway guide's block of the three Go SDKs against chorus
// serve, as written there (internal/readmecheck's TestGoBlocksCompile holds
// the guide to it, token for token); this module's build type-checks it.
// TestGoSDKsAgainstChorusServe runs the same calls against the built
// command.
var _ = docsSDKs

func docsSDKs(ctx context.Context) {
	// go get github.com/openai/openai-go/v3
	c := openai.NewClient(option.WithBaseURL("http://127.0.0.1:8080/v1"), option.WithAPIKey("unused-on-loopback"))
	r, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "sim/echo",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	resp, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "sim/echo",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}) // resp.OutputText()

	// go get github.com/anthropics/anthropic-sdk-go
	a := anthropic.NewClient(aoption.WithBaseURL("http://127.0.0.1:8080"), aoption.WithAPIKey("unused-on-loopback"))
	m, err := a.Messages.New(ctx, anthropic.MessageNewParams{Model: "sim/echo", MaxTokens: 100,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})

	// go get google.golang.org/genai
	g, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: "unused-on-loopback", Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: "http://127.0.0.1:8080"}})
	gr, err := g.Models.GenerateContent(ctx, "sim/echo", genai.Text("hi"), nil) // gr.Text()
	_, _, _, _, _ = r, resp, m, gr, err
}
