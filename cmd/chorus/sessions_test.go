package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chorusrt/chorus/console"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/runtime"
	"github.com/chorusrt/chorus/session"
	"github.com/chorusrt/chorus/sim"
	"github.com/chorusrt/chorus/store"
)

// consoleServer is a console on loopback over a session manager on the
// simulator, with an approval-gated refund tool.
type consoleServer struct {
	url     string
	m       *session.Manager
	refunds atomic.Int64
}

func newConsoleServer(t *testing.T, token string) *consoleServer {
	t.Helper()
	cs := &consoleServer{}
	s, err := sim.Start(sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	rt, err := runtime.New(runtime.WithProvider(s.Config()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = rt.Close(ctx)
	})
	dir := t.TempDir()
	j, err := store.OpenSQLite(filepath.Join(dir, "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	m, err := session.New(session.Options{Journal: j, Model: rt, ModelName: "sim/echo", Media: session.NewLocalMedia(filepath.Join(dir, "media")),
		Tools: []session.Tool{{Def: llm.Tool{Name: "refund", Parameters: json.RawMessage(`{"type":"object","properties":{"order":{"type":"integer"}}}`)},
			Effect: session.EffectNonIdempotentWrite, Handler: func(ctx context.Context, c session.Call) (session.Result, error) {
				cs.refunds.Add(1)
				return session.Result{Content: "refunded\nin full"}, nil
			}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = m.Close(ctx)
	})
	cs.m = m
	h, err := console.New(console.Options{Runtime: rt, Sessions: m, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	cs.url = srv.URL
	return cs
}

func (cs *consoleServer) waitPending(t *testing.T, id string) session.Interrupt {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := cs.m.Send(ctx, id, llm.UserText(`refund {"order": 7}`)); err != nil {
		t.Fatal(err)
	}
	for ctx.Err() == nil {
		s, err := cs.m.Snapshot(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Pending) == 1 {
			return s.Pending[0]
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no approval pending")
	return session.Interrupt{}
}

func TestSessionsCommand(t *testing.T) {
	const token = "cli-test-token"
	cs := newConsoleServer(t, token)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	in := cs.waitPending(t, "s-1")
	cs.waitPending(t, "s-2")
	vars := map[string]string{"CHORUS_CONSOLE_TOKEN": token}

	code, out, errOut := runCLI(t, ctx, vars, "sessions", "list", "--addr", cs.url)
	if code != 0 || !strings.Contains(out, "s-1") || !strings.Contains(out, "waiting_approval") || !strings.HasPrefix(out, "SESSION") {
		t.Fatalf("list: %d\n%s%s", code, out, errOut)
	}
	code, out, _ = runCLI(t, ctx, vars, "sessions", "list", "--state", "idle", "--addr", cs.url)
	if code != 0 || strings.Contains(out, "s-1") {
		t.Fatalf("list idle: %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, ctx, vars, "sessions", "show", "s-1", "--addr", cs.url)
	if code != 0 || !strings.Contains(out, in.ID) || !strings.Contains(out, "non_idempotent_write") || !strings.Contains(out, "timeline:") {
		t.Fatalf("show: %d\n%s", code, out)
	}
	// Without the token: refused.
	code, _, errOut = runCLI(t, ctx, nil, "sessions", "approve", "s-1", in.ID, "--addr", cs.url)
	if code != 1 || !strings.Contains(errOut, "unauthorized") {
		t.Fatalf("no token: %d %s", code, errOut)
	}
	// Approve, naming no interrupt (the session has one).
	code, out, errOut = runCLI(t, ctx, vars, "sessions", "approve", "s-1", "--note", "ok by Ann", "--addr", cs.url)
	if code != 0 || !strings.Contains(out, "approved") {
		t.Fatalf("approve: %d %s %s", code, out, errOut)
	}
	// A second resolution: already resolved, with the first's note.
	code, _, errOut = runCLI(t, ctx, vars, "sessions", "reject", "s-1", in.ID, "--addr", cs.url, "--token", token)
	if code != 1 || !strings.Contains(errOut, "already resolved (approved: ok by Ann)") {
		t.Fatalf("second resolution: %d %s", code, errOut)
	}
	if res, err := cs.m.Wait(ctx, "s-1"); err != nil || res.Status != session.TurnCompleted {
		t.Fatalf("turn: %+v %v", res, err)
	}
	if n := cs.refunds.Load(); n != 1 {
		t.Fatalf("refund ran %d times", n)
	}
	// The result's newline stays inside its table cell.
	code, out, _ = runCLI(t, ctx, vars, "sessions", "show", "s-1", "--addr", cs.url)
	if code != 0 || !strings.Contains(out, "refunded in full") {
		t.Fatalf("show after: %d\n%s", code, out)
	}
	// --json prints the API's answer.
	code, out, _ = runCLI(t, ctx, vars, "sessions", "show", "--json", "s-1", "--addr", cs.url)
	var sv console.SessionView
	if code != 0 || json.Unmarshal([]byte(out), &sv) != nil || sv.State != console.StateIdle {
		t.Fatalf("show --json: %d %s", code, out)
	}
	// Cancel the other session's turn; a second cancel finds none.
	if code, out, errOut = runCLI(t, ctx, vars, "sessions", "cancel", "s-2", "--addr", cs.url); code != 0 || !strings.Contains(out, "cancel requested") {
		t.Fatalf("cancel: %d %s %s", code, out, errOut)
	}
	if res, err := cs.m.Wait(ctx, "s-2"); err != nil || res.Status != session.TurnCancelled {
		t.Fatalf("cancelled turn: %+v %v", res, err)
	}
	if code, _, errOut = runCLI(t, ctx, vars, "sessions", "cancel", "s-2", "--addr", cs.url); code != 1 || !strings.Contains(errOut, "no_active_turn") {
		t.Fatalf("second cancel: %d %s", code, errOut)
	}
	if code, _, errOut = runCLI(t, ctx, vars, "sessions", "show", "nobody", "--addr", cs.url); code != 1 || !strings.Contains(errOut, "unknown_session") {
		t.Fatalf("unknown session: %d %s", code, errOut)
	}
	// Usage errors.
	for _, args := range [][]string{{"sessions"}, {"sessions", "frob"}, {"sessions", "show"}, {"sessions", "list", "--addr", "ftp://x"}, {"sessions", "show", "a", "--state", "idle"}} {
		if code, _, _ := runCLI(t, ctx, vars, args...); code != 2 {
			t.Fatalf("%q: exit %d, want 2", args, code)
		}
	}
}
