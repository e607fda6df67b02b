package clients

import (
	"context"
	"errors"
	"io"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/schema"
	"github.com/tmc/langchaingo/llms"

	"github.com/chorusrt/chorus/bench/internal/corpus"
	choruseino "github.com/chorusrt/chorus/integrations/eino"
	choruslc "github.com/chorusrt/chorus/integrations/langchaingo"
	"github.com/chorusrt/chorus/providers"
)

// Frameworks pairs each framework's own OpenAI model plugin (a peer) with
// the same framework on Chorus (integrations/<framework> over a
// providers.Client): same framework, same calls, same server.
var Frameworks = []struct{ Own, Chorus string }{
	{"eino", "eino-chorus"},
	{"langchaingo", "langchaingo-chorus"},
}

// chorusProvider is a plain providers.Client for the framework adapters,
// on the run's shared transport.
func chorusProvider(f corpus.Format, o Options) (*providers.Client, error) {
	cfg := ChorusConfig(f, o.BaseURL)
	cfg.APIKey = providers.Secret(o.key())
	return providers.New(cfg, providers.WithHTTPClient(o.HTTP))
}

// einoChorus is eino's ChatModel interface on Chorus
// (integrations/eino), read as the eino peer reads its own plugin.
type einoChorus struct {
	c  *providers.Client
	cm *choruseino.ChatModel
	o  Options
}

func newEinoChorus(f corpus.Format, o Options) (Client, error) {
	c, err := chorusProvider(f, o)
	if err != nil {
		return nil, err
	}
	cm, err := choruseino.New(c, choruseino.Config{Model: "default", MaxTokens: o.MaxTokens})
	if err != nil {
		return nil, err
	}
	return &einoChorus{c: c, cm: cm, o: o}, nil
}

func (c *einoChorus) Close() { c.c.CloseIdleConnections() }

func (c *einoChorus) Stream(ctx context.Context, name string, delta func(string)) error {
	sr, err := c.cm.Stream(ctx, []*schema.Message{schema.UserMessage(c.o.Prompt)}, model.WithModel(name))
	if err != nil {
		return wrap("eino-chorus", err)
	}
	defer sr.Close()
	for {
		msg, err := sr.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return wrap("eino-chorus", err)
		}
		if msg.Content != "" {
			delta(msg.Content)
		}
	}
}

func (c *einoChorus) Chat(ctx context.Context, name string) (string, error) {
	msg, err := c.cm.Generate(ctx, []*schema.Message{schema.UserMessage(c.o.Prompt)}, model.WithModel(name))
	if err != nil {
		return "", wrap("eino-chorus", err)
	}
	return msg.Content, nil
}

// langchainChorus is LangChainGo's llms.Model on Chorus
// (integrations/langchaingo), called as the langchaingo peer calls its own
// plugin.
type langchainChorus struct {
	c *providers.Client
	l *choruslc.LLM
	o Options
}

func newLangchainChorus(f corpus.Format, o Options) (Client, error) {
	c, err := chorusProvider(f, o)
	if err != nil {
		return nil, err
	}
	l, err := choruslc.New(c, choruslc.Config{Model: "default"})
	if err != nil {
		return nil, err
	}
	return &langchainChorus{c: c, l: l, o: o}, nil
}

func (c *langchainChorus) Close() { c.c.CloseIdleConnections() }

func (c *langchainChorus) Stream(ctx context.Context, model string, delta func(string)) error {
	msgs := []llms.MessageContent{llms.TextParts(llms.ChatMessageTypeHuman, c.o.Prompt)}
	_, err := c.l.GenerateContent(ctx, msgs, llms.WithModel(model), llms.WithMaxTokens(c.o.MaxTokens), llms.WithStreamingFunc(func(_ context.Context, chunk []byte) error {
		if len(chunk) > 0 {
			delta(string(chunk))
		}
		return nil
	}))
	return wrap("langchaingo-chorus", err)
}

func (c *langchainChorus) Chat(ctx context.Context, model string) (string, error) {
	msgs := []llms.MessageContent{llms.TextParts(llms.ChatMessageTypeHuman, c.o.Prompt)}
	res, err := c.l.GenerateContent(ctx, msgs, llms.WithModel(model), llms.WithMaxTokens(c.o.MaxTokens))
	if err != nil {
		return "", wrap("langchaingo-chorus", err)
	}
	if len(res.Choices) == 0 {
		return "", errEmpty
	}
	return res.Choices[0].Content, nil
}
