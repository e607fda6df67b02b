package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chorusrt/chorus/keystore"
	"github.com/chorusrt/chorus/llm"
)

// The fleet: with Options.KeyStore, a key's limits and budget hold for
// every replica on the store, through leases this replica takes from it
// in chunks, ahead of need (so that a request pays no store round trip in
// the common case), and a spend ledger it settles in batches.
//
// Per key and replica:
//   - requests and tokens: a lease of the current minute window (Unix
//     minutes, the same on every replica), taken in chunks of a
//     twentieth of the limit; a window's leases never sum past the limit.
//   - concurrency: slots, taken one at a time when the calls in flight
//     need one more, given back after a second of not needing them.
//   - budget: a reservation; each call reserves its most possible cost
//     (estimate) out of it before it runs, and settles its cost from the
//     provider's usage when it ends. The reservation is topped up a
//     hundredth of the budget at a time, ahead of need, and what is
//     beyond two hundredths spare is given back.
//
// Timing knobs; tests set them through a helper.
var (
	fleetTick      = 250 * time.Millisecond // poll of key changes, settlement
	fleetHeartbeat = time.Second
	fleetTTL       = 10 * time.Second // a replica silent this long is reconciled as dead
	fleetReconcile = 5 * time.Second
	fleetIdle      = time.Second // spare slots and reservations kept this long
)

// defaultReserveTokens is the output a call that names no max_tokens is
// reserved for.
const defaultReserveTokens = 4096

// fleetKey is one key's leases on this replica (guarded by its
// keyCounters' mu).
type fleetKey struct {
	f  *fleet
	id string

	// fetch serialises this key's store calls on the request path.
	fetch sync.Mutex

	win                 int64            // the window the leases are of
	reqLease, tokLease  int64            // requests and tokens left to use
	reqLeft, tokLeft    int64            // what the store said was left of the window
	fallReqs, fallToks  int64            // taken on this replica's own while the store was down
	slots               int64            // concurrency slots held
	busyAt              time.Time        // the last time every slot held was in use
	period              string           // the budget's period of the reservation
	held, open, unflush keystore.NanoUSD // reserved in the store; reserved by calls; spent, not settled
	calls               int64            // settled calls not yet written
	epoch               uint64
	lastUse             time.Time
	kicked              bool
	// old is the previous budget period's reservation while its calls
	// end and it is settled (a budget of a day or month that just rolled).
	old *budgetLease
	// storeDown: the last store call for this key failed.
	storeDown atomic.Bool
}

// budgetLease is a reservation of one budget period.
type budgetLease struct {
	period              string
	held, open, unflush keystore.NanoUSD
	calls               int64
}

// fleet is a Handler's link to its key store: the agent that follows key
// changes, settles, heartbeats and reconciles.
type fleet struct {
	h       *Handler
	st      *keystore.Store
	replica string
	rev     int64

	replicas atomic.Int64 // live replicas, at the last heartbeat
	kick     chan *keyState
	stop     context.CancelFunc
	done     chan struct{}

	mu   sync.Mutex
	byID map[string]*keyCounters
	// lost counts the times this replica was reconciled as dead.
	lost atomic.Int64
	// downUntil (Unix ns, wall clock): a store call on the request path
	// failed; until then requests do not wait on the store again, they
	// take the replica's share at once (or, for budget, a 503).
	downUntil atomic.Int64
}

// storeFailed notes a failed store call on the request path.
func (f *fleet) storeFailed() { f.downUntil.Store(time.Now().Add(time.Second).UnixNano()) }

// storeResting reports whether a store call failed within the last second.
func (f *fleet) storeResting() bool { return time.Now().UnixNano() < f.downUntil.Load() }

// errResting is the error of a store call not made: the store failed a
// moment ago.
var errResting = errors.New("gateway: the key store failed a moment ago")

// replicaID names this process in the store: host, pid and a random
// suffix (a restarted process is a new replica; its predecessor's leases
// are reconciled).
func replicaID() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// openFleet seeds the store with opts.Keys, loads every key and starts the
// agent.
func (h *Handler) openFleet(st *keystore.Store) error {
	now := h.opts.Now()
	seed := make([]keystore.Key, len(h.opts.Keys))
	for i, k := range h.opts.Keys {
		seed[i] = storeKey(k)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := st.Seed(ctx, seed, now); err != nil {
		return fmt.Errorf("gateway: seed the key store: %w", err)
	}
	f := &fleet{h: h, st: st, replica: h.opts.Replica, kick: make(chan *keyState, 256), done: make(chan struct{}), byID: map[string]*keyCounters{}}
	if f.replica == "" {
		f.replica = replicaID()
	}
	f.replicas.Store(1)
	if err := st.Register(ctx, f.replica, now); err != nil {
		return fmt.Errorf("gateway: key store: %w", err)
	}
	if err := f.poll(ctx); err != nil {
		return fmt.Errorf("gateway: load keys: %w", err)
	}
	h.fleet = f
	var bg context.Context
	bg, f.stop = context.WithCancel(context.Background())
	go f.run(bg)
	return nil
}

// storeKey is a configured key as the store keeps it.
func storeKey(k Key) keystore.Key {
	return keystore.Key{Name: k.Name, Hash: k.SHA256, Models: k.Models, RPM: k.RPM, TPM: k.TPM, Concurrency: k.Concurrency,
		BudgetUSD: k.BudgetUSD, BudgetPeriod: k.BudgetPeriod, DropUnsupported: k.DropUnsupported}
}

// keyEntry is what a presented key's hash finds: the key, and until when
// the hash works (a rotated-out hash; zero: no end).
type keyEntry struct {
	ks    *keyState
	until time.Time
}

// poll applies the keys changed since the last poll.
func (f *fleet) poll(ctx context.Context) error {
	changed, rev, err := f.st.Changes(ctx, f.rev)
	if err != nil || len(changed) == 0 {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	old := f.h.keyMap()
	next := make(map[[32]byte]keyEntry, len(old)+len(changed))
	ids := map[string]bool{}
	for _, k := range changed {
		ids[k.ID] = true
	}
	for h, e := range old {
		if !ids[e.ks.id] {
			next[h] = e
		}
	}
	for _, k := range changed {
		c := f.byID[k.ID]
		if c == nil {
			c = &keyCounters{}
			c.fl = &fleetKey{f: f, id: k.ID}
			f.byID[k.ID] = c
		}
		ks := &keyState{id: k.ID, revoked: !k.Live(), keyCounters: c, key: Key{
			Name: k.Name, SHA256: k.Hash, Models: k.Models, RPM: k.RPM, TPM: k.TPM, Concurrency: k.Concurrency,
			BudgetUSD: k.BudgetUSD, BudgetPeriod: k.BudgetPeriod, DropUnsupported: k.DropUnsupported,
		}}
		c.cur.Store(ks)
		next[k.Hash] = keyEntry{ks: ks}
		if k.PrevHash != ([32]byte{}) && k.Live() {
			next[k.PrevHash] = keyEntry{ks: ks, until: k.PrevUntil}
		}
	}
	f.h.keys.Store(&next)
	f.rev = rev
	return nil
}

func (f *fleet) run(ctx context.Context) {
	defer close(f.done)
	tick := time.NewTicker(fleetTick)
	defer tick.Stop()
	var beat, rec, scan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case ks := <-f.kick:
			f.prefetch(ctx, ks)
		case <-tick.C:
			now := f.h.opts.Now()
			if err := f.poll(ctx); err != nil && ctx.Err() == nil {
				f.h.log.Warn("gateway: key store: polling key changes failed", "err", err)
			}
			settled := f.settle(ctx, now, false)
			f.releaseSlots(ctx, now)
			if !settled && now.Sub(beat) >= fleetHeartbeat {
				f.heartbeat(ctx, now)
				beat = now
			}
			if now.Sub(scan) >= fleetBatchScan {
				scan = now
				f.h.takeBatches(ctx, now) // fleetfiles.go
			}
			if now.Sub(rec) >= fleetReconcile {
				rec = now
				if n, err := f.st.Replicas(ctx, now, fleetTTL); err == nil {
					f.replicas.Store(int64(max(n, 1)))
				}
				if dead, err := f.st.Reconcile(ctx, now, fleetTTL); err == nil && len(dead) > 0 {
					f.h.log.Info("gateway: reconciled dead replicas: their reservations count as spent", "replicas", dead)
				}
			}
		}
	}
}

func (f *fleet) heartbeat(ctx context.Context, now time.Time) {
	err := f.st.Heartbeat(ctx, f.replica, now)
	if errors.Is(err, keystore.ErrLost) {
		f.lostAll(ctx, now)
	}
}

// lostAll forgets every lease after the store reconciled this replica
// (what they held counts as spent already), and registers again.
func (f *fleet) lostAll(ctx context.Context, now time.Time) {
	f.lost.Add(1)
	f.h.log.Warn("gateway: this replica was reconciled as dead (its heartbeat was late): its leases count as spent; starting afresh")
	for _, c := range f.counters() {
		c.mu.Lock()
		fk := c.fl
		fk.epoch++
		fk.held, fk.open, fk.unflush, fk.calls, fk.slots, fk.old = 0, 0, 0, 0, 0, nil
		fk.reqLease, fk.tokLease = 0, 0
		c.mu.Unlock()
	}
	_ = f.st.Register(ctx, f.replica, now)
}

func (f *fleet) counters() []*keyCounters {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*keyCounters, 0, len(f.byID))
	for _, c := range f.byID {
		out = append(out, c)
	}
	return out
}

// settle writes what the calls spent since the last settlement, and gives
// back what is reserved beyond need (everything, when final), in one
// transaction. It reports whether it wrote (a heartbeat too).
func (f *fleet) settle(ctx context.Context, now time.Time, final bool) bool {
	type snap struct {
		c              *keyCounters
		spent, release keystore.NanoUSD
		calls          int64
		epoch          uint64
		old            *budgetLease // the settlement is of the previous period's
	}
	var snaps []snap
	var sets []keystore.Settlement
	for _, c := range f.counters() {
		c.mu.Lock()
		fk := c.fl
		spare := fk.held - fk.open - fk.unflush
		keep := keystore.NanoUSD(0)
		if !final && now.Sub(fk.lastUse) < fleetIdle {
			keep = 2 * budgetChunk(c.cur.Load())
		}
		release := max(spare-keep, 0)
		if fk.unflush > 0 || fk.calls > 0 || release > 0 {
			s := snap{c: c, spent: fk.unflush, calls: fk.calls, release: release, epoch: fk.epoch}
			fk.held -= release // no longer ours to use, until the store says otherwise
			snaps = append(snaps, s)
			sets = append(sets, keystore.Settlement{KeyID: fk.id, Period: fk.period, Spent: s.spent, Calls: s.calls, Release: s.release})
		}
		if o := fk.old; o != nil { // a period that ended takes no call: all its spare goes back
			release := max(o.held-o.open-o.unflush, 0)
			if o.unflush > 0 || o.calls > 0 || release > 0 {
				s := snap{c: c, spent: o.unflush, calls: o.calls, release: release, epoch: fk.epoch, old: o}
				o.held -= release
				snaps = append(snaps, s)
				sets = append(sets, keystore.Settlement{KeyID: fk.id, Period: o.period, Spent: s.spent, Calls: s.calls, Release: s.release})
			}
		}
		c.mu.Unlock()
	}
	if len(sets) == 0 {
		return false
	}
	err := f.st.Settle(ctx, f.replica, sets, now)
	if errors.Is(err, keystore.ErrLost) {
		f.lostAll(ctx, now)
		return true
	}
	for _, s := range snaps {
		s.c.mu.Lock()
		fk := s.c.fl
		switch {
		case fk.epoch != s.epoch:
		case s.old != nil:
			o := s.old
			if err != nil {
				o.held += s.release
			} else {
				o.unflush -= s.spent
				o.calls -= s.calls
				o.held -= s.spent
			}
			if fk.old == o && o.open == 0 && o.unflush == 0 && o.calls == 0 && o.held <= 0 {
				fk.old = nil // settled and given back
			}
		case err != nil:
			fk.held += s.release // still ours: try again next tick
		default:
			fk.unflush -= s.spent
			fk.calls -= s.calls
			fk.held -= s.spent
		}
		s.c.mu.Unlock()
	}
	if err != nil && ctx.Err() == nil {
		f.h.log.Warn("gateway: key store: settling spend failed; it stays reserved and is retried", "err", err)
		return false
	}
	return true
}

// releaseSlots gives back the slots of keys that have not needed them for
// fleetIdle.
func (f *fleet) releaseSlots(ctx context.Context, now time.Time) {
	for _, c := range f.counters() {
		c.mu.Lock()
		fk := c.fl
		n := fk.slots - int64(c.inFlight)
		if n <= 0 || now.Sub(fk.busyAt) < fleetIdle {
			c.mu.Unlock()
			continue
		}
		fk.slots -= n
		epoch := fk.epoch
		c.mu.Unlock()
		if err := f.st.ReleaseSlots(ctx, f.replica, fk.id, n); err != nil {
			c.mu.Lock()
			if fk.epoch == epoch {
				fk.slots += n
			}
			c.mu.Unlock()
		}
	}
}

// budgetChunk is how much reservation a key's replica takes at a time: a
// hundredth of the budget.
func budgetChunk(ks *keyState) keystore.NanoUSD {
	if ks == nil {
		return 0
	}
	return max(keystore.ToNano(ks.key.BudgetUSD)/100, 1)
}

func limitChunk(limit int) int64 { return max(int64(limit)/20, 1) }

// needs reports what the call lacks of this replica's leases (with mu).
func (fk *fleetKey) needs(ks *keyState, est keystore.NanoUSD, conc bool) (req, tok, slot, money bool) {
	req = ks.key.RPM > 0 && fk.reqLease <= 0
	tok = ks.key.TPM > 0 && fk.tokLease <= 0
	slot = conc && ks.key.Concurrency > 0 && int64(ks.inFlight) >= fk.slots
	money = ks.key.BudgetUSD > 0 && fk.open+fk.unflush+est > fk.held
	return
}

// roll starts the leases of a new window or budget period (with mu).
func (fk *fleetKey) roll(ks *keyState, now time.Time) {
	if w := now.Unix() / 60; w != fk.win {
		fk.win, fk.reqLease, fk.tokLease, fk.fallReqs, fk.fallToks = w, 0, 0, 0, 0
		fk.reqLeft, fk.tokLeft = int64(ks.key.RPM), int64(ks.key.TPM)
	}
	if p := ks.key.BudgetPeriod.ID(now); p != fk.period && p > fk.period {
		switch {
		case fk.open == 0 && fk.unflush == 0 && fk.held == 0 && fk.calls == 0:
			fk.period = p
		case fk.old == nil: // the last period's reservation is settled apart
			fk.old = &budgetLease{period: fk.period, held: fk.held, open: fk.open, unflush: fk.unflush, calls: fk.calls}
			fk.period, fk.held, fk.open, fk.unflush, fk.calls = p, 0, 0, 0, 0
		}
		// else the period before the last is still settling: calls stay in
		// the last one until it is (a tick or two).
	}
}

func (fk *fleetKey) view(ks *keyState, now time.Time) limitsView {
	reset := time.Unix((fk.win+1)*60, 0).Sub(now)
	return limitsView{rpm: ks.key.RPM, tpm: ks.key.TPM, remReq: int(max(fk.reqLease, 0) + fk.reqLeft), remTok: int(max(fk.tokLease, 0) + fk.tokLeft), reset: max(reset, 0)}
}

// admit is keyState.admit on the fleet's budgets.
func (fk *fleetKey) admit(ks *keyState, now time.Time, est keystore.NanoUSD) (admission, limitsView, *Error) {
	if ks.revoked {
		return admission{}, limitsView{}, errRevoked(ks)
	}
	got := true
	for try := 0; ; try++ {
		ks.mu.Lock()
		fk.roll(ks, now)
		req, tok, slot, money := fk.needs(ks, est, true)
		if !req && !tok && !slot && !money {
			fk.reqLease--
			ks.inFlight++
			fk.open += est
			fk.lastUse = now
			if int64(ks.inFlight) >= fk.slots {
				fk.busyAt = now
			}
			a := admission{k: ks, est: est, epoch: fk.epoch, win: fk.win, period: fk.period}
			low := (ks.key.RPM > 0 && fk.reqLease < limitChunk(ks.key.RPM)/2) || (ks.key.BudgetUSD > 0 && fk.held-fk.open-fk.unflush < budgetChunk(ks))
			v := fk.view(ks, now)
			ks.mu.Unlock()
			if low {
				fk.kickPrefetch(ks)
			}
			return a, v, nil
		}
		if !got || try == 8 { // the store had nothing more for it
			v := fk.view(ks, now)
			ks.mu.Unlock()
			return admission{}, v, fk.refusal(ks, v, req, tok, slot, money)
		}
		ks.mu.Unlock()
		got = fk.top(ks, now, est, true)
	}
}

// hold is keyState.hold on the fleet's budget.
func (fk *fleetKey) hold(ks *keyState, now time.Time, est keystore.NanoUSD) (admission, *Error) {
	if ks.revoked {
		return admission{}, errRevoked(ks)
	}
	got := true
	for try := 0; ; try++ {
		ks.mu.Lock()
		fk.roll(ks, now)
		if _, _, _, money := fk.needs(ks, est, false); !money {
			fk.open += est
			fk.lastUse = now
			a := admission{k: ks, est: est, epoch: fk.epoch, period: fk.period, win: -1}
			ks.mu.Unlock()
			return a, nil
		}
		ks.mu.Unlock()
		if !got || try == 8 {
			return admission{}, fk.refusal(ks, limitsView{}, false, false, false, true)
		}
		got = fk.top(ks, now, est, false)
	}
}

func errRevoked(ks *keyState) *Error {
	return &Error{Status: http.StatusUnauthorized, Message: fmt.Sprintf("gateway key %q is revoked", ks.key.Name)}
}

// errLedgerDown refuses a call that needs more of its budget's
// reservation while the key store cannot be reached: spending it would
// risk overrunning the budget.
var errLedgerDown = &Error{Status: http.StatusServiceUnavailable, Message: "gateway: the spend ledger cannot be reached to reserve this call's cost; retry shortly", RetryAfter: time.Second}

func (fk *fleetKey) refusal(ks *keyState, v limitsView, req, tok, slot, money bool) *Error {
	switch {
	case req:
		return errRPM(ks, v.reset)
	case tok:
		return errTPM(ks, v.reset)
	case money:
		if fk.storeDown.Load() {
			return errLedgerDown
		}
		return errBudgetSpent(ks)
	default:
		return errConcurrency(ks)
	}
}

// top takes from the store what the call lacks, under the key's fetch
// lock (one store call per key at a time; a request that waited finds
// what the one before it took). A store that cannot be reached gives the
// requests and tokens this replica's share of the limit (the limit over
// the live replicas) for the window, on its own, and the concurrency its
// share; the budget waits for the store.
func (fk *fleetKey) top(ks *keyState, now time.Time, est keystore.NanoUSD, conc bool) (got bool) {
	fk.fetch.Lock()
	defer fk.fetch.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ks.mu.Lock()
	fk.roll(ks, now)
	req, tok, slot, money := fk.needs(ks, est, conc)
	win, epoch, period := fk.win, fk.epoch, fk.period
	want := fk.held - fk.open - fk.unflush
	ks.mu.Unlock()
	if !req && !tok && !slot && !money {
		return true // another request took what this one lacked
	}
	st, replica := fk.f.st, fk.f.replica
	resting := fk.f.storeResting()
	share := func(limit int) int64 { return max(int64(limit)/fk.f.replicas.Load(), 1) }
	if req {
		g, left, err := int64(0), int64(0), errResting
		if !resting {
			if g, left, err = st.Take(ctx, fk.id, "req", win, int64(ks.key.RPM), limitChunk(ks.key.RPM)); err != nil {
				fk.f.storeFailed()
			}
		}
		ks.mu.Lock()
		if fk.win == win {
			if err != nil {
				fk.storeDown.Store(true)
				g, fk.fallReqs = max(share(ks.key.RPM)-fk.fallReqs, 0), share(ks.key.RPM)
			} else {
				fk.storeDown.Store(false)
				fk.reqLeft = left
			}
			fk.reqLease += g
		}
		ks.mu.Unlock()
		got = got || g > 0
	}
	if tok {
		g, left, err := int64(0), int64(0), errResting
		if !resting {
			if g, left, err = st.Take(ctx, fk.id, "tok", win, int64(ks.key.TPM), limitChunk(ks.key.TPM)); err != nil {
				fk.f.storeFailed()
			}
		}
		ks.mu.Lock()
		if fk.win == win {
			if err != nil {
				g, fk.fallToks = max(share(ks.key.TPM)-fk.fallToks, 0), share(ks.key.TPM)
			} else {
				fk.tokLeft = left
			}
			fk.tokLease += g
		}
		ks.mu.Unlock()
		got = got || g > 0
	}
	if slot {
		g, err := int64(0), error(errResting)
		if !resting {
			if g, err = st.TakeSlots(ctx, replica, fk.id, int64(ks.key.Concurrency), 1, now); err != nil && !errors.Is(err, keystore.ErrLost) {
				fk.f.storeFailed()
			}
		}
		if errors.Is(err, keystore.ErrLost) {
			fk.f.lostAll(ctx, now)
			return true
		}
		ks.mu.Lock()
		if g > 0 {
			fk.busyAt = now
		}
		if fk.epoch == epoch {
			if err != nil {
				if int64(ks.inFlight) < share(ks.key.Concurrency) {
					g = 1 // on our own, within our share; not in the store
				}
			}
			fk.slots += g
		}
		ks.mu.Unlock()
		got = got || g > 0
	}
	if money {
		need := max(est-want, 0)
		g, err := keystore.NanoUSD(0), error(errResting)
		if !resting {
			if g, err = st.Reserve(ctx, replica, fk.id, period, need, need+budgetChunk(ks), now); err != nil && !errors.Is(err, keystore.ErrLost) {
				fk.f.storeFailed()
			}
		}
		if errors.Is(err, keystore.ErrLost) {
			fk.f.lostAll(ctx, now)
			return true
		}
		fk.storeDown.Store(err != nil)
		ks.mu.Lock()
		if err == nil && fk.epoch == epoch && fk.period == period {
			fk.held += g
		}
		ks.mu.Unlock()
		got = got || g > 0
	}
	return got
}

// kickPrefetch asks the agent to top the key's leases up, without
// waiting.
func (fk *fleetKey) kickPrefetch(ks *keyState) {
	ks.mu.Lock()
	if fk.kicked {
		ks.mu.Unlock()
		return
	}
	fk.kicked = true
	ks.mu.Unlock()
	select {
	case fk.f.kick <- ks:
	default:
		ks.mu.Lock()
		fk.kicked = false
		ks.mu.Unlock()
	}
}

// prefetch tops a key's request lease and reservation up ahead of need.
func (f *fleet) prefetch(_ context.Context, ks *keyState) {
	ks = ks.latest()
	fk := ks.fl
	now := f.h.opts.Now()
	ks.mu.Lock()
	fk.kicked = false
	lowReq := ks.key.RPM > 0 && fk.reqLease < limitChunk(ks.key.RPM)/2+1
	lowMoney := ks.key.BudgetUSD > 0 && fk.held-fk.open-fk.unflush < budgetChunk(ks)
	ks.mu.Unlock()
	if !lowReq && !lowMoney {
		return
	}
	// top asks for one more chunk of whatever is low.
	fk.fetch.Lock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ks.mu.Lock()
	win, epoch, period := fk.win, fk.epoch, fk.period
	ks.mu.Unlock()
	if lowReq {
		if g, left, err := f.st.Take(ctx, fk.id, "req", win, int64(ks.key.RPM), limitChunk(ks.key.RPM)); err == nil {
			ks.mu.Lock()
			if fk.win == win {
				fk.reqLease += g
				fk.reqLeft = left
			}
			ks.mu.Unlock()
		}
	}
	if lowMoney {
		if g, err := f.st.Reserve(ctx, f.replica, fk.id, period, 0, budgetChunk(ks), now); err == nil {
			ks.mu.Lock()
			if fk.epoch == epoch && fk.period == period {
				fk.held += g
			}
			ks.mu.Unlock()
		}
	}
	fk.fetch.Unlock()
}

// done is admission.done on the fleet's budgets.
func (fk *fleetKey) done(ks *keyState, a *admission, u llm.Usage, cost keystore.NanoUSD) {
	ks.mu.Lock()
	ks.inFlight--
	if a.win == fk.win {
		fk.tokLease -= int64(u.TotalTokens())
	}
	over := fk.charge(a, cost)
	ks.mu.Unlock()
	if over > 0 {
		fk.cover(ks, a, over)
	}
}

// settleHold is budgetHold.settle on the fleet's budget.
func (fk *fleetKey) settleHold(ks *keyState, a *admission, cost keystore.NanoUSD) {
	ks.mu.Lock()
	over := fk.charge(a, cost)
	ks.mu.Unlock()
	if over > 0 {
		fk.cover(ks, a, over)
	}
}

// charge moves a call from reserved to spent (with mu), returning by how
// much what is spent and reserved now passes the reservation held in the
// store (a call that cost more than its estimate).
func (fk *fleetKey) charge(a *admission, cost keystore.NanoUSD) keystore.NanoUSD {
	if a.epoch != fk.epoch { // reconciled meanwhile: its reservation was counted
		return 0
	}
	if o := fk.old; o != nil && a.period == o.period {
		o.open -= a.est
		if cost > 0 || a.est > 0 {
			o.unflush += cost
			o.calls++
		}
		return max(o.open+o.unflush-o.held, 0)
	}
	fk.open -= a.est
	if cost > 0 || a.est > 0 {
		fk.unflush += cost
		fk.calls++
	}
	return max(fk.open+fk.unflush-fk.held, 0)
}

// cover reserves what a call spent beyond its estimate before its answer
// is sent, so that a SIGKILL after it cannot leave it uncounted.
func (fk *fleetKey) cover(ks *keyState, a *admission, over keystore.NanoUSD) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// need 0: take what is left, even less than over (the budget is
	// then overrun by the rest, which the ledger still counts when
	// settled).
	g, err := fk.f.st.Reserve(ctx, fk.f.replica, fk.id, a.period, 0, over, fk.f.h.opts.Now())
	if err != nil {
		return
	}
	ks.mu.Lock()
	switch {
	case fk.epoch != a.epoch:
	case fk.old != nil && a.period == fk.old.period:
		fk.old.held += g
	case a.period == fk.period:
		fk.held += g
	}
	ks.mu.Unlock()
}

// close settles and gives back everything, then retires the replica.
func (f *fleet) close(ctx context.Context) {
	f.stop()
	<-f.done
	now := f.h.opts.Now()
	f.settle(ctx, now, true)
	for _, c := range f.counters() {
		c.mu.Lock()
		n := c.fl.slots
		c.fl.slots = 0
		c.mu.Unlock()
		_ = f.st.ReleaseSlots(ctx, f.replica, c.fl.id, n)
	}
	if err := f.st.Retire(ctx, f.replica); err != nil {
		f.h.log.Warn("gateway: key store: retiring this replica failed; its leases are reconciled once its heartbeat is old", "err", err)
	}
}
