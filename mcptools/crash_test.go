package mcptools

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/session"
	"github.com/chorusrt/chorus/sim"
	"github.com/chorusrt/chorus/store"
)

// The crash test runs a session in a child process (this test binary, with
// crashChildEnv set) that calls server-filesystem's write_file, and kills
// the child with SIGKILL right after the write took effect, before the
// session recorded its outcome. A second child recovers the session.
const (
	crashChildEnv  = "MCPTOOLS_CRASH_CHILD" // the child's directory
	crashSimEnv    = "MCPTOOLS_CRASH_SIM"   // the simulator's OpenAI base URL
	crashFSEnv     = "MCPTOOLS_CRASH_FS"    // server-filesystem's executable
	crashPolicyEnv = "MCPTOOLS_CRASH_POLICY"
)

// crashChild is the child: it prints "SERVER <pid>" once its server runs,
// "WROTE" after write_file's first attempt took effect (and then hangs,
// waiting for the SIGKILL), and "RECORD <json>" once the session's turn
// is over.
func crashChild() int {
	dir := os.Getenv(crashChildEnv)
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "child:", err); return 3 }
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	set, err := Start(ctx, Options{Servers: []Server{{Name: "fs", Command: []string{os.Getenv(crashFSEnv), filepath.Join(dir, "files")}}}})
	if err != nil {
		return fail(err)
	}
	defer set.Close(context.Background())
	fmt.Printf("SERVER %d\n", set.server("fs").pid())

	ledger, err := os.OpenFile(filepath.Join(dir, "ledger"), os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		return fail(err)
	}
	defer ledger.Close()
	var mu sync.Mutex
	tools := set.SessionTools()
	for i := range tools {
		h := tools[i].Handler
		if tools[i].Def.Name != "write_file" {
			continue
		}
		tools[i].Handler = func(ctx context.Context, c session.Call) (session.Result, error) {
			mu.Lock()
			before, _ := os.ReadFile(ledger.Name())
			fmt.Fprintf(ledger, "%d %s\n", c.Attempt, c.IdempotencyKey)
			_ = ledger.Sync()
			mu.Unlock()
			res, err := h(ctx, c)
			if len(before) == 0 {
				fmt.Println("WROTE")
				select {} // the parent kills the process here
			}
			return res, err
		}
	}
	policy := map[string]session.ToolPolicy{"write_file": {RequireApproval: session.Bool(false)}}
	if os.Getenv(crashPolicyEnv) == "idempotent" {
		policy["write_file"] = session.ToolPolicy{Effect: session.EffectIdempotentWrite}
	}
	j, err := store.OpenSQLite(filepath.Join(dir, "journal.db"))
	if err != nil {
		return fail(err)
	}
	defer j.Close()
	client, err := providers.New(providers.Config{ID: sim.ProviderID, Format: providers.FormatOpenAI, BaseURL: os.Getenv(crashSimEnv), KeyOptional: true},
		providers.WithRetryPolicy(providers.RetryPolicy{MaxAttempts: 1}))
	if err != nil {
		return fail(err)
	}
	m, err := session.New(session.Options{Journal: j, Model: client, ModelName: "prose", Tools: tools, Policy: policy,
		Media: session.NewLocalMedia(filepath.Join(dir, "media")), RetryBackoff: 10 * time.Millisecond})
	if err != nil {
		return fail(err)
	}
	defer m.Close(context.Background())
	if _, err := m.Recover(ctx); err != nil {
		return fail(err)
	}
	// The first run starts the session; the second recovers it.
	if _, err := m.Snapshot(ctx, "crash"); err != nil && !errors.Is(err, session.ErrUnknownSession) {
		return fail(err)
	} else if err != nil {
		path := filepath.Join(dir, "files", "out.txt")
		if err := m.Send(ctx, "crash", llm.UserText(`call write_file {"path":"`+path+`","content":"written once"}`)); err != nil {
			return fail(err)
		}
	}
	if _, err := m.Wait(ctx, "crash"); err != nil {
		return fail(err)
	}
	s, err := m.Snapshot(ctx, "crash")
	if err != nil {
		return fail(err)
	}
	b, _ := json.Marshal(s.Tools)
	fmt.Printf("RECORD %s\n", b)
	return 0
}

// TestCrashWriteFile: a session process killed with SIGKILL right after
// write_file took effect. Under the default policy (unclassified) the
// recovered session records outcome_unknown and never runs the write again;
// with a policy that makes write_file idempotent, it runs again with the
// same key and succeeds. The killed child's server dies with it.
func TestCrashWriteFile(t *testing.T) {
	fs := serverBin(t, "mcp-server-filesystem")
	// Orphans of this process (the killed child's server) become its
	// children, so that they can be reaped and checked.
	if err := setSubreaper(); err != nil {
		t.Fatal(err)
	}
	s, err := sim.Start(sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, policy := range []string{"default", "idempotent"} {
		t.Run(policy, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Mkdir(filepath.Join(dir, "files"), 0o755); err != nil {
				t.Fatal(err)
			}
			env := append(os.Environ(), crashChildEnv+"="+dir, crashSimEnv+"="+s.OpenAIBaseURL(), crashFSEnv+"="+fs, crashPolicyEnv+"="+policy)

			// First run: killed after the write.
			lines, c1 := runChild(t, env)
			server, wrote := 0, false
			for l := range lines {
				if p, ok := strings.CutPrefix(l, "SERVER "); ok {
					server, _ = strconv.Atoi(p)
				}
				if l == "WROTE" {
					wrote = true
					break
				}
			}
			_ = c1.Process.Kill()
			for range lines {
			}
			_ = c1.Wait()
			if server == 0 || !wrote {
				t.Fatalf("the child reported server %d, wrote %v", server, wrote)
			}
			waitReaped(t, server)

			// Second run: recovers and finishes the turn.
			lines, c2 := runChild(t, env)
			var recs []session.ToolRecord
			for l := range lines {
				if p, ok := strings.CutPrefix(l, "RECORD "); ok {
					if err := json.Unmarshal([]byte(p), &recs); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := c2.Wait(); err != nil {
				t.Fatalf("second child: %v", err)
			}
			ledger, _ := os.ReadFile(filepath.Join(dir, "ledger"))
			runs := strings.Split(strings.TrimSpace(string(ledger)), "\n")
			if len(recs) != 1 {
				t.Fatalf("records: %+v", recs)
			}
			r := recs[0]
			switch policy {
			case "default":
				if r.Effect != session.EffectUnclassified || r.Status != session.StatusOutcomeUnknown || r.Attempts != 1 || len(runs) != 1 {
					t.Errorf("default policy: want one run and outcome_unknown, got %d run(s) %q and %+v", len(runs), runs, r)
				}
			case "idempotent":
				key := "crash/1/" + r.ID
				if r.Effect != session.EffectIdempotentWrite || r.Status != session.StatusSucceeded || r.Attempts != 2 ||
					len(runs) != 2 || runs[0] != "1 "+key || runs[1] != "2 "+key {
					t.Errorf("idempotent policy: want two runs with key %s and success, got %q and %+v", key, runs, r)
				}
			}
			if b, err := os.ReadFile(filepath.Join(dir, "files", "out.txt")); err != nil || string(b) != "written once" {
				t.Errorf("the file: %q %v", b, err)
			}
			noChildren(t)
		})
	}
}

// setSubreaper makes this process adopt its descendants' orphans.
func setSubreaper() error {
	const prSetChildSubreaper = 36
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		return errno
	}
	return nil
}

// runChild starts this test binary as a crash child; its stdout lines
// come on the channel, which closes at EOF.
func runChild(t *testing.T, env []string) (<-chan string, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = env
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines, cmd
}

// waitReaped waits for an orphaned server (adopted by this process, a
// subreaper) to die, reaps it and checks that it is gone.
func waitReaped(t *testing.T, pid int) {
	t.Helper()
	var ws syscall.WaitStatus
	done := make(chan error, 1)
	go func() {
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil && err != syscall.ECHILD {
			t.Errorf("reaping the server %d: %v", pid, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the killed child's server (pid %d) is still running", pid)
	}
	if !gone(pid) {
		t.Errorf("the killed child's server (pid %d) is still there", pid)
	}
}
