package mcptools

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/session"
	"github.com/chorusrt/chorus/store"
)

func filesystem(t testing.TB, dir string) []string {
	return []string{serverBin(t, "mcp-server-filesystem"), dir}
}

// TestFilesystemEffects: server-filesystem's tools come out as its
// annotations say when the server is trusted, and declare nothing (policy,
// else default) when it is not.
func TestFilesystemEffects(t *testing.T) {
	dir := t.TempDir()
	want := map[string]session.Effect{
		"read_file": session.EffectRead, "read_text_file": session.EffectRead, "list_directory": session.EffectRead,
		"write_file": session.EffectIdempotentWrite, "create_directory": session.EffectIdempotentWrite,
		"edit_file": "", "move_file": "",
	}
	set := start(t, Options{Servers: []Server{
		{Name: "trusted", Command: filesystem(t, dir), Trusted: true, Prefix: "t_"},
		{Name: "untrusted", Command: filesystem(t, dir)},
	}})
	got := map[string]Tool{}
	for _, tool := range set.Tools() {
		got[tool.Name] = tool
	}
	for name, effect := range want {
		tr, ok := got["t_"+name]
		if !ok {
			t.Fatalf("trusted: no tool %s", name)
		}
		if tr.Effect != effect || EffectFor(tr.Annotations) != effect {
			t.Errorf("trusted %s: effect %q, want %q (annotations %+v)", name, tr.Effect, effect, tr.Annotations)
		}
		if un := got[name]; un.Effect != "" || EffectFor(un.Annotations) != effect {
			t.Errorf("untrusted %s: effect %q, want none (its hint %q)", name, un.Effect, EffectFor(un.Annotations))
		}
	}
	if a := got["t_write_file"].Annotations; a == nil || !a.Destructive || !a.Idempotent || a.ReadOnly || a.OpenWorld {
		t.Errorf("write_file annotations: %+v", a)
	}
	// In a session, the declaration meets the policy and the default.
	for _, st := range set.SessionTools() {
		if st.Effect != got[st.Def.Name].Effect {
			t.Errorf("session tool %s: effect %q, want %q", st.Def.Name, st.Effect, got[st.Def.Name].Effect)
		}
	}
}

// newManager is a session Manager on a SQLite journal and the simulator.
func newManager(t *testing.T, tools []session.Tool, policy map[string]session.ToolPolicy) (*session.Manager, string) {
	t.Helper()
	dir := t.TempDir()
	j, err := store.OpenSQLite(filepath.Join(dir, "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := session.New(session.Options{Journal: j, Model: simClient(t), ModelName: "prose", Tools: tools, Policy: policy,
		Media: session.NewLocalMedia(filepath.Join(dir, "media")), RetryBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = m.Close(ctx)
		_ = j.Close()
	})
	return m, dir
}

// TestSessionWriteFileAsksApproval: under the default policy, a session
// calling server-filesystem's write_file (an untrusted server: its
// idempotentHint lowers nothing) waits for approval; approved, it writes.
// read_file of a trusted server is a read and runs without approval.
func TestSessionWriteFileAsksApproval(t *testing.T) {
	files := t.TempDir()
	set := start(t, Options{Servers: []Server{
		{Name: "fs", Command: filesystem(t, files)},
		{Name: "fsr", Command: filesystem(t, files), Trusted: true, Prefix: "r_"},
	}})
	m, _ := newManager(t, set.SessionTools(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	path := filepath.Join(files, "note.txt")
	if err := m.Send(ctx, "s1", llm.UserText(`call write_file {"path":"`+path+`","content":"from chorus"}`)); err != nil {
		t.Fatal(err)
	}
	var snap *session.Snapshot
	waitFor(t, func() bool {
		s, err := m.Snapshot(ctx, "s1")
		snap = s
		return err == nil && len(s.Pending) > 0
	}, "an approval for write_file")
	p := snap.Pending[0]
	if p.Call.Name != "write_file" || p.Call.Effect != session.EffectUnclassified {
		t.Fatalf("pending: %+v", p.Call)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the file exists before the approval: %v", err)
	}
	if err := m.Resolve(ctx, "s1", p.ID, true, "ok"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Wait(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "from chorus" {
		t.Fatalf("the file: %q %v", b, err)
	}

	if err := m.Send(ctx, "s2", llm.UserText(`call r_read_text_file {"path":"`+path+`"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Wait(ctx, "s2"); err != nil {
		t.Fatal(err)
	}
	s, err := m.Snapshot(ctx, "s2")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Tools) != 1 || s.Tools[0].Effect != session.EffectRead || s.Tools[0].Approval || s.Tools[0].Status != session.StatusSucceeded || !strings.Contains(s.Tools[0].Result, "from chorus") {
		t.Errorf("read: %+v", s.Tools)
	}
}

// TestSessionImageAndErrors: in a session, get-tiny-image's image goes to
// the media store and the journal holds its reference; a result marked
// isError ends the record failed with one attempt, though the tool is a
// read that could retry.
func TestSessionImageAndErrors(t *testing.T) {
	set := start(t, Options{Servers: []Server{{Name: "everything", Command: everything(t), Trusted: true}}})
	m, dir := newManager(t, set.SessionTools(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := m.Send(ctx, "img", llm.UserText(`call get-tiny-image then get-sum {"a":"not a number"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Wait(ctx, "img"); err != nil {
		t.Fatal(err)
	}
	s, err := m.Snapshot(ctx, "img")
	if err != nil {
		t.Fatal(err)
	}
	recs := map[string]session.ToolRecord{}
	for _, r := range s.Tools {
		recs[r.Name] = r
	}
	img := recs["get-tiny-image"]
	if img.Status != session.StatusSucceeded || len(img.Images) != 1 || !strings.HasPrefix(img.Images[0].URI, session.MediaScheme) || img.Images[0].MIMEType != "image/png" {
		t.Errorf("image record: %+v", img)
	} else if b, err := m.Media().Get(ctx, img.Images[0]); err != nil || !strings.HasPrefix(string(b), "\x89PNG") {
		t.Errorf("the stored image: %d bytes, %v", len(b), err)
	}
	if sum := recs["get-sum"]; sum.Status != session.StatusFailed || sum.Attempts != 1 || sum.Effect != session.EffectRead {
		t.Errorf("isError record: want failed after 1 attempt, got %+v", sum)
	}
	journal, err := os.ReadFile(filepath.Join(dir, "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(journal), "\x89PNG") {
		t.Error("the journal holds the image's bytes")
	}
}

// TestSessionServerKilled: a trusted read interrupted by the server's death
// is retried by the session after the restart and succeeds; an untrusted
// one (unclassified: one attempt) ends outcome_unknown.
func TestSessionServerKilled(t *testing.T) {
	shorten(t)
	for _, trusted := range []bool{true, false} {
		name := map[bool]string{true: "trusted", false: "untrusted"}[trusted]
		t.Run(name, func(t *testing.T) {
			w := &wire{}
			set := start(t, Options{Servers: []Server{{Name: "everything", Command: everything(t), Trusted: trusted}}, wrap: watched(w)})
			m, _ := newManager(t, set.SessionTools(), map[string]session.ToolPolicy{
				"trigger-long-running-operation": {RequireApproval: session.Bool(false)}})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			pid := set.server("everything").pid()
			if err := m.Send(ctx, "k", llm.UserText(`call trigger-long-running-operation {"duration":0.6,"steps":3}`)); err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool {
				_, ok := w.find(func(m wireMsg) bool { return m.Dir == "read" && m.Method == "notifications/progress" })
				return ok
			}, "the call to be running on the server")
			if err := killPID(pid); err != nil {
				t.Fatal(err)
			}
			if _, err := m.Wait(ctx, "k"); err != nil {
				t.Fatal(err)
			}
			s, err := m.Snapshot(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Tools) != 1 {
				t.Fatalf("records: %+v", s.Tools)
			}
			r := s.Tools[0]
			if trusted && (r.Status != session.StatusSucceeded || r.Attempts != 2 || r.Effect != session.EffectRead) {
				t.Errorf("trusted read: want succeeded on attempt 2, got %+v", r)
			}
			if !trusted && (r.Status != session.StatusOutcomeUnknown || r.Attempts != 1 || r.Effect != session.EffectUnclassified) {
				t.Errorf("unclassified: want outcome_unknown after 1 attempt, got %+v", r)
			}
			if !gone(pid) {
				t.Errorf("the killed server (pid %d) was not reaped", pid)
			}
		})
	}
}

// TestThreeServers: server-everything, server-filesystem and server-memory
// at once: every tool is offered once, under its server, and calls reach
// the right server (server-memory's env names its file).
func TestThreeServers(t *testing.T) {
	dir := t.TempDir()
	memFile := filepath.Join(dir, "memory.jsonl")
	set := start(t, Options{Servers: []Server{
		{Name: "everything", Command: everything(t)},
		{Name: "fs", Command: filesystem(t, dir)},
		{Name: "memory", Command: []string{serverBin(t, "mcp-server-memory")}, Env: map[string]string{"MEMORY_FILE_PATH": memFile}},
	}})
	owner := map[string]string{}
	for _, tool := range set.Tools() {
		owner[tool.Name] = tool.Server
	}
	for name, server := range map[string]string{"echo": "everything", "write_file": "fs", "create_entities": "memory", "read_graph": "memory"} {
		if owner[name] != server {
			t.Errorf("tool %s: server %q, want %q", name, owner[name], server)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := set.Call(ctx, "create_entities", []byte(`{"entities":[{"name":"chorus","entityType":"project","observations":["speaks MCP"]}]}`)); err != nil {
		t.Fatal(err)
	}
	r, err := set.Call(ctx, "read_graph", nil)
	if err != nil || r.IsError || !strings.Contains(r.Text, "speaks MCP") {
		t.Fatalf("read_graph: %+v %v", r, err)
	}
	if b, err := os.ReadFile(memFile); err != nil || !strings.Contains(string(b), "speaks MCP") {
		t.Errorf("the memory file: %q %v", b, err)
	}
}
