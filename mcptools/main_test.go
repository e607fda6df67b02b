package mcptools

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/sim"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		os.Exit(crashChild())
	}
	goleak.VerifyTestMain(m)
}

// npmDir is where `make mcp-servers` installs the pinned reference servers.
func npmDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", ".cache", "npm")
}

// serverBin is the path of a reference server's executable. Without the
// cache folder the test fails under CI=true and skips otherwise.
func serverBin(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(npmDir(), "node_modules", ".bin", name)
	if _, err := os.Stat(p); err != nil {
		msg := fmt.Sprintf("%s is not installed (%v): run `make mcp-servers` to install the pinned MCP reference servers into .cache/npm", name, err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return p
}

func everything(t testing.TB) []string {
	return []string{serverBin(t, "mcp-server-everything"), "stdio"}
}

// shorten makes restarts quick for the test.
func shorten(t testing.TB) {
	old, oldMax := restartBackoff, restartBackoffMax
	restartBackoff, restartBackoffMax = 20*time.Millisecond, 200*time.Millisecond
	t.Cleanup(func() { restartBackoff, restartBackoffMax = old, oldMax })
}

// start starts a Set and closes it at cleanup, then checks that no child
// process of this test process is left.
func start(t testing.TB, opts Options) *Set {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Error(err)
		}
		noChildren(t)
	})
	return s
}

// testServers are the servers a test started itself (not through a Set),
// by pid: they are stopped by their own cleanup.
var testServers sync.Map

// children are the live (not yet reaped, zombies included) child processes
// of this process, excluding the ones in keep.
func children(keep ...int) []int {
	me := strconv.Itoa(os.Getpid())
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if _, ours := testServers.Load(pid); len(f) > 1 && f[1] == me && !contains(keep, pid) && !ours {
			out = append(out, pid)
		}
	}
	return out
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// noChildren fails the test when a child process of this test process is
// still there (running or a zombie), other than the given ones.
func noChildren(t testing.TB, keep ...int) {
	t.Helper()
	if runtime.GOOS != "linux" {
		return
	}
	if left := children(keep...); len(left) > 0 {
		t.Errorf("child processes left behind: %v", left)
	}
}

// gone reports whether pid no longer exists (as a process or a zombie),
// waiting up to 30s for the kernel to deliver a kill.
func gone(pid int) bool {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// httpEverything starts server-everything's Streamable HTTP transport on a
// free loopback port and returns its /mcp URL; cleanup SIGKILLs it and
// checks it is gone.
func httpEverything(t *testing.T) string {
	t.Helper()
	bin := serverBin(t, "mcp-server-everything")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin, "streamableHttp")
	loopback, err := filepath.Abs(filepath.Join("testdata", "loopback.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	// Listen on 127.0.0.1 only (the server itself listens on every interface).
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port), "NODE_OPTIONS=--import="+loopback)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testServers.Store(cmd.Process.Pid, true)
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		said := false
		for sc.Scan() {
			if !said && strings.Contains(sc.Text(), "listening on port") {
				said = true
				ready <- nil
			}
		}
		if !said {
			ready <- errors.New("server-everything exited before listening")
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		if !gone(cmd.Process.Pid) {
			t.Errorf("server-everything (pid %d) is still there", cmd.Process.Pid)
		}
		testServers.Delete(cmd.Process.Pid)
	})
	select {
	case err := <-ready:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("server-everything did not start listening")
	}
	if addr := listenAddr(port); addr != "127.0.0.1" {
		t.Fatalf("server-everything listens on %q, want 127.0.0.1 only", addr)
	}
	return fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
}

// listenAddr is the local address of the TCP socket listening on port
// ("127.0.0.1", "0.0.0.0", "::", ...), from /proc/net/tcp and tcp6.
func listenAddr(port int) string {
	hexPort := fmt.Sprintf("%04X", port)
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, _ := os.ReadFile(f)
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) < 4 || fs[3] != "0A" { // LISTEN
				continue
			}
			ip, p, _ := strings.Cut(fs[1], ":")
			if p != hexPort {
				continue
			}
			switch ip {
			case "0100007F":
				return "127.0.0.1"
			case "00000000":
				return "0.0.0.0"
			default:
				return "other:" + ip
			}
		}
	}
	return ""
}

// simClient is a client of a fresh simulator, without retries.
func simClient(t testing.TB) *providers.Client {
	t.Helper()
	s, err := sim.Start(sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	c, err := providers.New(s.Config(), providers.WithRetryPolicy(providers.RetryPolicy{MaxAttempts: 1}), providers.WithTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func killPID(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

// testLogger logs to the test's log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tlogWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type tlogWriter struct{ t testing.TB }

func (w tlogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
