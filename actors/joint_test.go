package actors

import (
	"errors"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
)

// A diverted credential refuses the callers queued at it, and every later
// one, with an error Diverted reports, while what it granted still
// finishes there.
func TestDivertRefusesQueuedAndLaterCallers(t *testing.T) {
	_, r := spawn(t, Limits{MaxConcurrency: 1}, 8)
	first, err := r.Admit(ctxT(t, time.Second), 1)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 1)
	go func() {
		_, err := r.Admit(ctxT(t, 5*time.Second), 1)
		errs <- err
	}()
	waitQueued(t, r, 1)
	r.Divert()
	if err := <-errs; !Diverted(err) {
		t.Fatalf("a queued caller got %v, want a Diverted refusal", err)
	}
	if _, err := r.Admit(ctxT(t, time.Second), 1); !Diverted(err) {
		t.Fatalf("a later caller got %v, want a Diverted refusal", err)
	}
	if Diverted(llm.ErrOverloaded) || Diverted(errors.New("x")) {
		t.Fatal("Diverted reports other errors")
	}
	r.Finish(RequestFinished{Seq: first})
	waitFinished(t, r, 1)
	if s, _ := r.Stats(time.Second); s.InFlight != 0 {
		t.Fatalf("the grant made before the divert is still in flight: %+v", s)
	}
}

// A joint budget adopts the newest report any key holds, less what the
// keys still have in flight (the report may not count it), with their
// cooldown and their reading of the limiter; Sharing says what each key's
// reports showed.
func TestAdoptStartsFromTheKeysNewestReport(t *testing.T) {
	a := NewCredentialState("p", 0, Limits{}, 8)
	b := NewCredentialState("p", 1, Limits{}, 8)
	a.ShareEndpoint(2)
	b.ShareEndpoint(2)
	o := nopOwner{}
	grant := func(c *CredentialState) uint64 {
		seq, ok := c.TryGrant(1)
		if !ok {
			c.mu.Lock()
			seq = c.pacer.grant(1)
			c.mu.Unlock()
		}
		return seq
	}
	report := func(c *CredentialState, seq uint64, remaining int) {
		c.Finish(o, RequestFinished{Seq: seq, Status: 200, RateLimit: llm.RateLimit{HasRequests: true, LimitRequests: 20, RemainingRequests: remaining, ResetRequests: 400 * time.Millisecond}})
	}
	// Key a's first report counts only its own request; b's shows twelve
	// more than b granted: others draw on b's budget.
	report(a, grant(a), 19)
	if shared, limit := a.Sharing(); shared || limit != 20 {
		t.Fatalf("a: sharing %v, limit %d; want false, 20", shared, limit)
	}
	report(b, grant(b), 7)
	if shared, limit := b.Sharing(); !shared || limit != 20 {
		t.Fatalf("b: sharing %v, limit %d; want true, 20", shared, limit)
	}
	grant(a) // in flight at the join
	grant(b)
	j := NewCredentialState("p", 0, Limits{}, 8)
	j.Adopt(a, b)
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.pacer.observed || !j.pacer.reqs.known || j.pacer.reqs.limit != 20 {
		t.Fatalf("joint budget: observed %v, known %v, limit %d; want a known limit of 20", j.pacer.observed, j.pacer.reqs.known, j.pacer.reqs.limit)
	}
	if got := j.pacer.reqs.remaining; got != 5 {
		t.Fatalf("joint budget starts with %d remaining: want 5 (b's newest report, 7, less the 2 in flight)", got)
	}
	if at := j.pacer.reqs.resetAt; at.Before(time.Now().Add(300*time.Millisecond)) || at.After(time.Now().Add(500*time.Millisecond)) {
		t.Fatalf("joint budget resets in %v: want the report's 400ms", time.Until(at))
	}
}

// Keys joined after their newest report's window turned: the joint
// budget starts from the whole limit less what the keys have in flight,
// which lands in the new window. Started from the whole limit, it let a
// burst of 13 beside the keys' 10 into a window of 20 (three 429s on a
// provider that reports its limits, in TestPacingMatrix).
func TestAdoptAfterTheWindowTurnedCountsWhatIsInFlight(t *testing.T) {
	a := NewCredentialState("p", 0, Limits{}, 8)
	b := NewCredentialState("p", 1, Limits{}, 8)
	o := nopOwner{}
	for _, c := range []*CredentialState{a, b} {
		c.ShareEndpoint(2)
		seq, _ := c.TryGrant(1)
		c.Finish(o, RequestFinished{Seq: seq, Status: 200, RateLimit: llm.RateLimit{HasRequests: true, LimitRequests: 20, RemainingRequests: 0, ResetRequests: time.Millisecond}})
	}
	time.Sleep(20 * time.Millisecond) // the window turned
	for range 7 {
		a.mu.Lock()
		a.pacer.grant(1)
		a.mu.Unlock()
	}
	for range 3 {
		b.mu.Lock()
		b.pacer.grant(1)
		b.mu.Unlock()
	}
	j := NewCredentialState("p", 0, Limits{}, 8)
	j.Adopt(a, b)
	j.mu.Lock()
	defer j.mu.Unlock()
	if got := j.pacer.reqs.remaining; got != 10 {
		t.Fatalf("joint budget starts with %d remaining: want 10 (the limit of 20, less the 10 the keys have in flight)", got)
	}
}

type nopOwner struct{}

func (nopOwner) Reply(any, any) {}
func (nopOwner) Wake()          {}

// Shed refuses the newest queued callers, up to n, with an error Shed
// reports (the runtime places them again), leaves the older ones queued
// in order, and reports how many it refused.
func TestShedRefusesTheNewestQueuedCallers(t *testing.T) {
	_, r := spawn(t, Limits{MaxConcurrency: 1}, 8)
	first, err := r.Admit(ctxT(t, time.Second), 1)
	if err != nil {
		t.Fatal(err)
	}
	errs := make([]chan error, 3)
	for i := range errs {
		errs[i] = make(chan error, 1)
		go func() {
			seq, err := r.Admit(ctxT(t, 5*time.Second), 1)
			if err == nil {
				r.Finish(RequestFinished{Seq: seq})
			}
			errs[i] <- err
		}()
		waitQueued(t, r, i+1) // queued in order
	}
	if n := r.Shed(2); n != 2 {
		t.Fatalf("Shed(2) of 3 queued refused %d", n)
	}
	for _, i := range []int{2, 1} {
		if err := <-errs[i]; !Shed(err) {
			t.Fatalf("queued caller %d got %v, want a Shed refusal", i, err)
		}
	}
	if q, _, _ := r.Load(); q != 1 {
		t.Fatalf("%d callers queued after shedding 2 of 3, want the oldest", q)
	}
	r.Finish(RequestFinished{Seq: first})
	if err := <-errs[0]; err != nil {
		t.Fatalf("the oldest queued caller, not shed: %v", err)
	}
	if n := r.Shed(5); n != 0 {
		t.Fatalf("Shed of an empty queue refused %d", n)
	}
	if Shed(llm.ErrOverloaded) || Shed(errDiverted) {
		t.Fatal("Shed reports other errors")
	}
}

// OnHeld is told when the budget leaves a caller waiting in the queue,
// outside the credential's lock (it may read the credential and shed its
// callers there), and not when a caller is granted at once.
func TestOnHeldHearsCallersHeldBack(t *testing.T) {
	s := NewSystem(nil)
	st := NewCredentialState("p", 0, Limits{MaxConcurrency: 1}, 8)
	held := make(chan int, 8)
	var r *Ref
	st.OnHeld(func() {
		q := st.Snapshot().Queued // takes the lock: held here, it would never return
		held <- q
		r.Shed(q)
	})
	r = Spawn(s, st)
	t.Cleanup(func() {
		_ = r.Stop(time.Second)
		s.Release()
	})
	first, err := r.Admit(ctxT(t, time.Second), 1)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case q := <-held:
		t.Fatalf("OnHeld called (%d queued) for a caller granted at once", q)
	default:
	}
	if _, err := r.Admit(ctxT(t, 5*time.Second), 1); !Shed(err) {
		t.Fatalf("a caller held back got %v, want the Shed refusal OnHeld asked for", err)
	}
	if q := <-held; q != 1 {
		t.Fatalf("OnHeld saw %d queued, want the 1 held back", q)
	}
	r.Finish(RequestFinished{Seq: first})
	waitFinished(t, r, 1)
	select {
	case q := <-held:
		t.Fatalf("OnHeld called again (%d queued) with nobody held back", q)
	default:
	}
}
