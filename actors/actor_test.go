package actors

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/chorusrt/chorus/llm"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// protoactor's event stream and dispatcher keep no goroutine after
		// Shutdown; the scheduler of a stopped actor may still be returning.
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.(*defaultMailbox).run"),
	)
}

func spawn(t testing.TB, limits Limits, queue int) (*System, *Ref) {
	t.Helper()
	s := NewSystem(nil)
	r := Spawn(s, NewCredentialState("p", 0, limits, queue))
	t.Cleanup(func() {
		_ = r.Stop(time.Second)
		s.Release()
	})
	return s, r
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestAdmissionQueueBoundAndOrder(t *testing.T) {
	_, r := spawn(t, Limits{MaxConcurrency: 1}, 2)
	first, err := r.Admit(ctxT(t, time.Second), 1)
	if err != nil {
		t.Fatal(err)
	}
	order := make(chan int, 2)
	errs := make(chan error, 3)
	for i := 1; i <= 2; i++ {
		go func(i int) {
			seq, err := r.Admit(ctxT(t, 5*time.Second), 1)
			if err != nil {
				errs <- err
				return
			}
			order <- i
			r.Finish(RequestFinished{Seq: seq})
		}(i)
		waitQueued(t, r, i)
	}
	// Full queue: a typed overload error at once, never a blocked caller.
	start := time.Now()
	_, err = r.Admit(ctxT(t, 5*time.Second), 1)
	if !errors.Is(err, llm.ErrOverloaded) || time.Since(start) > time.Second {
		t.Fatalf("full queue: %v after %v", err, time.Since(start))
	}
	r.Finish(RequestFinished{Seq: first})
	if a, b := <-order, <-order; a != 1 || b != 2 {
		t.Fatalf("served out of order: %d, %d", a, b)
	}
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}

func waitQueued(t *testing.T, r *Ref, n int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if s, err := r.Stats(time.Second); err == nil && s.Queued == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("queue never reached %d", n)
}

func TestAdmitHonoursContext(t *testing.T) {
	_, r := spawn(t, Limits{MaxConcurrency: 1}, 10)
	seq, _ := r.Admit(ctxT(t, time.Second), 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := r.Admit(ctx, 1); done <- err }()
	waitQueued(t, r, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	waitQueued(t, r, 0)
	r.Finish(RequestFinished{Seq: seq})
	if _, err := r.Admit(ctxT(t, time.Second), 1); err != nil {
		t.Fatalf("slot not free after the withdrawn waiter: %v", err)
	}
}

// TestRestartKeepsStateAndWaiters: a crash mid-queue restarts the actor
// over the same state; the waiting caller is served and learned limits stay.
func TestRestartKeepsStateAndWaiters(t *testing.T) {
	s, r := spawn(t, Limits{MaxConcurrency: 1}, 10)
	seq, _ := r.Admit(ctxT(t, time.Second), 1)
	r.Finish(RequestFinished{Seq: seq, RateLimit: llm.RateLimit{HasRequests: true, LimitRequests: 100, RemainingRequests: 50, ResetRequests: time.Hour}})
	seq, _ = r.Admit(ctxT(t, time.Second), 1)
	got := make(chan error, 1)
	go func() {
		s2, err := r.Admit(ctxT(t, 5*time.Second), 1)
		if err == nil {
			r.Finish(RequestFinished{Seq: s2})
		}
		got <- err
	}()
	waitQueued(t, r, 1)
	s.Sys.Root.Send(r.pid, crashRequested{})
	r.Finish(RequestFinished{Seq: seq})
	if err := <-got; err != nil {
		t.Fatalf("waiter lost across the restart: %v", err)
	}
	st, err := r.Stats(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if st.Restarts != 1 || st.RateLimit.LimitRequests != 100 || st.RemainingRequests < 0 {
		t.Fatalf("after restart: %+v", st)
	}
}

func TestCooldownPastDeadlineRefusesAtOnce(t *testing.T) {
	_, r := spawn(t, Limits{}, 10)
	seq, _ := r.Admit(ctxT(t, time.Second), 1)
	r.Finish(RequestFinished{Seq: seq, RateLimited: true, RetryAfter: time.Hour})
	start := time.Now()
	_, err := r.Admit(ctxT(t, 200*time.Millisecond), 1)
	var re *RefusedError
	if !errors.As(err, &re) || !ErrCoolingDown(err) || re.RetryAt.IsZero() || time.Since(start) > 150*time.Millisecond {
		t.Fatalf("got %v after %v", err, time.Since(start))
	}
	// A caller whose budget outlasts the cooldown waits for it.
	_, r2 := spawn(t, Limits{}, 10)
	seq, _ = r2.Admit(ctxT(t, time.Second), 1)
	r2.Finish(RequestFinished{Seq: seq, RateLimited: true, RetryAfter: 100 * time.Millisecond})
	start = time.Now()
	if _, err := r2.Admit(ctxT(t, 5*time.Second), 1); err != nil || time.Since(start) < 80*time.Millisecond {
		t.Fatalf("waited %v: %v", time.Since(start), err)
	}
}

func TestCloseRefusesQueued(t *testing.T) {
	_, r := spawn(t, Limits{MaxConcurrency: 1}, 10)
	r.Admit(ctxT(t, time.Second), 1)
	done := make(chan error, 1)
	go func() { _, err := r.Admit(ctxT(t, 5*time.Second), 1); done <- err }()
	waitQueued(t, r, 1)
	if err := r.Close(time.Second); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("queued caller got %v", err)
	}
	if _, err := r.Admit(ctxT(t, time.Second), 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("admitted after close: %v", err)
	}
}

// observedCredential is a credential with no limits that has seen one
// answer (so no probing limit holds its admissions back), for the
// admission benchmarks.
func observedCredential(b *testing.B) *Ref {
	_, r := spawn(b, Limits{}, 1024)
	seq, err := r.Admit(context.Background(), 1)
	if err != nil {
		b.Fatal(err)
	}
	r.Finish(RequestFinished{Seq: seq, Status: 200})
	return r
}

func BenchmarkAdmission(b *testing.B) {
	r := observedCredential(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		seq, err := r.Admit(ctx, 1)
		if err != nil {
			b.Fatal(err)
		}
		r.Finish(RequestFinished{Seq: seq})
	}
}
