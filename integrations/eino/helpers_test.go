package eino_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/components/tool/utils"
	"github.com/cloudwego/eino/compose"

	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
)

const key = "sk-eino-test-KEY-7"

var fast = providers.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}

// wire is one Chorus wire format served by an llmtest server.
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

func clientOpts() runtime.Option {
	return runtime.WithClientOptions(providers.WithRetryPolicy(fast), providers.WithTimeout(10*time.Second), providers.WithIdleTimeout(2*time.Second))
}

func newRT(t *testing.T, opts ...runtime.Option) *runtime.Runtime {
	t.Helper()
	rt, err := runtime.New(append([]runtime.Option{clientOpts()}, opts...)...)
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

// toolbox is the agent's two tools, recording each call.
type toolbox struct {
	mu    sync.Mutex
	calls []string
}

type weatherIn struct {
	City string `json:"city" jsonschema:"description=the city"`
}

type convertIn struct {
	Value float64 `json:"value"`
	To    string  `json:"to" jsonschema:"enum=fahrenheit,enum=celsius"`
}

func (b *toolbox) record(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, s)
}

func (b *toolbox) sorted() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := append([]string(nil), b.calls...)
	for i := range c {
		for j := i + 1; j < len(c); j++ {
			if c[j] < c[i] {
				c[i], c[j] = c[j], c[i]
			}
		}
	}
	return strings.Join(c, "; ")
}

func (b *toolbox) tools(t *testing.T) []tool.BaseTool {
	t.Helper()
	weather, err := utils.InferTool("get_weather", "Current weather in a city", func(ctx context.Context, in weatherIn) (string, error) {
		b.record("get_weather(" + in.City + ")")
		return fmt.Sprintf(`{"city":%q,"celsius":21,"sky":"clear-7"}`, in.City), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	conv, err := utils.InferTool("convert_temperature", "Convert a temperature", func(ctx context.Context, in convertIn) (string, error) {
		b.record(fmt.Sprintf("convert_temperature(%g,%s)", in.Value, in.To))
		return fmt.Sprintf("%.1f", in.Value*9/5+32), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return []tool.BaseTool{weather, conv}
}

// toolsNode is the toolbox as eino's tools node configuration.
func toolsNode(t *testing.T, b *toolbox) compose.ToolsNodeConfig {
	return compose.ToolsNodeConfig{Tools: b.tools(t)}
}

// body decodes a recorded request body.
func body(t *testing.T, r llmtest.Recorded) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("request body %s: %v", r.Body, err)
	}
	return m
}
