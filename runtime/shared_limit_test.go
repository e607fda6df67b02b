package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"testing"
	"time"

	"github.com/chorusrt/chorus/actors"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

// Keys declared to share one limit (Limits.Shared, an organisation's) are
// paced as one budget: one admission queue for both, every call served
// without a 429 after the first window, both keys carrying calls.
func TestSharedLimitPacesKeysAsOneBudget(t *testing.T) {
	const window = 400 * time.Millisecond
	srv := llmtest.NewServer(llmtest.WithRateLimit(llmtest.RateLimit{Requests: 10, Window: window, Model: llmtest.FixedWindow,
		Orgs: map[string]string{"k-a": "acme", "k-b": "acme"}}))
	defer srv.Close()
	rt := newRT(t, WithProvider(openaiCfg(srv, "k-a")), WithProvider(openaiCfg(srv, "k-b")), WithLimits("openai", Limits{Shared: true}))
	start := time.Now()
	for _, err := range chatAll(t, rt, "openai/m", 40, 16) {
		t.Errorf("call failed: %v", err)
	}
	for _, at := range srv.RateLimitedAt() {
		if at.Sub(start) > window {
			t.Errorf("a 429 at %v, after the first window", at.Sub(start).Round(time.Millisecond))
		}
	}
	byKey := map[string]int{}
	for _, r := range srv.Requests() {
		byKey[r.Header.Get("Authorization")]++
	}
	if byKey["Bearer k-a"] == 0 || byKey["Bearer k-b"] == 0 {
		t.Errorf("requests per key %v: want both keys used", byKey)
	}
	st := rt.Stats()
	if len(st) != 2 || !st[0].SharedLimit || !st[1].SharedLimit {
		t.Fatalf("stats %+v: want two credentials, both on the shared limit", st)
	}
	if st[0].Requests != st[1].Requests || st[0].Requests < 40 {
		t.Errorf("admissions %d and %d: want one budget's count (at least 40) for both keys", st[0].Requests, st[1].Requests)
	}
	if st[0].Fingerprint == st[1].Fingerprint {
		t.Errorf("both keys named %s", st[0].Fingerprint)
	}
}

// With a SharedBudget (a cluster's budget owners), keys declared to share
// one limit ask for one budget, named by their endpoint rather than by a
// key, so every node's keys of it meet at one owner.
func TestSharedLimitAsksOneSharedBudget(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	sys := actors.NewSystem(nil)
	defer sys.Release()
	var asked []Credential
	budget := func(c Credential) (actors.Admitter, error) {
		asked = append(asked, c)
		return actors.Spawn(sys, actors.NewCredentialState(c.Provider, c.Index, c.Limits, c.QueueSize)), nil
	}
	cfgA, cfgB := openaiCfg(srv, "k-a"), openaiCfg(srv, "k-b")
	rt := newRT(t, WithProvider(cfgA), WithProvider(cfgB), WithLimits("openai", Limits{Shared: true}), WithSharedBudget(budget))
	if len(asked) != 1 {
		t.Fatalf("the shared budget was asked %d times for two keys of one limit, want once", len(asked))
	}
	for _, k := range []string{"k-a", "k-b"} {
		if sum := sha256.Sum256([]byte(k)); asked[0].KeyID == hex.EncodeToString(sum[:8]) {
			t.Errorf("the shared limit's budget is named by the key %s's id", k)
		}
	}
	srv.Push(llmtest.Step{Reply: &llmtest.Reply{Text: "a"}}, llmtest.Step{Reply: &llmtest.Reply{Text: "b"}})
	for range 2 {
		if _, err := rt.Chat(ctxT(t, 5*time.Second), req("openai/m")); err != nil {
			t.Fatal(err)
		}
	}
	if asked[0].Peers != 0 {
		t.Errorf("the shared limit's budget was told of %d peers: it serves them all", asked[0].Peers)
	}
	// Without the declaration each key has its own budget, told how many
	// keys serve the endpoint (should the reports show them sharing).
	asked = nil
	rt2 := newRT(t, WithProvider(cfgA), WithProvider(cfgB), WithSharedBudget(budget))
	if len(asked) != 2 || asked[0].KeyID == asked[1].KeyID {
		t.Errorf("undeclared: asked %d budgets, want one per key", len(asked))
	}
	for _, c := range asked {
		if c.Peers != 2 {
			t.Errorf("undeclared: key %d's budget told of %d peers, want the endpoint's 2 keys", c.Index, c.Peers)
		}
	}
	_ = rt2.Close(context.Background())
}

// staleLoad is an admitter whose published load lags: it reports the same
// counts whatever is placed on it, as an actor's do during a burst.
type staleLoad struct {
	actors.Admitter
	queued, inFlight int
}

func (s staleLoad) Load() (int, int, time.Time) { return s.queued, s.inFlight, time.Time{} }

// A burst of picks spreads over the keys by what was placed on each, not
// by counts the actors published before the burst: those sent a whole
// burst to the key that looked one call less busy.
func TestPickSpreadsABurstOverKeys(t *testing.T) {
	a := &cred{ref: staleLoad{queued: 17, inFlight: 16}, index: 0}
	b := &cred{ref: staleLoad{queued: 17, inFlight: 15}, index: 1}
	g := &group{id: "openai", creds: []*cred{a, b}}
	for range 20 {
		c := g.pick(time.Now())
		c.placed.Add(1) // as place does until the call finishes
	}
	if a.placed.Load() != 10 || b.placed.Load() != 10 {
		t.Errorf("a burst of 20 placed %d and %d: want 10 on each key", a.placed.Load(), b.placed.Load())
	}
}

// Keys that share one limit undeclared are recognised from the reports and
// joined into one budget, as if declared: every call served, no 429 after
// the second window, both keys' stats on the shared limit. Keys with limits
// of their own, on the same server, are never joined. (The sharing is read
// from the first window's reports; on a loaded machine the first window
// can turn before both keys' reports showed it, and one or two 429s came
// at that turn in 2 of 6 runs beside a CI run. The pacing matrix, whose
// windows hold twice the requests, has had none after the first window.)
func TestUndeclaredSharedKeysAreJoined(t *testing.T) {
	const window = 400 * time.Millisecond
	for _, org := range []bool{true, false} {
		rl := llmtest.RateLimit{Requests: 10, Window: window, Model: llmtest.FixedWindow, PerKey: true}
		if org {
			rl.PerKey, rl.Orgs = false, map[string]string{"k-a": "acme", "k-b": "acme"}
		}
		srv := llmtest.NewServer(llmtest.WithRateLimit(rl))
		rt := newRT(t, WithProvider(openaiCfg(srv, "k-a")), WithProvider(openaiCfg(srv, "k-b")))
		for _, err := range chatAll(t, rt, "openai/m", 50, 16) {
			t.Errorf("org %v: call failed: %v", org, err)
		}
		first := srv.FirstRequestAt()
		for _, at := range srv.RateLimitedAt() {
			if at.Sub(first) > 2*window {
				t.Errorf("org %v: a 429 at %v after the first request, after the second window", org, at.Sub(first).Round(time.Millisecond))
			}
		}
		st := rt.Stats()
		if len(st) != 2 {
			t.Fatalf("stats for %d credentials, want 2", len(st))
		}
		for _, s := range st {
			if s.SharedLimit != org {
				t.Errorf("org %v: credential %d SharedLimit %v", org, s.Credential, s.SharedLimit)
			}
		}
		srv.Close()
	}
}

// chatAll makes n calls of model on rt, conc at a time, each within 30
// s, and returns the errors of those that failed.
func chatAll(t *testing.T, rt *Runtime, model string, n, conc int) []error {
	t.Helper()
	return chatAllWithin(t, rt, model, n, conc, 30*time.Second)
}

// chatAllWithin is chatAll with each call given d.
func chatAllWithin(t *testing.T, rt *Runtime, model string, n, conc int, d time.Duration) []error {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	sem := make(chan struct{}, conc)
	for range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), d)
			defer cancel()
			if _, err := rt.Chat(ctx, req(model)); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errs
}

// Keys whose budgets know their request limits are placed where a call
// would wait least: where there is room now, then by the refills it waits
// for, the room that comes first, the windows of backlog for the key's
// limit, a cooldown past the refill last. Placed by count
// alone (as before), the first case went to the full key half the time,
// and the burst below went half to the key with a third of the limit.
func TestPickPlacesWhereACallWaitsLeast(t *testing.T) {
	pickOf := func(os ...actors.Outlook) (*group, []*cred) {
		as := make([]*queueAdmitter, len(os))
		for i, o := range os {
			as[i] = &queueAdmitter{o: o}
		}
		g := queueGroup(as...)
		return g, g.creds
	}
	// Room beats none, whatever the rotation.
	g, cs := pickOf(actors.Outlook{Limit: 10, Free: 0}, actors.Outlook{Limit: 10, Free: 1})
	for range 4 {
		if c := g.pick(time.Now()); c != cs[1] {
			t.Fatalf("picked key %d, which has no room, over one that has", c.index)
		}
	}
	// A burst onto full keys splits as their limits: 15 of 60 on the key
	// of limit 10, 45 on the one of 30.
	g, cs = pickOf(actors.Outlook{Limit: 10}, actors.Outlook{Limit: 30})
	for range 60 {
		g.pick(time.Now()).placed.Add(1)
	}
	if a, b := cs[0].placed.Load(), cs[1].placed.Load(); a < 14 || a > 16 || b < 44 || b > 46 {
		t.Errorf("a burst of 60 placed %d on the key of limit 10 and %d on the one of 30: want about 15 and 45", a, b)
	}
	// Full keys each a refill away: the one whose room comes first (a
	// trailing request leaving within milliseconds, against a window
	// turning in 400), though more wait there; not once the call would
	// wait for a second refill there.
	g, cs = pickOf(actors.Outlook{Limit: 10, Room: 2 * time.Millisecond}, actors.Outlook{Limit: 10, Room: 400 * time.Millisecond})
	cs[0].placed.Store(3)
	if c := g.pick(time.Now()); c != cs[0] {
		t.Errorf("picked the key whose room comes in 400ms over the one whose room comes in 2ms, each a refill away")
	}
	cs[0].placed.Store(10)
	if c := g.pick(time.Now()); c != cs[1] {
		t.Errorf("picked the key where the call waits for a second refill over one where it waits for its first")
	}
	// A cooldown past the refill: the other key, backlog and all.
	g, cs = pickOf(actors.Outlook{Limit: 10, Cooling: time.Second}, actors.Outlook{Limit: 10})
	cs[1].placed.Store(30)
	if c := g.pick(time.Now()); c != cs[1] {
		t.Errorf("picked the key cooling down past its refill over one with a backlog")
	}
	// A key that reads its share of a limit others draw on, or one whose
	// limit is not known: the counts alone, rotating among equals.
	for _, o := range []actors.Outlook{{Limit: 10, Free: 5, Shared: true}, {}} {
		g, cs = pickOf(actors.Outlook{Limit: 10}, o)
		for range 20 {
			g.pick(time.Now()).placed.Add(1)
		}
		if a, b := cs[0].placed.Load(), cs[1].placed.Load(); a != 10 || b != 10 {
			t.Errorf("outlook %+v: placed %d and %d, want 10 on each by count", o, a, b)
		}
	}
}

// Two keys of one provider with limits of their own that differ (a key of
// a higher tier), their limits known: a burst of callers is split as the
// limits are, and each key serves about its share. Placed by count, half
// the burst waited at the key of a quarter of the limit: it served 60 of
// 120 calls.
func TestKeysWithUnequalLimitsServeTheirShares(t *testing.T) {
	const window = 300 * time.Millisecond
	slow := llmtest.NewServer(llmtest.WithRateLimit(llmtest.RateLimit{Requests: 5, Window: window, Model: llmtest.FixedWindow}))
	fast := llmtest.NewServer(llmtest.WithRateLimit(llmtest.RateLimit{Requests: 15, Window: window, Model: llmtest.FixedWindow}))
	defer slow.Close()
	defer fast.Close()
	rt := newRT(t, WithProvider(openaiCfg(slow, "k-slow")), WithProvider(openaiCfg(fast, "k-fast")))
	for _, err := range chatAll(t, rt, "openai/m", 4, 1) { // both limits learned
		t.Fatalf("call failed: %v", err)
	}
	s0, f0 := slow.Count(), fast.Count()
	for _, err := range chatAll(t, rt, "openai/m", 120, 120) {
		t.Errorf("call failed: %v", err)
	}
	s, f := slow.Count()-s0, fast.Count()-f0
	if s > 40 {
		t.Errorf("of a burst of 120 calls the key of limit 5 served %d, the key of limit 15 %d: want about a quarter and three quarters", s, f)
	}
	for _, srv := range []*llmtest.Server{slow, fast} {
		if n := len(srv.RateLimitedAt()); n > 0 {
			t.Errorf("%d 429s from a key whose limit is reported", n)
		}
	}
}

// queueAdmitter is a fake key for pick, rebalance and awaitRoom: its
// outlook, queue and cooldown as set, and the sheds asked of it.
type queueAdmitter struct {
	actors.Admitter
	mu       sync.Mutex // a rebalance may run on a timer's goroutine
	o        actors.Outlook
	queued   int
	cooldown time.Time
	shed     []int
}

func (a *queueAdmitter) Outlook() actors.Outlook {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.o
}

func (a *queueAdmitter) Load() (int, int, time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.queued, a.o.InFlight, a.cooldown
}

func (a *queueAdmitter) Shed(n int) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.shed = append(a.shed, n)
	return min(n, a.queued)
}

// sheds returns the sheds asked of it so far.
func (a *queueAdmitter) sheds() []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]int(nil), a.shed...)
}

func queueGroup(as ...*queueAdmitter) *group {
	cs := make([]*cred, len(as))
	for i, a := range as {
		cs[i] = &cred{ref: a, index: i}
	}
	return &group{id: "gemini", creds: cs}
}

// A key with room and nobody queued takes callers queued at a key
// without room (the one with most queued), up to its room; none while
// callers wait for it, while it has no room or cools down, from a key
// with room of its own, or where some key's outlook is unknown or read as
// a share of a limit others draw on.
func TestRebalanceMovesQueuedCallersToRoom(t *testing.T) {
	a := &queueAdmitter{o: actors.Outlook{Limit: 10, Free: 3}}
	b := &queueAdmitter{o: actors.Outlook{Limit: 10}, queued: 2}
	c := &queueAdmitter{o: actors.Outlook{Limit: 10}, queued: 5}
	g := queueGroup(a, b, c)
	defer g.stopWake()
	g.rebalance()
	if len(b.shed) != 0 || len(c.shed) != 1 || c.shed[0] != 3 {
		t.Fatalf("shed from b %v, from c %v: want 3 (a's room) from c, the longest queue", b.shed, c.shed)
	}
	for name, set := range map[string]func(){
		"callers queued at the key with room": func() { a.queued = 1 },
		"no room":                             func() { a.o.Free = 0 },
		"a cooldown past the refill":          func() { a.o.Cooling = time.Second },
		"the queued keys have room":           func() { b.o.Free, c.o.Free = 1, 1 },
		"a share of a limit others draw on":   func() { b.o.Shared = true },
		"a limit not known":                   func() { c.o = actors.Outlook{} },
	} {
		a.o, a.queued, b.o, c.o = actors.Outlook{Limit: 10, Free: 3}, 0, actors.Outlook{Limit: 10}, actors.Outlook{Limit: 10}
		b.shed, c.shed = nil, nil
		set()
		g.rebalance()
		if len(b.shed)+len(c.shed) != 0 {
			t.Errorf("%s: shed %v and %v, want none", name, b.shed, c.shed)
		}
	}
}

// A key with nobody queued hears of no event when its room comes (its
// window turns, a trailing request leaves): when callers are held at a
// key whose own room comes later, rebalance runs again at the idle key's
// room, and moves them then; not when the held key's room comes first,
// and not once the runtime closed.
func TestRebalanceWakesWhenAnIdleKeyGetsRoom(t *testing.T) {
	a := &queueAdmitter{o: actors.Outlook{Limit: 10, Room: 30 * time.Millisecond}}
	b := &queueAdmitter{o: actors.Outlook{Limit: 10, Room: time.Hour}, queued: 2}
	g := queueGroup(a, b)
	defer g.stopWake()
	g.rebalance()
	if s := b.sheds(); len(s) != 0 {
		t.Fatalf("shed %v while no key has room", s)
	}
	a.mu.Lock()
	a.o = actors.Outlook{Limit: 10, Free: 4} // its room came
	a.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for len(b.sheds()) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if s := b.sheds(); len(s) != 1 || s[0] != 2 {
		t.Fatalf("shed %v once the idle key got room, want the 2 held callers", s)
	}

	// The held key's own room comes first: no wake.
	a = &queueAdmitter{o: actors.Outlook{Limit: 10, Room: 30 * time.Millisecond}}
	b = &queueAdmitter{o: actors.Outlook{Limit: 10, Room: 10 * time.Millisecond}, queued: 2}
	g = queueGroup(a, b)
	g.rebalance()
	g.mu.Lock()
	pending := !g.wakeT.IsZero()
	g.mu.Unlock()
	if pending {
		t.Errorf("a wake set for the idle key's room, after the held key's own")
	}
	// Closed: no wake either.
	b.mu.Lock()
	b.o.Room = time.Hour
	b.mu.Unlock()
	g.stopWake()
	g.rebalance()
	g.mu.Lock()
	pending = !g.wakeT.IsZero()
	g.mu.Unlock()
	if pending {
		t.Errorf("a wake set after stopWake")
	}
}

// A call a key's provider refused waits, before it is placed again, until
// the earliest any key could take it: at once when another key is not
// cooling down, until the other key's cooldown when that ends before the
// refusal's delay, no longer than its context, and not at all when its
// deadline comes before any key could take it.
func TestAwaitRoomWaitsForTheEarliestKey(t *testing.T) {
	within := func(name string, f func() bool, want bool) {
		t.Helper()
		done := make(chan bool, 1)
		go func() { done <- f() }()
		select {
		case got := <-done:
			if got != want {
				t.Errorf("%s: returned %v, want %v", name, got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: still waiting after 10s on a retry delay of an hour", name)
		}
	}
	a, b := &queueAdmitter{}, &queueAdmitter{}
	g := queueGroup(a, b)
	ctx := context.Background()
	within("the other key is not cooling down", func() bool { return awaitRoom(ctx, g, g.creds[0], time.Hour) }, true)
	b.cooldown = time.Now().Add(50 * time.Millisecond)
	start := time.Now()
	within("the other key's cooldown ends first", func() bool { return awaitRoom(ctx, g, g.creds[0], time.Hour) }, true)
	if time.Now().Before(b.cooldown) {
		t.Errorf("returned %v after the start, before the other key's cooldown ended", time.Since(start))
	}
	b.cooldown = time.Now().Add(time.Hour)
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(20*time.Millisecond, cancel)
	within("the context ends", func() bool { return awaitRoom(cctx, g, g.creds[0], time.Hour) }, false)
	within("one key alone", func() bool { return awaitRoom(ctx, queueGroup(a), g.creds[0], time.Hour) }, true)
	// A deadline before the earliest cooldown: no wait, so that its
	// admission refuses it at once and it falls back to its next target.
	dctx, dcancel := context.WithTimeout(ctx, time.Minute)
	defer dcancel()
	within("a deadline before every cooldown", func() bool { return awaitRoom(dctx, g, g.creds[0], time.Hour) }, true)
}

// Once one key of an endpoint reads others drawing on its budget, a key
// with the same request limit whose reports showed no one else is paced
// at its share too (actors.CredentialState.Suspect), though it is not
// joined until its own reports show it: keys of one organisation see each
// other only while their windows overlap, and a key that saw no one burst
// its whole limit into the other's share (20 late 429s in a sliding-window
// org cell of TestPacingMatrix). A key with another limit is left alone.
func TestJointSuspectsAKeyWithTheSameLimit(t *testing.T) {
	o := nopOwner{}
	report := func(c *actors.CredentialState, limit, remaining int) {
		seq, ok := c.TryGrant(1)
		if !ok {
			t.Fatal("no grant for the first request")
		}
		c.Finish(o, actors.RequestFinished{Seq: seq, Status: 200, RateLimit: llm.RateLimit{HasRequests: true, LimitRequests: limit, RemainingRequests: remaining, ResetRequests: time.Second}})
	}
	a := actors.NewCredentialState("p", 0, actors.Limits{}, 8)
	b := actors.NewCredentialState("p", 1, actors.Limits{}, 8)
	c := actors.NewCredentialState("p", 2, actors.Limits{}, 8)
	for _, k := range []*actors.CredentialState{a, b, c} {
		k.ShareEndpoint(3)
	}
	report(a, 30, 5) // 25 gone after one grant: others draw on it
	report(b, 30, 29)
	report(c, 60, 59)
	j := &joint{keys: []*actors.Ref{{Cred: a}, {Cred: b}, {Cred: c}}, ready: make(chan struct{})}
	if got := b.Outlook().Limit; got != 30 {
		t.Fatalf("b before: outlook limit %d, want 30", got)
	}
	j.check()
	if j.on.Load() {
		t.Fatal("joined on one key's reports")
	}
	if got := b.Outlook().Limit; got != 10 {
		t.Fatalf("b, same limit as a: outlook limit %d, want its share of 30 among 3 keys, 10", got)
	}
	if got := c.Outlook().Limit; got != 60 {
		t.Fatalf("c, a limit of its own: outlook limit %d, want 60", got)
	}
}

type nopOwner struct{}

func (nopOwner) Reply(any, any) {}
func (nopOwner) Wake()          {}
