package mcptools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// wire records the JSON-RPC messages of a server's connections, as the
// SDK's LoggingTransport prints them ("read: {...}", "write: {...}").
type wire struct {
	mu    sync.Mutex
	lines []string
	buf   []byte
}

func (w *wire) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := strings.IndexByte(string(w.buf), '\n')
		if i < 0 {
			break
		}
		w.lines = append(w.lines, string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}

// wireMsg is one recorded message.
type wireMsg struct {
	Dir    string // read or write
	ID     any    `json:"id"`
	Method string `json:"method"`
	Params struct {
		Name      string  `json:"name"`
		RequestID any     `json:"requestId"`
		Progress  float64 `json:"progress"`
		Total     float64 `json:"total"`
		Meta      struct {
			ProgressToken any `json:"progressToken"`
		} `json:"_meta"`
		ProgressToken any `json:"progressToken"`
	} `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

func (w *wire) messages() []wireMsg {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []wireMsg
	for _, l := range w.lines {
		dir, data, ok := strings.Cut(l, ": ")
		if !ok || (dir != "read" && dir != "write") {
			continue
		}
		var m wireMsg
		if json.Unmarshal([]byte(data), &m) == nil {
			m.Dir = dir
			out = append(out, m)
		}
	}
	return out
}

// find returns the first message that matches.
func (w *wire) find(match func(wireMsg) bool) (wireMsg, bool) {
	for _, m := range w.messages() {
		if match(m) {
			return m, true
		}
	}
	return wireMsg{}, false
}

func sameID(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return a != nil && string(ja) == string(jb)
}

func watched(w *wire) func(string, mcp.Transport) mcp.Transport {
	return func(_ string, t mcp.Transport) mcp.Transport { return &mcp.LoggingTransport{Transport: t, Writer: w} }
}

// TestCancelReachesServer: cancelling the caller's context during
// trigger-long-running-operation sends notifications/cancelled for that
// request, and the server stops it: it never answers the request, though
// it would have answered as soon as its last step was done.
func TestCancelReachesServer(t *testing.T) {
	w := &wire{}
	set := start(t, Options{Servers: []Server{{Name: "everything", Command: everything(t)}}, wrap: watched(w)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := set.Call(ctx, "trigger-long-running-operation", []byte(`{"duration":1.5,"steps":3}`))
		done <- err
	}()
	isCall := func(m wireMsg) bool {
		return m.Dir == "write" && m.Method == "tools/call" && m.Params.Name == "trigger-long-running-operation"
	}
	waitFor(t, func() bool {
		_, ok := w.find(func(m wireMsg) bool { return m.Dir == "read" && m.Method == "notifications/progress" })
		return ok
	}, "the first progress notification")
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled call returned %v, want context.Canceled", err)
	}
	call, ok := w.find(isCall)
	if !ok {
		t.Fatal("the call was not sent")
	}
	// The SDK sends the notification off the caller's return path.
	waitFor(t, func() bool {
		_, ok := w.find(func(m wireMsg) bool {
			return m.Dir == "write" && m.Method == "notifications/cancelled" && sameID(m.Params.RequestID, call.ID)
		})
		return ok
	}, fmt.Sprintf("notifications/cancelled for request %v", call.ID))
	// The server goes on reporting progress (its handler ignores the
	// abort signal) but drops the response: wait for the last step, then
	// make another call; a response to the cancelled request would have
	// come before this call's.
	waitFor(t, func() bool {
		_, ok := w.find(func(m wireMsg) bool {
			return m.Dir == "read" && m.Method == "notifications/progress" && m.Params.Progress == 3
		})
		return ok
	}, "the last progress notification")
	ctx2, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	if r, err := set.Call(ctx2, "echo", []byte(`{"message":"after"}`)); err != nil || r.Text != "Echo: after" {
		t.Fatalf("echo after the cancelled call: %+v %v", r, err)
	}
	if m, ok := w.find(func(m wireMsg) bool { return m.Dir == "read" && m.Method == "" && sameID(m.ID, call.ID) }); ok {
		t.Errorf("the server answered the cancelled request: %+v", m)
	}
}

// TestServerKilledMidCall: a stdio server killed with SIGKILL during a call
// fails that call with a *CallError, is restarted (a new process, the old
// one reaped), and the next call works.
func TestServerKilledMidCall(t *testing.T) {
	shorten(t)
	w := &wire{}
	set := start(t, Options{Servers: []Server{{Name: "everything", Command: everything(t)}}, wrap: watched(w), Logger: testLogger(t)})
	conn := set.server("everything")
	pid := conn.pid()
	if pid == 0 {
		t.Fatal("no server process")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := set.Call(ctx, "trigger-long-running-operation", []byte(`{"duration":60,"steps":60}`))
		done <- err
	}()
	waitFor(t, func() bool {
		_, ok := w.find(func(m wireMsg) bool { return m.Dir == "read" && m.Method == "notifications/progress" })
		return ok
	}, "the call to be running on the server")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := <-done
	t.Logf("the interrupted call: %v", err)
	var ce *CallError
	if !errors.As(err, &ce) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the interrupted call: want a *CallError for the lost server, got %T %v", err, err)
	}
	if !gone(pid) {
		t.Errorf("the killed server (pid %d) was not reaped", pid)
	}
	r, err := set.Call(ctx, "echo", []byte(`{"message":"again"}`))
	if err != nil || r.Text != "Echo: again" {
		t.Fatalf("the call after the restart: %+v %v", r, err)
	}
	if p := conn.pid(); p == 0 || p == pid {
		t.Errorf("pid after the restart: %d (before %d)", p, pid)
	}
	noChildren(t, conn.pid())
}
