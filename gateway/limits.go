package gateway

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/openai"
	"github.com/chorusrt/chorus/runtime"
)

// window is the span of a key's RPM and TPM budgets.
const window = time.Minute

// keyState is one gateway key's budgets: a fixed one-minute window that
// starts at the first request after the previous one ended, and a count of
// calls in flight.
type keyState struct {
	key Key

	mu       sync.Mutex
	start    time.Time
	reqs     int // requests admitted in the window
	toks     int // tokens charged in the window
	inFlight int
	spent    float64 // US dollars charged, over the Handler's life (Key.BudgetUSD)
}

func newKeyState(k Key) *keyState { return &keyState{key: k} }

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
	return limitsView{
		rpm: k.key.RPM, tpm: k.key.TPM,
		remReq: k.key.RPM - k.reqs, remTok: k.key.TPM - k.toks,
		reset: max(k.start.Add(window).Sub(now), 0),
	}
}

// admission is one admitted call's hold on its key's budgets: end
// releases it, once. The zero admission (no key) holds nothing. It is a
// value, used by the one goroutine serving the call, so admitting a call
// allocates nothing.
type admission struct {
	k     *keyState
	start time.Time // the window the call was admitted in
	ended bool
}

// end ends the call: it leaves the key's calls in flight, and its tokens
// are charged to the window it was admitted in (not to a later one). Only
// the first end counts.
func (a *admission) end(u llm.Usage) {
	if a.k == nil || a.ended {
		return
	}
	a.ended = true
	k := a.k
	k.mu.Lock()
	defer k.mu.Unlock()
	k.inFlight--
	if k.start.Equal(a.start) {
		k.toks += u.TotalTokens()
	}
}

// admit takes one request from the key's budgets. A request is refused
// with 429 when the window's requests are spent, when its tokens are spent
// (tokens are charged after each call from the usage it reported, so a call
// may overrun the last few tokens of a window), or when Concurrency calls
// are in flight. The admission's end ends the call and charges its tokens.
func (k *keyState) admit(now time.Time) (a admission, v limitsView, e *Error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.roll(now)
	v = k.view(now)
	switch {
	case k.key.RPM > 0 && k.reqs >= k.key.RPM:
		return a, v, &Error{Status: http.StatusTooManyRequests, Message: fmt.Sprintf("gateway key %q: %d requests per minute reached", k.key.Name, k.key.RPM), RetryAfter: v.reset}
	case k.key.TPM > 0 && k.toks >= k.key.TPM:
		return a, v, &Error{Status: http.StatusTooManyRequests, Message: fmt.Sprintf("gateway key %q: %d tokens per minute reached", k.key.Name, k.key.TPM), RetryAfter: v.reset}
	case k.key.BudgetUSD > 0 && k.spent >= k.key.BudgetUSD:
		return a, v, errBudgetSpent(k)
	case k.key.Concurrency > 0 && k.inFlight >= k.key.Concurrency:
		return a, v, &Error{Status: http.StatusTooManyRequests, Message: fmt.Sprintf("gateway key %q: %d calls in flight", k.key.Name, k.key.Concurrency), RetryAfter: time.Second}
	}
	k.reqs++
	k.inFlight++
	return admission{k: k, start: k.start}, k.view(now), nil
}

// errBudgetSpent is the refusal of a key whose budget is spent: a 429 an
// SDK does not retry (nothing frees the budget but a new Handler).
func errBudgetSpent(k *keyState) *Error {
	return &Error{Status: http.StatusTooManyRequests, Code: "insufficient_quota", NoRetry: true,
		Message: fmt.Sprintf("gateway key %q: its budget of $%s is spent", k.key.Name, strconv.FormatFloat(k.key.BudgetUSD, 'f', -1, 64))}
}

// charge adds a call's cost, when its model is priced, to the key's
// spending (a call admitted with budget left may cross it).
func (k *keyState) charge(rep *runtime.CallReport) {
	if k == nil || k.key.BudgetUSD <= 0 || !rep.Priced {
		return
	}
	k.mu.Lock()
	k.spent += rep.Cost
	k.mu.Unlock()
}

// budgetSpent reports whether the key's budget is spent.
func (k *keyState) budgetSpent() bool {
	if k == nil || k.key.BudgetUSD <= 0 {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.spent >= k.key.BudgetUSD
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
