package actors

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chorusrt/chorus/llm"
)

// ErrClosed is the answer to an admission asked after Close began.
var ErrClosed = errors.New("chorus: runtime closed")

// AdmitRequested asks a credential to admit one request. The reply, sent to
// the sender's PID, is Admitted or AdmitRefused.
type AdmitRequested struct {
	ID uint64
	// Cost is the request's estimated token cost.
	Cost int
	// Deadline is when the caller stops waiting; zero means none. A
	// credential cooling down past it refuses at once, so the caller can
	// fall back instead of waiting in vain.
	Deadline time.Time
}

// Admitted grants request ID; Seq identifies the grant in RequestFinished.
type Admitted struct {
	ID  uint64
	Seq uint64
	// Queued is how long the request waited behind others in the queue,
	// Paced how long it then waited at its head for the pacer (budget,
	// concurrency, cooldown); both zero for a grant on arrival.
	Queued, Paced time.Duration
}

// AdmitRefused refuses request ID: the queue is full (llm.ErrOverloaded),
// the credential cools down past the deadline, or the runtime is closing.
type AdmitRefused struct {
	ID  uint64
	Err error
	// RetryAt is when the credential expects to serve again, if known.
	RetryAt time.Time
}

// AdmitCancelled withdraws request ID: the caller stopped waiting. If the
// grant crossed the cancellation, the grant is returned.
type AdmitCancelled struct {
	ID  uint64
	Seq uint64
}

// RequestFinished reports a granted request's end: once per grant.
type RequestFinished struct {
	Seq       uint64
	Status    int
	Usage     llm.Usage
	RateLimit llm.RateLimit
	// RateLimited: the provider answered 429 or 529.
	RateLimited bool
	RetryAfter  time.Duration
	// QuotaWindow: the 429 named the quota window that refused (Gemini's
	// QuotaFailure), so a provider without limit headers has its limit
	// learned from it; a bare 429 only cools the credential down.
	QuotaWindow bool
	Failed      bool
}

// RequestAccepted says that grant Seq's request was accepted by the
// provider: its response's headers arrived with a 2xx status.
type RequestAccepted struct{ Seq uint64 }

// StatsRequested asks a credential's actor for an AdmissionStats reply.
type StatsRequested struct{}

// CloseRequested stops admitting: queued callers get ErrClosed; in-flight
// requests finish.
type CloseRequested struct{}

// AdmissionStats is what a credential's actor knows of it: its admission
// queue, pacing and cooldown. runtime.Stats adds what the runtime counts
// on the callers' side (attempts, retries, learned flags).
type AdmissionStats struct {
	Provider string
	// Credential is the credential's position among the provider's keys.
	Credential  int
	Queued      int
	InFlight    int
	Requests    int64
	Failed      int64
	RateLimited int64
	Restarts    int64
	RateLimit   llm.RateLimit
	// RemainingRequests and RemainingTokens are the credential's own count
	// since the provider's last report; -1 when unknown.
	RemainingRequests int
	RemainingTokens   int
	CooldownUntil     time.Time
}

type waiter struct {
	id       uint64
	cost     int
	deadline time.Time
	reply    any // the address its Owner answers
	// arrived is when it joined the queue, head when it first waited at
	// its head (Admitted.Queued, Admitted.Paced).
	arrived, head time.Time
}

// An Owner runs a CredentialState's logic, one message at a time: the
// credential's own actor (Spawn), or in a cluster the credential's budget
// owner, which translates other nodes' messages.
type Owner interface {
	// Reply delivers Admitted or AdmitRefused to a waiter: to is the
	// address its request came with (CredentialState.Admit).
	Reply(to any, msg any)
	// Wake is called from a timer goroutine when a waiter held back by
	// pacing or cooldown may go: the owner then calls the credential's
	// Wake on its own goroutine.
	Wake()
}

// CredentialState is the state of one provider credential that outlives
// its actor: the pacer, the queue of waiting callers and the counters. Its
// methods take its lock, so they apply one at a time whoever calls them:
// its Owner, for the callers who wait (the queue, the pacing timer), and a
// Ref on the caller's goroutine, for what needs no wait (a grant the pacer
// allows at once with nobody ahead, an acceptance, a report). Load is safe
// from anywhere without the lock. (The credential's learn-once state is
// its endpoint's: the runtime keeps it in the providers.Client, shared by
// the endpoint's credentials.)
type CredentialState struct {
	Provider string
	Index    int

	// mu serializes every method: the pacer and the queue below are
	// touched under it only.
	mu sync.Mutex
	// sent counts the reports and acceptances a Ref sent to the Owner
	// that the Owner has not applied yet: while there is one, nothing is
	// applied at once (TryGrant, finishNow), so nothing overtakes it.
	sent atomic.Int64

	queueCap int
	pacer    *pacer
	queue    []waiter
	closed   bool
	// diverted: the runtime paces this key in one budget with others
	// (Divert); it only finishes what it granted.
	diverted bool
	// joinedTo tells the joint budget this key was joined into (Ref.Adopt)
	// each grant the key ends (foreignFinished).
	joinedTo func(foreignFinished)
	timer    *time.Timer
	timerAt  time.Time

	requests, failed, rateLimited, restarts int64

	// view is published after every message for lock-free reads by callers
	// choosing a credential.
	queued, inFlight atomic.Int64
	suspected        atomic.Bool  // Suspect ran
	cooldown         atomic.Int64 // unix nanoseconds
	// sharing and reqLimit publish what the reports showed (Sharing).
	sharing  atomic.Bool
	reqLimit atomic.Int64
	// limited publishes that a request limit is known (Outlook).
	limited atomic.Bool

	// onHeld is told when the budget holds queued callers back (OnHeld);
	// held notes that it did, under mu, until heldOut tells it outside.
	onHeld func()
	held   atomic.Bool
}

// Sharing reports, as of the last message the credential handled, whether
// the provider's reports showed others drawing on its budget (the provider
// counted more than its own grants explain, or refused a request paced
// within what it reported), and the request limit it reported (zero:
// none). Safe from any goroutine.
func (c *CredentialState) Sharing() (shared bool, limit int) {
	return c.sharing.Load(), int(c.reqLimit.Load())
}

// Suspect paces the credential's request budget as shared for two of its
// windows (a minute while none is known), or until its own reports show
// it is: another key of its endpoint, with the same request limit, showed
// others drawing on its budget, and this one may not have seen them yet.
// It does nothing to a budget already shared or read as a token bucket,
// and a credential is suspected once.
func (c *CredentialState) Suspect() {
	if !c.suspected.CompareAndSwap(false, true) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	b := &c.pacer.reqs
	if b.shared || b.rate > 0 {
		// Shared already, or a bucket: paced by the level its reports
		// read, which holds what the others drew.
		return
	}
	span := time.Minute
	if b.repReset > 0 {
		span = 2 * b.repReset
	}
	b.suspect = time.Now().Add(span)
	// What a whole budget granted may exceed the share: nothing more
	// until the window turns.
	b.remaining = min(b.remaining, max(b.limit/int(b.share())-b.used, 0))
}

// Load returns the credential's queue length, requests in flight and the
// end of its cooldown, as of the last message it handled. Safe from any
// goroutine.
func (c *CredentialState) Load() (queued, inFlight int, cooldownUntil time.Time) {
	cd := c.cooldown.Load()
	if cd != 0 {
		cooldownUntil = time.Unix(0, cd)
	}
	return int(c.queued.Load()), int(c.inFlight.Load()), cooldownUntil
}

func (c *CredentialState) publish() {
	c.queued.Store(int64(len(c.queue)))
	c.inFlight.Store(int64(c.pacer.inFlight))
	if !c.pacer.cooldownUntil.IsZero() {
		c.cooldown.Store(c.pacer.cooldownUntil.UnixNano())
	}
	if r := &c.pacer.reqs; r.shared || c.pacer.toks.shared {
		c.sharing.Store(true)
	}
	if c.pacer.last.HasRequests {
		c.reqLimit.Store(int64(c.pacer.last.LimitRequests))
	}
	c.limited.Store(c.pacer.reqs.known && c.pacer.reqs.limit > 0)
}

// Outlook is what a credential's request budget would make of more
// requests now: a hint for a runtime choosing among keys of one endpoint,
// which then places a call where it would wait least (keys with limits of
// their own differ in them, and keys whose limits were read from 429s
// alone each hold whatever share of a limit they share they learned).
type Outlook struct {
	// Limit is the requests the budget lets through per window (its
	// share, when it is paced at a share of a limit others draw on);
	// zero: no request limit is known, and nothing else is set.
	Limit int
	// Free is what it could grant now (for a limit read from 429s, within
	// its trailing period too, as a sliding window counts).
	Free int
	// InFlight is what it granted and has not heard the end of.
	InFlight int
	// Cooling is how long a 429's cooldown holds it back beyond the
	// refill Free waits for (zero: none does, or it ends by then).
	Cooling time.Duration
	// Room is how long until one more request could be granted, when Free
	// is zero: the next refill, the oldest request leaving the trailing
	// period, a token refilling, the cooldown's end, whichever the budget
	// waits for (zero: Free is not zero, or only an answer to a request in
	// flight makes room). A hint: the budget decides when it grants.
	Room time.Duration
	// Shared says the provider's reports showed others drawing on the
	// budget: Free is then this key's reading of its share, which the
	// others' readings need not agree with.
	Shared bool
}

// Outlook returns the credential's Outlook as of now. Safe from any
// goroutine; it takes the credential's lock only once a request limit is
// known.
func (c *CredentialState) Outlook() Outlook {
	if !c.limited.Load() {
		return Outlook{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pacer.outlook(time.Now())
}

// NewCredentialState returns the state of one credential.
func NewCredentialState(provider string, index int, limits Limits, queueCap int) *CredentialState {
	if queueCap <= 0 {
		queueCap = 1024
	}
	return &CredentialState{Provider: provider, Index: index, queueCap: queueCap, pacer: newPacer(limits, time.Now())}
}

// ShareEndpoint says that n credentials (keys) serve this one's endpoint.
// If the provider's reports then show other keys drawing on this key's
// budget (an organisation's limit shared by its keys), each paces at 1/n
// of what is reported, so that together they stay inside it. Call it
// before the credential serves requests.
func (c *CredentialState) ShareEndpoint(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pacer.reqs.peers, c.pacer.toks.peers = n, n
}

// OnHeld has f called whenever the credential's budget leaves callers
// waiting in its queue (the head cannot be granted yet): after the message
// that found it so, on the goroutine that handled it, outside the
// credential's lock, so that f may ask this credential and others for
// their Outlook and Shed their queued callers. The runtime moves callers
// so held to another key of the endpoint that has room. Call it before
// the credential serves requests.
func (c *CredentialState) OnHeld(f func()) { c.onHeld = f }

// heldOut calls onHeld if the message just handled left callers held
// back. Deferred before the lock is taken, it runs after it is released.
func (c *CredentialState) heldOut() {
	if c.onHeld != nil && c.held.Load() && c.held.Swap(false) {
		c.onHeld()
	}
}

// Admit handles a request for admission; from is where the answer goes
// (handed back to o.Reply).
func (c *CredentialState) Admit(o Owner, from any, m AdmitRequested) {
	defer c.heldOut()
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.publish()
	c.admit(o, waiter{id: m.ID, cost: m.Cost, deadline: m.Deadline, reply: from})
}

// Cancel withdraws a waiting request, or gives back a grant that crossed
// the withdrawal.
func (c *CredentialState) Cancel(o Owner, m AdmitCancelled) {
	defer c.heldOut()
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.publish()
	for i, w := range c.queue {
		if w.id == m.ID {
			c.queue = append(c.queue[:i], c.queue[i+1:]...)
			return
		}
	}
	if m.Seq != 0 {
		if g, granted := c.pacer.grants[m.Seq]; granted && c.joinedTo != nil {
			c.joinedTo(foreignFinished{cost: g.cost})
		}
		c.pacer.cancelGrant(m.Seq)
		c.drain(o)
	}
}

// Finish applies a granted request's report and serves whom it lets go.
func (c *CredentialState) Finish(o Owner, m RequestFinished) {
	defer c.heldOut()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.finish(o, m)
}

func (c *CredentialState) finish(o Owner, m RequestFinished) {
	defer c.publish()
	c.requests++
	if m.Failed {
		c.failed++
	}
	if m.RateLimited {
		c.rateLimited++
	}
	var tell func(foreignFinished) // a joined key's: the joint budget hears the end
	var g grant
	if c.joinedTo != nil {
		var granted bool
		if g, granted = c.pacer.grants[m.Seq]; granted {
			tell = c.joinedTo
		}
	}
	c.pacer.release(m.Seq, m.RateLimit, m.RateLimited, m.RetryAfter, m.QuotaWindow, time.Now())
	if tell != nil {
		tell(foreignFinished{rl: m.RateLimit, rateLimited: m.RateLimited, cost: g.cost})
	}
	c.drain(o)
}

// Accept notes that grant seq's request was accepted (a 2xx response's
// headers arrived), for a provider that reports no limits.
func (c *CredentialState) Accept(o Owner, m RequestAccepted) {
	defer c.heldOut()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.accept(o, m)
}

func (c *CredentialState) accept(o Owner, m RequestAccepted) {
	defer c.publish()
	c.pacer.accept(m.Seq, time.Now())
	c.drain(o)
}

// paced reports whether the credential has anything to pace: a request
// or token budget known (configured, learned from reports, inferred from
// 429s), or a 429 ever seen. What such a credential admits, and the
// reports it learns from, keep the Owner's order (see TryGrant).
func (c *CredentialState) paced() bool {
	return c.pacer.reqs.known || c.pacer.toks.known || c.rateLimited > 0
}

// finishNow applies a report at once, on the caller's goroutine, when that
// cannot reorder anything: the credential paces nothing, the report
// teaches no limit and no cooldown, and no report or acceptance sent to
// the Owner before it is still on its way. It reports false, having done
// nothing, otherwise: the report then goes to the Owner as before.
func (c *CredentialState) finishNow(o Owner, m RequestFinished) bool {
	if m.RateLimited || m.RateLimit.HasRequests || m.RateLimit.HasTokens {
		return false
	}
	defer c.heldOut()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.paced() || c.sent.Load() > 0 {
		return false
	}
	c.finish(o, m)
	return true
}

// acceptNow is finishNow for an acceptance.
func (c *CredentialState) acceptNow(o Owner, m RequestAccepted) bool {
	defer c.heldOut()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.paced() || c.sent.Load() > 0 {
		return false
	}
	c.accept(o, m)
	return true
}

// Wake serves the waiters that pacing or cooldown held back, after
// o.Wake.
func (c *CredentialState) Wake(o Owner) {
	defer c.heldOut()
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.publish()
	c.timerAt = time.Time{}
	c.drain(o)
}

// Close stops admitting: queued callers are refused with ErrClosed, and so
// is every later request; requests in flight finish.
func (c *CredentialState) Close(o Owner) {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.publish()
	c.closed = true
	c.refuseQueued(o, ErrClosed)
}

// refuseQueued refuses every queued caller with err and empties the queue.
func (c *CredentialState) refuseQueued(o Owner, err error) {
	for _, w := range c.queue {
		o.Reply(w.reply, AdmitRefused{ID: w.id, Err: err})
	}
	c.queue = nil
}

// Stopped tells the credential that its owner stopped: its timer is
// cancelled. A new owner (a restart) takes it over as it is.
func (c *CredentialState) Stopped() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timer != nil {
		c.timer.Stop()
	}
	c.timerAt = time.Time{}
}

// TryGrant grants a request of cost at once if that needs no wait and
// paces nothing: the credential is open, nobody waits in its queue, it is
// not paced (no budget known, no 429 seen), no report sent to the Owner
// is still on its way, and the pacer lets it go now, exactly as Admit
// would grant it on arrival. It reports false otherwise, having changed
// nothing: the caller then asks the Owner (AdmitRequested) and waits its
// turn. A paced credential is served through its Owner alone, its
// admissions and reports in one order, as before this path existed: the
// pacer's reading of a provider's windows depends on when reports land
// among grants (granting at once there too let late 429s through in
// TestPacingMatrix under the race detector).
func (c *CredentialState) TryGrant(cost int) (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.diverted || len(c.queue) > 0 || c.paced() || c.sent.Load() > 0 {
		return 0, false
	}
	if blocked, _ := c.pacer.blocked(cost, time.Now()); blocked {
		return 0, false
	}
	seq := c.pacer.grant(cost)
	c.publish()
	return seq, true
}

func (c *CredentialState) admit(o Owner, w waiter) {
	if c.closed {
		o.Reply(w.reply, AdmitRefused{ID: w.id, Err: ErrClosed})
		return
	}
	if c.diverted {
		o.Reply(w.reply, AdmitRefused{ID: w.id, Err: errDiverted})
		return
	}
	now := time.Now()
	if len(c.queue) == 0 {
		if blocked, _ := c.pacer.blocked(w.cost, now); !blocked {
			o.Reply(w.reply, Admitted{ID: w.id, Seq: c.pacer.grant(w.cost)})
			return
		}
	}
	if !w.deadline.IsZero() && c.pacer.cooldownUntil.After(w.deadline) {
		o.Reply(w.reply, AdmitRefused{ID: w.id, Err: errCoolingDown, RetryAt: c.pacer.cooldownUntil})
		return
	}
	if len(c.queue) >= c.queueCap {
		o.Reply(w.reply, AdmitRefused{ID: w.id, Err: llm.ErrOverloaded})
		return
	}
	w.arrived = now
	c.queue = append(c.queue, w)
	c.drain(o)
}

// errDiverted is the refusal of a credential the runtime now paces in one
// budget with the other keys of its endpoint (Divert): the caller asks
// that budget instead.
var errDiverted = errors.New("chorus: credential paced in one budget with its endpoint's other keys")

// Diverted reports whether err refuses an admission because the credential
// is now paced in one budget with others: ask that budget instead.
func Diverted(err error) bool { return errors.Is(err, errDiverted) }

// Divert stops the credential admitting: the runtime paces it in one
// budget with the other keys of its endpoint from now on. Its queued
// callers, and every later one, are refused at once with an error Diverted
// reports, so that they ask that budget; what it granted finishes here.
func (c *CredentialState) Divert(o Owner) {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.publish()
	c.diverted = true
	c.refuseQueued(o, errDiverted)
	if c.timer != nil {
		c.timer.Stop()
		c.timerAt = time.Time{}
	}
}

// errShed is the refusal of a queued caller the runtime moved to another
// key with room now (Shed).
var errShed = errors.New("chorus: queued caller moved to a key with room")

// Shed reports whether err refuses an admission because the caller was
// moved from the queue to be placed again (CredentialState.Shed).
func Shed(err error) bool { return errors.Is(err, errShed) }

// Shed refuses up to n of the callers waiting in the queue, the newest
// first (they would wait longest), with an error Shed reports, so that
// the runtime places them again on a key that has room now, and returns
// how many it refused. Callers at the head, which the pacer already
// holds for the next refill, are the last to go.
func (c *CredentialState) Shed(o Owner, n int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.publish()
	k := 0
	for k < n && len(c.queue) > 0 {
		w := c.queue[len(c.queue)-1]
		c.queue = c.queue[:len(c.queue)-1]
		o.Reply(w.reply, AdmitRefused{ID: w.id, Err: errShed})
		k++
	}
	return k
}

// ErrCoolingDown is the refusal of a credential whose cooldown outlasts the
// caller's deadline.
var errCoolingDown = errors.New("chorus: credential cooling down past the deadline")

// ErrCoolingDown reports whether err is a cooldown refusal.
func ErrCoolingDown(err error) bool { return errors.Is(err, errCoolingDown) }

// drain grants queued requests in order while the pacer allows, and arms a
// timer for the earliest moment a blocked head could go.
func (c *CredentialState) drain(o Owner) {
	now := time.Now()
	for len(c.queue) > 0 {
		w := c.queue[0]
		if !w.deadline.IsZero() && now.After(w.deadline) {
			c.queue = c.queue[1:]
			o.Reply(w.reply, AdmitRefused{ID: w.id, Err: errCoolingDown})
			continue
		}
		blocked, at := c.pacer.blocked(w.cost, now)
		if blocked {
			if w.head.IsZero() {
				c.queue[0].head = now
			}
			if c.onHeld != nil {
				c.held.Store(true)
			}
			if !at.IsZero() {
				c.arm(o, at)
			}
			return
		}
		c.queue = c.queue[1:]
		head := w.head
		if head.IsZero() {
			head = now
		}
		o.Reply(w.reply, Admitted{ID: w.id, Seq: c.pacer.grant(w.cost), Queued: head.Sub(w.arrived), Paced: now.Sub(head)})
	}
}

func (c *CredentialState) arm(o Owner, at time.Time) {
	if !c.timerAt.IsZero() && !at.Before(c.timerAt) {
		return
	}
	if c.timer != nil {
		c.timer.Stop()
	}
	c.timerAt = at
	c.timer = time.AfterFunc(time.Until(at), o.Wake)
}

// Snapshot returns the credential's stats.
func (c *CredentialState) Snapshot() AdmissionStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := AdmissionStats{
		Provider: c.Provider, Credential: c.Index, Queued: len(c.queue), InFlight: c.pacer.inFlight,
		Requests: c.requests, Failed: c.failed, RateLimited: c.rateLimited, Restarts: c.restarts,
		RateLimit: c.pacer.last, RemainingRequests: -1, RemainingTokens: -1,
	}
	if c.pacer.reqs.known {
		s.RemainingRequests = c.pacer.reqs.remaining
	}
	if c.pacer.toks.known {
		s.RemainingTokens = c.pacer.toks.remaining
	}
	if time.Now().Before(c.pacer.cooldownUntil) {
		s.CooldownUntil = c.pacer.cooldownUntil
	}
	return s
}

// CoolingDown returns the cooldown refusal's error, for a refusal that
// crossed a node and is rebuilt on the caller's side.
func CoolingDown() error { return errCoolingDown }

// Adopt makes c, a credential that has served nothing, the one budget of
// keys found to share a limit (the runtime paces them as one from then on):
// it starts from the newest report any of them holds, less what they have
// in flight (which that report may not count), and from their longest
// cooldown. Their own states go on only to finish what they granted. Adopt
// does nothing once c has seen a response.
func (c *CredentialState) Adopt(keys ...*CredentialState) { c.adopt(nil, keys) }

// adopt is Adopt; each key then tells the end of every grant it has in
// flight (foreignFinished) to tell, unless tell is nil, which applies it
// to c (Ref.Adopt: a message to c's actor).
func (c *CredentialState) adopt(tell func(foreignFinished), keys []*CredentialState) {
	// c's lock first: a key's end of a grant that the adoption counted
	// is applied after it (CredentialState.foreign takes c's lock).
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.publish()
	if c.pacer.observed {
		return
	}
	var last llm.RateLimit
	var reqs, toks adoption
	var cool time.Time
	for _, k := range keys {
		k.mu.Lock()
		if tell != nil {
			k.joinedTo = tell
		}
		p := k.pacer
		reqs.weigh(&p.reqs)
		toks.weigh(&p.toks)
		for _, g := range p.grants {
			reqs.open++
			toks.open += g.cost
		}
		if p.cooldownUntil.After(cool) {
			cool = p.cooldownUntil
		}
		if p.last.HasRequests || p.last.HasTokens {
			last = p.last
		}
		k.mu.Unlock()
	}
	p := c.pacer
	if tell != nil {
		p.foreignReqs, p.foreignToks = reqs.open, toks.open
	}
	now := time.Now()
	r, t := reqs.adopt(&p.reqs, now), toks.adopt(&p.toks, now)
	if r || t {
		p.observed = true
		p.last = last
	}
	if cool.After(p.cooldownUntil) {
		p.cooldownUntil = cool
	}
}

// foreignFinished is a joined key's end of a grant, told to the joint
// budget that adopted it (CredentialState.adopt): its report, if it came
// with one, and its token cost.
type foreignFinished struct {
	rl          llm.RateLimit
	rateLimited bool
	cost        int
}

// foreign applies a joined key's end of a grant (pacer.foreign) and
// serves whom the room it shows lets go.
func (c *CredentialState) foreign(o Owner, m foreignFinished) {
	defer c.heldOut()
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.publish()
	c.pacer.foreign(m.rl, m.rateLimited, m.cost, time.Now())
	c.drain(o)
}

// Seed teaches a credential that knows nothing yet the limits another
// holder of the key saw in a response at time at: a budget owner that
// replaces one on a dead node starts from the nodes' latest headers
// instead of probing blind. The seed is old, and the dead owner may have
// granted the rest of that window since, so the window it describes is
// taken as spent: nothing is sent until its reset, then one request at a
// time until a response of its own says what remains. A seed whose window
// has already reset gives the limit, and the same single probe. Seed does
// nothing once the credential has seen a response.
func (c *CredentialState) Seed(rl llm.RateLimit, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pacer
	if p.observed || (!rl.HasRequests && !rl.HasTokens) {
		return
	}
	now := time.Now()
	age := now.Sub(at)
	seed := func(b *budget, units, limit int, reset time.Duration) {
		if limit <= 0 || b.known {
			return
		}
		remaining := limit
		if reset > age {
			remaining, reset = 0, reset-age // that window is spent, as far as we know
		} else {
			reset = 0
		}
		b.learn(units, limit, remaining, reset, 0, units, now)
	}
	if rl.HasRequests {
		seed(&p.reqs, int(p.seq), rl.LimitRequests, rl.ResetRequests)
	}
	if rl.HasTokens {
		seed(&p.toks, p.cum, rl.LimitTokens, rl.ResetTokens)
	}
	p.probeConcurrency = 1
	p.last = rl
}
