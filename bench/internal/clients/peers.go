package clients

import (
	"context"
	"errors"
	"io"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	anthropicopt "github.com/anthropics/anthropic-sdk-go/v2/option"
	einoopenai "github.com/cloudwego/eino-ext/components/model/openai"
	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/schema"
	openaigo "github.com/openai/openai-go/v3"
	openaigoopt "github.com/openai/openai-go/v3/option"
	goopenai "github.com/sashabaranov/go-openai"
	"github.com/tmc/langchaingo/llms"
	lcopenai "github.com/tmc/langchaingo/llms/openai"
	"google.golang.org/genai"

	"github.com/chorusrt/chorus/bench/internal/corpus"
)

// openai-go (github.com/openai/openai-go/v3), default retries (2).
type openAIGo struct {
	c openaigo.Client
	o Options
}

func newOpenAIGo(_ corpus.Format, o Options) (Client, error) {
	c := openaigo.NewClient(
		openaigoopt.WithBaseURL(o.BaseURL+"/v1/"),
		openaigoopt.WithAPIKey(o.key()),
		openaigoopt.WithHTTPClient(o.HTTP),
	)
	return &openAIGo{c: c, o: o}, nil
}

func (c *openAIGo) params(model string) openaigo.ChatCompletionNewParams {
	return openaigo.ChatCompletionNewParams{
		Model:     model,
		Messages:  []openaigo.ChatCompletionMessageParamUnion{openaigo.UserMessage(c.o.Prompt)},
		MaxTokens: openaigo.Int(int64(c.o.MaxTokens)),
	}
}

func (c *openAIGo) Close() { c.o.HTTP.CloseIdleConnections() }

func (c *openAIGo) Stream(ctx context.Context, model string, delta func(string)) error {
	s := c.c.Chat.Completions.NewStreaming(ctx, c.params(model))
	defer s.Close()
	for s.Next() {
		chunk := s.Current()
		if len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != "" {
			delta(chunk.Choices[0].Delta.Content)
		}
	}
	return wrap("openai-go", s.Err())
}

func (c *openAIGo) Chat(ctx context.Context, model string) (string, error) {
	res, err := c.c.Chat.Completions.New(ctx, c.params(model))
	if err != nil {
		return "", wrap("openai-go", err)
	}
	if len(res.Choices) == 0 {
		return "", errEmpty
	}
	return res.Choices[0].Message.Content, nil
}

// go-openai (github.com/sashabaranov/go-openai): no retries.
type goOpenAI struct {
	c *goopenai.Client
	o Options
}

func newGoOpenAI(_ corpus.Format, o Options) (Client, error) {
	cfg := goopenai.DefaultConfig(o.key())
	cfg.BaseURL = o.BaseURL + "/v1"
	cfg.HTTPClient = o.HTTP
	return &goOpenAI{c: goopenai.NewClientWithConfig(cfg), o: o}, nil
}

func (c *goOpenAI) req(model string, stream bool) goopenai.ChatCompletionRequest {
	return goopenai.ChatCompletionRequest{
		Model:     model,
		Messages:  []goopenai.ChatCompletionMessage{{Role: goopenai.ChatMessageRoleUser, Content: c.o.Prompt}},
		MaxTokens: c.o.MaxTokens,
		Stream:    stream,
	}
}

func (c *goOpenAI) Close() { c.o.HTTP.CloseIdleConnections() }

func (c *goOpenAI) Stream(ctx context.Context, model string, delta func(string)) error {
	s, err := c.c.CreateChatCompletionStream(ctx, c.req(model, true))
	if err != nil {
		return wrap("go-openai", err)
	}
	defer s.Close()
	for {
		chunk, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return wrap("go-openai", err)
		}
		if len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != "" {
			delta(chunk.Choices[0].Delta.Content)
		}
	}
}

func (c *goOpenAI) Chat(ctx context.Context, model string) (string, error) {
	res, err := c.c.CreateChatCompletion(ctx, c.req(model, false))
	if err != nil {
		return "", wrap("go-openai", err)
	}
	if len(res.Choices) == 0 {
		return "", errEmpty
	}
	return res.Choices[0].Message.Content, nil
}

// langchaingo (github.com/tmc/langchaingo/llms/openai): no retries. One
// LLM, the model chosen per call with llms.WithModel.
type langchain struct {
	l *lcopenai.LLM
	o Options
}

func newLangchain(_ corpus.Format, o Options) (Client, error) {
	l, err := lcopenai.New(lcopenai.WithToken(o.key()), lcopenai.WithBaseURL(o.BaseURL+"/v1"), lcopenai.WithHTTPClient(o.HTTP), lcopenai.WithModel("default"))
	if err != nil {
		return nil, wrap("langchaingo", err)
	}
	return &langchain{l: l, o: o}, nil
}

func (c *langchain) Close() { c.o.HTTP.CloseIdleConnections() }

func (c *langchain) Stream(ctx context.Context, model string, delta func(string)) error {
	msgs := []llms.MessageContent{llms.TextParts(llms.ChatMessageTypeHuman, c.o.Prompt)}
	_, err := c.l.GenerateContent(ctx, msgs, llms.WithModel(model), llms.WithMaxTokens(c.o.MaxTokens), llms.WithStreamingFunc(func(_ context.Context, chunk []byte) error {
		if len(chunk) > 0 {
			delta(string(chunk))
		}
		return nil
	}))
	return wrap("langchaingo", err)
}

func (c *langchain) Chat(ctx context.Context, model string) (string, error) {
	msgs := []llms.MessageContent{llms.TextParts(llms.ChatMessageTypeHuman, c.o.Prompt)}
	res, err := c.l.GenerateContent(ctx, msgs, llms.WithModel(model), llms.WithMaxTokens(c.o.MaxTokens))
	if err != nil {
		return "", wrap("langchaingo", err)
	}
	if len(res.Choices) == 0 {
		return "", errEmpty
	}
	return res.Choices[0].Content, nil
}

// eino (github.com/cloudwego/eino with eino-ext's OpenAI ChatModel): one
// ChatModel, the model chosen per call with model.WithModel.
type eino struct {
	cm *einoopenai.ChatModel
	o  Options
}

func newEino(_ corpus.Format, o Options) (Client, error) {
	mt := o.MaxTokens
	cm, err := einoopenai.NewChatModel(context.Background(), &einoopenai.ChatModelConfig{
		APIKey:     o.key(),
		BaseURL:    o.BaseURL + "/v1",
		Model:      "default",
		HTTPClient: o.HTTP,
		MaxTokens:  &mt,
	})
	if err != nil {
		return nil, wrap("eino", err)
	}
	return &eino{cm: cm, o: o}, nil
}

func (c *eino) Close() { c.o.HTTP.CloseIdleConnections() }

func (c *eino) Stream(ctx context.Context, name string, delta func(string)) error {
	sr, err := c.cm.Stream(ctx, []*schema.Message{schema.UserMessage(c.o.Prompt)}, model.WithModel(name))
	if err != nil {
		return wrap("eino", err)
	}
	defer sr.Close()
	for {
		msg, err := sr.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return wrap("eino", err)
		}
		if msg.Content != "" {
			delta(msg.Content)
		}
	}
}

func (c *eino) Chat(ctx context.Context, name string) (string, error) {
	msg, err := c.cm.Generate(ctx, []*schema.Message{schema.UserMessage(c.o.Prompt)}, model.WithModel(name))
	if err != nil {
		return "", wrap("eino", err)
	}
	return msg.Content, nil
}

// anthropic-sdk-go (github.com/anthropics/anthropic-sdk-go/v2), default
// retries (2).
type anthropicSDK struct {
	c anthropic.Client
	o Options
}

func newAnthropic(_ corpus.Format, o Options) (Client, error) {
	c := anthropic.NewClient(
		anthropicopt.WithBaseURL(o.BaseURL+"/"),
		anthropicopt.WithAPIKey(o.key()),
		anthropicopt.WithHTTPClient(o.HTTP),
	)
	return &anthropicSDK{c: c, o: o}, nil
}

func (c *anthropicSDK) params(model string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     anthropic.Model(model),
		MaxTokens: int64(c.o.MaxTokens),
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(c.o.Prompt))},
	}
}

func (c *anthropicSDK) Close() { c.o.HTTP.CloseIdleConnections() }

func (c *anthropicSDK) Stream(ctx context.Context, model string, delta func(string)) error {
	s := c.c.Messages.NewStreaming(ctx, c.params(model))
	defer s.Close()
	for s.Next() {
		ev := s.Current()
		if ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" {
			delta(ev.Delta.Text)
		}
	}
	return wrap("anthropic-sdk", s.Err())
}

func (c *anthropicSDK) Chat(ctx context.Context, model string) (string, error) {
	msg, err := c.c.Messages.New(ctx, c.params(model))
	if err != nil {
		return "", wrap("anthropic-sdk", err)
	}
	for _, b := range msg.Content {
		if b.Type == "text" {
			return b.Text, nil
		}
	}
	return "", errEmpty
}

// genai (google.golang.org/genai), Gemini API backend; no retries by
// default.
type genAI struct {
	c *genai.Client
	o Options
}

func newGenAI(_ corpus.Format, o Options) (Client, error) {
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey:      o.key(),
		Backend:     genai.BackendGeminiAPI,
		HTTPClient:  o.HTTP,
		HTTPOptions: genai.HTTPOptions{BaseURL: o.BaseURL + "/", APIVersion: "v1beta"},
	})
	if err != nil {
		return nil, wrap("genai", err)
	}
	return &genAI{c: c, o: o}, nil
}

func (c *genAI) config() *genai.GenerateContentConfig {
	return &genai.GenerateContentConfig{MaxOutputTokens: int32(c.o.MaxTokens)}
}

func (c *genAI) Close() { c.o.HTTP.CloseIdleConnections() }

func (c *genAI) Stream(ctx context.Context, model string, delta func(string)) error {
	for resp, err := range c.c.Models.GenerateContentStream(ctx, model, genai.Text(c.o.Prompt), c.config()) {
		if err != nil {
			return wrap("genai", err)
		}
		if len(resp.Candidates) > 0 && resp.Candidates[0].Content != nil {
			for _, p := range resp.Candidates[0].Content.Parts {
				if p.Text != "" {
					delta(p.Text)
				}
			}
		}
	}
	return nil
}

func (c *genAI) Chat(ctx context.Context, model string) (string, error) {
	resp, err := c.c.Models.GenerateContent(ctx, model, genai.Text(c.o.Prompt), c.config())
	if err != nil {
		return "", wrap("genai", err)
	}
	return resp.Text(), nil
}
