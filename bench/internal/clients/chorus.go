package clients

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/chorusrt/chorus/bench/internal/corpus"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
)

// ChorusConfig is the providers.Config of format f against baseURL.
func ChorusConfig(f corpus.Format, baseURL string) providers.Config {
	switch f {
	case corpus.Anthropic:
		return providers.Config{ID: "anthropic", Format: providers.FormatAnthropic, BaseURL: baseURL, APIKey: "k"}
	case corpus.Gemini:
		return providers.Config{ID: "gemini", Format: providers.FormatGemini, BaseURL: baseURL, APIKey: "k"}
	default:
		return providers.Config{ID: "openai", Format: providers.FormatOpenAI, BaseURL: baseURL + "/v1", APIKey: "k"}
	}
}

func chorusRequest(o Options, model string) *llm.ChatRequest {
	return &llm.ChatRequest{Model: model, Messages: []llm.Message{llm.UserText(o.Prompt)}, MaxTokens: o.MaxTokens}
}

// chorus is a plain providers.Client: its channel face (Stream, ranging
// over Events) or its callback face (StreamTo).
type chorus struct {
	c        *providers.Client
	o        Options
	callback bool
}

func newChorus(f corpus.Format, o Options, callback bool) (Client, error) {
	cfg := ChorusConfig(f, o.BaseURL)
	cfg.APIKey = providers.Secret(o.key())
	c, err := providers.New(cfg, providers.WithHTTPClient(o.HTTP))
	if err != nil {
		return nil, err
	}
	return &chorus{c: c, o: o, callback: callback}, nil
}

func (c *chorus) Close() { c.c.CloseIdleConnections() }

func (c *chorus) Stream(ctx context.Context, model string, delta func(string)) error {
	req := chorusRequest(c.o, model)
	if c.callback {
		_, err := c.c.StreamTo(ctx, req, func(ev llm.Event) bool {
			if ev.Type == llm.EventText {
				delta(ev.Text)
			}
			return true
		})
		return err
	}
	s, err := c.c.Stream(ctx, req)
	if err != nil {
		return err
	}
	return drain(s, delta)
}

func drain(s *llm.Stream, delta func(string)) error {
	for ev := range s.Events() {
		if ev.Type == llm.EventText {
			delta(ev.Text)
		}
	}
	_, err := s.Result()
	return err
}

func (c *chorus) Chat(ctx context.Context, model string) (string, error) {
	res, err := c.c.Chat(ctx, chorusRequest(c.o, model))
	if err != nil {
		return "", err
	}
	return res.Content, nil
}

// chorusRuntime is the runtime: credential actor admission, pacing and
// the report at the end of each call, around the same providers.Client.
type chorusRuntime struct {
	rt     *runtime.Runtime
	o      Options
	prefix string
}

// NewRuntime builds a runtime over format f's provider at baseURL with
// the benchmark's HTTP client and extra options: one credential per key of
// o.APIKeys (one key, "k", by default).
func NewRuntime(f corpus.Format, baseURL string, o Options, extra ...runtime.Option) (*runtime.Runtime, error) {
	o.defaults()
	keys := o.APIKeys
	if len(keys) == 0 {
		keys = []string{o.key()}
	}
	var opts []runtime.Option
	for _, k := range keys {
		cfg := ChorusConfig(f, baseURL)
		cfg.APIKey = providers.Secret(k)
		opts = append(opts, runtime.WithProvider(cfg))
	}
	opts = append(opts,
		runtime.WithClientOptions(providers.WithHTTPClient(o.HTTP)),
		runtime.WithQueueSize(1<<16),
	)
	return runtime.New(append(opts, extra...)...)
}

func newRuntime(f corpus.Format, o Options) (Client, error) {
	rt, err := NewRuntime(f, o.BaseURL, o)
	if err != nil {
		return nil, err
	}
	return &chorusRuntime{rt: rt, o: o, prefix: ChorusConfig(f, o.BaseURL).ID + "/"}, nil
}

func (c *chorusRuntime) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = c.rt.Close(ctx)
	c.o.HTTP.CloseIdleConnections()
}

func (c *chorusRuntime) Stream(ctx context.Context, model string, delta func(string)) error {
	s, err := c.rt.Stream(ctx, chorusRequest(c.o, c.prefix+model))
	if err != nil {
		return err
	}
	return drain(s, delta)
}

func (c *chorusRuntime) Chat(ctx context.Context, model string) (string, error) {
	res, err := c.rt.Chat(ctx, chorusRequest(c.o, c.prefix+model))
	if err != nil {
		return "", err
	}
	return res.Content, nil
}

// errEmpty is returned by an adapter whose library answered without text.
var errEmpty = errors.New("clients: answer without text")

func wrap(name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", name, err)
}
