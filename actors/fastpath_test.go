package actors

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A grant the pacer allows at once never jumps the queue: with a caller
// waiting for its tokens, a cheaper request that the budget would let
// through waits behind it.
func TestImmediateGrantNeverJumpsTheQueue(t *testing.T) {
	_, r := spawn(t, Limits{TokensPerMinute: 100}, 10)
	first, err := r.Admit(ctxT(t, time.Second), 90) // 10 tokens left this minute
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan error, 1)
	go func() { _, err := r.Admit(ctxT(t, 5*time.Second), 50); waiting <- err }()
	waitQueued(t, r, 1)
	// 5 tokens fit the budget, but the caller of 50 came first.
	if seq, ok := r.Cred.TryGrant(5); ok {
		t.Fatalf("TryGrant granted %d past a queued caller", seq)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if seq, err := r.Admit(ctx, 5); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the cheaper request jumped the queue: seq %d, err %v", seq, err)
	}
	if _, inFlight, _ := r.Load(); inFlight != 1 {
		t.Fatalf("in flight %d, want 1 (the first grant only)", inFlight)
	}
	r.Finish(RequestFinished{Seq: first})
	select {
	case err := <-waiting:
		t.Fatalf("the queued caller was served before its tokens refilled: %v", err)
	default:
	}
}

// While another caller's request is on its way to the actor, a new caller
// is not granted at once either: it asks the actor too, in order.
func TestImmediateGrantWaitsForAsksInFlight(t *testing.T) {
	_, r := spawn(t, Limits{MaxConcurrency: 1}, 10)
	r.asking.Add(1) // as if a request were with the actor
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	seq, err := r.Admit(ctx, 1)
	r.asking.Add(-1)
	if err != nil || seq != 1 {
		t.Fatalf("grant through the actor: seq %d, err %v", seq, err)
	}
	if got := r.nextID.Load(); got != 1 {
		t.Fatalf("%d asks reached the actor, want 1", got)
	}
	r.Finish(RequestFinished{Seq: seq})
	if seq, err := r.Admit(ctx, 1); err != nil || seq != 2 || r.nextID.Load() != 1 {
		t.Fatalf("with nobody asking: seq %d, err %v, asks %d (want a grant without an ask)", seq, err, r.nextID.Load())
	}
}

// A caller whose context has ended gets its error and no grant.
func TestAdmitWithEndedContextGrantsNothing(t *testing.T) {
	_, r := spawn(t, Limits{}, 10)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Admit(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	if q, f, _ := r.Load(); q != 0 || f != 0 {
		t.Fatalf("queued %d, in flight %d after a cancelled admission", q, f)
	}
}

// Many callers at once, granted at once or through the actor, never hold
// more than MaxConcurrency grants, and every one is served; the counters
// add up.
func TestConcurrentAdmissionsKeepTheLimit(t *testing.T) {
	const limit, callers, each = 3, 16, 50
	_, r := spawn(t, Limits{MaxConcurrency: limit}, callers)
	var held, peak atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			for range each {
				seq, err := r.Admit(ctxT(t, 10*time.Second), 1)
				if err != nil {
					errs <- err
					return
				}
				n := held.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				r.Accepted(seq)
				held.Add(-1)
				r.Finish(RequestFinished{Seq: seq, Status: 200})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if peak.Load() > limit {
		t.Fatalf("%d grants held at once, limit %d", peak.Load(), limit)
	}
	st, err := r.Stats(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if st.Requests != callers*each || st.InFlight != 0 || st.Queued != 0 {
		t.Fatalf("after the run: %+v", st)
	}
}

// BenchmarkAdmissionBusy is one admission and its report while 255 other
// grants are in flight, as in the bench's batch scenario (concurrency 256).
func BenchmarkAdmissionBusy(b *testing.B) {
	r := observedCredential(b)
	ctx := context.Background()
	held := make([]uint64, 0, 255)
	for range 255 {
		seq, err := r.Admit(ctx, 1)
		if err != nil {
			b.Fatal(err)
		}
		held = append(held, seq)
	}
	b.ReportAllocs()
	for b.Loop() {
		seq, err := r.Admit(ctx, 1)
		if err != nil {
			b.Fatal(err)
		}
		r.Accepted(seq)
		r.Finish(RequestFinished{Seq: seq, Status: 200})
	}
	for _, s := range held {
		r.Finish(RequestFinished{Seq: s})
	}
}

// A paced credential (a known budget, or a 429 seen) is served through its
// actor alone, as before the immediate path existed: its grants are asked
// for, and its reports and acceptances travel as messages, in one order.
func TestPacedCredentialKeepsTheActorsOrder(t *testing.T) {
	_, r := spawn(t, Limits{RequestsPerMinute: 1000}, 10)
	seq, err := r.Admit(ctxT(t, time.Second), 1)
	if err != nil || r.nextID.Load() != 1 {
		t.Fatalf("a paced credential granted without asking: seq %d, %v, asks %d", seq, err, r.nextID.Load())
	}
	if r.Cred.acceptNow(r.owner, RequestAccepted{Seq: seq}) || r.Cred.finishNow(r.owner, RequestFinished{Seq: seq}) {
		t.Fatal("a paced credential's report was applied at once")
	}
	r.Finish(RequestFinished{Seq: seq})
	waitFinished(t, r, 1)

	// Unpaced: at once, until a 429 is reported; from then on, the actor.
	_, u := spawn(t, Limits{}, 10)
	seq, _ = u.Admit(ctxT(t, time.Second), 1)
	if u.nextID.Load() != 0 {
		t.Fatal("an unpaced credential asked its actor")
	}
	u.Finish(RequestFinished{Seq: seq, Status: 429, RateLimited: true, RetryAfter: time.Millisecond})
	waitFinished(t, u, 1)
	time.Sleep(5 * time.Millisecond) // the cooldown ends
	if seq, err = u.Admit(ctxT(t, time.Second), 1); err != nil || u.nextID.Load() != 1 {
		t.Fatalf("after a 429: seq %d, %v, asks %d (want one ask)", seq, err, u.nextID.Load())
	}
	if u.Cred.finishNow(u.owner, RequestFinished{Seq: seq}) {
		t.Fatal("a credential that saw a 429 applied a report at once")
	}
}

// A report sent to the actor holds back what would overtake it: no grant
// and no report is applied at once until the actor applied it.
func TestSentReportIsNotOvertaken(t *testing.T) {
	_, r := spawn(t, Limits{}, 10)
	r.Cred.sent.Add(1) // as if a report were on its way
	if _, ok := r.Cred.TryGrant(1); ok {
		t.Fatal("granted at once past a report on its way")
	}
	if r.Cred.finishNow(r.owner, RequestFinished{Seq: 1}) || r.Cred.acceptNow(r.owner, RequestAccepted{Seq: 1}) {
		t.Fatal("applied at once past a report on its way")
	}
	r.Cred.sent.Add(-1)
	// A caller in the queue is not overtaken either, even where the pacer
	// would let the request go.
	r.Cred.mu.Lock()
	r.Cred.queue = append(r.Cred.queue, waiter{id: 99})
	r.Cred.mu.Unlock()
	if _, ok := r.Cred.TryGrant(1); ok {
		t.Fatal("granted at once past a queued caller")
	}
	r.Cred.mu.Lock()
	r.Cred.queue = nil
	r.Cred.mu.Unlock()
	if _, ok := r.Cred.TryGrant(1); !ok {
		t.Fatal("not granted at once with nothing on its way")
	}
}

func waitFinished(t *testing.T, r *Ref, n int64) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if s, err := r.Stats(time.Second); err == nil && s.Requests == n && r.Cred.sent.Load() == 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("the actor never applied %d reports", n)
}
