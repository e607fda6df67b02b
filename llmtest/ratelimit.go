package llmtest

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// rfc3339Milli is RFC 3339 with up to millisecond precision; Anthropic
// sends whole seconds, but windows in tests are often shorter than that.
const rfc3339Milli = "2006-01-02T15:04:05.999Z07:00"

// defaultWindow is the window used when RateLimit.Window is not positive.
const defaultWindow = time.Minute

// limiter is the rate-limit emulation: one budget per group of keys (see
// RateLimit.PerKey and RateLimit.Orgs). It is guarded by the server's
// mutex.
type limiter struct {
	cfg    RateLimit
	groups map[string]*budget
}

func (l *limiter) enabled() bool { return l.cfg.Requests > 0 || l.cfg.Tokens > 0 }

// group names the budget a request with API key key draws on.
func (l *limiter) group(key string) string {
	if org, ok := l.cfg.Orgs[key]; ok {
		return "org:" + org
	}
	if l.cfg.PerKey {
		return "key:" + key
	}
	return ""
}

// budget is one group's limits: requests, tokens (input and output
// together, what RateLimit.Tokens limits), and input and output tokens
// apart (what Anthropic also reports).
type budget struct {
	fixedStart time.Time
	started    bool
	req, tok   dim
	in, out    dim
}

// dim is one limited quantity under the limiter's model.
type dim struct {
	limit int
	// FixedWindow: used in the current window.
	used int
	// TokenBucket: what is available, refilled continuously at limit per
	// window up to limit, as of last.
	level float64
	last  time.Time
	// SlidingWindow: what each admitted request charged, oldest first.
	log []charge
}

type charge struct {
	at time.Time
	n  int
}

// rlState is a snapshot of one budget taken when a request was admitted or
// refused; the format renders it as headers and, when refused, as a fault.
type rlState struct {
	cfg RateLimit
	now time.Time
	// Per dimension: what remains and how long until it is whole again
	// (FixedWindow: the window's end; TokenBucket: full again;
	// SlidingWindow: the last charge in the window has left it).
	req, tok, in, out dimState
	// exhausted names the dimension that refused the request ("requests"
	// or "tokens"), if any; cost is the request's token charge; retry is
	// how long until the refused request would fit.
	exhausted string
	cost      int
	retry     time.Duration
}

type dimState struct {
	limit, remaining int
	untilFull        time.Duration
}

func (d dimState) used() int { return d.limit - d.remaining }

// admit charges one request of input and output tokens if the budget of
// key's group has room for it. A refused request is not charged.
func (l *limiter) admit(now time.Time, key string, input, output int) (bool, *rlState) {
	if l.groups == nil {
		l.groups = map[string]*budget{}
	}
	g := l.group(key)
	b := l.groups[g]
	if b == nil {
		b = &budget{}
		b.req.limit, b.tok.limit, b.in.limit, b.out.limit = l.cfg.Requests, l.cfg.Tokens, l.cfg.Tokens, l.cfg.Tokens
		l.groups[g] = b
	}
	m, w := l.cfg.Model, l.cfg.Window
	if m == FixedWindow {
		b.roll(now, w)
	}
	for _, d := range []*dim{&b.req, &b.tok, &b.in, &b.out} {
		d.update(m, now, w)
	}
	cost := input + output
	st := &rlState{cfg: l.cfg, now: now, cost: cost}
	switch {
	case l.cfg.Requests > 0 && b.req.avail(m) < 1:
		st.exhausted, st.retry = "requests", b.req.untilAvail(m, now, w, b.fixedStart, 1)
	case l.cfg.Tokens > 0 && b.tok.avail(m) < float64(cost):
		st.exhausted, st.retry = "tokens", b.tok.untilAvail(m, now, w, b.fixedStart, cost)
	default:
		b.req.charge(m, now, 1)
		b.tok.charge(m, now, cost)
		b.in.charge(m, now, input)
		b.out.charge(m, now, output)
	}
	st.req, st.tok = b.req.state(m, now, w, b.fixedStart), b.tok.state(m, now, w, b.fixedStart)
	st.in, st.out = b.in.state(m, now, w, b.fixedStart), b.out.state(m, now, w, b.fixedStart)
	return st.exhausted == "", st
}

// roll moves a fixed window forward so that it contains now. Windows are
// aligned on the first request: [t0, t0+w), [t0+w, t0+2w), ...
func (b *budget) roll(now time.Time, w time.Duration) {
	if !b.started {
		b.started, b.fixedStart = true, now
		return
	}
	if el := now.Sub(b.fixedStart); el >= w {
		b.fixedStart = b.fixedStart.Add(el / w * w)
		b.req.used, b.tok.used, b.in.used, b.out.used = 0, 0, 0, 0
	}
}

// update brings a bucket's level or a sliding window's log up to now.
func (d *dim) update(m LimiterModel, now time.Time, w time.Duration) {
	switch m {
	case TokenBucket:
		if d.last.IsZero() {
			d.level, d.last = float64(d.limit), now
			return
		}
		if dt := now.Sub(d.last); dt > 0 {
			d.level = math.Min(float64(d.limit), d.level+float64(d.limit)*dt.Seconds()/w.Seconds())
			d.last = now
		}
	case SlidingWindow:
		i := 0
		for i < len(d.log) && !d.log[i].at.Add(w).After(now) {
			i++
		}
		d.log = d.log[i:]
	}
}

func (d *dim) avail(m LimiterModel) float64 {
	switch m {
	case TokenBucket:
		return d.level
	case SlidingWindow:
		used := 0
		for _, c := range d.log {
			used += c.n
		}
		return float64(d.limit - used)
	}
	return float64(d.limit - d.used)
}

func (d *dim) charge(m LimiterModel, now time.Time, n int) {
	switch m {
	case TokenBucket:
		d.level -= float64(n)
	case SlidingWindow:
		d.log = append(d.log, charge{now, n})
	default:
		d.used += n
	}
}

// untilAvail is how long until n fits.
func (d *dim) untilAvail(m LimiterModel, now time.Time, w time.Duration, start time.Time, n int) time.Duration {
	short := float64(n) - d.avail(m)
	if short <= 0 {
		return 0
	}
	switch m {
	case TokenBucket:
		return time.Duration(math.Ceil(short / float64(d.limit) * float64(w)))
	case SlidingWindow:
		freed := 0.0
		for _, c := range d.log {
			freed += float64(c.n)
			if freed >= short {
				return max(c.at.Add(w).Sub(now), 0)
			}
		}
		return w
	}
	return max(start.Add(w).Sub(now), 0)
}

func (d *dim) state(m LimiterModel, now time.Time, w time.Duration, start time.Time) dimState {
	s := dimState{limit: d.limit, remaining: max(int(math.Floor(d.avail(m))), 0)}
	switch m {
	case TokenBucket:
		s.untilFull = time.Duration(math.Ceil((float64(d.limit) - d.level) / float64(d.limit) * float64(w)))
	case SlidingWindow:
		if n := len(d.log); n > 0 {
			s.untilFull = max(d.log[n-1].at.Add(w).Sub(now), 0)
		}
	default:
		if d.used > 0 {
			s.untilFull = max(start.Add(w).Sub(now), 0)
		}
	}
	return s
}

// resetTime is the instant a dimension is whole again.
func (st *rlState) resetTime(d dimState) time.Time { return st.now.Add(d.untilFull) }

// fault is the error a refused request gets, in format f.
func (st *rlState) fault(f Format, model string) *Fault {
	ft := &Fault{RetryAfter: max(st.retry, time.Millisecond)}
	switch f {
	case FormatOpenAI:
		d, requested := st.req, 1
		if st.exhausted == "tokens" {
			d, requested = st.tok, st.cost
		}
		ft.Type = st.exhausted
		ft.Message = fmt.Sprintf("Rate limit reached for %s in organization org-llmtest on %s per %s: Limit %d, Used %d, Requested %d. Please try again in %s.",
			model, st.exhausted, st.cfg.per(), d.limit, d.used(), requested, goDuration(ft.RetryAfter))
	case FormatGemini:
		// Gemini's 429 says "quota" for a per-minute limit too; what tells
		// pacing from an exhausted quota is the detail: a per-minute quota
		// id with a RetryInfo, or a per-day one without.
		ft.Message = "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits."
		ft.QuotaID = st.cfg.quotaID(st.exhausted)
		if st.cfg.daily() {
			ft.RetryAfter = 0 // a per-day quota: no RetryInfo, as Gemini sends it
		}
	}
	return ft
}

// per names the limit's period in OpenAI's message ("min", "day", or the
// window).
func (l RateLimit) per() string {
	switch l.Window {
	case time.Minute:
		return "min"
	case 24 * time.Hour:
		return "day"
	}
	return l.Window.String()
}

func (l RateLimit) daily() bool { return l.Window >= 24*time.Hour }

// quotaID is the Gemini QuotaFailure quota id for the exhausted dimension.
func (l RateLimit) quotaID(exhausted string) string {
	if l.QuotaID != "" {
		return l.QuotaID
	}
	what, per := "GenerateRequests", "PerMinute"
	if exhausted == "tokens" {
		what = "GenerateContentInputTokens"
	}
	if l.daily() {
		per = "PerDay"
	}
	return what + per + "PerProjectPerModel-FreeTier"
}

// requestKey is the API key a request carries, the way each SDK sends it.
func requestKey(r *http.Request) string {
	if v := r.Header.Get("Authorization"); v != "" {
		return strings.TrimSpace(strings.TrimPrefix(v, "Bearer "))
	}
	for _, h := range []string{"x-api-key", "x-goog-api-key"} {
		if v := r.Header.Get(h); v != "" {
			return v
		}
	}
	return r.URL.Query().Get("key")
}

func itoa(n int) string { return strconv.Itoa(n) }

// goDuration renders d as OpenAI does ("6ms", "1.5s", "1m0s"): Go duration
// text, rounded up to the millisecond.
func goDuration(d time.Duration) string {
	return ((d + time.Millisecond - 1) / time.Millisecond * time.Millisecond).String()
}

// retryAfterSeconds is d in whole seconds, rounded up, at least 1.
func retryAfterSeconds(d time.Duration) string {
	return strconv.FormatInt(int64(max((d+time.Second-1)/time.Second, 1)), 10)
}

// retryAfterMillis is d in whole milliseconds, rounded up.
func retryAfterMillis(d time.Duration) string {
	return strconv.FormatInt(int64((d+time.Millisecond-1)/time.Millisecond), 10)
}
