package langchaingo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tmc/langchaingo/tools"

	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
)

const key = "sk-lcgo-test-KEY-3"

var fast = providers.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}

type wire struct {
	name  string
	model string
	cfg   func(srv *llmtest.Server) providers.Config
}

var wires = []wire{
	{"openai", "openai/gpt-test", func(s *llmtest.Server) providers.Config {
		return providers.Config{ID: "openai", Format: providers.FormatOpenAI, BaseURL: s.OpenAIBaseURL(), APIKey: key}
	}},
	{"anthropic", "anthropic/claude-test", func(s *llmtest.Server) providers.Config {
		return providers.Config{ID: "anthropic", Format: providers.FormatAnthropic, BaseURL: s.AnthropicBaseURL(), APIKey: key}
	}},
	{"gemini", "gemini/gemini-test", func(s *llmtest.Server) providers.Config {
		return providers.Config{ID: "gemini", Format: providers.FormatGemini, BaseURL: s.GeminiBaseURL(), APIKey: key}
	}},
}

func newRT(t *testing.T, opts ...runtime.Option) *runtime.Runtime {
	t.Helper()
	opts = append([]runtime.Option{runtime.WithClientOptions(providers.WithRetryPolicy(fast), providers.WithTimeout(10*time.Second),
		providers.WithIdleTimeout(2*time.Second))}, opts...)
	rt, err := runtime.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	return rt
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func body(t *testing.T, r llmtest.Recorded) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("request body %s: %v", r.Body, err)
	}
	return m
}

// fnTool is a LangChainGo tool that records its calls.
type fnTool struct {
	name, desc string
	fn         func(string) string
	log        *callLog
}

func (f fnTool) Name() string        { return f.name }
func (f fnTool) Description() string { return f.desc }
func (f fnTool) Call(ctx context.Context, input string) (string, error) {
	f.log.add(f.name + "(" + input + ")")
	return f.fn(input), nil
}

type callLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *callLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, s)
}

func (l *callLog) sorted() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := append([]string(nil), l.calls...)
	sort.Strings(c)
	return strings.Join(c, "; ")
}

func agentTools(log *callLog) []tools.Tool {
	return []tools.Tool{
		fnTool{"get_weather", "Current weather in a city", func(city string) string {
			return fmt.Sprintf(`{"city":%q,"celsius":21,"sky":"clear-7"}`, city)
		}, log},
		fnTool{"convert_temperature", "Celsius to fahrenheit", func(c string) string { return "69.8F" }, log},
	}
}
