package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chorusrt/chorus/store"
)

// The lease tests use leases of an hour for those that must stay held
// whatever the machine's speed, and of shortTTL for those meant to expire;
// they wait for the latter by polling Expired (the journal's clock, the
// server's for PostgreSQL), never by sleeping a fixed time.
const (
	longTTL  = time.Hour
	shortTTL = 100 * time.Millisecond
)

// leaser returns j's leases, skipping t when the backend has none.
func leaser(t *testing.T, j store.Journal) store.LeasingJournal {
	t.Helper()
	lj, ok := j.(store.LeasingJournal)
	if !ok {
		t.Skipf("%T does not implement store.Leaser", j)
	}
	return lj
}

func mustAcquire(t *testing.T, j store.Leaser, session, holder string, ttl time.Duration) store.Lease {
	t.Helper()
	l, err := j.Acquire(t.Context(), session, holder, ttl)
	if err != nil {
		t.Fatalf("Acquire(%q, %q): %v", session, holder, err)
	}
	if l.Session != session || l.Holder != holder || l.Epoch < 1 {
		t.Fatalf("Acquire(%q, %q) = %+v", session, holder, l)
	}
	if l.Expires.Location() != time.UTC {
		t.Fatalf("Acquire(%q, %q): Expires %v is not UTC", session, holder, l.Expires)
	}
	return l
}

func mustRelease(t *testing.T, j store.Leaser, l store.Lease) {
	t.Helper()
	if err := j.Release(t.Context(), l); err != nil {
		t.Fatalf("Release(%+v): %v", l, err)
	}
}

// heldBy acquires session as a holder nobody else uses and checks that
// Acquire refuses with a *LeaseHeldError naming holder. It returns the
// error.
func heldBy(t *testing.T, j store.Leaser, session, holder string) *store.LeaseHeldError {
	t.Helper()
	l, err := j.Acquire(t.Context(), session, "prober/"+session, longTTL)
	var held *store.LeaseHeldError
	if !errors.As(err, &held) {
		t.Fatalf("Acquire(%q) by a third holder = %+v, %v; want a *LeaseHeldError (held by %q)", session, l, err, holder)
	}
	if !errors.Is(err, store.ErrLeaseHeld) || errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("LeaseHeldError %v: errors.Is(ErrLeaseHeld) = %v, errors.Is(ErrLeaseLost) = %v", err, errors.Is(err, store.ErrLeaseHeld), errors.Is(err, store.ErrLeaseLost))
	}
	if held.Session != session || held.Holder != holder {
		t.Fatalf("LeaseHeldError = %+v, want session %q held by %q", held, session, holder)
	}
	if held.Expires.Location() != time.UTC {
		t.Fatalf("LeaseHeldError.Expires %v is not UTC", held.Expires)
	}
	return held
}

// waitExpired waits until Expired lists every lease of ls (same holder and
// epoch), that is until they expired by the journal's clock.
func waitExpired(t *testing.T, j store.Leaser, ls ...store.Lease) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		exp, err := j.Expired(t.Context(), 10000)
		if err != nil {
			t.Fatalf("Expired: %v", err)
		}
		if !slices.ContainsFunc(ls, func(l store.Lease) bool {
			return !slices.ContainsFunc(exp, func(e store.Lease) bool {
				return e.Session == l.Session && e.Holder == l.Holder && e.Epoch == l.Epoch
			})
		}) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("leases %+v not listed by Expired 30s after they were granted (listed: %+v)", ls, exp)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkLost fails unless err matches ErrLeaseLost and not ErrConflict.
func checkLost(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("%s = %v, want ErrLeaseLost", what, err)
	}
	if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("%s = %v: ErrLeaseLost also matches ErrConflict or ErrLeaseHeld", what, err)
	}
}

func testLeaseAcquire(t *testing.T, open func(*testing.T) store.Journal) {
	j := leaser(t, open(t))
	ctx := t.Context()
	before := time.Now()
	a := mustAcquire(t, j, "s", "node-a/1", longTTL)
	after := time.Now()
	if a.Epoch != 1 {
		t.Fatalf("first grant has epoch %d, want 1", a.Epoch)
	}
	// Expires is the journal's clock plus ttl: allow for a skewed server.
	if a.Expires.Before(before.Add(longTTL-30*time.Minute)) || a.Expires.After(after.Add(longTTL+30*time.Minute)) {
		t.Fatalf("Expires %v is not about an hour after %v", a.Expires, before)
	}
	again := mustAcquire(t, j, "s", "node-a/1", longTTL)
	if again.Epoch != a.Epoch || again.Expires.Before(a.Expires) {
		t.Fatalf("re-acquire by the holder = %+v, want epoch %d extended from %v", again, a.Epoch, a.Expires)
	}
	held := heldBy(t, j, "s", "node-a/1")
	if !held.Expires.Equal(again.Expires) {
		t.Fatalf("LeaseHeldError.Expires = %v, want the holder's %v", held.Expires, again.Expires)
	}
	if _, err := j.Acquire(ctx, "s", "node-b/1", shortTTL); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("Acquire of a held lease = %v, want ErrLeaseHeld", err)
	}

	// An expired lease goes to whoever asks next, at the next epoch.
	short := mustAcquire(t, j, "t", "node-a/1", shortTTL)
	waitExpired(t, j, short)
	b := mustAcquire(t, j, "t", "node-b/1", longTTL)
	if b.Epoch != short.Epoch+1 {
		t.Fatalf("grant after expiry has epoch %d, want %d", b.Epoch, short.Epoch+1)
	}
	heldBy(t, j, "t", "node-b/1")
	if _, err := j.Acquire(ctx, "t", "node-a/1", longTTL); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("the former holder's Acquire = %v, want ErrLeaseHeld", err)
	}
	// Epochs are per session.
	if u := mustAcquire(t, j, "u", "node-b/1", longTTL); u.Epoch != 1 {
		t.Fatalf("first grant of another session has epoch %d, want 1", u.Epoch)
	}

	for _, tc := range []struct {
		name, session, holder string
		ttl                   time.Duration
		field                 string
	}{
		{"empty session", "", "h", time.Second, "session"},
		{"session with NUL", "a\x00b", "h", time.Second, "session"},
		{"empty holder", "v", "", time.Second, "holder"},
		{"holder not UTF-8", "v", "h\xff", time.Second, "holder"},
		{"holder too long", "v", string(make([]byte, store.MaxIDLen+1)), time.Second, "holder"},
		{"zero ttl", "v", "h", 0, "ttl"},
		{"negative ttl", "v", "h", -time.Second, "ttl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := j.Acquire(ctx, tc.session, tc.holder, tc.ttl)
			checkField(t, err, tc.field)
		})
	}
	if v := mustAcquire(t, j, "v", "h", longTTL); v.Epoch != 1 {
		t.Fatalf("invalid Acquire calls granted session v: next grant has epoch %d", v.Epoch)
	}
}

func testLeaseEpochs(t *testing.T, open func(*testing.T) store.Journal) {
	j := leaser(t, open(t))
	var epochs []int64
	grant := func(holder string) store.Lease {
		t.Helper()
		l := mustAcquire(t, j, "s", holder, longTTL)
		epochs = append(epochs, l.Epoch)
		return l
	}
	a := grant("A")
	if again := grant("A"); again.Epoch != a.Epoch {
		t.Fatalf("re-acquire by the holder moved the epoch %d -> %d", a.Epoch, again.Epoch)
	}
	epochs = epochs[:1]
	mustRelease(t, j, a)
	a2 := grant("A") // the same holder after a release: a new grant
	mustRelease(t, j, a2)
	b := grant("B")
	mustRelease(t, j, b)
	grant("A")
	if want := []int64{1, 2, 3, 4}; !slices.Equal(epochs, want) {
		t.Fatalf("epochs of successive grants = %v, want %v", epochs, want)
	}
	// The same holder after its lease expired: a new grant too.
	e := mustAcquire(t, j, "e", "A", shortTTL)
	waitExpired(t, j, e)
	if e2 := mustAcquire(t, j, "e", "A", longTTL); e2.Epoch != e.Epoch+1 {
		t.Fatalf("re-acquire after expiry has epoch %d, want %d", e2.Epoch, e.Epoch+1)
	}
}

func testLeaseRenew(t *testing.T, open func(*testing.T) store.Journal) {
	j := leaser(t, open(t))
	ctx := t.Context()
	const A, B = "node-a/1", "node-b/1"

	expired := mustAcquire(t, j, "expired", A, shortTTL)
	taken := mustAcquire(t, j, "taken", A, shortTTL)
	waitExpired(t, j, expired, taken)
	mustAcquire(t, j, "taken", B, longTTL)
	released := mustAcquire(t, j, "released", A, longTTL)
	mustRelease(t, j, released)
	epoch := mustAcquire(t, j, "epoch", A, longTTL)
	other := mustAcquire(t, j, "other", B, longTTL)
	kept := mustAcquire(t, j, "kept", A, shortTTL)
	// Granted after kept for as long: once it has expired, so would kept
	// have, had Renew not extended it.
	sentinel := mustAcquire(t, j, "sentinel", A, shortTTL)

	lost, err := j.Renew(ctx, A, longTTL, map[string]int64{
		"kept":     kept.Epoch,
		"expired":  expired.Epoch, // expired, but nobody took it: renewed
		"taken":    taken.Epoch,
		"released": released.Epoch,
		"epoch":    epoch.Epoch + 1,
		"none":     1,
		"other":    other.Epoch,
	})
	if err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if want := []string{"epoch", "none", "other", "released", "taken"}; !slices.Equal(lost, want) {
		t.Fatalf("Renew lost %q, want %q", lost, want)
	}
	waitExpired(t, j, sentinel)
	if exp, err := j.Expired(ctx, 100); err != nil || slices.ContainsFunc(exp, func(l store.Lease) bool { return l.Session == "kept" || l.Session == "expired" }) {
		t.Fatalf("Expired = %+v, %v: lists a renewed lease", exp, err)
	}
	for _, l := range []store.Lease{kept, expired} {
		held := heldBy(t, j, l.Session, A)
		if !held.Expires.After(time.Now().Add(30 * time.Minute)) {
			t.Fatalf("%s: renewed for an hour but expires at %v", l.Session, held.Expires)
		}
		if again := mustAcquire(t, j, l.Session, A, longTTL); again.Epoch != l.Epoch {
			t.Fatalf("%s: Renew moved the epoch %d -> %d", l.Session, l.Epoch, again.Epoch)
		}
	}
	heldBy(t, j, "taken", B)
	if held := heldBy(t, j, "other", B); !held.Expires.Equal(other.Expires) {
		t.Fatalf("a renewal by a non-holder moved the lease's expiry %v -> %v", other.Expires, held.Expires)
	}
	if got := mustAcquire(t, j, "released", B, longTTL); got.Epoch != released.Epoch+1 {
		t.Fatalf("Renew revived a released lease: next grant epoch %d, want %d", got.Epoch, released.Epoch+1)
	}

	if lost, err := j.Renew(ctx, A, longTTL, nil); err != nil || lost != nil {
		t.Fatalf("Renew of nothing = %q, %v", lost, err)
	}
	for _, tc := range []struct {
		name   string
		holder string
		ttl    time.Duration
		held   map[string]int64
		field  string
	}{
		{"empty holder", "", time.Second, map[string]int64{"kept": 1}, "holder"},
		{"zero ttl", A, 0, map[string]int64{"kept": 1}, "ttl"},
		{"empty session", A, time.Second, map[string]int64{"kept": 1, "": 1}, `held[""]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := j.Renew(ctx, tc.holder, tc.ttl, tc.held)
			checkField(t, err, tc.field)
		})
	}
}

func testLeaseRelease(t *testing.T, open func(*testing.T) store.Journal) {
	j := leaser(t, open(t))
	ctx := t.Context()
	a := mustAcquire(t, j, "s", "A", longTTL)
	for _, l := range []store.Lease{
		{Session: "s", Holder: "B", Epoch: a.Epoch},     // not the holder
		{Session: "s", Holder: "A", Epoch: a.Epoch + 1}, // not its epoch
		{Session: "other", Holder: "A", Epoch: a.Epoch}, // not its session
	} {
		if err := j.Release(ctx, l); err != nil {
			t.Fatalf("Release(%+v) of a lease not held = %v, want nil", l, err)
		}
		heldBy(t, j, "s", "A")
	}
	mustRelease(t, j, a)
	if exp, err := j.Expired(ctx, 100); err != nil || len(exp) != 0 {
		t.Fatalf("Expired after a release = %+v, %v; want none (released leases are not listed)", exp, err)
	}
	b := mustAcquire(t, j, "s", "B", longTTL) // at once: a released lease is free
	if b.Epoch != a.Epoch+1 {
		t.Fatalf("grant after release has epoch %d, want %d", b.Epoch, a.Epoch+1)
	}
	mustRelease(t, j, a) // released already, now B's: a no-op
	heldBy(t, j, "s", "B")
	if err := j.Release(ctx, store.Lease{Session: "never", Holder: "A", Epoch: 1}); err != nil {
		t.Fatalf("Release of a session never leased = %v", err)
	}
	checkField(t, j.Release(ctx, store.Lease{Holder: "A", Epoch: 1}), "session")
	checkField(t, j.Release(ctx, store.Lease{Session: "s", Epoch: b.Epoch}), "holder")
	heldBy(t, j, "s", "B")
}

func testLeaseExpired(t *testing.T, open func(*testing.T) store.Journal) {
	j := leaser(t, open(t))
	ctx := t.Context()
	// Granted one after the other, so they expire in this order, which is
	// not the sessions' order.
	var exp []store.Lease
	for _, s := range []string{"z", "m", "a"} {
		exp = append(exp, mustAcquire(t, j, s, "holder-"+s, shortTTL))
	}
	mustAcquire(t, j, "held", "H", longTTL)
	mustRelease(t, j, mustAcquire(t, j, "released", "R", shortTTL))
	waitExpired(t, j, exp...)
	list := func(limit int) []store.Lease {
		t.Helper()
		got, err := j.Expired(ctx, limit)
		if err != nil {
			t.Fatalf("Expired(%d): %v", limit, err)
		}
		for _, l := range got {
			if l.Expires.Location() != time.UTC {
				t.Fatalf("Expired: %+v: Expires is not UTC", l)
			}
		}
		return got
	}
	same := func(a, b store.Lease) bool {
		return a.Session == b.Session && a.Holder == b.Holder && a.Epoch == b.Epoch && a.Expires.Equal(b.Expires)
	}
	for _, tc := range []struct {
		limit int
		want  []store.Lease
	}{
		{10, exp},
		{3, exp},
		{2, exp[:2]},
		{1, exp[:1]},
		{0, nil},
	} {
		if got := list(tc.limit); !slices.EqualFunc(got, tc.want, same) {
			t.Fatalf("Expired(%d) = %+v, want %+v (oldest first)", tc.limit, got, tc.want)
		}
	}
	mustAcquire(t, j, "m", "B", longTTL)
	if _, err := j.Renew(ctx, "holder-z", longTTL, map[string]int64{"z": exp[0].Epoch}); err != nil {
		t.Fatal(err)
	}
	if got := list(10); !slices.EqualFunc(got, exp[2:], same) {
		t.Fatalf("Expired after m was taken and z renewed = %+v, want %+v", got, exp[2:])
	}
	_, err := j.Expired(ctx, -1)
	checkField(t, err, "limit")
}

func testLeaseAppend(t *testing.T, open func(*testing.T) store.Journal) {
	j := leaser(t, open(t))
	ctx := t.Context()
	appendLeased := func(l store.Lease, expected int64, recs ...store.Record) int64 {
		t.Helper()
		n, err := j.AppendLeased(ctx, l, expected, recs...)
		if err != nil {
			t.Fatalf("AppendLeased(%+v, %d): %v", l, expected, err)
		}
		if want := expected + int64(len(recs)); n != want {
			t.Fatalf("AppendLeased(%+v, %d) = %d, want %d", l, expected, n, want)
		}
		return n
	}
	unchanged := func(session string, last int64) {
		t.Helper()
		if n := mustLastSeq(t, j, session); n != last {
			t.Fatalf("LastSeq(%s) = %d, want %d: a refused append wrote", session, n, last)
		}
		for _, r := range mustRead(t, j, session, 0) {
			if string(r.Data) == `"lost"` {
				t.Fatalf("a refused append wrote record %d", r.Seq)
			}
		}
	}
	lost := rec("k", `"lost"`)

	a := mustAcquire(t, j, "s", "A", longTTL)
	appendLeased(a, 0, rec("k", `1`), rec("k", `2`))
	if _, err := j.AppendLeased(ctx, a, 1, lost); !errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("AppendLeased at a stale seq = %v, want ErrConflict", err)
	}
	appendLeased(a, 2)
	if _, err := j.AppendLeased(ctx, a, 1); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("empty AppendLeased at a stale seq = %v, want ErrConflict", err)
	}
	for _, tc := range []struct {
		name string
		l    store.Lease
	}{
		{"other epoch", store.Lease{Session: "s", Holder: "A", Epoch: a.Epoch + 1}},
		{"other holder", store.Lease{Session: "s", Holder: "B", Epoch: a.Epoch}},
	} {
		_, err := j.AppendLeased(ctx, tc.l, 2, lost)
		checkLost(t, "AppendLeased with "+tc.name, err)
		_, err = j.AppendLeased(ctx, tc.l, 2)
		checkLost(t, "empty AppendLeased with "+tc.name, err)
	}
	unchanged("s", 2)
	// No lease at all: nothing written, no session created.
	_, err := j.AppendLeased(ctx, store.Lease{Session: "fresh", Holder: "A", Epoch: 1}, 0, lost)
	checkLost(t, "AppendLeased without a lease", err)
	unchanged("fresh", 0)
	if ids, err := j.Sessions(ctx); err != nil || !slices.Equal(ids, []string{"s"}) {
		t.Fatalf("Sessions = %q, %v; want [s]", ids, err)
	}

	// Expired but not taken: still good.
	e := mustAcquire(t, j, "e", "A", shortTTL)
	waitExpired(t, j, e)
	appendLeased(e, 0, rec("k", `"a1"`))
	// Taken: refused, lease checked before the seq.
	b := mustAcquire(t, j, "e", "B", longTTL)
	for _, expected := range []int64{1, 0} {
		_, err := j.AppendLeased(ctx, e, expected, lost)
		checkLost(t, fmt.Sprintf("AppendLeased at %d under a lease taken over", expected), err)
	}
	_, err = j.AppendLeased(ctx, e, 1)
	checkLost(t, "empty AppendLeased under a lease taken over", err)
	unchanged("e", 1)
	appendLeased(b, 1, rec("k", `"b2"`))
	// Released: refused.
	mustRelease(t, j, b)
	_, err = j.AppendLeased(ctx, b, 2, lost)
	checkLost(t, "AppendLeased under a released lease", err)
	unchanged("e", 2)
	a3 := mustAcquire(t, j, "e", "A", longTTL)
	appendLeased(a3, 2, rec("k", `"a3"`))
	got := mustRead(t, j, "e", 0)
	checkContiguous(t, "e", got, 1)
	if data := []string{string(got[0].Data), string(got[1].Data), string(got[2].Data)}; !slices.Equal(data, []string{`"a1"`, `"b2"`, `"a3"`}) {
		t.Fatalf("records %q", data)
	}

	for _, tc := range []struct {
		name     string
		l        store.Lease
		expected int64
		recs     []store.Record
		field    string
	}{
		{"empty session", store.Lease{Holder: "A", Epoch: 1}, 0, []store.Record{rec("k", `{}`)}, "session"},
		{"empty holder", store.Lease{Session: "s", Epoch: a.Epoch}, 2, []store.Record{rec("k", `{}`)}, "holder"},
		{"negative expectedSeq", a, -1, []store.Record{rec("k", `{}`)}, "expectedSeq"},
		{"empty kind", a, 2, []store.Record{rec("k", `{}`), {}}, "recs[1].Kind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := j.AppendLeased(ctx, tc.l, tc.expected, tc.recs...)
			checkField(t, err, tc.field)
		})
	}
	unchanged("s", 2)
}

// testLeaseRace has holders on two journals over one storage race for a
// lease that is free (never granted, expired, released): exactly one wins
// each round, and the others are told who.
func testLeaseRace(t *testing.T, open func(*testing.T) store.Journal) {
	js := []store.LeasingJournal{leaser(t, open(t)), leaser(t, open(t))}
	const racers = 8
	for _, state := range []string{"fresh", "expired", "released"} {
		for rep := range 3 {
			session := fmt.Sprintf("%s-%d", state, rep)
			var prev int64
			switch state {
			case "expired":
				l := mustAcquire(t, js[0], session, "previous", shortTTL)
				waitExpired(t, js[0], l)
				prev = l.Epoch
			case "released":
				l := mustAcquire(t, js[0], session, "previous", longTTL)
				mustRelease(t, js[1], l)
				prev = l.Epoch
			}
			type result struct {
				holder string
				l      store.Lease
				err    error
			}
			results := make([]result, racers)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for w := range racers {
				wg.Go(func() {
					holder := fmt.Sprintf("racer-%d", w)
					<-start
					l, err := js[w%2].Acquire(t.Context(), session, holder, longTTL)
					results[w] = result{holder, l, err}
				})
			}
			close(start)
			wg.Wait()
			var win *result
			for i := range results {
				if r := &results[i]; r.err == nil {
					if win != nil {
						t.Fatalf("%s: %s and %s both acquired the lease (epochs %d, %d)", session, win.holder, r.holder, win.l.Epoch, r.l.Epoch)
					}
					win = r
				}
			}
			if win == nil {
				t.Fatalf("%s: nobody acquired the lease: %v", session, results[0].err)
			}
			if win.l.Epoch != prev+1 {
				t.Fatalf("%s: winner's epoch %d, want %d", session, win.l.Epoch, prev+1)
			}
			for _, r := range results {
				if r.err == nil {
					continue
				}
				var held *store.LeaseHeldError
				if !errors.As(r.err, &held) || held.Holder != win.holder || !held.Expires.Equal(win.l.Expires) {
					t.Fatalf("%s: loser %s got %v, want a LeaseHeldError naming %s until %v", session, r.holder, r.err, win.holder, win.l.Expires)
				}
				_, err := js[1].AppendLeased(t.Context(), store.Lease{Session: session, Holder: r.holder, Epoch: win.l.Epoch}, 0, rec("k", `"lost"`))
				checkLost(t, "a loser's AppendLeased", err)
			}
			if _, err := js[1].AppendLeased(t.Context(), win.l, 0, rec("k", `"won"`)); err != nil {
				t.Fatalf("%s: the winner's AppendLeased: %v", session, err)
			}
		}
	}
}

// testLeasedAdapters runs two holders' Leased journals, on two journals over
// one storage, as two cluster nodes would: once the second has the lease,
// the first can write nothing.
func testLeasedAdapters(t *testing.T, open func(*testing.T) store.Journal) {
	j1, j2 := leaser(t, open(t)), leaser(t, open(t))
	ctx := t.Context()
	A := store.NewLeased(j1, "node-a/1", shortTTL)
	B := store.NewLeased(j2, "node-b/1", longTTL)
	if A.Holder() != "node-a/1" {
		t.Fatalf("Holder() = %q", A.Holder())
	}
	var _ store.Journal = A

	// Without a lease nothing is written.
	_, err := A.Append(ctx, "s", 0, rec("k", `"lost"`))
	checkLost(t, "Append without a lease", err)
	checkLost(t, "SaveSnapshot without a lease", A.SaveSnapshot(ctx, "s", 0, []byte(`"lost"`)))
	if n := mustLastSeq(t, j1, "s"); n != 0 {
		t.Fatalf("Append without a lease wrote: LastSeq %d", n)
	}
	if _, _, err := j1.LoadSnapshot(ctx, "s"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("SaveSnapshot without a lease wrote: LoadSnapshot = %v", err)
	}
	_, err = A.Append(ctx, "", 0, rec("k", `{}`))
	checkField(t, err, "session")

	la, err := A.Acquire(ctx, "s")
	if err != nil || la.Epoch != 1 || la.Holder != "node-a/1" || !A.Holds("s") {
		t.Fatalf("A.Acquire = %+v, %v (holds %v)", la, err, A.Holds("s"))
	}
	if n, err := A.Append(ctx, "s", 0, rec("k", `"a1"`)); err != nil || n != 1 {
		t.Fatalf("A.Append = %d, %v", n, err)
	}
	if err := A.SaveSnapshot(ctx, "s", 1, []byte(`"snapA"`)); err != nil {
		t.Fatalf("A.SaveSnapshot: %v", err)
	}

	// A stops renewing (a stalled node); B takes the session over.
	waitExpired(t, j1, la)
	lb, err := B.Acquire(ctx, "s")
	if err != nil || lb.Epoch != 2 || !B.Holds("s") {
		t.Fatalf("B.Acquire after A's lease expired = %+v, %v", lb, err)
	}
	if !A.Holds("s") {
		t.Fatal("A forgot its lease before learning it was lost")
	}
	_, err = A.Append(ctx, "s", 1, rec("k", `"lost"`))
	checkLost(t, "A.Append after B acquired", err)
	if A.Holds("s") {
		t.Fatal("A still holds the lease after an Append found it lost")
	}
	checkLost(t, "A.SaveSnapshot after B acquired", A.SaveSnapshot(ctx, "s", 1, []byte(`"lost"`)))
	if n := mustLastSeq(t, j2, "s"); n != 1 {
		t.Fatalf("A wrote after losing the lease: LastSeq %d", n)
	}
	if seq, data, err := B.LoadSnapshot(ctx, "s"); err != nil || seq != 1 || string(data) != `"snapA"` {
		t.Fatalf("LoadSnapshot = %d %q %v, want A's snapshot at 1", seq, data, err)
	}
	last, err := B.LastSeq(ctx, "s")
	if err != nil || last != 1 {
		t.Fatalf("B.LastSeq = %d, %v", last, err)
	}
	if n, err := B.Append(ctx, "s", last, rec("k", `"b2"`)); err != nil || n != 2 {
		t.Fatalf("B.Append = %d, %v", n, err)
	}
	if err := B.SaveSnapshot(ctx, "s", 2, []byte(`"snapB"`)); err != nil {
		t.Fatalf("B.SaveSnapshot: %v", err)
	}
	got, err := A.Read(ctx, "s", 0) // reads pass through
	if err != nil || len(got) != 2 || string(got[0].Data) != `"a1"` || string(got[1].Data) != `"b2"` {
		t.Fatalf("Read = %+v, %v", got, err)
	}
	if seq, data, err := A.LoadSnapshot(ctx, "s"); err != nil || seq != 2 || string(data) != `"snapB"` {
		t.Fatalf("LoadSnapshot = %d %q %v, want B's snapshot at 2", seq, data, err)
	}
	if ids, err := A.Sessions(ctx); err != nil || !slices.Equal(ids, []string{"s"}) {
		t.Fatalf("Sessions = %q, %v", ids, err)
	}

	// Renew finds lost leases and forgets them; expired ones nobody took
	// are renewed.
	if _, err := A.Acquire(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	lu, err := A.Acquire(ctx, "u")
	if err != nil {
		t.Fatal(err)
	}
	waitExpired(t, j1, lu)
	if _, err := B.Acquire(ctx, "u"); err != nil {
		t.Fatal(err)
	}
	lost, err := A.Renew(ctx)
	if err != nil || !slices.Equal(lost, []string{"u"}) {
		t.Fatalf("A.Renew = %q, %v; want [u]", lost, err)
	}
	if A.Holds("u") || !A.Holds("t") {
		t.Fatalf("after Renew A holds u: %v, t: %v; want false, true", A.Holds("u"), A.Holds("t"))
	}
	if lost, err := B.Renew(ctx); err != nil || len(lost) != 0 {
		t.Fatalf("B.Renew = %q, %v; want nothing lost", lost, err)
	}

	// Drop forgets a lease without releasing it: no longer renewed, it
	// expires and goes to the next holder.
	lt, err := A.Acquire(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	A.Drop("t")
	A.Drop("never held")
	if A.Holds("t") {
		t.Fatal("A holds t after Drop")
	}
	_, err = A.Append(ctx, "t", 0, rec("k", `"lost"`))
	checkLost(t, "A.Append after Drop", err)
	if lost, err := A.Renew(ctx); err != nil || len(lost) != 0 {
		t.Fatalf("A.Renew after Drop = %q, %v", lost, err)
	}
	waitExpired(t, j1, lt) // neither released (Expired lists no released lease) nor renewed
	if l, err := B.Acquire(ctx, "t"); err != nil || l.Epoch != lt.Epoch+1 {
		t.Fatalf("B.Acquire of a dropped lease once expired = %+v, %v; want epoch %d", l, err, lt.Epoch+1)
	}

	// Release hands the session over at once.
	if err := B.Release(ctx, "s"); err != nil || B.Holds("s") {
		t.Fatalf("B.Release = %v (holds %v)", err, B.Holds("s"))
	}
	_, err = B.Append(ctx, "s", 2, rec("k", `"lost"`))
	checkLost(t, "B.Append after its Release", err)
	if err := B.Release(ctx, "s"); err != nil {
		t.Fatalf("second B.Release = %v", err)
	}
	if la3, err := A.Acquire(ctx, "s"); err != nil || la3.Epoch != 3 {
		t.Fatalf("A.Acquire after B's release = %+v, %v; want epoch 3", la3, err)
	}
	if n, err := A.Append(ctx, "s", 2, rec("k", `"a3"`)); err != nil || n != 3 {
		t.Fatalf("A.Append after re-acquiring = %d, %v", n, err)
	}

	// Close: ErrClosed from then on; the wrapped journal stays open.
	if err := A.Close(); err != nil {
		t.Fatal(err)
	}
	if err := A.Close(); err != nil {
		t.Fatal(err)
	}
	if A.Holds("s") {
		t.Fatal("A holds a lease after Close")
	}
	closedCalls := map[string]func() error{
		"Append":       func() error { _, err := A.Append(ctx, "s", 3, rec("k", `"lost"`)); return err },
		"Read":         func() error { _, err := A.Read(ctx, "s", 0); return err },
		"LastSeq":      func() error { _, err := A.LastSeq(ctx, "s"); return err },
		"SaveSnapshot": func() error { return A.SaveSnapshot(ctx, "s", 3, nil) },
		"LoadSnapshot": func() error { _, _, err := A.LoadSnapshot(ctx, "s"); return err },
		"Sessions":     func() error { _, err := A.Sessions(ctx); return err },
		"Acquire":      func() error { _, err := A.Acquire(ctx, "s"); return err },
		"Renew":        func() error { _, err := A.Renew(ctx); return err },
		"Release":      func() error { return A.Release(ctx, "s") },
	}
	for name, call := range closedCalls {
		if err := call(); !errors.Is(err, store.ErrClosed) {
			t.Errorf("Leased.%s after Close = %v, want ErrClosed", name, err)
		}
	}
	if n := mustLastSeq(t, j1, "s"); n != 3 {
		t.Fatalf("the wrapped journal after Leased.Close: LastSeq %d, want 3", n)
	}

	// Bad settings surface as ConfigErrors.
	_, err = store.NewLeased(j1, "", time.Second).Acquire(ctx, "x")
	checkField(t, err, "holder")
	_, err = store.NewLeased(j1, "h", 0).Acquire(ctx, "x")
	checkField(t, err, "ttl")
}

// testLeaseContext calls every lease method with a done context: each fails
// with the context's error and changes nothing.
func testLeaseContext(t *testing.T, open func(*testing.T) store.Journal) {
	j := leaser(t, open(t))
	a := mustAcquire(t, j, "s", "A", longTTL)
	if _, err := j.AppendLeased(t.Context(), a, 0, rec("k", `1`)); err != nil {
		t.Fatal(err)
	}
	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	calls := map[string]func() error{
		"Acquire":      func() error { _, err := j.Acquire(canceled, "fresh", "B", longTTL); return err },
		"Acquire held": func() error { _, err := j.Acquire(canceled, "s", "A", longTTL); return err },
		"Renew":        func() error { _, err := j.Renew(canceled, "A", longTTL, map[string]int64{"s": a.Epoch}); return err },
		"Renew none":   func() error { _, err := j.Renew(canceled, "A", longTTL, nil); return err },
		"Release":      func() error { return j.Release(canceled, a) },
		"Expired":      func() error { _, err := j.Expired(canceled, 10); return err },
		"AppendLeased": func() error { _, err := j.AppendLeased(canceled, a, 1, rec("k", `"lost"`)); return err },
		"AppendLeased empty": func() error {
			_, err := j.AppendLeased(canceled, a, 1)
			return err
		},
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context = %v, want context.Canceled", name, err)
		}
	}
	if n := mustLastSeq(t, j, "s"); n != 1 {
		t.Fatalf("a cancelled AppendLeased wrote: LastSeq %d", n)
	}
	if held := heldBy(t, j, "s", "A"); !held.Expires.Equal(a.Expires) {
		t.Fatalf("a cancelled call changed the lease: expires %v, was %v", held.Expires, a.Expires)
	}
	if l := mustAcquire(t, j, "fresh", "B", longTTL); l.Epoch != 1 {
		t.Fatalf("a cancelled Acquire granted the lease: next epoch %d", l.Epoch)
	}
}

// testLeaseReopen checks that leases outlive Close and reopen, and that the
// lease methods return ErrClosed after Close.
func testLeaseReopen(t *testing.T, open func(*testing.T) store.Journal) {
	j := leaser(t, open(t))
	ctx := t.Context()
	a := mustAcquire(t, j, "s", "A", longTTL)
	if _, err := j.AppendLeased(ctx, a, 0, rec("k", `1`)); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	calls := map[string]func() error{
		"Acquire":      func() error { _, err := j.Acquire(ctx, "s", "A", longTTL); return err },
		"Renew":        func() error { _, err := j.Renew(ctx, "A", longTTL, map[string]int64{"s": a.Epoch}); return err },
		"Release":      func() error { return j.Release(ctx, a) },
		"Expired":      func() error { _, err := j.Expired(ctx, 10); return err },
		"AppendLeased": func() error { _, err := j.AppendLeased(ctx, a, 1, rec("k", `"lost"`)); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
	j2 := leaser(t, open(t))
	if held := heldBy(t, j2, "s", "A"); !held.Expires.Equal(a.Expires) {
		t.Fatalf("lease after reopen expires %v, want %v", held.Expires, a.Expires)
	}
	if n, err := j2.AppendLeased(ctx, a, 1, rec("k", `2`)); err != nil || n != 2 {
		t.Fatalf("AppendLeased under the lease after reopen = %d, %v", n, err)
	}
	mustRelease(t, j2, a)
	if b := mustAcquire(t, j2, "s", "B", longTTL); b.Epoch != a.Epoch+1 {
		t.Fatalf("epoch after reopen and release = %d, want %d", b.Epoch, a.Epoch+1)
	}
}
