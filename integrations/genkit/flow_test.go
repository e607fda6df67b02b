package genkit_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"

	chorus "github.com/chorusrt/chorus/integrations/genkit"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
)

const key = "sk-genkit-test-KEY-5"

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

const (
	question = "What is the weather in Oslo, in fahrenheit?"
	answer   = "It is 69.8 degrees fahrenheit in Oslo."
)

func parallelCalls() llmtest.Step {
	return llmtest.ToolCalls(
		llm.ToolCall{Name: "get_weather", Arguments: `{"city":"Oslo"}`},
		llm.ToolCall{Name: "convert_temperature", Arguments: `{"value":21,"to":"fahrenheit"}`},
	)
}

type weatherIn struct {
	City string `json:"city"`
}

type convertIn struct {
	Value float64 `json:"value"`
	To    string  `json:"to"`
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

// weatherFlows defines, on a Genkit with the Chorus plugin, a flow and a
// streaming flow that answer a question with two tools.
func weatherFlows(t *testing.T, c chorus.Client, model string, log *callLog) (func(context.Context, string) (string, error), func(context.Context, string) (string, []string, error)) {
	t.Helper()
	g := initGenkit(t, &chorus.Plugin{Client: c})
	weather := genkit.DefineTool(g, "get_weather", "Current weather in a city", func(ctx *ai.ToolContext, in weatherIn) (string, error) {
		log.add("get_weather(" + in.City + ")")
		return fmt.Sprintf(`{"city":%q,"celsius":21,"sky":"clear-7"}`, in.City), nil
	})
	conv := genkit.DefineTool(g, "convert_temperature", "Convert a temperature", func(ctx *ai.ToolContext, in convertIn) (string, error) {
		log.add(fmt.Sprintf("convert_temperature(%g,%s)", in.Value, in.To))
		return fmt.Sprintf("%.1f", in.Value*9/5+32), nil
	})
	m := chorus.Model(g, model)
	if m == nil {
		t.Fatalf("model %s not resolved", model)
	}
	flow := genkit.DefineFlow(g, "weather", func(ctx context.Context, q string) (string, error) {
		resp, err := genkit.Generate(ctx, g, ai.WithModel(m), ai.WithSystem("Use the tools."), ai.WithPrompt(q), ai.WithTools(weather, conv),
			ai.WithConfig(&ai.GenerationCommonConfig{MaxOutputTokens: 200}))
		if err != nil {
			return "", err
		}
		return resp.Text(), nil
	})
	streaming := genkit.DefineStreamingFlow(g, "weatherStream", func(ctx context.Context, q string, cb func(context.Context, string) error) (string, error) {
		resp, err := genkit.Generate(ctx, g, ai.WithModel(m), ai.WithSystem("Use the tools."), ai.WithPrompt(q), ai.WithTools(weather, conv),
			ai.WithStreaming(func(ctx context.Context, chunk *ai.ModelResponseChunk) error { return cb(ctx, chunk.Text()) }))
		if err != nil {
			return "", err
		}
		return resp.Text(), nil
	})
	run := func(ctx context.Context, q string) (string, error) { return flow.Run(ctx, q) }
	stream := func(ctx context.Context, q string) (string, []string, error) {
		var chunks []string
		var out string
		for v, err := range streaming.Stream(ctx, q) {
			if err != nil {
				return "", chunks, err
			}
			if v.Done {
				out = v.Output
			} else if v.Stream != "" {
				chunks = append(chunks, v.Stream)
			}
		}
		return out, chunks, nil
	}
	return run, stream
}

// initGenkit starts Genkit with the plugin. genkit.Init watches for
// signals on a goroutine that lives as long as its context, so the test
// gives it one it cancels.
func initGenkit(t *testing.T, p *chorus.Plugin) *genkit.Genkit {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return genkit.Init(ctx, genkit.WithPlugins(p))
}

func ask(t *testing.T, c chorus.Client, model string, streamed bool, log *callLog) string {
	t.Helper()
	run, stream := weatherFlows(t, c, model, log)
	ctx := ctxT(t, 20*time.Second)
	if !streamed {
		out, err := run(ctx, question)
		if err != nil {
			t.Fatalf("flow: %v", err)
		}
		return out
	}
	out, chunks, err := stream(ctx, question)
	if err != nil {
		t.Fatalf("streaming flow: %v", err)
	}
	if strings.Join(chunks, "") != answer {
		t.Errorf("streamed chunks %q", chunks)
	}
	return out
}

func checkToolRound(t *testing.T, reqs []llmtest.Recorded, log *callLog, streamed bool) {
	t.Helper()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	for i, r := range reqs {
		if r.Stream != streamed {
			t.Errorf("request %d stream=%v, want %v", i, r.Stream, streamed)
		}
		for _, name := range []string{"get_weather", "convert_temperature"} {
			if !strings.Contains(string(r.Body), name) {
				t.Errorf("request %d lacks %s: %s", i, name, r.Body)
			}
		}
	}
	for _, result := range []string{"clear-7", "69.8"} {
		if !strings.Contains(string(reqs[1].Body), result) {
			t.Errorf("second request lacks tool result %s: %s", result, reqs[1].Body)
		}
	}
	if got, want := log.sorted(), "convert_temperature(21,fahrenheit); get_weather(Oslo)"; got != want {
		t.Errorf("tools ran %q, want %q", got, want)
	}
}

// TestFlowWithToolsOnEveryWireFormat runs a Genkit flow whose generate call
// has two tools through the plugin, on each format, buffered and streamed:
// the model asks for both at once, Genkit runs them, the model answers.
func TestFlowWithToolsOnEveryWireFormat(t *testing.T) {
	for _, w := range wires {
		for _, streamed := range []bool{false, true} {
			name := w.name + map[bool]string{false: "/buffered", true: "/streamed"}[streamed]
			t.Run(name, func(t *testing.T) {
				srv := llmtest.NewServer()
				defer srv.Close()
				rt := newRT(t, runtime.WithProvider(w.cfg(srv)))
				srv.Push(parallelCalls(), llmtest.Text(answer))
				log := &callLog{}
				if out := ask(t, rt, w.model, streamed, log); out != answer {
					t.Fatalf("flow answered %q", out)
				}
				checkToolRound(t, srv.Requests(), log, streamed)
			})
		}
	}
}

// TestFlowThrough429: the runtime waits out a scripted 429; the flow never
// sees it.
func TestFlowThrough429(t *testing.T) {
	for _, streamed := range []bool{false, true} {
		srv := llmtest.NewServer()
		rt := newRT(t, runtime.WithProvider(wires[2].cfg(srv)))
		srv.Push(llmtest.Status(429, 150*time.Millisecond), parallelCalls(), llmtest.Text(answer))
		log := &callLog{}
		if out := ask(t, rt, wires[2].model, streamed, log); out != answer {
			t.Fatalf("flow answered %q", out)
		}
		reqs := srv.Requests()
		if len(reqs) != 3 || string(reqs[0].Body) != string(reqs[1].Body) {
			t.Fatalf("streamed=%v: %d requests, want the refused one, the same again, and the second turn", streamed, len(reqs))
		}
		checkToolRound(t, reqs[1:], log, streamed)
		srv.Close()
	}
}

// TestFlowFallbackAlias: the plugin defines the runtime's alias as a Genkit
// model at Init; its first target always fails, and the second serves.
func TestFlowFallbackAlias(t *testing.T) {
	for _, streamed := range []bool{false, true} {
		an, oa := llmtest.NewServer(), llmtest.NewServer()
		rt := newRT(t, runtime.WithProvider(wires[1].cfg(an)), runtime.WithProvider(wires[0].cfg(oa)),
			runtime.WithAlias("smart", "anthropic/claude-down", "openai/gpt-up"))
		for i := 0; i < 2*fast.MaxAttempts; i++ {
			an.Push(llmtest.Status(503, 0))
		}
		oa.Push(parallelCalls(), llmtest.Text(answer))
		log := &callLog{}
		if out := ask(t, rt, "smart", streamed, log); out != answer {
			t.Fatalf("flow answered %q", out)
		}
		if an.Count() != 2*fast.MaxAttempts {
			t.Errorf("first model got %d requests", an.Count())
		}
		for _, r := range oa.Requests() {
			if r.Model != "gpt-up" {
				t.Errorf("fallback request for model %q", r.Model)
			}
		}
		checkToolRound(t, oa.Requests(), log, streamed)
		an.Close()
		oa.Close()
	}
}

// TestFlowPacedByLearnedLimits: against a server enforcing 3 requests per
// 400 ms (x-ratelimit headers), three flow runs of two model calls each
// all succeed with no 429: the runtime paces them from the headers.
func TestFlowPacedByLearnedLimits(t *testing.T) {
	srv := llmtest.NewServer(llmtest.WithRateLimit(llmtest.RateLimit{Requests: 3, Window: 400 * time.Millisecond}))
	defer srv.Close()
	rt := newRT(t, runtime.WithProvider(wires[0].cfg(srv)))
	run, _ := weatherFlows(t, rt, wires[0].model, &callLog{})
	for i := 0; i < 3; i++ {
		srv.Push(parallelCalls(), llmtest.Text(answer))
		if out, err := run(ctxT(t, 20*time.Second), question); err != nil || out != answer {
			t.Fatalf("run %d: %q %v", i, out, err)
		}
	}
	if srv.Count() != 6 || srv.RateLimited() != 0 {
		t.Errorf("%d requests, %d refused with 429; want 6 and none", srv.Count(), srv.RateLimited())
	}
}
