package actors

import (
	"container/heap"
	"math"
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
	// Shared says the provider's keys draw on one limit (an organisation's
	// or a project's, as OpenAI and Anthropic count them), not a limit per
	// key: the runtime then paces every key of one endpoint as one budget,
	// with one admission queue, and MaxConcurrency caps them together.
	// Undeclared, keys that share a limit are still recognised from the
	// reports (the provider counting more than their grants explain): each
	// paces at its share, with no late 429s but more slowly (what one key
	// leaves unused in a window the others cannot know of), until the
	// runtime joins them into one budget (runtime/joint.go: in one process,
	// once every key shows it and all report one limit).
	Shared bool
}

// budget is one limit (requests or tokens) as the provider reports it: the
// limit, what remains of it and when it is whole again. Units are requests
// for the request budget and token cost for the token budget; the pacer
// passes its running total of units granted (units) so the budget can tell
// what a report has not counted yet.
//
// Providers run different limiters behind the same headers, and the budget
// reads each one right:
//   - a fixed window (and a sliding one) refills at its reset; what was
//     granted after the report that named the reset is still charged then
//     (a sliding window keeps the later charges; a fixed window's late
//     grants were the old window's, and the next report corrects it);
//   - a token bucket (OpenAI's and Anthropic's limiters) refills
//     continuously, its reset meaning "until full": the budget recognises
//     one when successive reports agree on a refill rate, (limit -
//     remaining) / reset, and their "full" instants move by what was granted
//     in between at that rate, where a fixed window's stay put. It then
//     admits at the refill rate once the burst is spent.
type budget struct {
	known     bool
	limit     int
	remaining int
	resetAt   time.Time
	// window is the refill period for a static limit (per minute); zero for
	// a learned limit, whose reset time comes from the provider.
	window time.Duration
	// used is what was granted since the latest refill (requests, or
	// token cost).
	used int

	// The newest report: when it arrived, what it said remained and how
	// long until whole, and the units granted up to its request.
	repAt     time.Time
	repRemain int
	repReset  time.Duration
	repUnits  int
	// repUnseen is what was granted before the newest report's request
	// and still in flight when it came: a sliding window may have
	// charged it after that request, so it can still be in the window
	// when the report's full instant comes.
	repUnseen int
	// repEarlier is what was granted after the newest report's request
	// and answered since with a report that is not newer (more left, or
	// an earlier full instant): the provider charged it before that
	// request, so it has left the window by the report's full instant.
	repEarlier int
	// refilled says the window named by the newest report has been
	// refilled: that window's own late reports are stale.
	refilled bool
	// rate is the refill rate in units per second once the reports show a
	// token bucket (score >= bucketScore); zero for a window.
	rate  float64
	score int
	// The report the limiter was last classified from: reports are
	// weighed pairwise in grant order only, since an answer that was
	// overtaken carries an older state whose full instant its latency
	// moved.
	clsAt     time.Time
	clsRemain int
	clsReset  time.Duration
	clsUnits  int
	// level is a bucket's level as of levelAt: the newest report's, less
	// what it had not counted, refilled at rate and charged at each grant.
	level   float64
	levelAt time.Time
	lo, hi  float64 // the refill rate's bounds from the agreeing reports
	// peers is how many credentials serve this one's endpoint; shared says
	// the reports showed others drawing on this budget (an organisation's
	// limit shared by its keys): each credential then paces at 1/peers of
	// what is reported, so together they stay inside it.
	peers  int
	shared bool
	// suspect, until then, paces the budget as shared without its reports
	// having shown it (CredentialState.Suspect): another key of the
	// endpoint with the same limit showed others drawing on its budget.
	// A key whose reports showed no one else could not see the other
	// key's requests once the windows no longer overlapped theirs: it
	// burst its whole limit into the other's share (late 429s in
	// TestPacingMatrix's sliding-window org cells).
	suspect time.Time
	// ours, when oursKnown, is the most of our requests a report being
	// learned can count (the pacer's holds and requests in flight): what
	// it counts beyond that is others'.
	ours      int
	oursKnown bool
	// inherited is until when the provider's counts may still hold grants
	// made before this budget served (keys joined into it, Adopt): their
	// reports then show no one else drawing on it.
	inherited time.Time
	// fixed scores the evidence of a fixed window: reports whose full
	// instant stays put while what remains goes down. At a fixed window's
	// reset only what is still in flight can land in the new window.
	fixed int
}

// bucketScore is how many agreeing pairs of reports it takes to read the
// limiter as a token bucket; one disagreeing pair takes a point back.
const bucketScore = 2

// refresh brings the budget up to now: a bucket's level, or a window's
// refill once its reset has passed. units is what was granted so far;
// inFlight, what is in flight and not yet accepted (what may still land
// in a fixed window's next window).
func (b *budget) refresh(now time.Time, units, inFlight int) {
	if !b.suspect.IsZero() && (!now.Before(b.suspect) || b.rate > 0) {
		// Suspicion lapses, or the reports show a bucket: its level,
		// read from the reports, holds what the others drew.
		b.suspect = time.Time{}
	}
	if !b.known {
		return
	}
	if b.rate > 0 {
		if dt := now.Sub(b.levelAt); dt > 0 {
			b.level = math.Min(float64(b.limit)/b.share(), b.level+b.rate/b.share()*dt.Seconds())
			b.levelAt = now
		}
		b.remaining = max(int(math.Floor(b.level)), 0)
		return
	}
	if b.resetAt.IsZero() || now.Before(b.resetAt) {
		return
	}
	if b.window > 0 { // a static limit: a fixed window of our own
		b.used = 0
		b.remaining = b.limit
		b.resetAt = now.Add(b.window)
		return
	}
	// What was granted after the report that named this reset is not in
	// it and is still charged.
	b.used = max(units-b.repUnits-b.repEarlier, 0) + b.repUnseen
	if b.fixed >= bucketScore {
		b.used = inFlight
	}
	b.remaining = max(b.limit/int(b.share())-b.used, 0)
	if b.asShared() && b.peers > 1 && b.fixed < bucketScore {
		// A budget other keys draw on, not known to be a fixed window:
		// its reset may be a shared bucket's "full" instant, which the
		// others' traffic keeps moving. One request finds out where it
		// stands before any burst.
		b.remaining = min(b.remaining, 1)
	}
	b.resetAt = time.Time{}
	b.refilled = true
}

// asShared says the budget is paced as one others draw on: its reports
// showed it (shared), or another key's did (suspect).
func (b *budget) asShared() bool { return b.shared || !b.suspect.IsZero() }

// share is how many credentials divide this budget: 1 unless it is paced
// as shared.
func (b *budget) share() float64 {
	if b.asShared() && b.peers > 1 {
		return float64(b.peers)
	}
	return 1
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

// wakeAt is when a refused request of cost may fit; zero when unknown.
func (b *budget) wakeAt(cost int, now time.Time) time.Time {
	if b.rate > 0 {
		need := float64(min(max(cost, 1), b.limit)) - b.level
		return now.Add(time.Duration(math.Ceil(need / b.rate * float64(time.Second))))
	}
	return b.resetAt
}

// resetMargin is added to a provider's reset time: our clock starts when the
// response arrives, later than the provider's, so the margin only guards
// against a provider rounding its reset down.
const resetMargin = 10 * time.Millisecond

// learn applies a provider's report on the request whose grant brought the
// units granted to units; unseen is what was granted before it and is
// still in flight, total the units granted so far (what was granted after
// it is total - units). Neither is in the report.
//
// Reports arrive out of order: responses overtake each other, and requests
// reached the provider in another order than they were granted. Which one
// is the newest state is told by its "full" instant (arrival + reset), which
// never moves back on any limiter: a fixed window's stays put until the
// next window's, a bucket's and a sliding window's move later with every
// charge. So a report whose full instant is earlier than the newest one's
// is ignored, one with the same full instant counts only when it shows less
// remaining, and after a window's refill its own reports are ignored.
func (b *budget) learn(units, limit, remaining int, reset time.Duration, unseen, total int, now time.Time) {
	b.take(units, limit, remaining, reset, unseen, total, now, true)
}

// answered applies the report on a request of cost whose grant brought
// the units granted to units (learn). A report that is not the newer
// state was charged before the newest report's request: granted after
// that request, it is counted in repEarlier; granted before it, it was in
// flight when that report came and leaves repUnseen.
func (b *budget) answered(units, cost, limit, remaining int, reset time.Duration, unseen, total int, now time.Time) {
	if b.take(units, limit, remaining, reset, unseen, total, now, true) {
		return
	}
	b.before(units, cost)
}

// before notes that a request of cost, whose grant brought the units
// granted to units, was charged before the newest report's request (or
// not at all), while that report's window has not been refilled.
func (b *budget) before(units, cost int) {
	if !b.known || b.refilled {
		return
	}
	if units > b.repUnits {
		b.repEarlier += cost
	} else {
		b.repUnseen = max(b.repUnseen-cost, 0)
	}
}

// take is learn; classify says whether the report is weighed as evidence
// of the limiter's kind, which needs its place in grant order (a joined
// key's report, pacer.foreign, has none in this budget's).
func (b *budget) take(units, limit, remaining int, reset time.Duration, unseen, total int, now time.Time, classify bool) bool {
	if limit <= 0 {
		return false
	}
	full := now.Add(reset)
	if b.known && !b.repAt.IsZero() {
		tol := 5*time.Millisecond + reset/50
		if b.fixed >= bucketScore && b.rate == 0 {
			// A fixed window's full instant is its end plus each
			// answer's latency: a slow answer from early in the window
			// lands later than a quick one from its end, yet is older.
			// A report of the next window lies a window later.
			tol = max(tol, max(b.repReset, reset)/2)
		}
		cur := b.repAt.Add(b.repReset)
		if units < b.repUnits && remaining > b.repRemain && !b.refilled {
			// The answer to an earlier grant than the newest report's,
			// showing more left: an older state that its latency made
			// look newer (or a refill since, which the next report
			// shows anyway). Keeping the lower count never overruns.
			return false
		}
		switch {
		case full.Before(cur.Add(-tol)):
			return false // an older state
		case !full.After(cur.Add(tol)) && (b.refilled || remaining >= b.repRemain):
			return false // the same window or bucket state, no newer
		}
	}
	if classify {
		b.classify(units, limit, remaining, reset, now)
	}
	// Not in this report, at most: what was granted before its request
	// and is still in flight (requests reach the provider out of grant
	// order), and everything granted after it. Most of it usually is in
	// the report (an earlier grant reached the provider earlier, and later
	// ones often overtook the answer), so the truth lies between remaining
	// less all of it and remaining itself.
	pending := unseen + max(total-units, 0)
	// What our own grants leave: a window's limit less what we granted in
	// it; a bucket's own level, refilled to now.
	own := float64(limit - b.used)
	if b.rate > 0 {
		own = math.Min(float64(limit), b.level+b.rate*max(now.Sub(b.levelAt), 0).Seconds())
	}
	if !b.shared && (b.known || b.rate == 0) && float64(remaining) < own-2 && !now.Before(b.inherited) && (!b.oursKnown || remaining < limit-b.ours-2) {
		// The provider counted more than our own grants explain: others
		// draw on this budget (other keys of one organisation, or
		// another client on this key). Alone, what remains is never
		// less than what our grants leave.
		b.shared = true
	}
	var fresh int
	// Alone on it: our own count of what we granted (a window's used, a
	// bucket's level) says where it stands, bounded by the report on both
	// sides. Subtracting every grant in flight instead counts twice the
	// ones the report already holds: a window then lost grants in every
	// window.
	level := min(max(own, float64(remaining-pending)), float64(remaining))
	if b.asShared() {
		// Others draw on it too: our share, less all that may be ours
		// and uncounted.
		fresh = max(remaining/int(b.share())-pending, 0)
		if b.rate == 0 {
			fresh = max(min(fresh, limit/int(b.share())-b.used), 0)
		}
		if b.shared {
			level = float64(remaining)/b.share() - float64(pending)
		}
		// A suspected budget (not shared) keeps its own level whole: the
		// next report must still be able to show others drawing on it,
		// and the level is a bucket's once the reports show one, which
		// ends the suspicion. Kept at its share, a bucket suspected
		// before it was read as one never saw the other key's draws:
		// it burst the whole bucket while the other waited, whose probe
		// then drew late 429s (TestPacingMatrix's token-bucket org
		// cells).
	} else {
		fresh = max(int(math.Floor(level)), 0)
	}
	b.known = true
	b.limit = limit
	b.remaining = fresh
	b.level, b.levelAt = level, now
	b.refilled = false
	b.repAt, b.repRemain, b.repReset, b.repUnits, b.repUnseen = now, remaining, reset, units, unseen
	b.repEarlier = 0
	if reset > 0 {
		b.resetAt = now.Add(reset + resetMargin)
	} else if b.remaining < b.limit && b.resetAt.IsZero() {
		// No reset reported: assume a minute, the usual window.
		b.resetAt = now.Add(time.Minute)
	}
	b.window = 0
	return true
}

// classify weighs a new report against the previous one: a token bucket's
// reports agree on one refill rate, (limit - remaining) / reset, and each
// one's "full" instant (arrival + reset) lies later than the previous one's
// by the units granted in between at that rate; a fixed window's full
// instant stays put, and a sliding window's rate does not agree.
//
// A report's remaining is the bucket's level rounded down, so each report
// bounds the rate from both sides: (limit-remaining-1)/reset <= rate <=
// (limit-remaining)/reset. The budget keeps the tightest bounds and paces at
// the lower one, so it is never ahead of the bucket; bounds that cross mean
// it is not a bucket.
func (b *budget) classify(units, limit, remaining int, reset time.Duration, now time.Time) {
	if reset <= 0 || remaining >= limit {
		return
	}
	// An answer overtaken by a later grant's carries an older state,
	// unless it shows less left than that one: then the provider counted
	// its request later (requests of a burst reach it in another order
	// than they were granted), and it is the newer state. Weighing only
	// grant order, a burst whose last grant was answered first taught
	// nothing for a whole window.
	later := units > b.clsUnits || (remaining < b.clsRemain && (!b.shared || b.peers <= 1))
	if !later && !b.clsAt.IsZero() && !b.refilled {
		return
	}
	hi := float64(limit-remaining) / reset.Seconds()
	lo := float64(limit-remaining-1) / reset.Seconds()
	prevAt, prevReset, prevRemain, prevUnits := b.clsAt, b.clsReset, b.clsRemain, b.clsUnits
	b.clsAt, b.clsReset, b.clsRemain, b.clsUnits = now, reset, remaining, units
	if prevAt.IsZero() || prevReset <= 0 || prevRemain >= limit || !later || (b.refilled && !b.shared) {
		// No pair to weigh: no earlier report, or the earlier one's
		// window has been refilled since (a window's next full instant
		// lies a window later: that says nothing of the limiter). A
		// budget others draw on keeps weighing that pair: its reading as
		// a fixed window skips the probe at each refill, and a shared
		// bucket read so burst its whole share into what the others
		// left (late 429s with three keys of one organisation).
		b.lo, b.hi = lo, hi
		return
	}
	moved := now.Add(reset).Sub(prevAt.Add(prevReset)).Seconds()
	expect := float64(units-prevUnits) / hi
	tol := 0.005 + 0.02*reset.Seconds()
	nlo, nhi := max(b.lo, lo), min(b.hi, hi)
	// A bucket's full instant moves later by what was charged between
	// the two reports at its rate; how much of that was ours the reports
	// do not say when requests overtake each other, so agreement is the
	// rate's bounds meeting and the full instant moving later at all (a
	// fixed window's stays put; a sliding window's rate bounds part).
	agree := nlo <= nhi*1.02 && moved > tol
	if b.shared && b.peers > 1 {
		// Other keys draw on a shared bucket too: the full instant moves by
		// their grants as well as ours, so it moves at least by ours and at
		// most by every key's share of it.
		agree = nlo <= nhi*1.02 && moved > tol && moved >= 0.5*expect-tol && moved <= 1.5*expect*float64(b.peers)+tol
	}
	still := math.Abs(moved) <= tol && remaining < prevRemain
	switch {
	case agree:
		b.score = min(b.score+1, 3)
		b.fixed = max(b.fixed-1, -3)
		b.lo, b.hi = nlo, nhi
	case still:
		b.fixed = min(b.fixed+1, 3)
		b.score = max(b.score-1, -3)
		b.lo, b.hi = lo, hi
	default:
		b.score = max(b.score-1, -3)
		b.fixed = max(b.fixed-1, -3)
		b.lo, b.hi = lo, hi
	}
	b.rate = 0
	if b.score >= bucketScore && b.lo > 0 {
		b.rate = b.lo
	}
}

// adoption gathers what keys joined into one budget knew of one limit
// (CredentialState.Adopt): the newest state any of their reports
// described, what they have in flight, and the most evidence of the
// limiter's kind.
type adoption struct {
	known     bool
	limit     int
	at        time.Time // when the newest state's report arrived
	remaining int
	reset     time.Duration
	open      int // the keys' grants in flight: cost units
	// fixed and score with lo and hi: the highest fixed-window score, and
	// the highest bucket score with its rate bounds.
	fixed, score int
	lo, hi       float64
}

// weigh takes in a key's budget: its newest state if newer than the one
// held (a later full instant, or the same one with less left), and its
// evidence of the limiter's kind.
func (a *adoption) weigh(b *budget) {
	if !b.known || b.repAt.IsZero() {
		return
	}
	full, cur := b.repAt.Add(b.repReset), a.at.Add(a.reset)
	tol := 5*time.Millisecond + b.repReset/50
	if !a.known || full.After(cur.Add(tol)) || (!full.Before(cur.Add(-tol)) && b.repRemain < a.remaining) {
		a.known, a.limit, a.at, a.remaining, a.reset = true, b.limit, b.repAt, b.repRemain, b.repReset
	}
	a.fixed = max(a.fixed, b.fixed)
	if b.score > a.score || a.hi == 0 {
		a.score, a.lo, a.hi = b.score, b.lo, b.hi
	}
}

// adopt starts b from the adoption: the newest state less what the keys
// have in flight (it may not count it), as of now, read as the limiter
// the keys' evidence showed. It reports whether there was a state.
func (a *adoption) adopt(b *budget, now time.Time) bool {
	if !a.known || a.limit <= 0 {
		return false
	}
	remaining, reset := a.remaining, a.reset
	if age := now.Sub(a.at); reset > age {
		reset -= age
	} else {
		// That window has been refilled since; what the keys have in
		// flight lands in the new one.
		remaining, reset = a.limit, 0
	}
	// Until the state's full instant, and a tenth more, the keys' grants
	// may still be in the provider's counts: they are not others'.
	b.inherited = now.Add(reset + reset/10)
	// The window holds what the report counted and, at most, all the keys
	// have in flight: its count (used) starts there, and the report is
	// learned as one that counted none of it, so that a later report of
	// the keys' grants (pacer.foreign) can show that it counted some.
	b.used = a.limit - remaining + a.open
	b.learn(0, a.limit, remaining, reset, a.open, 0, now)
	b.fixed, b.score = a.fixed, a.score
	if b.score >= bucketScore && a.lo > 0 {
		b.lo, b.hi, b.rate = a.lo, a.hi, a.lo
	}
	return true
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

	// foreignReqs and foreignToks are what the keys joined into this
	// budget (Ref.Adopt) granted and have not finished: the provider may
	// count it after the reports this budget has seen. Each key's end of
	// a grant takes it off (pacer.foreign).
	foreignReqs, foreignToks int

	// inf is the request limit of a provider that reports none (Gemini),
	// inferred from its 429s and what its windows let through.
	inf inference

	// holds are when the requests answered with a report leave the
	// provider's request count, as their own reports named it (the
	// report's full instant): the request a report answers was charged
	// no later than the newest charge that report counts, so it has left
	// every limiter by then (a fixed window at its end, a sliding one
	// when its newest charge leaves, a bucket when full). Alone on the
	// budget, a request fits when fewer than the limit are held or in
	// flight: a sliding window then frees its requests one by one
	// instead of all at the instant its newest leaves (which cost the
	// spread of a window's requests in every window). noHolds: a 429
	// came while the rule applied; it is not used again.
	holds   holdHeap
	noHolds bool
	// holdsOwn says the newest report counted no more than the holds and
	// the requests in flight explain: nobody else's requests are in it.
	holdsOwn bool
}

// held decides a request from the holds when they apply (use): alone on a
// request budget read from reports as a window (a bucket is paced at its
// rate), nothing inherited from other keys, no 429 met while they applied.
// fits says one more request is within the limit; if not, at is when the
// earliest hold ends (zero: none does, an answer will tell). The holds,
// not the budget's count, then decide: the count's refill comes at the
// newest report's full instant, right for a fixed window, while a sliding
// window whose requests the holds let go one by one has them leave one by
// one after it.
func (p *pacer) held(now time.Time) (use, fits bool, at time.Time) {
	b := &p.reqs
	if p.noHolds || !p.holdsOwn || !b.known || b.rate > 0 || b.score >= bucketScore || b.asShared() || b.window > 0 || p.inf.on || now.Before(b.inherited) || b.limit <= 0 {
		return false, false, time.Time{}
	}
	n := p.holds.active(now)
	if n+p.inFlight+p.foreignReqs < b.limit {
		return true, true, time.Time{}
	}
	if n > 0 {
		at = p.holds[0]
	}
	return true, false, at
}

// outlook is what the request budget would make of more requests now
// (see Outlook), as blocked would find it, without changing anything
// blocked's refills and turns would.
func (p *pacer) outlook(now time.Time) Outlook {
	b := &p.reqs
	if !b.known || b.limit <= 0 {
		return Outlook{}
	}
	o := Outlook{Limit: max(int(float64(b.limit)/b.share()), 1), InFlight: p.inFlight, Shared: b.shared || p.toks.shared}
	// room is when one more request could be granted, should none be now
	// (zero: when an answer to what is in flight frees room).
	var room time.Time
	switch use, _, _ := p.held(now); {
	case b.rate > 0:
		level := b.level
		if dt := now.Sub(b.levelAt); dt > 0 {
			level = math.Min(float64(o.Limit), level+b.rate/b.share()*dt.Seconds())
		}
		o.Free = int(level)
		if level < 1 {
			room = now.Add(time.Duration((1 - level) / (b.rate / b.share()) * float64(time.Second)))
		}
	case use:
		o.Free = b.limit - p.holds.active(now) - p.inFlight - p.foreignReqs
		if o.Free <= 0 && len(p.holds) > 0 {
			room = p.holds[0]
		}
	case !b.resetAt.IsZero() && !now.Before(b.resetAt):
		o.Free = o.Limit - p.inFlight // refilled; what is in flight may land in it
	default:
		o.Free = b.remaining
		if o.Free <= 0 {
			room = b.resetAt
		}
	}
	if n := p.inf.length(); p.inf.on && n > 0 {
		// An inferred limit also holds to its trailing period (full):
		// on a sliding window that, not the window's count, is what
		// keeps a caller waiting.
		from, in := now.Add(-n), 0
		for i := len(p.inf.accs) - 1; i >= 0 && p.inf.accs[i].After(from); i-- {
			in++
		}
		open, _ := p.open()
		free := b.limit - in - open
		o.Free = min(o.Free, free)
		if over := -free; free <= 0 && over < in {
			// The oldest of those in the period that must leave first
			// (full; when the open ones alone fill it, their answers).
			if at := p.inf.accs[len(p.inf.accs)-in+over].Add(n); at.After(room) {
				room = at
			}
		}
	}
	if now.Before(p.cooldownUntil) {
		o.Free = 0
		if b.resetAt.IsZero() || p.cooldownUntil.After(b.resetAt) {
			o.Cooling = p.cooldownUntil.Sub(now)
		}
		if p.cooldownUntil.After(room) {
			room = p.cooldownUntil
		}
	}
	o.Free = max(o.Free, 0)
	if o.Free == 0 && room.After(now) {
		o.Room = room.Sub(now)
	}
	return o
}

// holdHeap is the holds, earliest first (a min-heap: answers arrive out
// of order). Its cost per admission is logarithmic in the holds, which
// number at most a few times the limit.
type holdHeap []time.Time

func (h holdHeap) Len() int           { return len(h) }
func (h holdHeap) Less(i, j int) bool { return h[i].Before(h[j]) }
func (h holdHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *holdHeap) Push(x any)        { *h = append(*h, x.(time.Time)) }
func (h *holdHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// active drops the holds that ended by now and returns how many remain.
func (h *holdHeap) active(now time.Time) int {
	for len(*h) > 0 && !(*h)[0].After(now) {
		heap.Pop(h)
	}
	return len(*h)
}

// inference learns a request limit from a provider that sends no limit
// headers (Gemini) and tells its limit only by refusing: a 429 with a retry
// delay (Gemini's RetryInfo) ends the current window at arrival + delay,
// and the requests the provider accepted in that window (counted when
// their response headers arrive, not when they end: a 429 comes back at
// once, a stream ends long after) are its limit. The window's length is
// first read from that refusal (its end less when the window's first
// accepted request was sent), then from two window ends a whole number of
// windows apart.
// The budget then refills the limit at each window end on its own, and
// never lets more than the limit into any trailing window (a sliding
// window lets its requests go one by one, not at a turn); a window that
// spends the whole limit without a 429, three times in a row, raises it by
// a quarter, admitted past the old limit one request at a time, so a limit
// inferred low (another client's traffic, a transient refusal) does not
// cap the credential for good, at the cost of one 429 when the real limit
// is met again.
type inference struct {
	on       bool
	accepted int           // requests accepted since the current window began
	end      time.Time     // the newest window end a 429 named
	period   time.Duration // the window's length, once two ends showed it
	starved  bool          // the current window's limit held a request back
	refusal  bool          // the current window saw a 429
	clean    int           // windows in a row spent whole without a 429
	// anchor is the newest window end a refusal named (not one the pacer
	// advanced to by itself): the period is refined from the ends
	// refusals name, a whole number of periods apart.
	anchor time.Time
	// probe says the window turned on the pacer's own clock and no
	// request of it has been accepted yet: one request goes first, so a
	// window turned early (the period read a little short) costs one 429,
	// which names the real end, not a burst of them.
	probe    bool
	probeSeq uint64 // the last grant before the turn
	// accs are when recent requests were accepted (their response headers
	// arrived), oldest first: once the window's length is known no more
	// than the limit are let into any trailing window, so a window that frees its
	// requests one by one (a sliding one) is not met with a burst at its
	// turn. A fixed window's turn frees them all at once, which the
	// requests of the window before it, accepted a period earlier, allow
	// too.
	accs []time.Time
	// raised is the limit before this window raised it (zero: not
	// raised): a refusal in it goes back to that, not below.
	raised int
	// slide is the window's length as the first refusal suggests it (end
	// less when the window's first accepted request was sent), used by
	// the trailing-period rule until two refusals tell the period.
	slide time.Duration
	// firstSent is when the first accepted request was granted, before
	// any refusal: the window began between it and that request's
	// acceptance (accs[0]), as the provider counted its arrival.
	firstSent time.Time
}

// inferGrowAfter is how many whole, refusal-free windows raise an inferred
// limit.
const inferGrowAfter = 3

// maxAccs bounds the acceptance times an inference keeps (it keeps those of
// the trailing period, at most this many).
const maxAccs = 4096

// grant is one admitted request: its token cost and the cumulative cost of
// all grants up to and including it.
type grant struct {
	cost, cum int
	accepted  bool
	at        time.Time // when it was granted
}

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
	// In flight and not yet accepted: what may still land in a fixed
	// window's next window (a request granted before the newest report
	// can reach the provider after the window turned as well as one
	// granted after it; one whose answer has begun was counted).
	reqsOpen, toksOpen := 0, 0
	if p.reqs.known || p.toks.known { // nothing to refill otherwise: no walk over what is in flight
		reqsOpen, toksOpen = p.open()
	}
	if p.inf.on {
		if !p.reqs.resetAt.IsZero() && !now.Before(p.reqs.resetAt) {
			p.turn(now)
			p.reqs.remaining = p.reqs.limit
			p.reqs.resetAt = time.Time{}
			if p.inf.length() > 0 {
				p.reqs.resetAt = p.inf.end.Add(resetMargin)
			}
		}
		if p.inf.probe {
			for s, g := range p.grants {
				if s > p.inf.probeSeq && !g.accepted {
					return true, time.Time{} // the window's first request has not been answered yet
				}
			}
		}
		if full, at := p.inf.full(now, p.reqs.limit, reqsOpen); full {
			p.inf.starved = true // the limit held a request back
			return true, at
		}
	} else {
		p.reqs.refresh(now, int(p.seq), reqsOpen)
	}
	p.toks.refresh(now, p.cum, toksOpen)
	if use, fits, at := p.held(now); use {
		if !fits {
			return true, at
		}
	} else if !p.reqs.allows(1) {
		if p.inf.on {
			p.inf.starved = true
		}
		wake := p.reqs.wakeAt(1, now)
		if wake.IsZero() && p.inFlight == 0 {
			// Nothing will refill it and nothing in flight will report:
			// one request finds out where the budget stands.
			return false, time.Time{}
		}
		return true, wake
	}
	if !p.toks.allows(cost) {
		if p.inFlight == 0 && p.toks.resetAt.IsZero() && p.toks.rate == 0 {
			return false, time.Time{} // nothing will refill it: let one through to learn again
		}
		return true, p.toks.wakeAt(cost, now)
	}
	return false, time.Time{}
}

// open counts the requests granted and not yet accepted, and their token
// cost: what may still land in a window (blocked, outlook).
func (p *pacer) open() (reqs, toks int) {
	reqs, toks = p.foreignReqs, p.foreignToks
	for _, g := range p.grants {
		if !g.accepted {
			reqs++
			toks += g.cost
		}
	}
	return reqs, toks
}

// grant admits a request of cost and returns its sequence number.
func (p *pacer) grant(cost int) uint64 {
	p.seq++
	p.cum += cost
	p.inFlight++
	p.grants[p.seq] = grant{cost: cost, cum: p.cum, at: time.Now()}
	p.reqs.used++
	p.toks.used += cost
	if p.reqs.known {
		p.reqs.remaining--
		p.reqs.level--
	}
	if p.toks.known {
		p.toks.remaining -= cost
		p.toks.level -= float64(cost)
	}
	return p.seq
}

// release ends grant seq and applies its report.
func (p *pacer) release(seq uint64, rl llm.RateLimit, rateLimited bool, retryAfter time.Duration, quotaWindow bool, now time.Time) {
	g, ok := p.grants[seq]
	if !ok {
		return
	}
	delete(p.grants, seq)
	p.inFlight--
	p.observed = true
	if rl.HasRequests || rl.HasTokens {
		if p.inf.on { // the provider reports its limits after all
			p.inf, p.reqs = inference{}, budget{peers: p.reqs.peers}
		}
		if seq > p.lastReport {
			p.lastReport = seq
			p.last = rl
		}
		// Not in this report: everything granted after this request, and
		// what was granted before it and is still in flight (requests reach
		// the provider out of grant order).
		unseenReqs, unseenToks := p.foreignReqs, p.foreignToks
		for s, o := range p.grants {
			if s < seq {
				unseenReqs++
				unseenToks += o.cost
			}
		}
		if rl.HasRequests {
			if !rateLimited && rl.ResetRequests > 0 && len(p.holds) < 4*max(rl.LimitRequests, 1) {
				heap.Push(&p.holds, now.Add(rl.ResetRequests+resetMargin))
			}
			active := p.holds.active(now)
			// The holds and what is in flight bound what of ours the
			// report can count: while they apply, a budget whose
			// refills they outpace (a sliding window's requests let go
			// one by one) is not taken for one others draw on.
			if use, _, _ := p.held(now); use {
				p.reqs.ours, p.reqs.oursKnown = active+p.inFlight+p.foreignReqs, true
			}
			p.reqs.answered(int(seq), 1, rl.LimitRequests, rl.RemainingRequests, rl.ResetRequests, unseenReqs, int(p.seq), now)
			p.reqs.oursKnown = false
			p.holdsOwn = rl.LimitRequests-rl.RemainingRequests <= active+p.inFlight+p.foreignReqs
		}
		if rl.HasTokens {
			p.toks.answered(g.cum, g.cost, rl.LimitTokens, rl.RemainingTokens, rl.ResetTokens, unseenToks, p.cum, now)
		}
	} else if p.reqs.known && !rateLimited && len(p.holds) > 0 {
		// An answer without a report (a failure): the request may have
		// been counted; it is held until the budget's next refill, or as
		// long as the newest report's reset, whichever is later.
		until := now.Add(p.reqs.repReset + resetMargin)
		if p.reqs.resetAt.After(until) {
			until = p.reqs.resetAt
		}
		heap.Push(&p.holds, until)
	}
	if rateLimited && quotaWindow && retryAfter > 0 && p.headerless() {
		p.refuse(g.at, now, retryAfter)
	}
	if rateLimited {
		if use, _, _ := p.held(now); use {
			p.noHolds = true // the holds read this limit wrong: not again
		}
		wait := retryAfter
		if wait <= 0 {
			wait = time.Second
		}
		if until := now.Add(wait); until.After(p.cooldownUntil) {
			p.cooldownUntil = until
		}
		// The provider refused: whatever we thought remained, nothing does
		// until the cooldown ends, and a bucket read from the reports was
		// read wrong: back to windows until the reports agree again.
		for _, b := range []*budget{&p.reqs, &p.toks} {
			if !b.known {
				continue
			}
			if b.peers > 1 && !b.shared && (rl.HasRequests || rl.HasTokens || p.last.HasRequests || p.last.HasTokens) {
				// A provider that reports its limits refused a request we
				// paced within them: other keys draw on this budget.
				b.shared = true
			}
			if b.shared && b.peers > 1 && b.rate > 0 {
				// A bucket shared with other keys: the refusal says they
				// drew on it faster than the reports showed, not that it
				// is no bucket. It is empty now and refills from the
				// cooldown's end.
				b.level, b.levelAt, b.remaining = 0, p.cooldownUntil, 0
				continue
			}
			b.rate, b.score = 0, min(b.score, 0)
			if b == &p.reqs {
				b.remaining = 0
				if b.resetAt.Before(p.cooldownUntil) {
					b.resetAt = p.cooldownUntil
				}
			}
		}
	}
}

// headerless reports whether the provider has said nothing of its limits,
// and no static limit stands in for them.
func (p *pacer) headerless() bool {
	return !p.last.HasRequests && !p.last.HasTokens && p.limits.RequestsPerMinute == 0 && (!p.reqs.known || p.inf.on)
}

// accept notes that grant seq's request was accepted (its response's
// headers arrived): it counts in the current window.
func (p *pacer) accept(seq uint64, now time.Time) {
	g, ok := p.grants[seq]
	if !ok || g.accepted {
		return
	}
	g.accepted = true
	p.grants[seq] = g
	p.inf.accepted++
	if p.inf.on && p.inf.refusal && p.inf.accepted > p.reqs.limit {
		// Accepted in a window that refused: its answer came after the
		// refusal that set the limit, and the provider let it in.
		p.reqs.limit = p.inf.accepted
	}
	if p.headerless() {
		p.inf.accs = append(p.inf.accs, now)
		if !p.inf.on && p.inf.firstSent.IsZero() {
			p.inf.firstSent = g.at
		}
		if len(p.inf.accs) > maxAccs {
			p.inf.accs = append(p.inf.accs[:0], p.inf.accs[len(p.inf.accs)-maxAccs/2:]...)
		}
	}
	if seq > p.inf.probeSeq {
		p.inf.probe = false
	}
}

// refuse learns from a 429 of a headerless provider that named its retry
// delay: the window it ends and what it let through.
//
// A refusal's window end is its arrival plus its delay, and arrival is late
// by however long the answer took to reach us: of the refusals of one
// window the earliest end is the truest. Only a request granted after the
// known window's end can be refused by a later window.
func (p *pacer) refuse(grantedAt, now time.Time, delay time.Duration) {
	inf := &p.inf
	if !inf.on && inf.accepted == 0 {
		return // a refusal before anything was let through teaches only its cooldown
	}
	end := now.Add(delay)
	tol := 20*time.Millisecond + delay/50
	limit := max(inf.accepted, 1)
	if n := inf.length(); inf.on && n > 0 {
		// What the window ending at end let through: the acceptances
		// since its start. On a fixed window those of the current
		// window, as counted since the turn; on a sliding one, whose
		// refusal names when its oldest request leaves, those since that
		// request, which the turn on our own clock may have split.
		limit = max(limit, inf.since(end.Add(-n)))
	}
	if n := inf.length(); inf.on && n > 0 && end.Before(inf.end.Add(-n/2)) && end.After(now) {
		// The window turned on our clock before the provider's (or a
		// sliding one lets its requests go one by one): this refusal
		// names the end of the window still running there, or when its
		// next request leaves. It says nothing of the limit, unless the
		// limit was just raised: then the raise is what it refused.
		// The window and the period are corrected from the end it names.
		raised := inf.raised > 0
		if raised {
			p.reqs.limit, inf.raised = inf.raised, 0
		}
		p.reanchor(end)
		if short := end.Sub(grantedAt); !raised && short > 0 && short <= n/100 {
			// The request went out just before room was made for it:
			// the length was read short by at least that (keys of one
			// organisation each read it from their own first request,
			// which the window's oldest may predate). Longer than a
			// hundredth of it, the wait is another key's request in a
			// window they share, not a misreading.
			p.lengthen(short)
		}
		// The rest of this burst's refusals name the same end: they say
		// nothing of the limit either.
		inf.end, inf.probe, inf.refusal = end, false, true
		p.reqs.remaining = 0
		p.reqs.resetAt = end.Add(resetMargin)
		return
	}
	switch {
	case inf.on && (grantedAt.Before(inf.end) || !end.After(inf.end.Add(tol))):
		if end.Before(inf.end) && inf.end.After(now) { // a truer end of the window not yet turned
			inf.end = end
			p.reanchor(end)
			if p.reqs.resetAt.After(end.Add(resetMargin)) {
				p.reqs.resetAt = end.Add(resetMargin)
			}
		}
		// The window already known. Its first refusal says it let fewer
		// through than inferred; later ones (the rest of a burst) only
		// count acceptances that arrived late.
		if !inf.refusal {
			p.reqs.limit = limit
			if inf.raised > 0 {
				// The window after a raise: the limit is the one the
				// windows before it held to without a refusal.
				p.reqs.limit = max(limit, inf.raised)
			}
		} else {
			p.reqs.limit = max(p.reqs.limit, limit)
		}
		inf.refusal = true
		return
	case inf.on && !inf.end.IsZero():
		gap := end.Sub(inf.end)
		if inf.period == 0 && gap < inf.slide/2 {
			// Too soon after the last end to be the next window's: a
			// window that lets its requests go one by one (a sliding
			// one) named when its next one leaves. Nothing of the limit
			// or the period.
			inf.refusal = true
			p.reqs.remaining = 0
			p.reqs.resetAt = end.Add(resetMargin)
			return
		}
		if gap > tol && (inf.period == 0 || gap < inf.period-tol) {
			inf.period = gap
		}
	case !inf.on && len(inf.accs) > 0:
		// The first refusal: its window began when its first accepted
		// request reached the provider (a window starting at the first
		// request, or a sliding one whose oldest request leaves at end),
		// so its length is about end less that, until two ends tell it.
		// Bounded by the delay, should the first acceptance be long past.
		//
		// Read from when that request was sent, not from its acceptance:
		// the provider counted it in between, and a length read short by
		// the answer's latency lets each trailing slot go that much early,
		// which keys drawing on one sliding window (each reading its own
		// length) meet as a 429 at nearly every turn.
		from := inf.accs[0]
		if !inf.firstSent.IsZero() && inf.firstSent.Before(from) {
			from = inf.firstSent
		}
		inf.slide = min(end.Sub(from), 4*delay)
	}
	inf.on, inf.end, inf.refusal, inf.starved, inf.clean, inf.probe = true, end, true, false, 0, false
	p.reanchor(end)
	p.reqs = budget{known: true, limit: limit, remaining: 0, resetAt: end.Add(resetMargin), window: inf.period, peers: p.reqs.peers}
}

// full reports whether one more request would put more than limit into
// one trailing period: those accepted within it and the open ones
// (granted, not yet accepted), and if so when the oldest that must leave
// does (zero: when an open one is answered). Never while the window's
// length is unknown. An acceptance is seen after the provider counted the
// request, so a window after it the provider has let it go.
func (inf *inference) full(now time.Time, limit, open int) (bool, time.Time) {
	period := inf.length()
	if period <= 0 {
		return false, time.Time{}
	}
	from := now.Add(-period)
	i := 0
	for i < len(inf.accs) && !inf.accs[i].After(from) {
		i++
	}
	if i > 0 {
		inf.accs = append(inf.accs[:0], inf.accs[i:]...)
	}
	over := len(inf.accs) + open - limit
	switch {
	case inf.raised > 0 && open > 0 && len(inf.accs)+open >= inf.raised:
		// Past the limit held before a raise, one request at a time: a
		// raise the provider refuses costs one 429, not a burst.
		return true, time.Time{}
	case over < 0:
		return false, time.Time{}
	case over >= len(inf.accs):
		return true, time.Time{} // the open ones alone fill it: their answers wake the pacer
	}
	return true, inf.accs[over].Add(period)
}

// since counts the acceptances at or after t.
func (inf *inference) since(t time.Time) int {
	n := 0
	for i := len(inf.accs) - 1; i >= 0 && !inf.accs[i].Before(t); i-- {
		n++
	}
	return n
}

// reanchor notes a window end a refusal named. Two such ends a whole
// number of periods apart refine the period: its error shrinks with every
// period between them, where ends the pacer advances by itself carry the
// first estimate's error into every later window.
func (p *pacer) reanchor(end time.Time) {
	inf := &p.inf
	if inf.period > 0 && !inf.anchor.IsZero() && end.After(inf.anchor) {
		gap := end.Sub(inf.anchor)
		if n := math.Round(float64(gap) / float64(inf.period)); n >= 2 {
			inf.period = time.Duration(float64(gap) / n)
			p.reqs.window = inf.period
		}
	}
	inf.anchor = end
}

// lengthen reads the window's length d longer.
func (p *pacer) lengthen(d time.Duration) {
	if inf := &p.inf; inf.period > 0 {
		inf.period += d
		p.reqs.window = inf.period
	} else {
		inf.slide += d
	}
}

// turn starts an inferred limit's next window at its reset.
func (p *pacer) turn(now time.Time) {
	inf := &p.inf
	inf.raised = 0
	if inf.starved && !inf.refusal {
		if inf.clean++; inf.clean >= inferGrowAfter {
			inf.raised = p.reqs.limit
			p.reqs.limit += max(1, p.reqs.limit/4)
			inf.clean = 0
		}
	} else if inf.refusal {
		inf.clean = 0
	}
	inf.accepted, inf.starved, inf.refusal = 0, false, false
	inf.probe, inf.probeSeq = true, p.seq
	if n := inf.length(); n > 0 {
		inf.end = inf.end.Add(n)
		for !inf.end.After(now) {
			inf.end = inf.end.Add(n)
		}
	}
}

// length is the window's length: the period two refusals told, or until
// then the first refusal's suggestion (zero: neither).
func (inf *inference) length() time.Duration {
	if inf.period > 0 {
		return inf.period
	}
	return inf.slide
}

// foreign ends one grant of a key joined into this budget (Ref.Adopt),
// with its report (a zero one for a grant cancelled or answered without
// one). Of one window, the report that shows the least left was counted
// last; what it did not count is in flight at most, ours and the keys':
// so each report and each end of a key's grant can show that the window
// has more room than the adoption, which took every key's grant in flight
// for uncounted, left it. At a join in a window of 20 that adoption left
// 18 served (a whole window more for 100 calls, in TestPacingMatrix).
func (p *pacer) foreign(rl llm.RateLimit, rateLimited bool, cost int, now time.Time) {
	p.foreignReqs = max(p.foreignReqs-1, 0)
	p.foreignToks = max(p.foreignToks-cost, 0)
	reqs, toks := p.foreignReqs, p.foreignToks
	for _, g := range p.grants {
		reqs++
		toks += g.cost
	}
	if rl.HasRequests && !rateLimited && rl.ResetRequests > 0 && len(p.holds) < 4*max(rl.LimitRequests, 1) {
		// The key's request is held as our own are: it was charged to
		// this budget's limit.
		heap.Push(&p.holds, now.Add(rl.ResetRequests+resetMargin))
	}
	// A key's grant was in flight when each report this budget has
	// seen since the join came (repUnseen counts it): refused, or
	// answered with a report that is not the newer state, it was charged
	// before the newest report's request, or not at all.
	if rl.HasRequests && !rateLimited && p.reqs.known {
		if !p.reqs.take(int(p.seq), rl.LimitRequests, rl.RemainingRequests, rl.ResetRequests, reqs, int(p.seq), now, false) {
			p.reqs.before(0, 1)
		}
	} else if rateLimited {
		p.reqs.before(0, 1)
	}
	if rl.HasTokens && !rateLimited && p.toks.known {
		if !p.toks.take(p.cum, rl.LimitTokens, rl.RemainingTokens, rl.ResetTokens, toks, p.cum, now, false) {
			p.toks.before(0, cost)
		}
	} else if rateLimited {
		p.toks.before(0, cost)
	}
	p.reqs.settle(reqs, now)
	p.toks.settle(toks, now)
}

// settle raises a fixed window's remaining to the newest report's less
// unseen, all that is in flight: that report counted everything the
// provider charged before its request, and what it charged after is in
// flight still (an answer showing less left would be the newest report).
// A bucket or a sliding window refills between reports, so that order
// does not hold there; a budget others draw on has their grants besides.
func (b *budget) settle(unseen int, now time.Time) {
	if !b.known || b.rate > 0 || b.score >= bucketScore || b.fixed <= 0 || b.asShared() || b.refilled || b.resetAt.IsZero() || !now.Before(b.resetAt) {
		return
	}
	if left := b.repRemain - unseen; left > b.remaining {
		b.remaining = min(left, b.limit)
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
