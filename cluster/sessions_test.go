package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/session"
	"github.com/chorusrt/chorus/store"
)

// Sessions live on two members and are driven from a client node: every
// operation reaches the session wherever it lives, each session runs on
// one member only (it holds the lease), and each tool ran once.
func TestSessionsAcrossNodes(t *testing.T) {
	dsn := pgDSN(t)
	srv := llmtest.NewServer()
	defer srv.Close()
	srv.SetResponder(agentResponder)
	l := &ledger{path: filepath.Join(t.TempDir(), "ledger")}
	addrs := freeAddrs(t, 3)
	members := joinAll(t, "sessions", addrs[:2], func(i int, c *Config) {
		c.Runtime = append(c.Runtime, openaiAt(srv, "sk-test"))
		c.Sessions = sessionOptions(t, dsn, l, 0)
	})
	client, err := Join(context.Background(), Config{Name: "sessions", Bind: addrs[2], Peers: addrs[:2], Client: true, RefreshInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	nodes := append(members, client)
	defer closeAll(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := client.WaitMembers(ctx, 2); err != nil {
		t.Fatal(err)
	}

	ss := client.Sessions()
	ids := make([]string, 12)
	for i := range ids {
		ids[i] = fmt.Sprintf("s%d", i)
	}
	// Follow one session's events from the client before its turn starts.
	evs, stop := ss.Events(ctx, ids[0], 0)
	got := make(chan []session.EventType, 1)
	go func() {
		var types []session.EventType
		for ev := range evs {
			types = append(types, ev.Type)
			if ev.Type == session.EventTurnFinished {
				break
			}
		}
		got <- types
	}()
	for _, id := range ids {
		if err := ss.Send(ctx, id, llm.UserText("refund order 7")); err != nil {
			t.Fatalf("send %s: %v", id, err)
		}
	}
	for _, id := range ids {
		tr, err := ss.Wait(ctx, id)
		if err != nil || tr.Status != session.TurnCompleted || tr.Answer != "done" {
			t.Fatalf("wait %s: %+v, %v", id, tr, err)
		}
		snap, err := ss.Snapshot(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Tools) != 2 {
			t.Fatalf("%s: %d tool records, want 2", id, len(snap.Tools))
		}
		for _, r := range snap.Tools {
			if r.Status != session.StatusSucceeded || r.Attempts != 1 {
				t.Fatalf("%s: tool %s ended %s after %d attempts", id, r.Name, r.Status, r.Attempts)
			}
		}
	}
	types := <-got
	stop()
	if len(types) < 4 || types[0] != session.EventTurnStarted || types[len(types)-1] != session.EventTurnFinished {
		t.Fatalf("followed events %v: want the turn from start to finish", types)
	}

	// Each session's side effects happened once.
	lines := l.lines(t)
	for _, id := range ids {
		for _, tool := range []string{"refund", "note"} {
			c := 0
			for line, n := range lines {
				if len(line) > len(tool)+1 && line[:len(tool)+1] == tool+" " && hasSession(line, id) {
					c += n
				}
			}
			if c != 1 {
				t.Fatalf("%s: %s ran %d times, want 1 (ledger %v)", id, tool, c, lines)
			}
		}
	}
	// The sessions are spread: each member hosts some (rendezvous hash over
	// six ids and two members).
	for i, m := range members {
		m.sessions.mu.Lock()
		n := len(m.sessions.grains)
		m.sessions.mu.Unlock()
		t.Logf("member %d hosts %d sessions", i, n)
		if n == 0 {
			t.Errorf("member %d hosts no session", i)
		}
	}
	// A resolution of an unknown interrupt comes back typed.
	err = ss.Resolve(ctx, ids[1], "approval/1/nope", true, "")
	var re *session.ResolveError
	if !errorsAs(err, &re) || re.Interrupt != "approval/1/nope" {
		t.Fatalf("resolve unknown interrupt: %v (%T)", err, err)
	}
	// The leases fence: another holder cannot write a session a member holds.
	j, err := store.OpenPostgres(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	other := store.NewLeased(j, "intruder", time.Minute)
	if _, err := other.Acquire(ctx, ids[0]); !errorsIs(err, store.ErrLeaseHeld) {
		t.Fatalf("intruder acquired a held session's lease: %v", err)
	}
}

func hasSession(line, id string) bool {
	// "<tool> <session>/<turn>/<call>"
	for i := 0; i < len(line); i++ {
		if line[i] == ' ' {
			rest := line[i+1:]
			return len(rest) > len(id) && rest[:len(id)] == id && rest[len(id)] == '/'
		}
	}
	return false
}
