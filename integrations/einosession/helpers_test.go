package einosession_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/components/tool/utils"
	"github.com/cloudwego/eino/compose"

	chorus "github.com/chorusrt/chorus/integrations/eino"
	"github.com/chorusrt/chorus/integrations/einosession"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/session"
	"github.com/chorusrt/chorus/store"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// scripted is one agent's model: a Chorus eino ChatModel on an llmtest
// server of its own, answering from a script.
type scripted struct {
	srv *llmtest.Server
	cm  *chorus.ChatModel
}

func newScripted(t *testing.T, steps ...llmtest.Step) *scripted {
	t.Helper()
	srv := llmtest.NewServer()
	t.Cleanup(srv.Close)
	c, err := providers.New(providers.Config{ID: "openai", Format: providers.FormatOpenAI, BaseURL: srv.OpenAIBaseURL(), APIKey: "sk-test"},
		providers.WithRetryPolicy(providers.RetryPolicy{MaxAttempts: 1}), providers.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	cm, err := chorus.New(c, chorus.Config{Model: "gpt-test"})
	if err != nil {
		t.Fatal(err)
	}
	srv.Push(steps...)
	return &scripted{srv: srv, cm: cm}
}

// calls is how many model calls the server answered.
func (s *scripted) calls() int { return len(s.srv.Requests()) }

// ledger records every tool run.
type ledger struct {
	mu  sync.Mutex
	ran []string
}

func (l *ledger) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ran = append(l.ran, s)
}

func (l *ledger) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ran)
}

type orderIn struct {
	Order int `json:"order"`
}

// orderTool is a tool on an order that records its runs in l.
func orderTool(t *testing.T, l *ledger, name, answer string) tool.InvokableTool {
	t.Helper()
	tl, err := utils.InferTool(name, name+" an order", func(_ context.Context, in orderIn) (string, error) {
		l.add(fmt.Sprintf("%s(%d)", name, in.Order))
		return fmt.Sprintf(`{"%s":%q}`, name, answer), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

func chatAgent(t *testing.T, name string, m *scripted, tools ...tool.BaseTool) adk.Agent {
	t.Helper()
	cfg := &adk.ChatModelAgentConfig{Name: name, Description: name + " agent", Instruction: "You are " + name + ".", Model: m.cm}
	if len(tools) > 0 {
		cfg.ToolsConfig = adk.ToolsConfig{ToolsNodeConfig: compose.ToolsNodeConfig{Tools: tools}}
	}
	a, err := adk.NewChatModelAgent(ctxT(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// harness is a session Manager running one agent tree.
type harness struct {
	t  *testing.T
	j  store.Journal
	m  *session.Manager
	rn *einosession.Runner
}

func newHarness(t *testing.T, rn *einosession.Runner, agent adk.Agent, opt session.Options) *harness {
	t.Helper()
	dir := t.TempDir()
	j, err := store.OpenSQLite(filepath.Join(dir, "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	opt.Journal, opt.Media, opt.RetryBackoff = j, session.NewLocalMedia(filepath.Join(dir, "media")), time.Millisecond
	opt, err = rn.Options(agent, opt)
	if err != nil {
		t.Fatal(err)
	}
	m, err := session.New(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	return &harness{t: t, j: j, m: m, rn: rn}
}

func (h *harness) turn(id, text string) session.TurnResult {
	h.t.Helper()
	ctx := ctxT(h.t)
	if err := h.m.Send(ctx, id, llm.UserText(text)); err != nil {
		h.t.Fatal(err)
	}
	r, err := h.m.Wait(ctx, id)
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

// steps is the step history of a session's turn from its journal: each
// RunModel output, then the CallTool steps of the calls it planned, in
// their step order, with the status each ended with: "RunModel",
// "CallTool <tool> <status>".
func (h *harness) steps(id string, turn int) []string {
	h.t.Helper()
	tl, err := session.ReadTimeline(ctxT(h.t), h.j, id)
	if err != nil {
		h.t.Fatal(err)
	}
	status := map[string]string{}
	for _, e := range tl {
		if e.Turn == turn && e.Kind == "tool_finished" {
			status[e.Call] = e.Status
		}
	}
	var out []string
	for _, e := range tl {
		if e.Turn != turn || e.Kind != "model_output" {
			continue
		}
		out = append(out, "RunModel")
		for _, c := range e.Calls {
			out = append(out, "CallTool "+c.Name+" "+status[c.ID])
		}
	}
	return out
}

// agents is, by tool name, the agent the timeline names for each call.
func (h *harness) agents(id string) map[string]string {
	h.t.Helper()
	tl, err := session.ReadTimeline(ctxT(h.t), h.j, id)
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range tl {
		for _, c := range e.Calls {
			out[c.Name] = c.Agent
		}
	}
	return out
}

func (h *harness) records(id string) map[string]session.ToolRecord {
	h.t.Helper()
	s, err := h.m.Snapshot(ctxT(h.t), id)
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string]session.ToolRecord{}
	for _, r := range s.Tools {
		out[r.Name] = r
	}
	return out
}

// modelSaw reports whether a request the server received holds s.
func modelSaw(s *scripted, sub string) bool {
	for _, r := range s.srv.Requests() {
		if strings.Contains(string(r.Body), sub) {
			return true
		}
	}
	return false
}

func call(id, name, args string) llm.ToolCall {
	return llm.ToolCall{ID: id, Name: name, Arguments: args}
}
