package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chorusrt/chorus/internal/pgtest"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/session"
	"github.com/chorusrt/chorus/store"
)

// pgDSN returns a DSN on a fresh schema, dropped when t ends, of the test
// PostgreSQL server (pgtest: CHORUS_PG_DSN's, else a throwaway cluster
// this test binary starts), or skips (fails under CI).
func pgDSN(t testing.TB) string {
	t.Helper()
	return pgtest.SchemaDSN(t)
}

// ledger records the side effects of the test tools, one line per effect,
// in a file shared by the processes of a cluster (O_APPEND, synced).
type ledger struct {
	mu   sync.Mutex
	path string
}

func (l *ledger) write(line string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.OpenFile(l.path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.WriteString(line + "\n"); err != nil {
		return err
	}
	return f.Sync()
}

// lines returns the ledger's lines and how many times each appears.
func (l *ledger) lines(t testing.TB) map[string]int {
	t.Helper()
	b, err := os.ReadFile(l.path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, s := range strings.Split(string(bytes.TrimSpace(b)), "\n") {
		if s != "" {
			out[s]++
		}
	}
	return out
}

// testTools are the tools every node of a test cluster registers: refund
// (a non-idempotent write: one attempt, never repeated) and note (an
// idempotent write with a key). Each writes its side effect to the
// ledger, after a pause long enough for a node to be killed mid-call.
func testTools(l *ledger, pause time.Duration) []session.Tool {
	tool := func(name string, effect session.Effect) session.Tool {
		return session.Tool{
			Def:    llm.Tool{Name: name, Description: name, Parameters: json.RawMessage(`{"type":"object","properties":{"order":{"type":"string"}}}`)},
			Effect: effect,
			Handler: func(ctx context.Context, c session.Call) (session.Result, error) {
				select {
				case <-time.After(pause):
				case <-ctx.Done():
					return session.Result{}, ctx.Err()
				}
				line := fmt.Sprintf("%s %s/%d/%s", name, c.Session, c.Turn, c.ID)
				if err := l.write(line); err != nil {
					return session.Result{}, err
				}
				return session.Result{Content: `{"ok":true}`}, nil
			},
		}
	}
	return []session.Tool{tool("refund", session.EffectNonIdempotentWrite), tool("note", session.EffectIdempotentWrite)}
}

// agentResponder answers a session's model calls: a user message gets a
// turn of two tool calls (refund and note), the function responses get
// the answer "done".
func agentResponder(r llmtest.Recorded) llmtest.Step {
	var body struct {
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(r.Body, &body)
	if n := len(body.Messages); n > 0 && body.Messages[n-1].Role == "tool" {
		return llmtest.Text("done")
	}
	return llmtest.ToolCalls(
		llm.ToolCall{ID: "c1", Name: "refund", Arguments: `{"order":"7"}`},
		llm.ToolCall{ID: "c2", Name: "note", Arguments: `{"order":"7"}`},
	)
}

// sessionOptions are the sessions of a test node.
func sessionOptions(t testing.TB, dsn string, l *ledger, pause time.Duration) *session.Options {
	j, err := store.OpenPostgres(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	no := false
	return &session.Options{
		Journal: j, ModelName: "fake/m", Tools: testTools(l, pause),
		Policy:       map[string]session.ToolPolicy{"refund": {RequireApproval: &no}},
		RetryBackoff: 10 * time.Millisecond,
	}
}

// checkSessionHistory waits for every session's turn and checks its
// history against the ledger the tools wrote: each turn completed; the
// refund (single attempt) ran at most once and ended succeeded or
// outcome_unknown; the note (the response's second write) ran once the
// refund succeeded and was skipped, never run, after an unknown one; the
// ledger holds no single-attempt write twice and one note per succeeded
// note. It returns the ledger's refunds and notes.
func checkSessionHistory(t *testing.T, ctx context.Context, ss *Sessions, ids []string, l *ledger) (refunds, notes int) {
	t.Helper()
	wantNotes := 0
	for _, id := range ids {
		tr, err := ss.Wait(ctx, id)
		if err != nil {
			t.Fatalf("wait %s: %v", id, err)
		}
		if tr.Status != session.TurnCompleted || tr.Answer != "done" {
			t.Fatalf("%s: turn ended %+v", id, tr)
		}
		snap, err := ss.Snapshot(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		refunded := false
		for _, r := range snap.Tools {
			switch r.Effect {
			case session.EffectNonIdempotentWrite:
				if r.Attempts > 1 || (r.Status != session.StatusSucceeded && r.Status != session.StatusOutcomeUnknown) {
					t.Errorf("%s: refund ended %s after %d attempts", id, r.Status, r.Attempts)
				}
				refunded = r.Status == session.StatusSucceeded
			case session.EffectIdempotentWrite:
				if refunded && r.Status != session.StatusSucceeded || !refunded && (!r.Skipped || r.Attempts != 0) {
					t.Errorf("%s: note ended %s (skipped %v) after %d attempts, the refund succeeded: %v", id, r.Status, r.Skipped, r.Attempts, refunded)
				}
				if r.Status == session.StatusSucceeded {
					wantNotes++
				}
			}
		}
	}
	for line, n := range l.lines(t) {
		switch {
		case strings.HasPrefix(line, "refund "):
			refunds++
			if n > 1 {
				t.Errorf("single-attempt write repeated: %q ran %d times", line, n)
			}
		case strings.HasPrefix(line, "note "):
			notes++
		}
	}
	if notes != wantNotes {
		t.Errorf("%d sessions' notes in the ledger, want %d (an idempotent write reruns until it succeeds; skipped ones never run)", notes, wantNotes)
	}
	return refunds, notes
}
