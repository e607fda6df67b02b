package eino_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudwego/eino/callbacks"
	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/flow/agent"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"

	chorus "github.com/chorusrt/chorus/integrations/eino"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/runtime"
)

const question = "What is the weather in Oslo, in fahrenheit?"

// parallelCalls is one answer asking for both tools at once.
func parallelCalls() llmtest.Step {
	return llmtest.ToolCalls(
		llm.ToolCall{Name: "get_weather", Arguments: `{"city":"Oslo"}`},
		llm.ToolCall{Name: "convert_temperature", Arguments: `{"value":21,"to":"fahrenheit"}`},
	)
}

const answer = "It is 69.8 degrees fahrenheit in Oslo."

func newAgent(t *testing.T, c chorus.Client, modelName string, box *toolbox) *react.Agent {
	t.Helper()
	cm, err := chorus.New(c, chorus.Config{Model: modelName, MaxTokens: 200})
	if err != nil {
		t.Fatal(err)
	}
	a, err := react.NewAgent(context.Background(), &react.AgentConfig{
		ToolCallingModel: cm,
		ToolsConfig:      compose.ToolsNodeConfig{Tools: box.tools(t)},
		MaxStep:          6,
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// run asks the agent the question, buffered or streamed, and returns its
// final message.
func run(t *testing.T, a *react.Agent, streamed bool, opts ...agent.AgentOption) *schema.Message {
	t.Helper()
	ctx := ctxT(t, 20*time.Second)
	in := []*schema.Message{schema.SystemMessage("Use the tools."), schema.UserMessage(question)}
	if !streamed {
		out, err := a.Generate(ctx, in, opts...)
		if err != nil {
			t.Fatalf("Generate: %v", err)
		}
		return out
	}
	sr, err := a.Stream(ctx, in, opts...)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	out, err := schema.ConcatMessageStream(sr)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	return out
}

// checkToolRound asserts that the first request declared both tools, the
// second carried both results, and both tools ran once.
func checkToolRound(t *testing.T, reqs []llmtest.Recorded, box *toolbox, streamed bool) {
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
				t.Errorf("request %d does not declare %s: %s", i, name, r.Body)
			}
		}
	}
	second := string(reqs[1].Body)
	for _, result := range []string{"clear-7", "69.8"} {
		if !strings.Contains(second, result) {
			t.Errorf("second request lacks tool result %s: %s", result, second)
		}
	}
	if got, want := box.sorted(), "convert_temperature(21,fahrenheit); get_weather(Oslo)"; got != want {
		t.Errorf("tools ran %q, want %q", got, want)
	}
}

// TestReActAgentOnEveryWireFormat runs eino's ReAct agent with two tools
// through the adapter on each wire format, buffered and streamed: the model
// asks for both tools in one answer, eino runs them, and the model answers
// from their results.
func TestReActAgentOnEveryWireFormat(t *testing.T) {
	for _, w := range wires {
		for _, streamed := range []bool{false, true} {
			name := w.name + "/buffered"
			if streamed {
				name = w.name + "/streamed"
			}
			t.Run(name, func(t *testing.T) {
				srv := llmtest.NewServer()
				defer srv.Close()
				rt := newRT(t, runtime.WithProvider(w.cfg(srv)))
				srv.Push(parallelCalls(), llmtest.Text(answer))
				box := &toolbox{}
				out := run(t, newAgent(t, rt, w.model, box), streamed)
				if out.Content != answer || out.Role != schema.Assistant {
					t.Fatalf("agent answered %q (%s), want %q", out.Content, out.Role, answer)
				}
				checkToolRound(t, srv.Requests(), box, streamed)
			})
		}
	}
}

// TestReActAgentThrough429 scripts a 429 with a retry-after before the
// first model answer: the runtime waits out the cooldown and sends again,
// and the agent never sees the refusal.
func TestReActAgentThrough429(t *testing.T) {
	for _, streamed := range []bool{false, true} {
		srv := llmtest.NewServer()
		rt := newRT(t, runtime.WithProvider(wires[0].cfg(srv)))
		srv.Push(llmtest.Status(429, 150*time.Millisecond), parallelCalls(), llmtest.Text(answer))
		box := &toolbox{}
		out := run(t, newAgent(t, rt, wires[0].model, box), streamed)
		if out.Content != answer {
			t.Fatalf("streamed=%v: agent answered %q", streamed, out.Content)
		}
		reqs := srv.Requests()
		if len(reqs) != 3 {
			t.Fatalf("streamed=%v: %d requests, want the refused one, its retry and the second turn", streamed, len(reqs))
		}
		if string(reqs[0].Body) != string(reqs[1].Body) {
			t.Errorf("the retry is not the refused request:\n%s\n%s", reqs[0].Body, reqs[1].Body)
		}
		checkToolRound(t, reqs[1:], box, streamed)
		srv.Close()
	}
}

// TestReActAgentFallbackAlias gives the agent a runtime alias whose first
// model fails on every attempt: the runtime falls back to the second
// model, and all eino sees is the alias it asked for.
func TestReActAgentFallbackAlias(t *testing.T) {
	for _, streamed := range []bool{false, true} {
		oa := llmtest.NewServer()
		an := llmtest.NewServer()
		rt := newRT(t, runtime.WithProvider(wires[0].cfg(oa)), runtime.WithProvider(wires[1].cfg(an)),
			runtime.WithAlias("smart", "openai/gpt-down", "anthropic/claude-up"))
		for i := 0; i < 2*fast.MaxAttempts; i++ {
			oa.Push(llmtest.Status(503, 0))
		}
		an.Push(parallelCalls(), llmtest.Text(answer))

		var mu sync.Mutex
		var seen []string
		h := callbacks.NewHandlerBuilder().
			OnStartFn(func(ctx context.Context, info *callbacks.RunInfo, in callbacks.CallbackInput) context.Context {
				if ci := model.ConvCallbackInput(in); ci != nil && ci.Config != nil {
					mu.Lock()
					seen = append(seen, info.Type+":"+ci.Config.Model)
					mu.Unlock()
				}
				return ctx
			}).Build()
		box := &toolbox{}
		out := run(t, newAgent(t, rt, "smart", box), streamed, agent.WithComposeOptions(compose.WithCallbacks(h)))
		if out.Content != answer {
			t.Fatalf("streamed=%v: agent answered %q", streamed, out.Content)
		}
		if oa.Count() != 2*fast.MaxAttempts {
			t.Errorf("first model got %d requests, want %d", oa.Count(), 2*fast.MaxAttempts)
		}
		for _, r := range an.Requests() {
			if r.Model != "claude-up" {
				t.Errorf("fallback request named model %q", r.Model)
			}
		}
		checkToolRound(t, an.Requests(), box, streamed)
		mu.Lock()
		if strings.Join(seen, ",") != "Chorus:smart,Chorus:smart" {
			t.Errorf("model callbacks saw %q, want the alias on both calls", seen)
		}
		mu.Unlock()
		oa.Close()
		an.Close()
	}
}

// TestReActAgentPacedByLearnedLimits: against a server enforcing 3 requests
// per 400 ms (reported in x-ratelimit headers), three agent runs of two
// model calls each all succeed, and the runtime paces them from the
// headers so that the server never refuses one.
func TestReActAgentPacedByLearnedLimits(t *testing.T) {
	srv := llmtest.NewServer(llmtest.WithRateLimit(llmtest.RateLimit{Requests: 3, Window: 400 * time.Millisecond}))
	defer srv.Close()
	rt := newRT(t, runtime.WithProvider(wires[0].cfg(srv)))
	for i := 0; i < 3; i++ {
		srv.Push(parallelCalls(), llmtest.Text(answer))
		box := &toolbox{}
		if out := run(t, newAgent(t, rt, wires[0].model, box), i == 1); out.Content != answer {
			t.Fatalf("run %d answered %q", i, out.Content)
		}
	}
	if srv.Count() != 6 || srv.RateLimited() != 0 {
		t.Errorf("%d requests, %d refused with 429; want 6 and none", srv.Count(), srv.RateLimited())
	}
}
