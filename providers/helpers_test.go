package providers

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/chorusrt/chorus/internal/testkit/faultmatrix"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

// fastRetry keeps ladders short in tests.
var fastRetry = RetryPolicy{MaxAttempts: 4, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}

// formats lists one provider config per wire format, pointed at srv.
func formats(srv *llmtest.Server) []Config {
	return []Config{
		{ID: "openai", Format: FormatOpenAI, BaseURL: srv.OpenAIBaseURL(), APIKey: testKey, Quirks: Quirks{MaxCompletionTokens: true, ReasoningEffort: true}},
		{ID: "anthropic", Format: FormatAnthropic, BaseURL: srv.AnthropicBaseURL(), APIKey: testKey},
		{ID: "gemini", Format: FormatGemini, BaseURL: srv.GeminiBaseURL(), APIKey: testKey},
	}
}

func newClient(t *testing.T, cfg Config, opts ...Option) *Client {
	t.Helper()
	opts = append([]Option{WithRetryPolicy(fastRetry), WithTimeout(10 * time.Second), WithIdleTimeout(2 * time.Second)}, opts...)
	c, err := New(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func hello() *llm.ChatRequest {
	return &llm.ChatRequest{Model: "test-model", Messages: []llm.Message{llm.UserText("hello")}}
}

// collect drains a stream through All and returns the events and final error.
func collect(s *llm.Stream) ([]llm.Event, error) {
	var evs []llm.Event
	for ev, err := range s.All() {
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

// textOf is the text the events carried.
var textOf = faultmatrix.TextOf

// attempts records attempt events.
type attempts struct {
	mu  sync.Mutex
	evs []AttemptEvent
}

func (a *attempts) observe(ev AttemptEvent) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.evs = append(a.evs, ev)
}

func (a *attempts) all() []AttemptEvent {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]AttemptEvent(nil), a.evs...)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}
