package cluster

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/session"
)

// A session whose lease is taken from its node mid-tool (as when the node
// stalled past its lease and another activation took over) writes nothing
// more there: the tool's outcome append is refused, the node stops the
// session, and once the other holder's lease lapses a survivor's sweep
// resumes it under the crash rules: the interrupted single-attempt write is
// outcome_unknown, never run again, and the turn completes.
func TestLeaseLostStopsTheSession(t *testing.T) {
	dsn := pgDSN(t)
	srv := llmtest.NewServer()
	defer srv.Close()
	srv.SetResponder(agentResponder)
	l := &ledger{path: filepath.Join(t.TempDir(), "ledger")}
	addrs := freeAddrs(t, 1)
	nodes := joinAll(t, "lease-lost", addrs, func(i int, c *Config) {
		c.Runtime = append(c.Runtime, openaiAt(srv, "sk-test"))
		c.Sessions = sessionOptions(t, dsn, l, 1500*time.Millisecond)
		c.LeaseTTL = time.Second
	})
	defer closeAll(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ss := nodes[0].Sessions()
	if err := ss.Send(ctx, "victim", llm.UserText("refund order 7")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the tools are running
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tag, err := conn.Exec(ctx, `UPDATE chorus_journal_leases SET holder = 'thief', epoch = epoch + 1, expires_at = now() + interval '2 seconds' WHERE session = 'victim'`)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("stealing the lease: %v (%d rows)", err, tag.RowsAffected())
	}
	tr, err := ss.Wait(ctx, "victim")
	for err == nil && tr.Turn == 0 { // a Wait cut short by the stop: ask again
		tr, err = ss.Wait(ctx, "victim")
	}
	if err != nil {
		t.Fatalf("wait: %v", err)
	}
	if tr.Status != session.TurnCompleted || tr.Answer != "done" {
		t.Fatalf("turn %+v", tr)
	}
	snap, err := ss.Snapshot(ctx, "victim")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range snap.Tools {
		if r.Name == "refund" && (r.Status != session.StatusOutcomeUnknown || r.Attempts != 1) {
			t.Fatalf("refund ended %s after %d attempts; want outcome_unknown after 1 (its outcome was written by no one)", r.Status, r.Attempts)
		}
	}
	refunds := 0
	for line, n := range l.lines(t) {
		if strings.HasPrefix(line, "refund ") {
			refunds += n
		}
	}
	if refunds != 1 {
		t.Fatalf("the refund ran %d times, want 1", refunds)
	}
}

// A member that leaves with a session mid-turn hands it over: the running
// tool attempt ends and is recorded before it goes, its lease is left to
// lapse, and the other member resumes the turn.
func TestCloseHandsSessionsOver(t *testing.T) {
	dsn := pgDSN(t)
	srv := llmtest.NewServer()
	defer srv.Close()
	srv.SetResponder(agentResponder)
	l := &ledger{path: filepath.Join(t.TempDir(), "ledger")}
	addrs := freeAddrs(t, 2)
	nodes := joinAll(t, "handoff", addrs, func(i int, c *Config) {
		c.Runtime = append(c.Runtime, openaiAt(srv, "sk-test"))
		c.Sessions = sessionOptions(t, dsn, l, 800*time.Millisecond)
		c.LeaseTTL = time.Second
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Sessions until one lives on member 0.
	var id string
	for i := 0; id == "" && i < 40; i++ {
		cand := "handoff-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		if err := nodes[1].Sessions().Send(ctx, cand, llm.UserText("refund order 7")); err != nil {
			t.Fatal(err)
		}
		nodes[0].sessions.mu.Lock()
		if nodes[0].sessions.grains[cand] != nil {
			id = cand
		}
		nodes[0].sessions.mu.Unlock()
	}
	if id == "" {
		t.Fatal("no session landed on member 0")
	}
	time.Sleep(300 * time.Millisecond) // its tools are running
	if err := nodes[0].Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	defer closeAll(t, nodes[1:])
	tr, err := nodes[1].Sessions().Wait(ctx, id)
	for err == nil && tr.Turn == 0 {
		tr, err = nodes[1].Sessions().Wait(ctx, id)
	}
	if err != nil || tr.Status != session.TurnCompleted || tr.Answer != "done" {
		t.Fatalf("turn after the handover: %+v, %v", tr, err)
	}
	snap, err := nodes[1].Sessions().Snapshot(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range snap.Tools {
		if r.Status != session.StatusSucceeded || r.Attempts != 1 {
			t.Fatalf("%s ended %s after %d attempts; a clean leave records the running attempt", r.Name, r.Status, r.Attempts)
		}
	}
}
