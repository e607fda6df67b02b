package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chorusrt/chorus/llm"
)

// Lease is a session's activation lease: while a holder holds it, writes
// made through AppendLeased by any other holder, or under an older epoch,
// write nothing.
type Lease struct {
	Session string
	Holder  string    // who holds it (the cluster code uses "<node address>/<random activation id>")
	Epoch   int64     // increases by one every time Acquire grants the lease (also on re-acquire by the same holder after a release/expiry); first grant is 1
	Expires time.Time // UTC, per the database clock for PostgreSQL
}

// ErrLeaseHeld is matched (errors.Is) by the *LeaseHeldError Acquire returns
// when it finds the lease held, unexpired, by another holder.
var ErrLeaseHeld = errors.New("store: lease held by another holder")

// ErrLeaseLost is returned (wrapped; match it with errors.Is) by a write or
// renewal under a lease that is no longer current: another holder acquired
// it, or it was released. Nothing was written.
var ErrLeaseLost = errors.New("store: lease lost")

// LeaseHeldError is the error Acquire returns when another holder holds the
// session's lease and it has not expired. It matches ErrLeaseHeld.
type LeaseHeldError struct {
	Session string
	Holder  string    // the current holder
	Expires time.Time // when its lease expires unless renewed (UTC)
}

// Error implements error.
func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("%v: session %q is leased to %q until %s", ErrLeaseHeld, e.Session, e.Holder, e.Expires.Format(time.RFC3339Nano))
}

// Unwrap returns ErrLeaseHeld, so that errors.Is(err, ErrLeaseHeld) holds.
func (e *LeaseHeldError) Unwrap() error { return ErrLeaseHeld }

// Leaser grants per-session leases that fence writes: an activation of a
// session acquires the session's lease before it recovers and writes,
// renews it while it runs, writes through AppendLeased, and releases it when
// it passivates. *Postgres and *SQLite implement it.
type Leaser interface {
	// Acquire grants session's lease to holder for ttl when no lease exists, the existing one has
	// expired or was released, or holder already holds it unexpired (then it is extended, same
	// epoch). Every other grant increases the epoch by one. When another holder holds it unexpired,
	// Acquire returns a *LeaseHeldError (matching ErrLeaseHeld).
	Acquire(ctx context.Context, session, holder string, ttl time.Duration) (Lease, error)
	// Renew extends, for ttl, every listed session's lease that holder still holds at the epoch
	// given in held, in one statement/transaction. Expired leases nobody else took are renewed
	// too. It returns, sorted, the sessions whose lease holder no longer holds (taken by another,
	// released, or at another epoch).
	Renew(ctx context.Context, holder string, ttl time.Duration, held map[string]int64) (lost []string, err error)
	// Release gives up the lease if l.Holder holds it at l.Epoch; it is a no-op (no error) when
	// it does not. The next Acquire of the session grants epoch l.Epoch+1.
	Release(ctx context.Context, l Lease) error
	// Expired lists up to limit leases whose Expires is in the past (holders that stopped
	// renewing: a crashed node), oldest first. Released leases are not listed.
	Expired(ctx context.Context, limit int) ([]Lease, error)
	// AppendLeased is Append that additionally requires l (session, holder, epoch) to be the
	// session's current lease, checked in the same transaction as the seq compare-and-swap.
	// Expiry alone does not fail it (nobody else took the lease yet); a different holder or
	// epoch, or no lease at all, fails it with an error matching ErrLeaseLost, writing nothing.
	// The lease is checked first; otherwise it fails as Append does (ErrConflict...).
	AppendLeased(ctx context.Context, l Lease, expectedSeq int64, recs ...Record) (int64, error)
}

// LeasingJournal is a Journal with leases: what Leased wraps.
type LeasingJournal interface {
	Journal
	Leaser
}

var (
	_ LeasingJournal = (*Postgres)(nil)
	_ LeasingJournal = (*SQLite)(nil)
	_ Journal        = (*Leased)(nil)
)

// tableLeases holds one row per session ever leased: a released lease keeps
// its row (holder empty) so that epochs keep increasing.
const tableLeases = "chorus_journal_leases"

// checkTTL validates a lease duration.
func checkTTL(ttl time.Duration) error {
	if ttl <= 0 {
		return &llm.ConfigError{Field: "ttl", Msg: "must be positive"}
	}
	return nil
}

// validateAcquire checks Acquire's arguments.
func validateAcquire(session, holder string, ttl time.Duration) error {
	if err := checkID("session", session); err != nil {
		return err
	}
	if err := checkID("holder", holder); err != nil {
		return err
	}
	return checkTTL(ttl)
}

// validateRenew checks Renew's arguments and returns the sessions of held,
// sorted bytewise (the order leases are locked in).
func validateRenew(holder string, ttl time.Duration, held map[string]int64) ([]string, error) {
	if err := checkID("holder", holder); err != nil {
		return nil, err
	}
	if err := checkTTL(ttl); err != nil {
		return nil, err
	}
	sessions := make([]string, 0, len(held))
	for s := range held {
		sessions = append(sessions, s)
	}
	slices.Sort(sessions)
	for _, s := range sessions {
		if err := checkID(fmt.Sprintf("held[%q]", s), s); err != nil {
			return nil, err
		}
	}
	return sessions, nil
}

// validateLease checks the session and holder of a lease handed to Release
// or AppendLeased.
func validateLease(l Lease) error {
	if err := checkID("session", l.Session); err != nil {
		return err
	}
	return checkID("holder", l.Holder)
}

// validateLimit checks Expired's limit.
func validateLimit(limit int) error {
	if limit < 0 {
		return &llm.ConfigError{Field: "limit", Msg: "must not be negative"}
	}
	return nil
}

// ttlMicros is ttl in whole microseconds, rounded up so that a positive ttl
// never becomes an already expired lease.
func ttlMicros(ttl time.Duration) int64 {
	return int64((ttl + time.Microsecond - 1) / time.Microsecond)
}

// leaseLost builds the wrapped ErrLeaseLost AppendLeased returns.
func leaseLost(l Lease) error {
	return fmt.Errorf("%w: session %q is no longer leased to %q at epoch %d", ErrLeaseLost, l.Session, l.Holder, l.Epoch)
}

// lostSessions returns, sorted, the sessions of all that are not in kept.
func lostSessions(all []string, kept map[string]bool) []string {
	var lost []string
	for _, s := range all {
		if !kept[s] {
			lost = append(lost, s)
		}
	}
	return lost
}

// Leased is the Journal of one lease holder (a cluster node's activations):
// Append for a session writes through AppendLeased with the lease this
// Leased holds for it, and fails with an error matching ErrLeaseLost,
// writing nothing, when it holds none. SaveSnapshot likewise requires the
// lease (a snapshot from a stale activation is not written). Read, LastSeq,
// LoadSnapshot and Sessions pass through.
//
// Leased remembers the leases Acquire granted it until Release, Drop, a
// Renew that finds them lost, or an Append that fails with ErrLeaseLost. It is
// safe for concurrent use. Close does not close the wrapped journal.
type Leased struct {
	j      LeasingJournal
	holder string
	ttl    time.Duration
	closed atomic.Bool

	mu     sync.Mutex
	leases map[string]Lease
}

// NewLeased returns the Journal of holder over j, acquiring and renewing
// leases for ttl. An empty holder or a ttl that is not positive makes every
// Acquire and Renew fail with an *llm.ConfigError.
func NewLeased(j LeasingJournal, holder string, ttl time.Duration) *Leased {
	return &Leased{j: j, holder: holder, ttl: ttl, leases: map[string]Lease{}}
}

// Holder is the holder name l acquires leases as.
func (l *Leased) Holder() string { return l.holder }

// check reports ErrClosed after Close.
func (l *Leased) check() error {
	if l.closed.Load() {
		return fmt.Errorf("store: leased journal of %q: %w", l.holder, ErrClosed)
	}
	return nil
}

// lease returns the lease l holds for session.
func (l *Leased) lease(session string) (Lease, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	le, ok := l.leases[session]
	return le, ok
}

// forget drops the lease of le.Session if it is still le (a newer Acquire
// may have replaced it meanwhile).
func (l *Leased) forget(le Lease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur, ok := l.leases[le.Session]; ok && cur.Epoch == le.Epoch {
		delete(l.leases, le.Session)
	}
}

// notHeld is the error of a write to a session l holds no lease for.
func (l *Leased) notHeld(session string) error {
	return fmt.Errorf("%w: %q holds no lease on session %q", ErrLeaseLost, l.holder, session)
}

// Acquire acquires session's lease for l's holder (see Leaser.Acquire) and
// remembers it. When another holder holds it, l forgets any lease it had
// for session and returns the *LeaseHeldError.
func (l *Leased) Acquire(ctx context.Context, session string) (Lease, error) {
	if err := l.check(); err != nil {
		return Lease{}, err
	}
	le, err := l.j.Acquire(ctx, session, l.holder, l.ttl)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil:
		l.leases[session] = le
	case errors.Is(err, ErrLeaseHeld):
		delete(l.leases, session)
	}
	return le, err
}

// Release forgets session's lease and releases it. Releasing a session l
// holds no lease for is a no-op. The lease is forgotten even when releasing
// it fails (it then expires, no longer renewed).
func (l *Leased) Release(ctx context.Context, session string) error {
	if err := l.check(); err != nil {
		return err
	}
	l.mu.Lock()
	le, ok := l.leases[session]
	delete(l.leases, session)
	l.mu.Unlock()
	if !ok {
		return nil
	}
	return l.j.Release(ctx, le)
}

// Drop forgets session's lease without releasing it: l no longer renews it
// or writes under it, and it expires after its ttl (Expired then lists it,
// for another node to take the session over). Dropping a session l holds
// no lease for is a no-op.
func (l *Leased) Drop(session string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.leases, session)
}

// Holds reports whether l holds a lease for session, as far as it knows: a
// lease taken by another holder is found lost by the next Renew or Append.
func (l *Leased) Holds(session string) bool {
	_, ok := l.lease(session)
	return ok
}

// Renew renews every lease l holds in one call and forgets those it no
// longer holds, which it returns, sorted. A lease released, dropped or
// acquired again while Renew ran is left alone and not reported.
func (l *Leased) Renew(ctx context.Context) ([]string, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	held := make(map[string]int64, len(l.leases))
	for s, le := range l.leases {
		held[s] = le.Epoch
	}
	l.mu.Unlock()
	lost, err := l.j.Renew(ctx, l.holder, l.ttl, held)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	out := lost[:0]
	for _, s := range lost {
		// A lease released, dropped or acquired again meanwhile is not
		// reported: l no longer held it at the renewed epoch.
		if cur, ok := l.leases[s]; ok && cur.Epoch == held[s] {
			delete(l.leases, s)
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// Append implements Journal: AppendLeased under the lease l holds for
// session. Without one it fails with ErrLeaseLost and writes nothing; when
// AppendLeased finds the lease lost, l forgets it.
func (l *Leased) Append(ctx context.Context, session string, expectedSeq int64, recs ...Record) (int64, error) {
	if err := validateAppend(session, expectedSeq, recs); err != nil {
		return 0, err
	}
	if err := l.check(); err != nil {
		return 0, err
	}
	le, ok := l.lease(session)
	if !ok {
		return 0, l.notHeld(session)
	}
	n, err := l.j.AppendLeased(ctx, le, expectedSeq, recs...)
	if errors.Is(err, ErrLeaseLost) {
		l.forget(le)
	}
	return n, err
}

// SaveSnapshot implements Journal. It fails with ErrLeaseLost, writing
// nothing, when l holds no lease for session; otherwise it passes through
// (an older snapshot than the stored one is ignored, which keeps a late
// snapshot of a stale activation harmless).
func (l *Leased) SaveSnapshot(ctx context.Context, session string, seq int64, data []byte) error {
	if err := validateSnapshot(session, seq); err != nil {
		return err
	}
	if err := l.check(); err != nil {
		return err
	}
	if !l.Holds(session) {
		return l.notHeld(session)
	}
	return l.j.SaveSnapshot(ctx, session, seq, data)
}

// Read implements Journal.
func (l *Leased) Read(ctx context.Context, session string, from int64) ([]Record, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	return l.j.Read(ctx, session, from)
}

// LastSeq implements Journal.
func (l *Leased) LastSeq(ctx context.Context, session string) (int64, error) {
	if err := l.check(); err != nil {
		return 0, err
	}
	return l.j.LastSeq(ctx, session)
}

// LoadSnapshot implements Journal.
func (l *Leased) LoadSnapshot(ctx context.Context, session string) (int64, []byte, error) {
	if err := l.check(); err != nil {
		return 0, nil, err
	}
	return l.j.LoadSnapshot(ctx, session)
}

// Sessions implements Journal.
func (l *Leased) Sessions(ctx context.Context) ([]string, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	return l.j.Sessions(ctx)
}

// Close makes every later call of l return ErrClosed and forgets its
// leases, without releasing them (they expire, no longer renewed: release
// them first to hand the sessions over at once). It does not close the
// wrapped journal. Closing twice is a no-op.
func (l *Leased) Close() error {
	l.closed.Store(true)
	l.mu.Lock()
	clear(l.leases)
	l.mu.Unlock()
	return nil
}
