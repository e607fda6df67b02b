package actors

import (
	"time"

	"github.com/chorusrt/chorus/llm"
)

// Limits are static limits for a credential, known before any response.
// Zero fields are unknown (learned from headers) or unlimited
// (MaxConcurrency).
type Limits struct {
	MaxConcurrency    int
	RequestsPerMinute int
	TokensPerMinute   int
}

// budget is one limit (requests or tokens) in a provider window: the limit,
// what remains of it and when it resets. It is refilled to the limit when
// the reset time passes and corrected by every response's headers.
type budget struct {
	known     bool
	limit     int
	remaining int
	resetAt   time.Time
	// window is the refill period for a static limit (per minute); zero for
	// a learned limit, whose reset time comes from the provider.
	window time.Duration
	// epoch is the last grant made before the latest refill: a report on a
	// grant up to it describes the previous window and is ignored. used is
	// what was granted since (requests, or token cost).
	epoch uint64
	used  int
}

// refresh refills the budget when its reset time has passed; seq is the
// last grant so far.
func (b *budget) refresh(now time.Time, seq uint64) {
	if !b.known || b.resetAt.IsZero() || now.Before(b.resetAt) {
		return
	}
	b.epoch = seq
	b.used = 0
	b.remaining = b.limit
	if b.window > 0 {
		b.resetAt = now.Add(b.window)
	} else {
		b.resetAt = time.Time{}
	}
}

// allows reports whether cost fits now. A request costing more than the
// whole limit is let through when the budget is full, so it is not starved.
func (b *budget) allows(cost int) bool {
	if !b.known {
		return true
	}
	if cost > b.limit {
		return b.remaining >= b.limit
	}
	return b.remaining >= cost && b.remaining > 0
}

// wakeAt is when a refused request may fit again; zero when unknown.
func (b *budget) wakeAt() time.Time { return b.resetAt }

// resetMargin is added to a provider's reset time: our clock starts when the
// response arrives, later than the provider's, so the margin only guards
// against a provider rounding its reset down.
const resetMargin = 10 * time.Millisecond

// learn replaces the budget with a provider's report on grant seq.
// pendingCost is what was admitted after that grant and is not in the
// report yet. A report from before the latest refill is ignored.
func (b *budget) learn(seq uint64, limit, remaining int, reset time.Duration, pendingCost int, now time.Time) {
	if limit <= 0 || (b.known && seq <= b.epoch) {
		return
	}
	// Requests reach the provider out of grant order, so a report may miss
	// grants made before it as well as after: our own count of what was
	// granted in this window bounds it. The report bounds it too when
	// another client shares the key.
	fresh := max(min(remaining-pendingCost, limit-b.used), 0)
	b.known = true
	b.limit = limit
	b.remaining = fresh
	if reset > 0 {
		b.resetAt = now.Add(reset + resetMargin)
	} else if b.remaining < b.limit && b.resetAt.IsZero() {
		// No reset reported: assume a minute, the usual window.
		b.resetAt = now.Add(time.Minute)
	}
	b.window = 0
}

// pacer decides admissions for one credential. It is owned by the actor.
type pacer struct {
	limits Limits
	reqs   budget
	toks   budget

	inFlight int
	// observed is set after the first response: until then, with no limits
	// known, only probeConcurrency requests go out, so a cold start cannot
	// overrun a limit it has not read yet.
	observed         bool
	probeConcurrency int

	cooldownUntil time.Time

	seq        uint64           // grants so far
	cum        int              // token cost of all grants so far
	grants     map[uint64]grant // in-flight grants by seq
	lastReport uint64           // seq of the newest report applied
	last       llm.RateLimit    // the newest report
}

// grant is one admitted request: its token cost and the cumulative cost of
// all grants up to and including it.
type grant struct{ cost, cum int }

func newPacer(l Limits, now time.Time) *pacer {
	p := &pacer{limits: l, grants: map[uint64]grant{}, probeConcurrency: 4}
	if l.RequestsPerMinute > 0 {
		p.reqs = budget{known: true, limit: l.RequestsPerMinute, remaining: l.RequestsPerMinute, resetAt: now.Add(time.Minute), window: time.Minute}
	}
	if l.TokensPerMinute > 0 {
		p.toks = budget{known: true, limit: l.TokensPerMinute, remaining: l.TokensPerMinute, resetAt: now.Add(time.Minute), window: time.Minute}
	}
	if l.RequestsPerMinute > 0 || l.TokensPerMinute > 0 {
		p.observed = true
	}
	return p
}

// blocked reports whether a request of cost can be granted now, and if not,
// when to look again (zero: when something finishes).
func (p *pacer) blocked(cost int, now time.Time) (bool, time.Time) {
	if now.Before(p.cooldownUntil) {
		return true, p.cooldownUntil
	}
	if p.limits.MaxConcurrency > 0 && p.inFlight >= p.limits.MaxConcurrency {
		return true, time.Time{}
	}
	if !p.observed && p.inFlight >= p.probeConcurrency {
		return true, time.Time{}
	}
	p.reqs.refresh(now, p.seq)
	p.toks.refresh(now, p.seq)
	if !p.reqs.allows(1) {
		return true, p.reqs.wakeAt()
	}
	if !p.toks.allows(cost) {
		if p.inFlight == 0 && p.toks.resetAt.IsZero() {
			return false, time.Time{} // nothing will refill it: let one through to learn again
		}
		return true, p.toks.wakeAt()
	}
	return false, time.Time{}
}

// grant admits a request of cost and returns its sequence number.
func (p *pacer) grant(cost int) uint64 {
	p.seq++
	p.cum += cost
	p.inFlight++
	p.grants[p.seq] = grant{cost: cost, cum: p.cum}
	p.reqs.used++
	p.toks.used += cost
	if p.reqs.known {
		p.reqs.remaining--
	}
	if p.toks.known {
		p.toks.remaining -= cost
	}
	return p.seq
}

// release ends grant seq and applies its report.
func (p *pacer) release(seq uint64, rl llm.RateLimit, rateLimited bool, retryAfter time.Duration, now time.Time) {
	g, ok := p.grants[seq]
	if !ok {
		return
	}
	delete(p.grants, seq)
	p.inFlight--
	p.observed = true
	if (rl.HasRequests || rl.HasTokens) && seq > p.lastReport {
		p.lastReport = seq
		p.last = rl
		// Everything granted after this request is not in its report,
		// finished or not.
		pendingReqs := int(p.seq - seq)
		pendingToks := p.cum - g.cum
		if rl.HasRequests {
			p.reqs.learn(seq, rl.LimitRequests, rl.RemainingRequests, rl.ResetRequests, pendingReqs, now)
		}
		if rl.HasTokens {
			p.toks.learn(seq, rl.LimitTokens, rl.RemainingTokens, rl.ResetTokens, pendingToks, now)
		}
	}
	if rateLimited {
		wait := retryAfter
		if wait <= 0 {
			wait = time.Second
		}
		if until := now.Add(wait); until.After(p.cooldownUntil) {
			p.cooldownUntil = until
		}
		// The provider refused: whatever we thought remained, nothing does
		// until the cooldown ends.
		if p.reqs.known {
			p.reqs.remaining = 0
			if p.reqs.resetAt.Before(p.cooldownUntil) {
				p.reqs.resetAt = p.cooldownUntil
			}
		}
	}
}

// cancelGrant returns a grant that was never used.
func (p *pacer) cancelGrant(seq uint64) {
	g, ok := p.grants[seq]
	if !ok {
		return
	}
	cost := g.cost
	delete(p.grants, seq)
	p.inFlight--
	p.reqs.used = max(p.reqs.used-1, 0)
	p.toks.used = max(p.toks.used-cost, 0)
	if p.reqs.known && p.reqs.remaining < p.reqs.limit {
		p.reqs.remaining++
	}
	if p.toks.known {
		p.toks.remaining = min(p.toks.remaining+cost, p.toks.limit)
	}
}
