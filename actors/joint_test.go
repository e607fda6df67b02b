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

// The keys' grants in flight at the join are counted as uncounted by the
// adoption; as each ends, its report (counted before the newest, showing
// more left) or its end alone gives back what the provider did count, and
// a report showing less left is the newest. Without that the join's window
// served 18 of 20 (one window more for 100 calls in TestPacingMatrix).
func TestJointBudgetLearnsFromTheKeysGrantsEnding(t *testing.T) {
	a := NewCredentialState("p", 0, Limits{}, 8)
	b := NewCredentialState("p", 1, Limits{}, 8)
	o := nopOwner{}
	rl := func(remaining int) llm.RateLimit {
		return llm.RateLimit{HasRequests: true, LimitRequests: 20, RemainingRequests: remaining, ResetRequests: 400 * time.Millisecond}
	}
	grant := func(c *CredentialState) uint64 {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.pacer.grant(1)
	}
	for _, c := range []*CredentialState{a, b} {
		c.ShareEndpoint(2)
	}
	// Reports of one window (their full instant stays put): a's two show
	// a fixed window, b's that others draw on it.
	s1, s2 := grant(a), grant(a)
	a.Finish(o, RequestFinished{Seq: s1, Status: 200, RateLimit: rl(19)})
	a.Finish(o, RequestFinished{Seq: s2, Status: 200, RateLimit: rl(17)})
	b.Finish(o, RequestFinished{Seq: grant(b), Status: 200, RateLimit: rl(9)})
	inA := []uint64{grant(a), grant(a)}
	inB := []uint64{grant(b), grant(b)}
	j := NewCredentialState("p", 0, Limits{}, 8)
	j.adopt(func(m foreignFinished) { j.foreign(o, m) }, []*CredentialState{a, b})
	remaining := func() (int, int) {
		j.mu.Lock()
		defer j.mu.Unlock()
		return j.pacer.reqs.remaining, j.pacer.reqs.fixed
	}
	if got, fixed := remaining(); got != 5 || fixed <= 0 {
		t.Fatalf("joint budget starts with %d remaining (fixed-window score %d): want 5 (b's 9, less the 4 in flight) and a score above 0", got, fixed)
	}
	// Three of the four were counted in b's 9: they show more left.
	a.Finish(o, RequestFinished{Seq: inA[0], Status: 200, RateLimit: rl(12)})
	a.Finish(o, RequestFinished{Seq: inA[1], Status: 200, RateLimit: rl(11)})
	if got, _ := remaining(); got != 7 {
		t.Fatalf("after two of the keys' grants ended with older reports: %d remaining, want 7 (9 less the 2 still in flight)", got)
	}
	b.Finish(o, RequestFinished{Seq: inB[0], Status: 200, RateLimit: rl(10)})
	if got, _ := remaining(); got != 8 {
		t.Fatalf("after three: %d remaining, want 8", got)
	}
	// The last was counted after b's 9: its report is the newest.
	b.Finish(o, RequestFinished{Seq: inB[1], Status: 200, RateLimit: rl(8)})
	if got, _ := remaining(); got != 8 {
		t.Fatalf("after the last, which shows 8 left: %d remaining, want 8", got)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.pacer.foreignReqs != 0 || len(j.pacer.holds) != 4 {
		t.Fatalf("joint budget: %d of the keys' grants in flight, %d held; want 0 and the 4 reports' requests held", j.pacer.foreignReqs, len(j.pacer.holds))
	}
}

// A joint budget's holds count the keys' grants: in flight until they
// end, then held until their reports' full instant, as its own are. Left
// out, a join after the window turned let 7 more beside the keys' 7 into
// a window of 20 (late 429s in TestPacingMatrix).
func TestJointBudgetHoldsCountTheKeysGrants(t *testing.T) {
	now := time.Now()
	p := newPacer(Limits{}, now)
	p.observed, p.holdsOwn = true, true
	p.reqs.known, p.reqs.limit, p.reqs.remaining = true, 20, 20
	p.foreignReqs = 7
	for range 13 {
		p.grant(1)
	}
	if use, fits, _ := p.held(now); !use || fits {
		t.Fatalf("13 granted and 7 of the keys' in flight of 20: held use %v fits %v, want the limit reached", use, fits)
	}
	p.foreign(llm.RateLimit{HasRequests: true, LimitRequests: 20, RemainingRequests: 6, ResetRequests: 400 * time.Millisecond}, false, 1, now)
	if use, fits, _ := p.held(now); !use || fits {
		t.Fatalf("a key's grant ended and held: use %v fits %v, want the limit still reached", use, fits)
	}
	p.foreign(llm.RateLimit{}, false, 1, now) // ended without a report: nothing holds it
	if use, fits, _ := p.held(now); !use || !fits {
		t.Fatalf("a key's grant ended without a report: use %v fits %v, want room for one", use, fits)
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
