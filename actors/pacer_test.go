package actors

import (
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
)

func TestPacerProbesUntilFirstResponse(t *testing.T) {
	now := time.Now()
	p := newPacer(Limits{}, now)
	for i := 0; i < p.probeConcurrency; i++ {
		if b, _ := p.blocked(1, now); b {
			t.Fatalf("probe %d blocked", i)
		}
		p.grant(1)
	}
	if b, _ := p.blocked(1, now); !b {
		t.Fatal("cold credential admitted past its probe concurrency")
	}
	p.release(1, llm.RateLimit{}, false, 0, false, now) // a response with no limit headers
	for i := 0; i < 100; i++ {
		if b, _ := p.blocked(1, now); b {
			t.Fatal("a credential whose provider reports no limits stays throttled")
		}
		p.grant(1)
	}
}

func TestPacerLearnsAndRefills(t *testing.T) {
	now := time.Now()
	p := newPacer(Limits{}, now)
	s1 := p.grant(10)
	s2 := p.grant(10)
	// The first response says 5 requests remain of 10 in a 1s window; the
	// second grant is not in that count yet.
	p.release(s1, llm.RateLimit{HasRequests: true, LimitRequests: 10, RemainingRequests: 5, ResetRequests: time.Second}, false, 0, false, now)
	if p.reqs.remaining != 4 {
		t.Fatalf("remaining = %d, want 5 reported - 1 pending", p.reqs.remaining)
	}
	for i := 0; i < 4; i++ {
		if b, _ := p.blocked(10, now); b {
			t.Fatalf("request %d blocked with budget left", i)
		}
		p.grant(10)
	}
	b, at := p.blocked(10, now)
	if !b || at.Before(now.Add(time.Second)) {
		t.Fatalf("exhausted budget: blocked=%v until %v", b, at.Sub(now))
	}
	// s2's report is newer than s1's (granted later): it counts the four
	// grants made after it as pending.
	p.release(s2, llm.RateLimit{HasRequests: true, LimitRequests: 10, RemainingRequests: 4, ResetRequests: time.Second}, false, 0, false, now)
	if p.reqs.remaining != 0 {
		t.Fatalf("remaining %d, want 4 reported - 4 pending", p.reqs.remaining)
	}
	// An older report arriving late must not overwrite a newer one.
	s3 := p.grant(10)
	s4 := p.grant(10)
	p.release(s4, llm.RateLimit{HasRequests: true, LimitRequests: 10, RemainingRequests: 0, ResetRequests: time.Second}, false, 0, false, now)
	p.release(s3, llm.RateLimit{HasRequests: true, LimitRequests: 10, RemainingRequests: 9, ResetRequests: time.Second}, false, 0, false, now)
	if p.reqs.remaining != 0 {
		t.Fatalf("stale report applied: remaining %d", p.reqs.remaining)
	}
	later := now.Add(time.Second + 20*time.Millisecond)
	if b, _ := p.blocked(10, later); b {
		t.Fatal("budget not refilled after the reset")
	}
	// The four granted before the reset and never answered may reach the
	// provider in its next window: they are charged there.
	if p.reqs.remaining != 6 {
		t.Fatalf("refill = %d, want 10 less the 4 unanswered in flight", p.reqs.remaining)
	}
}

func TestPacerTokens(t *testing.T) {
	now := time.Now()
	p := newPacer(Limits{TokensPerMinute: 1000}, now)
	p.grant(600)
	if b, _ := p.blocked(500, now); !b {
		t.Fatal("token budget overrun admitted")
	}
	if b, _ := p.blocked(400, now); b {
		t.Fatal("fitting request blocked")
	}
	// A request larger than the whole limit goes when the budget is full.
	q := newPacer(Limits{TokensPerMinute: 100}, now)
	if b, _ := q.blocked(5000, now); b {
		t.Fatal("oversized request starved on a full budget")
	}
}

func TestPacerCooldown(t *testing.T) {
	now := time.Now()
	p := newPacer(Limits{}, now)
	s := p.grant(1)
	p.release(s, llm.RateLimit{}, true, 2*time.Second, false, now)
	b, at := p.blocked(1, now.Add(time.Second))
	if !b || !at.Equal(now.Add(2*time.Second)) {
		t.Fatalf("cooldown: blocked=%v at=%v", b, at.Sub(now))
	}
	if b, _ := p.blocked(1, now.Add(2*time.Second)); b {
		t.Fatal("still blocked after the cooldown")
	}
}

func TestPacerConcurrencyAndCancel(t *testing.T) {
	now := time.Now()
	p := newPacer(Limits{MaxConcurrency: 2, RequestsPerMinute: 10}, now)
	a, _ := p.grant(1), p.grant(1)
	if b, _ := p.blocked(1, now); !b {
		t.Fatal("concurrency cap ignored")
	}
	p.cancelGrant(a)
	if b, _ := p.blocked(1, now); b || p.reqs.remaining != 9 {
		t.Fatalf("cancelled grant not returned: remaining %d", p.reqs.remaining)
	}
}

// A credential seeded with another holder's headers takes the window they
// describe as spent (the dead owner may have granted the rest of it),
// waits for its reset, then probes one request at a time until its own
// first response; a seed whose window has reset gives the full limit; a
// seed after the credential's own response is ignored.
func TestCredentialSeed(t *testing.T) {
	now := time.Now()
	c := NewCredentialState("p", 0, Limits{}, 8)
	c.Seed(llm.RateLimit{HasRequests: true, LimitRequests: 10, RemainingRequests: 7, ResetRequests: 5 * time.Second}, now)
	p := c.pacer
	if !p.reqs.known || p.reqs.limit != 10 || p.reqs.remaining != 0 {
		t.Fatalf("seeded budget %+v, want limit 10, nothing remaining in the seeded window", p.reqs)
	}
	if b, at := p.blocked(1, now); !b || at.Before(now.Add(4*time.Second)) {
		t.Fatalf("blocked %v until %v, want blocked until the seeded reset", b, at)
	}
	later := now.Add(6 * time.Second)
	if b, _ := p.blocked(1, later); b {
		t.Fatal("still blocked after the seeded window reset")
	}
	s1 := p.grant(1)
	if p.observed {
		t.Fatal("a seed counts as the credential's own response: it would stop probing")
	}
	if b, _ := p.blocked(1, later); !b {
		t.Fatal("a seeded credential sent a second request before a response of its own")
	}
	p.release(s1, llm.RateLimit{HasRequests: true, LimitRequests: 10, RemainingRequests: 8, ResetRequests: 5 * time.Second}, false, 0, false, later)
	for i := range 8 {
		if b, _ := p.blocked(1, later); b {
			t.Fatalf("grant %d blocked with 8 remaining after its own response", i)
		}
		p.grant(1)
	}
	if b, _ := p.blocked(1, later); !b {
		t.Fatal("granted past what its own response said remained")
	}

	old := NewCredentialState("p", 0, Limits{}, 8)
	old.Seed(llm.RateLimit{HasRequests: true, LimitRequests: 10, RemainingRequests: 0, ResetRequests: time.Second}, now.Add(-2*time.Second))
	if old.pacer.reqs.remaining != 10 {
		t.Fatalf("a seed from a window that ended since: %d remaining, want the full 10", old.pacer.reqs.remaining)
	}

	seen := NewCredentialState("p", 0, Limits{}, 8)
	s := seen.pacer.grant(1)
	seen.pacer.release(s, llm.RateLimit{HasRequests: true, LimitRequests: 100, RemainingRequests: 99, ResetRequests: time.Second}, false, 0, false, now)
	seen.Seed(llm.RateLimit{HasRequests: true, LimitRequests: 10, RemainingRequests: 0, ResetRequests: time.Second}, now)
	if seen.pacer.reqs.limit != 100 {
		t.Fatalf("a seed overrode the credential's own headers: limit %d", seen.pacer.reqs.limit)
	}
}

// TestPacerReadsATokenBucket: reports whose rate (limit - remaining) /
// reset agrees and whose full instant moves by what was granted make the
// budget a bucket, which refills continuously at the lower bound of the
// rate instead of all at once at the reset.
func TestPacerReadsATokenBucket(t *testing.T) {
	now := time.Now()
	p := newPacer(Limits{}, now)
	// A bucket of 40 refilling at 20 per second: after n charges remaining
	// is 40-n and the bucket is full again in n/20 s.
	var at time.Time
	for n := 1; n <= 5; n++ {
		at = now.Add(time.Duration(n) * time.Millisecond)
		s := p.grant(1)
		p.release(s, llm.RateLimit{HasRequests: true, LimitRequests: 40, RemainingRequests: 40 - n, ResetRequests: time.Duration(n) * 50 * time.Millisecond}, false, 0, false, at)
	}
	if p.reqs.rate <= 0 || p.reqs.rate > 20 {
		t.Fatalf("rate %v, want a bucket read at no more than 20/s", p.reqs.rate)
	}
	// Spend the rest, then half a second later about 10 are back (not 0
	// until the reset, not the whole 40).
	for range 35 {
		if b, _ := p.blocked(1, at); b {
			t.Fatal("blocked with budget left")
		}
		p.grant(1)
	}
	if b, wake := p.blocked(1, at); !b || wake.Sub(at) > 100*time.Millisecond {
		t.Fatalf("empty bucket: blocked %v, wake in %v (want about one refill, 50ms)", b, wake.Sub(at))
	}
	p.blocked(1, at.Add(500*time.Millisecond))
	if r := p.reqs.remaining; r < 8 || r > 10 {
		t.Fatalf("after 500ms: remaining %d, want 8-10", r)
	}
}

// TestPacerFixedWindowStaysAWindow: reports whose full instant stays put
// are a fixed window: never read as a bucket, refilled only at the reset.
func TestPacerFixedWindowStaysAWindow(t *testing.T) {
	now := time.Now()
	p := newPacer(Limits{}, now)
	end := now.Add(time.Second)
	for n := 1; n <= 10; n++ {
		at := now.Add(time.Duration(n) * 10 * time.Millisecond)
		s := p.grant(1)
		p.release(s, llm.RateLimit{HasRequests: true, LimitRequests: 10, RemainingRequests: 10 - n, ResetRequests: end.Sub(at)}, false, 0, false, at)
	}
	if p.reqs.rate != 0 || p.reqs.fixed < bucketScore {
		t.Fatalf("rate %v fixed %d: a fixed window read as a bucket", p.reqs.rate, p.reqs.fixed)
	}
	if b, _ := p.blocked(1, now.Add(900*time.Millisecond)); !b {
		t.Fatal("a spent window refilled before its reset")
	}
	if b, _ := p.blocked(1, end.Add(50*time.Millisecond)); b || p.reqs.remaining != 10 {
		t.Fatalf("after the reset: blocked %v remaining %d, want 10", b, p.reqs.remaining)
	}
}

// TestPacerNewestStateWins: a report on a later grant that the provider
// counted earlier (an earlier full instant, more remaining) does not
// replace the newest state; the refill at its reset then keeps what was
// granted after that state as charged.
func TestPacerNewestStateWins(t *testing.T) {
	now := time.Now()
	p := newPacer(Limits{}, now)
	s1 := p.grant(1)
	s2 := p.grant(1)
	// s2 reached the provider first (15 left, full in 125ms); s1 after it
	// (0 left, full in 500ms). s1's report arrives last.
	p.release(s2, llm.RateLimit{HasRequests: true, LimitRequests: 20, RemainingRequests: 15, ResetRequests: 125 * time.Millisecond}, false, 0, false, now)
	p.release(s1, llm.RateLimit{HasRequests: true, LimitRequests: 20, RemainingRequests: 0, ResetRequests: 500 * time.Millisecond}, false, 0, false, now)
	if b, _ := p.blocked(1, now.Add(200*time.Millisecond)); !b {
		t.Fatalf("refilled at the older state's reset: remaining %d", p.reqs.remaining)
	}
}

// TestPacerInfersAHeaderlessLimit: a provider that sends no limit headers
// (Gemini) tells its limit by refusing: the requests it accepted before the
// 429 are the window's limit, the 429's delay names the window's end, and
// the rest of the same burst's 429s do not lower it.
func TestPacerInfersAHeaderlessLimit(t *testing.T) {
	now := time.Now()
	p := newPacer(Limits{}, now)
	p.observed = true
	var seqs []uint64
	for range 8 {
		seqs = append(seqs, p.grant(1))
	}
	for _, s := range seqs[:5] {
		p.accept(s, now)
	}
	// Three of the burst are refused; the window ends 400ms from now.
	for i, s := range seqs[5:] {
		p.release(s, llm.RateLimit{}, true, 400*time.Millisecond-time.Duration(i)*time.Millisecond, true, now.Add(time.Duration(i)*time.Millisecond))
	}
	if !p.inf.on || p.reqs.limit != 5 {
		t.Fatalf("inferred %v limit %d, want 5 (what the window accepted)", p.inf.on, p.reqs.limit)
	}
	for _, s := range seqs[:5] {
		p.release(s, llm.RateLimit{}, false, 0, false, now.Add(10*time.Millisecond))
	}
	if b, _ := p.blocked(1, now.Add(300*time.Millisecond)); !b {
		t.Fatal("admitted inside the refused window")
	}
	later := now.Add(420 * time.Millisecond)
	for i := range 5 {
		if b, _ := p.blocked(1, later); b {
			t.Fatalf("request %d of the next window blocked", i)
		}
		p.accept(p.grant(1), later)
	}
	if b, _ := p.blocked(1, later); !b {
		t.Fatal("a sixth request admitted in a window that lets five through")
	}
}

// TestPacerSharedBucket: a bucket another key of the organisation draws
// on. Its full instant moves by both keys' charges, so reports agreeing on
// a rate still read as a bucket; a 429 on it (the other key drew faster
// than the reports showed) empties it until the cooldown ends without
// forgetting the rate; and a window-read shared budget at its reset lets
// one request find out where it stands, never a burst.
func TestPacerSharedBucket(t *testing.T) {
	now := time.Now()
	p := newPacer(Limits{}, now)
	p.reqs.peers, p.reqs.shared = 2, true
	// A bucket of 40 refilling at 20 per second; the other key charges as
	// much as this one, so after this key's n-th charge 2n are gone.
	var at time.Time
	for n := 1; n <= 5; n++ {
		at = now.Add(time.Duration(n) * time.Millisecond)
		s := p.grant(1)
		p.release(s, llm.RateLimit{HasRequests: true, LimitRequests: 40, RemainingRequests: 40 - 2*n, ResetRequests: time.Duration(2*n) * 50 * time.Millisecond}, false, 0, false, at)
	}
	if p.reqs.rate <= 0 || p.reqs.rate > 20 {
		t.Fatalf("rate %v: a shared bucket not read as one (want a rate up to 20/s)", p.reqs.rate)
	}
	s := p.grant(1)
	p.release(s, llm.RateLimit{}, true, 100*time.Millisecond, false, at)
	if p.reqs.rate <= 0 {
		t.Fatal("a 429 on a shared bucket forgot its rate")
	}
	if b, _ := p.blocked(1, at.Add(50*time.Millisecond)); !b {
		t.Fatal("admitted during the cooldown")
	}
	// Half a second after the cooldown this key's half of the refill is
	// back: about 5, never the whole bucket.
	p.blocked(1, at.Add(600*time.Millisecond))
	if r := p.reqs.remaining; r < 3 || r > 5 {
		t.Fatalf("500ms after the cooldown: remaining %d, want 3-5 (half of 10)", r)
	}

	// Read as a window (no agreeing rate yet), the shared budget's reset
	// lets one request through, not limit/2.
	q := newPacer(Limits{}, now)
	q.reqs.peers, q.reqs.shared = 2, true
	s = q.grant(1)
	q.release(s, llm.RateLimit{HasRequests: true, LimitRequests: 20, RemainingRequests: 0, ResetRequests: 100 * time.Millisecond}, false, 0, false, now)
	q.blocked(1, now.Add(200*time.Millisecond))
	if r := q.reqs.remaining; r != 1 {
		t.Fatalf("at a shared window's reset: remaining %d, want 1 (a probe)", r)
	}
}

// TestPacerCountsInFlightOnce: a report on one request usually counts the
// grants still in flight before it (they reached the provider first) and
// often later ones too. A key alone on its window must not subtract them
// again: with 16 in flight and a report saying 4 of 20 remain, 4 more may
// go, not none (the pacer lost a quarter of every window so). Two keys with
// budgets of their own are not read as sharing one, and a 429 on a budget
// paced within its reports is (other keys drew on it).
func TestPacerCountsInFlightOnce(t *testing.T) {
	for _, peers := range []int{1, 2} {
		now := time.Now()
		p := newPacer(Limits{}, now)
		p.reqs.peers = peers
		var seqs []uint64
		for range 16 {
			seqs = append(seqs, p.grant(1))
		}
		// The last grant's answer comes first: the provider counted all 16.
		p.release(seqs[15], llm.RateLimit{HasRequests: true, LimitRequests: 20, RemainingRequests: 4, ResetRequests: 400 * time.Millisecond}, false, 0, false, now)
		if p.reqs.remaining != 4 {
			t.Fatalf("peers %d: remaining %d after a report counting all 16 grants, want 4", peers, p.reqs.remaining)
		}
		if p.reqs.shared {
			t.Fatalf("peers %d: a budget our own grants explain read as shared", peers)
		}
		// An earlier grant's answer, counted before the last ones.
		p.release(seqs[3], llm.RateLimit{HasRequests: true, LimitRequests: 20, RemainingRequests: 16, ResetRequests: 398 * time.Millisecond}, false, 0, false, now.Add(time.Millisecond))
		if p.reqs.remaining != 4 {
			t.Fatalf("peers %d: an older report moved remaining to %d", peers, p.reqs.remaining)
		}
		for i := range 4 {
			if b, _ := p.blocked(1, now.Add(2*time.Millisecond)); b {
				t.Fatalf("peers %d: grant %d of the 4 left blocked", peers, i)
			}
			p.grant(1)
		}
		if b, _ := p.blocked(1, now.Add(2*time.Millisecond)); !b {
			t.Fatalf("peers %d: admitted past the window's limit", peers)
		}
	}

	// Another key of the organisation drew on it: the provider counted
	// more than this key granted.
	now := time.Now()
	p := newPacer(Limits{}, now)
	p.reqs.peers = 2
	s1, s2 := p.grant(1), p.grant(1)
	p.release(s1, llm.RateLimit{HasRequests: true, LimitRequests: 20, RemainingRequests: 10, ResetRequests: 400 * time.Millisecond}, false, 0, false, now)
	if !p.reqs.shared {
		t.Fatal("10 of 20 gone after 2 grants: not read as shared")
	}
	_ = s2
	q := newPacer(Limits{}, now)
	q.reqs.peers = 2
	a, b := q.grant(1), q.grant(1)
	q.release(a, llm.RateLimit{HasRequests: true, LimitRequests: 20, RemainingRequests: 18, ResetRequests: 400 * time.Millisecond}, false, 0, false, now)
	if q.reqs.shared {
		t.Fatal("read as shared before any sign")
	}
	q.release(b, llm.RateLimit{}, true, 100*time.Millisecond, false, now)
	if !q.reqs.shared {
		t.Fatal("a 429 within the reported budget did not read it as shared")
	}
}

// TestPacerInferredWindowTurnedEarly: a Gemini-like provider (no headers,
// 429s naming their window's end) whose period the pacer read a little
// short turns its window before the provider does. The window's first
// request goes alone, and its 429, which names the end of the window still
// running, moves the window there: the inferred limit stays (it once fell
// to the acceptances since the early turn, none: a limit of 1) and no
// burst of 429s follows.
// onTestClock returns a pacer and, on a clock in milliseconds from t0,
// ms and grant: grant stamps a grant with that clock (refusals are told
// apart by when their request was granted).
func onTestClock() (p *pacer, t0 time.Time, ms func(int) time.Time, grant func(at int) uint64) {
	t0 = time.Now()
	ms = func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	p = newPacer(Limits{}, t0)
	grant = func(at int) uint64 {
		s := p.grant(1)
		g := p.grants[s]
		g.at = ms(at)
		p.grants[s] = g
		return s
	}
	return p, t0, ms, grant
}

// inferredTen is a pacer on the test clock past a headerless provider's
// first window: 10 sent at 0 and accepted at 2, the 11th refused at 5,
// "retry in 495ms" (its oldest leaves at 500): a limit of 10 per 500ms.
func inferredTen() (p *pacer, ms func(int) time.Time, grant func(at int) uint64) {
	p, _, ms, grant = onTestClock()
	p.probeConcurrency = 64
	p.observed = true
	for range 10 {
		s := grant(0)
		p.accept(s, ms(2))
		p.release(s, llm.RateLimit{}, false, 0, false, ms(3))
	}
	p.release(grant(0), llm.RateLimit{}, true, 495*time.Millisecond, true, ms(5))
	return p, ms, grant
}

func TestPacerInferredWindowTurnedEarly(t *testing.T) {
	p, t0, ms, grant := onTestClock()
	window := func(at, refusedAt int, delay time.Duration, n int) {
		t.Helper()
		var seqs []uint64
		for i := range n {
			if b, _ := p.blocked(1, ms(at)); b {
				t.Fatalf("window at %dms: request %d of %d blocked", at, i, n)
			}
			s := grant(at)
			p.accept(s, ms(at+1))
			seqs = append(seqs, s)
		}
		over := grant(at)
		p.release(over, llm.RateLimit{}, true, delay, true, ms(refusedAt))
		for _, s := range seqs {
			p.release(s, llm.RateLimit{}, false, 0, false, ms(refusedAt))
		}
	}
	p.probeConcurrency = 64
	p.observed = true
	window(0, 100, 400*time.Millisecond, 20)   // the provider's window ends at 500ms
	window(510, 600, 380*time.Millisecond, 20) // and at 980ms: a window read as about 480-500ms
	if n := p.inf.length(); n < 470*time.Millisecond || n > 510*time.Millisecond || p.reqs.limit != 20 {
		t.Fatalf("inferred window %v, limit %d; want about 480-500ms and 20", n, p.reqs.limit)
	}
	// The pacer turns at 990ms, or a little later if the window before
	// it was accepted later (no more than the limit in any trailing
	// window); its next turn is early: the provider's window runs until
	// 1500ms.
	turn := 990
	if b, at := p.blocked(1, ms(turn)); b {
		if at.IsZero() || at.After(ms(1030)) {
			t.Fatalf("at the window's turn blocked until %v", at.Sub(t0))
		}
		turn = int(at.Sub(t0)/time.Millisecond) + 1
		if b, _ := p.blocked(1, ms(turn)); b {
			t.Fatalf("blocked at %dms, after the window's turn", turn)
		}
	}
	var window3 []uint64
	for range 20 {
		window3 = append(window3, grant(turn+1))
	}
	for _, s := range window3 {
		p.accept(s, ms(turn+3))
		p.release(s, llm.RateLimit{}, false, 0, false, ms(turn+5))
	}
	// The next turn comes before the provider's window ends at 1500ms.
	// Whatever the pacer's clock says, no burst goes out before then: the
	// window's first request alone (its 429 names the end of the window
	// still running, which keeps the limit and moves the window there),
	// or none, when the trailing window's count already holds them back.
	next := int(p.reqs.resetAt.Sub(t0) / time.Millisecond)
	if next >= 1500 {
		t.Fatalf("the pacer turns at %dms, not before the provider (1500ms): no early turn to test", next)
	}
	var early []uint64
	for at := next; at < 1500; at++ {
		if b, _ := p.blocked(1, ms(at)); !b {
			early = append(early, grant(at))
		}
	}
	if len(early) > 1 {
		t.Fatalf("%d requests went out before the provider's window ended, want at most the window's first", len(early))
	}
	for _, probe := range early {
		p.release(probe, llm.RateLimit{}, true, 2*time.Millisecond, true, ms(1500)) // "retry in 2ms": the window ends at 1502ms
		if p.reqs.limit != 20 {
			t.Fatalf("a refusal from the window still running set the limit to %d, want 20", p.reqs.limit)
		}
		if b, at := p.blocked(1, ms(1501)); !b || at.Before(ms(1502)) {
			t.Fatalf("before the provider's window end: blocked=%v until %v", b, at.Sub(t0))
		}
	}
	if b, _ := p.blocked(1, ms(1515)); b {
		t.Fatal("blocked after the provider's window ended")
	}
	first := grant(1515)
	p.accept(first, ms(1516))
	for i := range 19 {
		if b, _ := p.blocked(1, ms(1517)); b {
			t.Fatalf("request %d of the window blocked after its first was accepted", i+2)
		}
		grant(1517)
	}
	if b, _ := p.blocked(1, ms(1517)); !b {
		t.Fatal("admitted past the inferred limit")
	}
}

// TestPacerWindowStaysFixedAcrossRefills: a fixed window's first report
// after a refill names a full instant a window later than the last one of
// the window before. That pair says nothing of the limiter; weighed as
// evidence against a fixed window, a key that sees few reports a window
// never kept the fixed score, and its refills charged what was granted
// since the newest report instead of what is still in flight. (A budget
// other keys draw on keeps weighing the pair: see classify.)
func TestPacerWindowStaysFixedAcrossRefills(t *testing.T) {
	t0 := time.Now()
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	p := newPacer(Limits{}, t0)
	report := func(at, remaining, windowEnd int) {
		s := p.grant(1)
		p.release(s, llm.RateLimit{HasRequests: true, LimitRequests: 20, RemainingRequests: remaining, ResetRequests: ms(windowEnd).Sub(ms(at))}, false, 0, false, ms(at))
	}
	for i, rem := range []int{19, 18, 17} {
		report(10+i, rem, 500)
	}
	if p.reqs.fixed < bucketScore {
		t.Fatalf("fixed score %d after three reports of one window's end", p.reqs.fixed)
	}
	p.blocked(1, ms(520)) // the refill
	report(521, 19, 1000)
	if p.reqs.fixed < bucketScore {
		t.Fatalf("the next window's first report took the fixed score to %d", p.reqs.fixed)
	}
}

// TestPacerBucketReadThroughOvertakenAnswers replays the reports one key
// of the pacing matrix saw from a token bucket (20, refilling at 40 a
// second) at concurrency 16: requests reached the provider and answered in
// another order than they were granted. Each report's full instant moved by
// what the bucket charged before it, not by our grants between the two
// reports; weighing pairs by our grant count read the bucket as no bucket,
// and the key waited half a second for it to be full (the per-key cells at
// 1.35x the minimum).
func TestPacerBucketReadThroughOvertakenAnswers(t *testing.T) {
	t0 := time.Now()
	p := newPacer(Limits{}, t0)
	p.observed = true
	reports := []struct {
		seq, granted, remaining int
		resetMs, atUs           int
	}{
		{1, 4, 19, 25, 0}, {2, 6, 16, 99, 1000}, {3, 10, 15, 124, 1000}, {5, 12, 13, 173, 2000},
		{8, 15, 8, 296, 4000}, {14, 19, 7, 320, 6000}, {18, 20, 5, 369, 6000}, {20, 20, 3, 419, 8000},
		{16, 20, 0, 492, 9000},
	}
	for _, r := range reports {
		for int(p.seq) < r.granted {
			p.grant(1)
		}
		p.release(uint64(r.seq), llm.RateLimit{HasRequests: true, LimitRequests: 20, RemainingRequests: r.remaining, ResetRequests: time.Duration(r.resetMs) * time.Millisecond}, false, 0, false, t0.Add(time.Duration(r.atUs)*time.Microsecond))
	}
	if p.reqs.rate < 30 || p.reqs.rate > 41 {
		t.Fatalf("refill rate read as %.1f/s, want the bucket's 40/s", p.reqs.rate)
	}
	// Read as a bucket, it admits again within the refill of a request or
	// two, not when the bucket is full again (about 500ms).
	if b, at := p.blocked(1, t0.Add(10*time.Millisecond)); b && at.Sub(t0) > 100*time.Millisecond {
		t.Fatalf("next admission %v after the burst, want within a refill of one request", at.Sub(t0))
	}
}

// TestPacerSlowAnswerIsOlder: a fixed window's full instant is its end
// plus each answer's latency, so a slow answer from early in the window
// (19 remaining) can name a later instant than quick ones from its end (2
// remaining). Read as the newest state, it let 8 requests through into an
// exhausted window (late 429s in the pacing matrix under -race).
func TestPacerSlowAnswerIsOlder(t *testing.T) {
	t0 := time.Now()
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	p := newPacer(Limits{}, t0)
	p.observed = true
	var seqs []uint64
	for range 20 {
		seqs = append(seqs, p.grant(1))
	}
	// Quick answers from the window's end (it ends at 500ms), latency 2ms.
	for i, rem := range []int{8, 6, 4, 2} {
		at := 30 + i
		p.release(seqs[10+i], llm.RateLimit{HasRequests: true, LimitRequests: 20, RemainingRequests: rem, ResetRequests: ms(500).Sub(ms(at - 2))}, false, 0, false, ms(at))
	}
	if p.reqs.fixed < bucketScore {
		t.Fatalf("fixed score %d", p.reqs.fixed)
	}
	// The first request's answer, 25ms late: charged first (19 remain).
	p.release(seqs[0], llm.RateLimit{HasRequests: true, LimitRequests: 20, RemainingRequests: 19, ResetRequests: ms(500).Sub(ms(40 - 25))}, false, 0, false, ms(40))
	// A later grant's answer, as slow: charged fourth.
	p.release(seqs[14], llm.RateLimit{HasRequests: true, LimitRequests: 20, RemainingRequests: 16, ResetRequests: ms(500).Sub(ms(41 - 25))}, false, 0, false, ms(41))
	if b, _ := p.blocked(1, ms(45)); !b {
		t.Fatalf("admitted into an exhausted window after a slow answer from its start (remaining %d)", p.reqs.remaining)
	}
}

// TestPacerInferredSlidingWindow: a provider without headers whose window
// slides (each request leaves it a window after it came) names in its 429
// when its oldest request leaves. Turning the whole window at once then met
// a burst of 429s, each naming a near end, and the first of them set the
// limit to what had been accepted since the turn (down to 1). Now no more
// than the limit go into any trailing window: at the turn only what has
// left is let in, and a refusal naming a near end keeps the limit.
func TestPacerInferredSlidingWindow(t *testing.T) {
	p, _, ms, grant := onTestClock()
	p.probeConcurrency = 64
	p.observed = true
	// The first window: 20 requests 10ms apart, all accepted; the 21st is
	// refused at 200ms, "retry in 300ms": the oldest leaves at 500ms.
	for i := range 20 {
		s := grant(10 * i)
		p.accept(s, ms(10*i))
		p.release(s, llm.RateLimit{}, false, 0, false, ms(10*i+1))
	}
	over := grant(200)
	p.release(over, llm.RateLimit{}, true, 300*time.Millisecond, true, ms(200))
	if p.reqs.limit != 20 {
		t.Fatalf("inferred limit %d, want 20", p.reqs.limit)
	}
	// From 500ms on, one request a 10ms as the first window's leave it.
	sent := 0
	for at := 500; at < 700; at++ {
		if b, _ := p.blocked(1, ms(at)); !b {
			s := grant(at)
			p.accept(s, ms(at))
			p.release(s, llm.RateLimit{}, false, 0, false, ms(at))
			sent++
			if left := (at-500)/10 + 1; sent > left {
				t.Fatalf("at %dms %d requests sent since the turn, but only %d of the window before have left it", at, sent, left)
			}
		}
	}
	if sent < 18 {
		t.Fatalf("%d requests sent from 500 to 700ms as the window slid, want about 20", sent)
	}
	// A refusal naming a near end (the next request leaves in 5ms) says
	// nothing of the limit.
	s := grant(700)
	p.release(s, llm.RateLimit{}, true, 5*time.Millisecond, true, ms(700))
	if p.reqs.limit != 20 {
		t.Fatalf("a refusal naming when the next request leaves set the limit to %d, want 20", p.reqs.limit)
	}
}

// A sliding window lets its requests go one by one, each a window after it
// was charged: alone on it, the pacer lets one request go as each of its
// own reports' full instants passes (the holds), not all at once when the
// newest charge leaves, which cost a window's spread of requests in every
// window at concurrency 1. A report counting more than the pacer's own
// requests turns the holds off; so does a 429 met while they applied.
func TestPacerSlidingWindowFreesOneByOne(t *testing.T) {
	const w = time.Second
	now := time.Now()
	fill := func(p *pacer, others int) {
		for n := 1; n <= 10; n++ {
			at := now.Add(time.Duration(n) * 10 * time.Millisecond)
			s := p.grant(1)
			p.release(s, llm.RateLimit{HasRequests: true, LimitRequests: 10, RemainingRequests: max(10-n-others, 0), ResetRequests: w}, false, 0, false, at)
		}
	}
	p := newPacer(Limits{}, now)
	fill(p, 0)
	if b, _ := p.blocked(1, now.Add(900*time.Millisecond)); !b {
		t.Fatal("a full sliding window let a request go before its first charge left")
	}
	first := now.Add(10*time.Millisecond + w + resetMargin + time.Millisecond)
	if b, _ := p.blocked(1, first); b {
		t.Fatal("the window's first charge has left, yet nothing may go until its newest leaves")
	}
	p.grant(1)
	b, at := p.blocked(1, first)
	if !b || !at.Equal(now.Add(20*time.Millisecond+w+resetMargin)) {
		t.Fatalf("a second request: blocked %v until %v; want blocked until the second charge leaves", b, at.Sub(now))
	}

	// Someone else's requests in the count: the budget's own reading.
	q := newPacer(Limits{}, now)
	fill(q, 3)
	if b, _ := q.blocked(1, first); !b {
		t.Fatal("holds used although the reports counted others' requests")
	}

	// A 429 while the holds applied: never again.
	r := newPacer(Limits{}, now)
	fill(r, 0)
	s := r.grant(1)
	r.release(s, llm.RateLimit{}, true, 10*time.Millisecond, false, first)
	if !r.noHolds {
		t.Fatal("a 429 while the holds applied left them on")
	}
}

// The outlook tells a runtime choosing among keys what the budget would
// make of more requests now: nothing before a limit is known; what the
// report leaves; the whole limit less what is in flight once the window
// refilled, though no message came to refill it; nothing while a 429's
// cooldown runs, counted as a wait of its own only past the refill; and
// whether others draw on the budget.
func TestPacerOutlook(t *testing.T) {
	now := time.Now()
	p := newPacer(Limits{}, now)
	if o := p.outlook(now); o != (Outlook{}) {
		t.Fatalf("outlook %+v before any limit is known, want none", o)
	}
	s1 := p.grant(1)
	p.grant(1)
	p.release(s1, llm.RateLimit{HasRequests: true, LimitRequests: 10, RemainingRequests: 6, ResetRequests: time.Second}, false, 0, false, now)
	o := p.outlook(now)
	if o.Limit != 10 || o.InFlight != 1 || o.Free > 6 || o.Free < 4 || o.Cooling != 0 || o.Shared {
		t.Fatalf("outlook %+v after a report of 6 left of 10, one in flight", o)
	}
	if o := p.outlook(now.Add(2 * time.Second)); o.Free != 9 {
		t.Errorf("outlook %+v past the reset, nothing refilled it yet: want 9 free (10 less the one in flight)", o)
	}
	p.release(2, llm.RateLimit{HasRequests: true, LimitRequests: 10, RemainingRequests: 0, ResetRequests: time.Second}, true, 100*time.Millisecond, false, now)
	if o := p.outlook(now.Add(50 * time.Millisecond)); o.Free != 0 || o.Cooling != 0 {
		t.Errorf("outlook %+v in a cooldown that ends before the refill: want no room, no wait of its own", o)
	}
	p.cooldownUntil = now.Add(5 * time.Second)
	if o := p.outlook(now.Add(50 * time.Millisecond)); o.Free != 0 || o.Cooling < 4*time.Second {
		t.Errorf("outlook %+v in a cooldown of 5s past the refill: want no room and the cooldown as a wait", o)
	}
	p.reqs.shared, p.reqs.peers = true, 2
	if o := p.outlook(now.Add(10 * time.Second)); !o.Shared || o.Limit != 5 {
		t.Errorf("outlook %+v of a budget two keys share: want it shared, a limit of 5 per key", o)
	}
}

// An inferred sliding limit is read from what the window its refusal
// names let through, however the pacer's own turns split it: the key's
// turn (a refusal told it the window turned early) zeroed its count while
// answers of the requests before it still arrived, and a later refusal
// that named about the end of its own window found half the limit counted
// since that turn; read from that count, a key of two sharing one window
// fell from its share of 7 to 2. The window's length is read from when
// the first accepted request was sent, not from its acceptance, which is
// late by the answer's latency. Its trailing period bounds the outlook's
// room too.
func TestPacerSlidingShareKeepsItsTrailingCount(t *testing.T) {
	p, ms, grant := inferredTen()
	if n := p.inf.length(); p.reqs.limit != 10 || n != 500*time.Millisecond {
		t.Fatalf("inferred limit %d over %v, want 10 over 500ms (from the first send, not its acceptance at 2ms)", p.reqs.limit, n)
	}
	// The turn at 510: ten sent, five accepted at 512; one more sent at
	// 512 is refused at once, "retry in 1ms": the window turned early on
	// the pacer's clock (its next slot frees at 513: the length was read
	// a millisecond short); the other five are accepted at 520.
	if b, _ := p.blocked(1, ms(510)); b {
		t.Fatal("blocked at the turn")
	}
	var late []uint64
	for i := range 10 {
		s := grant(510)
		if i < 5 {
			p.accept(s, ms(512))
			p.release(s, llm.RateLimit{}, false, 0, false, ms(512))
		} else {
			late = append(late, s)
		}
	}
	p.release(grant(512), llm.RateLimit{}, true, time.Millisecond, true, ms(512))
	if n := p.inf.length(); n != 501*time.Millisecond {
		t.Fatalf("length %v after a request sent at 512 was refused until 513, want 501ms", n)
	}
	for _, s := range late {
		p.accept(s, ms(520))
		p.release(s, llm.RateLimit{}, false, 0, false, ms(520))
	}
	if p.reqs.limit != 10 {
		t.Fatalf("a refusal naming the early turn set the limit to %d, want 10", p.reqs.limit)
	}
	p.blocked(1, ms(525)) // the pacer's own turn, its count zeroed
	// At 1013 the five accepted at 512 have left: five free, though the
	// window's count (zeroed at the turn) says ten.
	if o := p.outlook(ms(1013)); o.Free != 5 {
		t.Fatalf("outlook %+v at 1013ms, five of ten in the trailing period: want 5 free", o)
	}
	for range 5 {
		if b, _ := p.blocked(1, ms(1013)); b {
			t.Fatal("blocked at 1013ms with five free")
		}
		s := grant(1013)
		p.accept(s, ms(1014))
		p.release(s, llm.RateLimit{}, false, 0, false, ms(1014))
	}
	// A refusal at 1015 naming 1020, about the pacer's own window end: the
	// window since 520 let ten through, five of them before the turn.
	p.release(grant(1014), llm.RateLimit{}, true, 5*time.Millisecond, true, ms(1015))
	if p.reqs.limit != 10 {
		t.Fatalf("the refusal set the limit to %d, want the 10 its window let through (5 counted since the turn)", p.reqs.limit)
	}
}

// The outlook tells when a budget with no room will have some (Room): the
// window's refill when its count is spent, the oldest request leaving
// the trailing period of a limit read from 429s, a cooldown's end,
// whichever comes last; nothing while it has room.
func TestPacerOutlookRoom(t *testing.T) {
	p, ms, grant := inferredTen()
	if o := p.outlook(ms(100)); o.Free != 0 || o.Room != 410*time.Millisecond {
		t.Fatalf("outlook %+v at 100ms, the window spent and its cooldown ending at 500: want no room, room in 410ms (its refill at 510)", o)
	}
	// Five sent at the turn (510), accepted at 512: room for five more.
	send := func(at, acceptedAt int) {
		t.Helper()
		if b, _ := p.blocked(1, ms(at)); b {
			t.Fatalf("blocked at %dms", at)
		}
		s := grant(at)
		p.accept(s, ms(acceptedAt))
		p.release(s, llm.RateLimit{}, false, 0, false, ms(acceptedAt))
	}
	for range 5 {
		send(510, 512)
	}
	if o := p.outlook(ms(600)); o.Free != 5 || o.Room != 0 {
		t.Fatalf("outlook %+v at 600ms, five of ten sent: want 5 free, no room to wait for", o)
	}
	for range 5 {
		send(700, 701)
	}
	// The window's count is spent until its refill (at 1010: its end
	// and the margin), and its trailing period is full until the five
	// accepted at 512 leave it, at 1012: the later of the two.
	if o := p.outlook(ms(800)); o.Free != 0 || o.Room != 212*time.Millisecond {
		t.Fatalf("outlook %+v at 800ms, the window's ten sent: want room once both its refill and the trailing period allow, in 212ms", o)
	}
	// After the refill five more fill the trailing period: the first five
	// leave it at 1012.
	for range 5 {
		send(1021, 1022)
	}
	if o := p.outlook(ms(1030)); o.Free != 0 || o.Room != 171*time.Millisecond {
		t.Fatalf("outlook %+v at 1030ms, ten in the trailing 500ms, the oldest five accepted at 701: want room in 171ms", o)
	}
	// A cooldown past both.
	p.cooldownUntil = ms(1400)
	if o := p.outlook(ms(1030)); o.Free != 0 || o.Room != 370*time.Millisecond {
		t.Fatalf("outlook %+v at 1030ms in a cooldown until 1400: want room at its end, in 370ms", o)
	}
}

// TestPacerRequestsAnsweredLaterWereChargedEarlier: the newest report is
// of the first grant of a burst (0 left); the five granted after it answer
// since with more left, so the provider charged them before it. When that
// report's window is refilled, none of them is charged in the next: all
// 20 are free (they once counted as charged: 15, a sliding window's whole
// window a quarter short in TestPacingMatrix's org cells).
func TestPacerRequestsAnsweredLaterWereChargedEarlier(t *testing.T) {
	now := time.Now()
	p := newPacer(Limits{}, now)
	var seqs []uint64
	for range 6 {
		seqs = append(seqs, p.grant(1))
	}
	rl := func(remaining int) llm.RateLimit {
		return llm.RateLimit{HasRequests: true, LimitRequests: 20, RemainingRequests: remaining, ResetRequests: 400 * time.Millisecond}
	}
	p.release(seqs[0], rl(0), false, 0, false, now)
	for i, s := range seqs[1:] {
		p.release(s, rl(1+i), false, 0, false, now)
	}
	if p.reqs.repEarlier != 5 || p.reqs.repUnseen != 0 {
		t.Fatalf("charged before the newest report: %d, unseen %d; want 5 and 0", p.reqs.repEarlier, p.reqs.repUnseen)
	}
	p.noHolds = true // the budget's refill alone (holds free each request as its report says)
	if b, _ := p.blocked(1, now.Add(500*time.Millisecond)); b {
		t.Fatal("blocked after the newest report's window was refilled")
	}
	if p.reqs.remaining != 20 {
		t.Fatalf("refilled to %d remaining, want 20", p.reqs.remaining)
	}

	// Granted before the newest report's request and answered after it
	// with more left: it was in flight when that report came (unseen),
	// and was charged before it.
	q := newPacer(Limits{}, now)
	a, b := q.grant(1), q.grant(1)
	q.release(b, rl(0), false, 0, false, now)
	if q.reqs.repUnseen != 1 {
		t.Fatalf("unseen %d with one earlier grant in flight, want 1", q.reqs.repUnseen)
	}
	q.release(a, rl(1), false, 0, false, now)
	if q.reqs.repUnseen != 0 {
		t.Fatalf("unseen %d after it answered with more left, want 0", q.reqs.repUnseen)
	}
}

// TestSuspectedBudgetStillSeesOthersDrawing: a key suspected before its
// reports showed what limiter it faces keeps its own level whole, so the
// report that shows the other key's draws marks it shared. Kept at its
// share, the level of the bucket it turned out to be sat below every
// report: it never saw the other key, burst the whole bucket at its full
// rate once the suspicion ended, and the other key's probe drew late 429s.
func TestSuspectedBudgetStillSeesOthersDrawing(t *testing.T) {
	c := NewCredentialState("p", 0, Limits{}, 8)
	c.ShareEndpoint(2)
	o := nopOwner{}
	// A bucket of 20 refilling at 40 a second: each report's reset is
	// the time until it is full again.
	report := func(remaining int) llm.RateLimit {
		return llm.RateLimit{HasRequests: true, LimitRequests: 20, RemainingRequests: remaining,
			ResetRequests: time.Duration(20-remaining) * time.Second / 40}
	}
	finish := func(remaining int) {
		t.Helper()
		c.mu.Lock()
		blocked, _ := c.pacer.blocked(1, time.Now())
		seq := c.pacer.grant(1)
		c.mu.Unlock()
		if blocked {
			t.Fatalf("no room for the request reported with %d left", remaining)
		}
		c.Finish(o, RequestFinished{Seq: seq, Status: 200, RateLimit: report(remaining)})
	}
	finish(19)
	c.Suspect()
	c.mu.Lock()
	suspected := !c.pacer.reqs.suspect.IsZero()
	c.mu.Unlock()
	if !suspected {
		t.Fatal("a budget not yet read as any limiter was not suspected")
	}
	finish(18)
	finish(17)
	c.mu.Lock()
	rate := c.pacer.reqs.rate
	c.mu.Unlock()
	if rate <= 0 {
		t.Fatal("three agreeing reports did not read as a token bucket")
	}
	if shared, _ := c.Sharing(); shared {
		t.Fatal("shared before any report showed another key's draws")
	}
	finish(10) // the other key drew 6 of it
	if shared, _ := c.Sharing(); !shared {
		t.Fatal("a report of 10 left where its own grants left 16 did not show the budget shared")
	}
}

// TestSuspectPacesAKeyAsShared: a key told that another key of its
// endpoint shares a limit like its own paces at its share (half, of two)
// though its own reports showed no one else; Sharing still says what its
// reports showed; the suspicion lapses after two of its windows. A key
// read as a token bucket is not suspected: its level, read from the
// reports, holds what others drew.
func TestSuspectPacesAKeyAsShared(t *testing.T) {
	c := NewCredentialState("p", 0, Limits{}, 8)
	c.ShareEndpoint(2)
	o := nopOwner{}
	seq, _ := c.TryGrant(1)
	c.Finish(o, RequestFinished{Seq: seq, Status: 200, RateLimit: llm.RateLimit{HasRequests: true, LimitRequests: 20, RemainingRequests: 19, ResetRequests: 100 * time.Millisecond}})
	if got := c.Outlook().Limit; got != 20 {
		t.Fatalf("before: outlook limit %d, want 20", got)
	}
	c.Suspect()
	if got := c.Outlook().Limit; got != 10 {
		t.Fatalf("suspected: outlook limit %d, want 10 (half of 20)", got)
	}
	if shared, _ := c.Sharing(); shared {
		t.Fatal("suspected: Sharing reports shared, which only its own reports may show")
	}
	c.mu.Lock()
	granted := 0
	for {
		if b, _ := c.pacer.blocked(1, time.Now()); b {
			break
		}
		c.pacer.grant(1)
		granted++
	}
	c.mu.Unlock()
	if granted != 9 {
		t.Fatalf("suspected: granted %d more in the window, want 9 (its share of 10, less the 1 it had)", granted)
	}
	time.Sleep(250 * time.Millisecond) // two windows
	c.mu.Lock()
	c.pacer.blocked(1, time.Now())
	lapsed := c.pacer.reqs.suspect.IsZero()
	c.mu.Unlock()
	if !lapsed {
		t.Fatal("suspicion did not lapse after two windows")
	}

	k := NewCredentialState("p", 1, Limits{}, 8)
	k.ShareEndpoint(2)
	k.mu.Lock()
	k.pacer.reqs.known, k.pacer.reqs.limit, k.pacer.reqs.rate = true, 20, 40
	k.mu.Unlock()
	k.Suspect()
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.pacer.reqs.suspect.IsZero() {
		t.Fatal("a budget read as a token bucket was suspected")
	}
}
