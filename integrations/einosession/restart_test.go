package einosession_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cloudwego/eino/adk"

	"github.com/chorusrt/chorus/integrations/einosession"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/session"
	"github.com/chorusrt/chorus/store"
)

// TestRestartResumesFromJournal: a turn of a sequential tree paused on an
// approval survives the process: a new Manager, with a new Runner and a
// new tree as a new process would build them, on the same journal,
// resumes the tree from the checkpoint the journal holds once the write is
// approved; each tool ran once, and no model call was repeated.
func TestRestartResumesFromJournal(t *testing.T) {
	var l ledger
	first := newScripted(t, llmtest.Text("triaged: a refund"))
	second := newScripted(t, llmtest.ToolCalls(call("c1", "lookup_order", `{"order":7}`), call("c2", "refund_order", `{"order":7}`)),
		llmtest.Text("refund r-1 issued"))
	lookupImpl := orderTool(t, &l, "lookup_order", "delivered")
	refundImpl := orderTool(t, &l, "refund_order", "r-1")
	build := func() (*einosession.Runner, adk.Agent) {
		rn := einosession.New()
		lookup := rn.Tool(lookupImpl, einosession.Effect(session.EffectRead))
		refund := rn.Tool(refundImpl, einosession.Effect(session.EffectNonIdempotentWrite))
		seq, err := adk.NewSequentialAgent(ctxT(t), &adk.SequentialAgentConfig{Name: "pipeline", Description: "triage then act",
			SubAgents: []adk.Agent{chatAgent(t, "triage", first), chatAgent(t, "clerk", second, lookup, refund)}})
		if err != nil {
			t.Fatal(err)
		}
		return rn, seq
	}
	dir := t.TempDir()
	j, err := store.OpenSQLite(filepath.Join(dir, "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	start := func() *session.Manager {
		rn, agent := build()
		opt, err := rn.Options(agent, session.Options{Journal: j, Media: session.NewLocalMedia(filepath.Join(dir, "media")), RetryBackoff: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		m, err := session.New(opt)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	ctx := ctxT(t)
	m := start()
	if err := m.Send(ctx, "s", llm.UserText("refund order 7")); err != nil {
		t.Fatal(err)
	}
	var pend []session.Interrupt
	for len(pend) == 0 || !slices.Contains(l.list(), "lookup_order(7)") {
		s, err := m.Snapshot(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		pend = s.Pending
		time.Sleep(time.Millisecond)
	}
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	m = start()
	defer m.Close(context.Background())
	if _, err := m.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Resolve(ctx, "s", pend[0].ID, true, "ok"); err != nil {
		t.Fatal(err)
	}
	r, err := m.Wait(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != session.TurnCompleted || r.Answer != "refund r-1 issued" {
		t.Fatalf("turn %+v", r)
	}
	if got := l.list(); !slices.Equal(got, []string{"lookup_order(7)", "refund_order(7)"}) {
		t.Fatalf("tools ran %v", got)
	}
	if first.calls() != 1 || second.calls() != 2 {
		t.Fatalf("model calls: triage %d, clerk %d; want 1 and 2", first.calls(), second.calls())
	}
}
