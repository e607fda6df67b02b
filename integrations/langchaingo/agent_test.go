package langchaingo_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tmc/langchaingo/agents"
	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/llms"

	chorus "github.com/chorusrt/chorus/integrations/langchaingo"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/runtime"
)

const (
	question = "What is the weather in Oslo, in fahrenheit?"
	answer   = "It is 69.8 degrees fahrenheit in Oslo."
)

// parallelCalls asks for both tools in one answer, with the single string
// argument LangChainGo's functions agent declares (__arg1).
func parallelCalls() llmtest.Step {
	return llmtest.ToolCalls(
		llm.ToolCall{Name: "get_weather", Arguments: `{"__arg1":"Oslo"}`},
		llm.ToolCall{Name: "convert_temperature", Arguments: `{"__arg1":"21"}`},
	)
}

// streamRecorder keeps streamed chunks; passing its func to the chain makes
// the agent stream. (An agents.WithCallbacksHandler alone does not: the
// executor's chain options replace the agent's streaming func.)
type streamRecorder struct {
	mu     sync.Mutex
	chunks []string
}

func (s *streamRecorder) fn(ctx context.Context, chunk []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chunks = append(s.chunks, string(chunk))
	return nil
}

func (s *streamRecorder) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.chunks, "")
}

// runAgent runs LangChainGo's functions agent with two tools through the
// adapter and returns its output.
func runAgent(t *testing.T, c chorus.Client, modelName string, streamed bool, log *callLog) (string, *streamRecorder) {
	t.Helper()
	m, err := chorus.New(c, chorus.Config{Model: modelName, MaxTokens: 200})
	if err != nil {
		t.Fatal(err)
	}
	rec := &streamRecorder{}
	var opts []chains.ChainCallOption
	if streamed {
		opts = append(opts, chains.WithStreamingFunc(rec.fn))
	}
	a := agents.NewOpenAIFunctionsAgent(m, agentTools(log))
	exec := agents.NewExecutor(a, agents.WithMaxIterations(5))
	out, err := chains.Run(ctxT(t, 20*time.Second), exec, question, opts...)
	if err != nil {
		t.Fatalf("agent: %v", err)
	}
	return out, rec
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
		for _, name := range []string{"get_weather", "convert_temperature", "__arg1"} {
			if !strings.Contains(string(r.Body), name) {
				t.Errorf("request %d lacks %s: %s", i, name, r.Body)
			}
		}
	}
	for _, result := range []string{"clear-7", "69.8F"} {
		if !strings.Contains(string(reqs[1].Body), result) {
			t.Errorf("second request lacks tool result %s: %s", result, reqs[1].Body)
		}
	}
	if got, want := log.sorted(), "convert_temperature(21); get_weather(Oslo)"; got != want {
		t.Errorf("tools ran %q, want %q", got, want)
	}
}

// TestFunctionsAgentOnEveryWireFormat runs LangChainGo's functions agent
// with two tools on each format, buffered and streamed (a chain
// streaming func makes the agent stream): both tools asked for in one answer, run,
// and answered from.
func TestFunctionsAgentOnEveryWireFormat(t *testing.T) {
	for _, w := range wires {
		for _, streamed := range []bool{false, true} {
			name := w.name + map[bool]string{false: "/buffered", true: "/streamed"}[streamed]
			t.Run(name, func(t *testing.T) {
				srv := llmtest.NewServer()
				defer srv.Close()
				rt := newRT(t, runtime.WithProvider(w.cfg(srv)))
				srv.Push(parallelCalls(), llmtest.Text(answer))
				log := &callLog{}
				out, rec := runAgent(t, rt, w.model, streamed, log)
				if out != answer {
					t.Fatalf("agent answered %q", out)
				}
				if streamed && rec.text() != answer {
					t.Errorf("streamed chunks %q", rec.chunks)
				}
				checkToolRound(t, srv.Requests(), log, streamed)
			})
		}
	}
}

// TestFunctionsAgentThrough429: the runtime waits out a scripted 429 and
// sends again; the agent never sees it.
func TestFunctionsAgentThrough429(t *testing.T) {
	for _, streamed := range []bool{false, true} {
		srv := llmtest.NewServer()
		rt := newRT(t, runtime.WithProvider(wires[1].cfg(srv)))
		srv.Push(llmtest.Status(429, 150*time.Millisecond), parallelCalls(), llmtest.Text(answer))
		log := &callLog{}
		if out, _ := runAgent(t, rt, wires[1].model, streamed, log); out != answer {
			t.Fatalf("agent answered %q", out)
		}
		reqs := srv.Requests()
		if len(reqs) != 3 || string(reqs[0].Body) != string(reqs[1].Body) {
			t.Fatalf("streamed=%v: %d requests, want the refused one, the same again, and the second turn", streamed, len(reqs))
		}
		checkToolRound(t, reqs[1:], log, streamed)
		srv.Close()
	}
}

// TestFunctionsAgentFallbackAlias: the agent names an alias whose first
// model always fails; the runtime serves every call from the second.
func TestFunctionsAgentFallbackAlias(t *testing.T) {
	for _, streamed := range []bool{false, true} {
		oa, gm := llmtest.NewServer(), llmtest.NewServer()
		rt := newRT(t, runtime.WithProvider(wires[0].cfg(oa)), runtime.WithProvider(wires[2].cfg(gm)),
			runtime.WithAlias("smart", "openai/gpt-down", "gemini/gemini-up"))
		for i := 0; i < 2*fast.MaxAttempts; i++ {
			oa.Push(llmtest.Status(503, 0))
		}
		gm.Push(parallelCalls(), llmtest.Text(answer))
		log := &callLog{}
		if out, _ := runAgent(t, rt, "smart", streamed, log); out != answer {
			t.Fatalf("agent answered %q", out)
		}
		if oa.Count() != 2*fast.MaxAttempts {
			t.Errorf("first model got %d requests", oa.Count())
		}
		for _, r := range gm.Requests() {
			if r.Model != "gemini-up" {
				t.Errorf("fallback request for model %q", r.Model)
			}
		}
		checkToolRound(t, gm.Requests(), log, streamed)
		oa.Close()
		gm.Close()
	}
}

var _ llms.Model = (*chorus.LLM)(nil)

// TestFunctionsAgentPacedByLearnedLimits: against a server enforcing 3
// requests per 400 ms on the Anthropic format (anthropic-ratelimit-*
// headers), three agent runs of two model calls each all succeed with no
// 429: the runtime paces them from the headers.
func TestFunctionsAgentPacedByLearnedLimits(t *testing.T) {
	srv := llmtest.NewServer(llmtest.WithRateLimit(llmtest.RateLimit{Requests: 3, Window: 400 * time.Millisecond}))
	defer srv.Close()
	rt := newRT(t, runtime.WithProvider(wires[1].cfg(srv)))
	for i := 0; i < 3; i++ {
		srv.Push(parallelCalls(), llmtest.Text(answer))
		if out, _ := runAgent(t, rt, wires[1].model, i == 1, &callLog{}); out != answer {
			t.Fatalf("run %d answered %q", i, out)
		}
	}
	if srv.Count() != 6 || srv.RateLimited() != 0 {
		t.Errorf("%d requests, %d refused with 429; want 6 and none", srv.Count(), srv.RateLimited())
	}
}
