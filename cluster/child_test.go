package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
	"github.com/chorusrt/chorus/session"
	"github.com/chorusrt/chorus/store"
)

// A child is this test binary run as one node of a test cluster, in its
// own process, so that the parent can kill it with SIGKILL.
const childEnv = "CHORUS_CLUSTER_CHILD"

// childSpec is what the parent tells a child (as JSON in childEnv).
type childSpec struct {
	Name, Bind string
	Peers      []string
	DSN        string // PostgreSQL journal, on the test's schema
	Provider   string // OpenAI-format base URL of the fake provider
	Ledger     string
	Pause      time.Duration
	LeaseTTL   time.Duration
	// Routes maps a peer's actor address to the address this member
	// dials for it (a fault proxy of the test's, one per directed link).
	Routes map[string]string
	// History, when set, is the file the member records its lease and
	// journal operations in (history_test.go).
	History string
	// Skew is how far the member's clock is off the real one.
	Skew time.Duration
}

// runChild runs a node until SIGTERM (a clean Close) or SIGKILL.
func runChild() int {
	var spec childSpec
	if err := json.Unmarshal([]byte(os.Getenv(childEnv)), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "child: bad spec:", err)
		return 2
	}
	ctx := context.Background()
	j, err := store.OpenPostgres(ctx, spec.DSN)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: journal:", err)
		return 2
	}
	var lj store.LeasingJournal = j
	if spec.History != "" {
		h, err := newHistJournal(j, spec.History, fmt.Sprintf("%s#%d", spec.Bind, os.Getpid()))
		if err != nil {
			fmt.Fprintln(os.Stderr, "child: history:", err)
			return 2
		}
		lj = h
	}
	defer lj.Close()
	l := &ledger{path: spec.Ledger}
	no := false
	cfg := Config{
		Name: spec.Name, Bind: spec.Bind, Peers: spec.Peers, LeaseTTL: spec.LeaseTTL, RefreshInterval: 200 * time.Millisecond,
		Runtime: []runtime.Option{
			runtime.WithProvider(providers.Config{ID: "fake", Format: providers.FormatOpenAI, BaseURL: spec.Provider, APIKey: "sk-cluster-shared"}),
			runtime.WithTimeout(60 * time.Second),
		},
		Sessions: &session.Options{
			Journal: lj, ModelName: "fake/m", Tools: testTools(l, spec.Pause),
			Policy:       map[string]session.ToolPolicy{"refund": {RequireApproval: &no}},
			RetryBackoff: 10 * time.Millisecond,
		},
	}
	if lv := os.Getenv("CHORUS_CHILD_LOG"); lv != "" { // a run by hand: the member's log on stderr
		var level slog.Level
		_ = level.UnmarshalText([]byte(lv))
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	}
	if spec.Skew != 0 {
		cfg.clock = func() time.Time { return time.Now().Add(spec.Skew) }
	}
	if len(spec.Routes) > 0 {
		cfg.dial = func(ctx context.Context, addr string) (net.Conn, error) {
			if to, ok := spec.Routes[addr]; ok {
				addr = to
			}
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		}
	}
	n, err := Join(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: join:", err)
		return 2
	}
	fmt.Println("ready", n.Address())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := n.Close(cctx); err != nil {
		fmt.Fprintln(os.Stderr, "child: close:", err)
		return 1
	}
	return 0
}

// child is a running child node.
type child struct {
	bind string
	cmd  *exec.Cmd
	done chan struct{}
}

func startChild(t *testing.T, spec childSpec) *child {
	t.Helper()
	b, _ := json.Marshal(spec)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(b))
	cmd.Stderr = &prefixWriter{prefix: "[" + spec.Bind + "] ", w: os.Stderr}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{bind: spec.Bind, cmd: cmd, done: make(chan struct{})}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "ready ") {
				ready <- sc.Text()
			}
		}
		_ = cmd.Wait()
		close(c.done)
	}()
	select {
	case <-ready:
	case <-c.done:
		t.Fatalf("child %s exited before it was ready", spec.Bind)
	case <-time.After(60 * time.Second):
		c.kill()
		t.Fatalf("child %s not ready after 60s", spec.Bind)
	}
	return c
}

// startMembers starts a member process per spec, all at once, and joins
// this process as a client of the cluster; the members are stopped
// (SIGTERM) and the client closed at the test's end, a member a test set
// to nil (killed) excepted. It waits until the client sees every member.
func startMembers(t *testing.T, ctx context.Context, specs []childSpec, clientAddr string) ([]*child, *Node) {
	t.Helper()
	children := make([]*child, len(specs))
	var wg sync.WaitGroup
	for i := range specs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			children[i] = startChild(t, specs[i])
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range children {
			if c != nil {
				c.stop(t)
			}
		}
	})
	client, err := Join(context.Background(), Config{Name: specs[0].Name, Bind: clientAddr, Peers: specs[0].Peers, Client: true, RefreshInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeAll(t, []*Node{client}) })
	if err := client.WaitMembers(ctx, len(specs)); err != nil {
		t.Fatal(err)
	}
	return children, client
}

func (c *child) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

func (c *child) stop(t *testing.T) {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		t.Errorf("child %s did not stop on SIGTERM", c.bind)
		c.kill()
	}
}

type prefixWriter struct {
	prefix string
	w      io.Writer
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if line != "" {
			fmt.Fprint(p.w, p.prefix+line)
		}
	}
	return len(b), nil
}

// clusterResponder answers sessions as agentResponder does and batch
// items ("item <id>") with "answer <id>".
func clusterResponder(r llmtest.Recorded) llmtest.Step {
	var body struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(r.Body, &body)
	if len(body.Messages) == 1 {
		if s, ok := body.Messages[0].Content.(string); ok && strings.HasPrefix(s, "item ") {
			return llmtest.Text("answer " + strings.TrimPrefix(s, "item "))
		}
	}
	return agentResponder(r)
}
