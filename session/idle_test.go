package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/store"
)

// TestIdlePassivation: a session with no work is passivated after
// IdleTimeout and activated again by the next call; a session whose turn
// waits for an approval is passivated too, and Resolve activates it and
// runs the call once; a Wait caller keeps a session active.
func TestIdlePassivation(t *testing.T) {
	var l ledger
	h := newHarness(t, Options{IdleTimeout: 20 * time.Millisecond,
		Tools: []Tool{tool(&l, "refund", EffectNonIdempotentWrite, ok(`{"refund":"r-1"}`))}})
	h.srv.Push(llmtest.Text("hello"))
	h.send("a", "hi")
	if r := h.wait("a"); r.Answer != "hello" {
		t.Fatalf("turn: %+v", r)
	}
	h.srv.Push(llmtest.ToolCalls(call("c1", "refund", `{"order":7}`)))
	h.send("b", "refund order 7")
	pend := h.pending("b", 1)
	until(t, "both sessions passivated", func() bool { return len(h.m.active()) == 0 })

	if s := h.snap("a"); len(s.History) != 2 || s.Last.Answer != "hello" {
		t.Fatalf("a after passivation: %d messages, last %+v", len(s.History), s.Last)
	}
	// a's event stream was dropped with it (nobody read it); its numbers go
	// on: a reader from 0 gets a gap for the first turn's events, then the
	// second turn's, numbered after them.
	until(t, "a passivated again", func() bool { return !slices.Contains(h.m.active(), "a") })
	ch, stop := h.m.Events("a", 0)
	h.srv.Push(llmtest.Text("again"))
	h.send("a", "once more")
	gap := <-ch
	next := <-ch
	stop()
	h.wait("a")
	if gap.Type != EventGap || gap.Missed < 3 || next.Type != EventTurnStarted || next.Turn != 2 || next.Seq != originOf(h.m, "a")+gap.Missed {
		t.Fatalf("events after reactivation: %+v, then %+v", gap, next)
	}
	until(t, "a passivated again", func() bool { return !slices.Contains(h.m.active(), "a") })
	if got := h.snap("b").Pending; len(got) != 1 || got[0].ID != pend[0].ID || len(l.of("c1")) != 0 {
		t.Fatalf("b after passivation: pending %+v, ran %d times", got, len(l.of("c1")))
	}
	until(t, "passivated again", func() bool { return len(h.m.active()) == 0 })
	// A Wait caller keeps b active while its approval waits.
	waited := make(chan TurnResult, 1)
	go func() { r, _ := h.m.Wait(ctx10(t), "b"); waited <- r }()
	until(t, "b active for its waiter", func() bool { return slices.Contains(h.m.active(), "b") })
	time.Sleep(60 * time.Millisecond) // three idle timeouts
	if !slices.Contains(h.m.active(), "b") {
		t.Fatal("a session with a caller in Wait was passivated")
	}
	h.srv.Push(llmtest.Text("refunded"))
	if err := h.m.Resolve(ctx10(t), "b", pend[0].ID, true, "ok"); err != nil {
		t.Fatalf("resolve: %v", err)
	}
	if r := <-waited; r.Answer != "refunded" {
		t.Fatalf("b's turn: %+v", r)
	}
	if n := len(l.of("c1")); n != 1 {
		t.Fatalf("the refund ran %d times, want 1", n)
	}
	until(t, "passivated after the turn", func() bool { return len(h.m.active()) == 0 })

	// Negative: never.
	h2 := newHarness(t, Options{IdleTimeout: -1})
	h2.srv.Push(llmtest.Text("hello"))
	h2.send("a", "hi")
	h2.wait("a")
	time.Sleep(50 * time.Millisecond)
	if got := h2.m.active(); len(got) != 1 {
		t.Fatalf("IdleTimeout -1: active %v", got)
	}
}

// TestIdleApprovalDeadline: a passivated session whose approval has a
// deadline is activated at the deadline, which expires the approval (the
// call ends rejected, never run), and the turn goes on; a reader of its
// events follows it throughout without keeping it active.
func TestIdleApprovalDeadline(t *testing.T) {
	var l ledger
	h := newHarness(t, Options{IdleTimeout: 10 * time.Millisecond, ApprovalTimeout: time.Second,
		Tools: []Tool{tool(&l, "refund", EffectNonIdempotentWrite, ok("r"))}})
	h.srv.Push(llmtest.ToolCalls(call("c1", "refund", `{}`)), llmtest.Text("expired, sorry"))
	evs := collect(h.m, "s")
	h.send("s", "refund")
	p := h.pending("s", 1)[0]
	until(t, "passivated", func() bool { return len(h.m.active()) == 0 })
	if time.Now().After(p.Deadline) {
		t.Logf("passivated only after the deadline (%v late): the wake-up was not needed", time.Since(p.Deadline))
	}
	until(t, "turn_finished event", func() bool {
		e := evs.events()
		return len(e) > 0 && e[len(e)-1].Type == EventTurnFinished
	})
	var expired bool
	for _, e := range evs.close() {
		if e.Type == EventApprovalResolved && strings.Contains(e.Reason, "deadline") {
			expired = true
		}
	}
	if !expired || len(l.inv) != 0 {
		t.Fatalf("approval expired: %v; the call ran %d times", expired, len(l.inv))
	}
	until(t, "passivated after the turn", func() bool { return len(h.m.active()) == 0 })
	if r := h.wait("s"); r.Answer != "expired, sorry" {
		t.Fatalf("turn = %+v", r)
	}
}

// TestRecoverActivatesOnlyWork: Recover activates the sessions with work
// pending (here a read whose retry the previous Close left), not the idle
// ones nor one whose turn waits only for an approval; it still reports
// both busy sessions, and the others activate on their next call.
func TestRecoverActivatesOnlyWork(t *testing.T) {
	var l ledger
	slow := tool(&l, "slow", EffectRead, func(ctx context.Context, c Call) (Result, error) {
		if c.Attempt == 1 {
			return Result{}, errors.New("busy")
		}
		return Result{Content: "found"}, nil
	})
	h := newHarness(t, Options{IdleTimeout: time.Minute, Tools: []Tool{slow, tool(&l, "refund", EffectNonIdempotentWrite, ok("r"))},
		Policy: map[string]ToolPolicy{"slow": {Backoff: time.Hour}}}) // the retry waits for the next process
	h.srv.Push(llmtest.Text("hello"))
	h.send("a", "hi")
	h.wait("a")
	h.srv.Push(llmtest.ToolCalls(call("c1", "refund", `{}`)))
	h.send("b", "refund")
	pend := h.pending("b", 1)
	h.srv.Push(llmtest.ToolCalls(call("c2", "slow", `{}`)))
	h.send("c", "look it up")
	until(t, "the slow read failed once", func() bool { return len(h.snap("c").Tools) == 1 && len(h.snap("c").Tools[0].AttemptErrors) == 1 })
	h.restart()

	h.srv.Push(llmtest.Text("found it"))
	busy, err := h.m.Recover(ctx10(t))
	if err != nil || !slices.Equal(busy, []string{"b", "c"}) {
		t.Fatalf("Recover = %v, %v; want [b c]", busy, err)
	}
	if got := h.m.active(); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("active after Recover: %v, want [c]", got)
	}
	if r := h.wait("c"); r.Answer != "found it" || len(l.of("c2")) != 2 {
		t.Fatalf("c: %+v, the read ran %d times", r, len(l.of("c2")))
	}
	if s := h.snap("a"); s.Last.Answer != "hello" {
		t.Fatalf("a: %+v", s.Last)
	}
	h.srv.Push(llmtest.Text("refunded"))
	if err := h.m.Resolve(ctx10(t), "b", pend[0].ID, true, ""); err != nil {
		t.Fatal(err)
	}
	if r := h.wait("b"); r.Answer != "refunded" || len(l.of("c1")) != 1 {
		t.Fatalf("b: %+v, the refund ran %d times", r, len(l.of("c1")))
	}
}

// gateModel holds the model call of each session (named by its user
// message) until the test releases it; other calls are answered at once.
type gateModel struct {
	mu    sync.Mutex
	gates map[string]*gate
}

type gate struct {
	arrived chan struct{} // closed when the session's call arrived
	release chan struct{} // closed by the test: answer it
}

func (g *gateModel) gate(id string) *gate {
	g.mu.Lock()
	defer g.mu.Unlock()
	gt := g.gates[id]
	if gt == nil {
		gt = &gate{arrived: make(chan struct{}), release: make(chan struct{})}
		g.gates[id] = gt
	}
	return gt
}

func (g *gateModel) Stream(ctx context.Context, req *llm.ChatRequest) (*llm.Stream, error) {
	g.mu.Lock()
	gt := g.gates[req.Messages[len(req.Messages)-1].Content]
	g.mu.Unlock()
	if gt != nil {
		select {
		case <-gt.arrived:
		default:
			close(gt.arrived)
		}
		select {
		case <-gt.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	s, w, _ := llm.NewStream(ctx, 1)
	w.Emit(llm.Event{Type: llm.EventText, Text: "ok"})
	w.Finish(&llm.ChatResult{Content: "ok", FinishReason: llm.FinishStop}, nil)
	return s, nil
}

// scratchDir is a temporary directory, in memory where the machine has
// /dev/shm: thousands of sessions make five fsync'd SQLite commits each.
func scratchDir(t *testing.T) string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "chorus-session-test-"); err == nil {
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

func heapAfterGC() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// scaleSessions is how many sessions TestIdlePassivationAtScale runs:
// 10,000, or 1,000 under the race detector, which makes a session's turn
// (mostly the pure-Go SQLite) some fifteen times dearer;
// CHORUS_IDLE_SESSIONS sets it.
func scaleSessions(t *testing.T) int {
	n := 10_000
	if raceDetector {
		n = 1_000
	}
	if v := os.Getenv("CHORUS_IDLE_SESSIONS"); v != "" {
		if _, err := fmt.Sscan(v, &n); err != nil || n < 1 {
			t.Fatalf("CHORUS_IDLE_SESSIONS=%q", v)
		}
	}
	return n
}

// TestIdlePassivationAtScale: thousands of sessions on a SQLite journal,
// all active at once (each holding its model call), finish their turns,
// go idle and are passivated: none stays active, and the heap after GC
// comes back near where it started. A session called afterwards still
// works. Eight workers start and finish the turns, so that the journal's
// queue stays short.
func TestIdlePassivationAtScale(t *testing.T) {
	n := scaleSessions(t)
	dir := scratchDir(t)
	sq, err := store.OpenSQLite(filepath.Join(dir, "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sq.Close() })
	model := &gateModel{gates: map[string]*gate{}}
	logs := &errorLog{}
	m, err := New(Options{Journal: sq, Model: model, ModelName: "test-model", IdleTimeout: 20 * time.Millisecond,
		Media: NewLocalMedia(filepath.Join(dir, "media")), Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("s-%05d", i)
	}
	// each runs f on every id, eight at a time.
	each := func(f func(id string) error) {
		t.Helper()
		work := make(chan string)
		errs := make(chan error, 8)
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for id := range work {
					if err := f(id); err != nil {
						errs <- fmt.Errorf("%s: %w", id, err)
						for range work {
						}
						return
					}
				}
			}()
		}
		for _, id := range ids {
			work <- id
		}
		close(work)
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		model.gate(id)
	}

	start := heapAfterGC()
	began := time.Now()
	each(func(id string) error {
		if err := m.Send(ctx, id, llm.UserText(id)); err != nil {
			return err
		}
		select {
		case <-model.gate(id).arrived:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	peak := heapAfterGC()
	if got := len(m.active()); got != n {
		t.Fatalf("%d sessions active, want %d", got, n)
	}
	each(func(id string) error {
		close(model.gate(id).release)
		r, err := m.Wait(ctx, id)
		if err == nil && r.Answer != "ok" {
			err = fmt.Errorf("turn %+v", r)
		}
		return err
	})
	waitFor(t, ctx, "every session passivated", func() bool { return len(m.active()) == 0 })
	end := heapAfterGC()
	t.Logf("%d sessions in %v; heap after GC: start %d KiB, all active %d KiB, all passivated %d KiB",
		n, time.Since(began).Round(time.Millisecond), start>>10, peak>>10, end>>10)
	if first, count := logs.get(); count > 0 {
		t.Fatalf("%d error lines; the first: %s", count, first)
	}
	if peak <= start {
		t.Fatalf("the heap did not grow with %d active sessions (start %d, peak %d)", n, start, peak)
	}
	if limit := start + (peak-start)/4; end > limit {
		t.Fatalf("heap after passivation %d KiB, want under %d KiB (start + a quarter of the growth)", end>>10, limit>>10)
	}

	id := ids[n/2]
	s, err := m.Snapshot(ctx, id)
	if err != nil || len(s.History) != 2 || s.Last.Answer != "ok" {
		t.Fatalf("a passivated session's snapshot: %+v, %v", s, err)
	}
	if err := m.Send(ctx, id, llm.UserText("again")); err != nil {
		t.Fatal(err)
	}
	if r, err := m.Wait(ctx, id); err != nil || r.Turn != 2 || r.Answer != "ok" {
		t.Fatalf("second turn: %+v, %v", r, err)
	}
}

// waitFor polls cond until it holds or ctx ends.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// errorLog is a slog handler that keeps the first error line and counts
// them.
type errorLog struct {
	mu    sync.Mutex
	first string
	n     int
}

func (h *errorLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }
func (h *errorLog) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == 0 {
		var b strings.Builder
		b.WriteString(r.Message)
		r.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true })
		h.first = b.String()
	}
	h.n++
	return nil
}
func (h *errorLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *errorLog) WithGroup(string) slog.Handler      { return h }
func (h *errorLog) get() (string, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.first, h.n
}
