package gateway

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chorusrt/chorus/keystore"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/openai"
	"github.com/chorusrt/chorus/runtime"
)

// window is the span of a key's RPM and TPM budgets.
const window = time.Minute

// keyState is one gateway key: its settings, immutable for this value (a
// change through the key store makes a new keyState over the same
// counters), and its counters.
type keyState struct {
	key Key
	// id is the key's id in the key store ("" without one).
	id string
	// revoked: the key is kept to say so, and refused.
	revoked bool
	*keyCounters
}

// keyCounters are a key's budgets in this process: without a key store, a
// fixed one-minute window that starts at the first request after the
// previous one ended, the calls in flight and the spend; with one, the
// leases this replica holds of the fleet's (fleet.go).
type keyCounters struct {
	// cur is the newest keyState over these counters (a batch's lines
	// read the key's settings as they are when each runs).
	cur atomic.Pointer[keyState]

	mu       sync.Mutex
	start    time.Time
	reqs     int // requests admitted in the window
	toks     int // tokens charged in the window
	inFlight int
	// spent is what the key spent in period (NanoUSD), without a store.
	spent  keystore.NanoUSD
	period string

	fl *fleetKey // the leases, with a key store
}

func newKeyState(k Key) *keyState {
	ks := &keyState{key: k, keyCounters: &keyCounters{}}
	ks.cur.Store(ks)
	return ks
}

// latest is the key's newest settings.
func (k *keyState) latest() *keyState {
	if c := k.cur.Load(); c != nil {
		return c
	}
	return k
}

// limitsView is a snapshot for the x-ratelimit-* headers.
type limitsView struct {
	rpm, tpm, remReq, remTok int
	reset                    time.Duration
}

func (k *keyState) roll(now time.Time) {
	if k.start.IsZero() || now.Sub(k.start) >= window {
		k.start, k.reqs, k.toks = now, 0, 0
	}
}

func (k *keyState) view(now time.Time) limitsView {
	if k.fl != nil {
		return k.fl.view(k, now)
	}
	return limitsView{
		rpm: k.key.RPM, tpm: k.key.TPM,
		remReq: k.key.RPM - k.reqs, remTok: k.key.TPM - k.toks,
		reset: max(k.start.Add(window).Sub(now), 0),
	}
}

// admission is one admitted call's hold on its key's budgets: end or done
// releases it, once. The zero admission (no key) holds nothing. It is a
// value, used by the one goroutine serving the call, so admitting a call
// allocates nothing.
type admission struct {
	k     *keyState
	start time.Time // the window the call was admitted in
	// est is the cost reserved for the call (NanoUSD, with a key store);
	// epoch the leases' epoch it was reserved in; period the budget's.
	est    keystore.NanoUSD
	epoch  uint64
	win    int64
	period string
	ended  bool
}

// end ends a call that is charged nothing: it leaves the key's calls in
// flight and its tokens are charged to the window it was admitted in.
func (a *admission) end(u llm.Usage) { a.done(u) }

// done ends the call and charges its tokens to the window it was admitted
// in (not to a later one) and the answers' costs (reps) to the key's
// budget. Only the first end counts.
func (a *admission) done(u llm.Usage, reps ...*runtime.CallReport) {
	if a.k == nil || a.ended {
		return
	}
	a.ended = true
	cost := costOf(reps)
	k := a.k
	if k.fl != nil {
		k.fl.done(k, a, u, cost)
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.inFlight--
	if k.start.Equal(a.start) {
		k.toks += u.TotalTokens()
	}
	k.addSpent(a.period, cost)
}

// costOf adds up the priced reports' costs.
func costOf(reps []*runtime.CallReport) (n keystore.NanoUSD) {
	for _, r := range reps {
		if r != nil && r.Priced {
			n += keystore.ToNano(r.Cost)
		}
	}
	return n
}

// addSpent charges a cost to the period it was admitted in (with k.mu).
func (k *keyState) addSpent(period string, cost keystore.NanoUSD) {
	if k.period != period {
		if period < k.period { // a call admitted in a period that has ended
			return
		}
		k.period, k.spent = period, 0
	}
	k.spent += cost
}

// spentNow is what the key spent in the current period (with k.mu).
func (k *keyState) spentNow(now time.Time) keystore.NanoUSD {
	if k.period != k.key.BudgetPeriod.ID(now) {
		return 0
	}
	return k.spent
}

// admit takes one request from the key's budgets, reserving est (the
// most the call may cost, NanoUSD) of its budget. A request is refused
// with 429 when the window's requests are spent, when its tokens are spent
// (tokens are charged after each call from the usage it reported, so a call
// may overrun the last few tokens of a window), when its budget is spent,
// or when Concurrency calls are in flight. With a key store the budgets
// are the fleet's (fleet.go).
func (k *keyState) admit(now time.Time, est keystore.NanoUSD) (a admission, v limitsView, e *Error) {
	if k.fl != nil {
		return k.fl.admit(k, now, est)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.roll(now)
	v = k.view(now)
	switch {
	case k.key.RPM > 0 && k.reqs >= k.key.RPM:
		return a, v, errRPM(k, v.reset)
	case k.key.TPM > 0 && k.toks >= k.key.TPM:
		return a, v, errTPM(k, v.reset)
	case k.key.BudgetUSD > 0 && k.spentNow(now) >= keystore.ToNano(k.key.BudgetUSD):
		return a, v, errBudgetSpent(k)
	case k.key.Concurrency > 0 && k.inFlight >= k.key.Concurrency:
		return a, v, errConcurrency(k)
	}
	k.reqs++
	k.inFlight++
	return admission{k: k, start: k.start, period: k.key.BudgetPeriod.ID(now)}, k.view(now), nil
}

func errRPM(k *keyState, reset time.Duration) *Error {
	return &Error{Status: http.StatusTooManyRequests, Message: fmt.Sprintf("gateway key %q: %d requests per minute reached", k.key.Name, k.key.RPM), RetryAfter: reset}
}

func errTPM(k *keyState, reset time.Duration) *Error {
	return &Error{Status: http.StatusTooManyRequests, Message: fmt.Sprintf("gateway key %q: %d tokens per minute reached", k.key.Name, k.key.TPM), RetryAfter: reset}
}

func errConcurrency(k *keyState) *Error {
	return &Error{Status: http.StatusTooManyRequests, Message: fmt.Sprintf("gateway key %q: %d calls in flight", k.key.Name, k.key.Concurrency), RetryAfter: time.Second}
}

// errBudgetSpent is the refusal of a key whose budget is spent: a 429 an
// SDK does not retry (nothing frees the budget but its next period or the
// operator).
func errBudgetSpent(k *keyState) *Error {
	per := ""
	switch k.key.BudgetPeriod {
	case keystore.Daily:
		per = " for today (UTC)"
	case keystore.Monthly:
		per = " for this month (UTC)"
	}
	return &Error{Status: http.StatusTooManyRequests, Code: "insufficient_quota", NoRetry: true,
		Message: fmt.Sprintf("gateway key %q: its budget of $%s is spent%s", k.key.Name, strconv.FormatFloat(k.key.BudgetUSD, 'f', -1, 64), per)}
}

// budgetHold is a batch line's hold on its key's budget (lines are not
// charged to RPM, TPM or concurrency): settle charges the line's cost.
type budgetHold struct{ a admission }

// hold reserves est of the key's budget for a batch line, or refuses it
// when the budget is spent.
func (k *keyState) hold(now time.Time, est keystore.NanoUSD) (budgetHold, *Error) {
	if k.fl != nil {
		a, e := k.fl.hold(k, now, est)
		return budgetHold{a}, e
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.key.BudgetUSD > 0 && k.spentNow(now) >= keystore.ToNano(k.key.BudgetUSD) {
		return budgetHold{}, errBudgetSpent(k)
	}
	return budgetHold{admission{k: k, period: k.key.BudgetPeriod.ID(now), ended: false, start: time.Time{}, win: -1}}, nil
}

// settle charges the line's cost (rep may be nil: nothing).
func (b *budgetHold) settle(rep *runtime.CallReport) {
	b.settleCost(costOf([]*runtime.CallReport{rep}))
}

// settleCost charges cost (NanoUSD) to the hold's key.
func (b *budgetHold) settleCost(cost keystore.NanoUSD) {
	a := &b.a
	if a.k == nil || a.ended {
		return
	}
	a.ended = true
	if a.k.fl != nil {
		a.k.fl.settleHold(a.k, a, cost)
		return
	}
	a.k.mu.Lock()
	a.k.addSpent(a.period, cost)
	a.k.mu.Unlock()
}

// allows reports whether the key may call model.
func (k *keyState) allows(model string) bool {
	if len(k.key.Models) == 0 {
		return true
	}
	for _, m := range k.key.Models {
		if m == model {
			return true
		}
		if p, ok := strings.CutSuffix(m, "/*"); ok && strings.HasPrefix(model, p+"/") {
			return true
		}
	}
	return false
}

// setRateLimitHeaders writes the key's own limits in the x-ratelimit-*
// names the OpenAI SDKs read.
func setRateLimitHeaders(h http.Header, v limitsView) {
	reset := v.reset.Round(time.Millisecond).String()
	openai.ServerRateLimitHeaders(h, v.rpm, v.remReq, v.tpm, v.remTok, reset, reset)
}
