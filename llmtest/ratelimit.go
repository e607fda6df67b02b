package llmtest

import (
	"fmt"
	"strconv"
	"time"
)

// rfc3339Milli is RFC 3339 with up to millisecond precision; Anthropic
// sends whole seconds, but windows in tests are often shorter than that.
const rfc3339Milli = "2006-01-02T15:04:05.999Z07:00"

// defaultWindow is the window used when RateLimit.Window is not positive.
const defaultWindow = time.Minute

// limiter is the fixed-window rate-limit emulation. It is guarded by the
// server's mutex.
type limiter struct {
	cfg      RateLimit
	started  bool
	start    time.Time
	requests int
	input    int
	output   int
}

// rlState is a snapshot of the limiter taken when a request was admitted
// or refused; the format renders it as headers.
type rlState struct {
	cfg      RateLimit
	now      time.Time
	end      time.Time
	requests int
	input    int
	output   int
	// exhausted names the dimension that refused the request, if any;
	// cost is the request's token estimate.
	exhausted string
	cost      int
}

func (l *limiter) enabled() bool { return l.cfg.Requests > 0 || l.cfg.Tokens > 0 }

// roll moves the window forward so that it contains now. Windows are
// aligned on the first request: [t0, t0+w), [t0+w, t0+2w), ...
func (l *limiter) roll(now time.Time) {
	if !l.started {
		l.started, l.start = true, now
		return
	}
	if el := now.Sub(l.start); el >= l.cfg.Window {
		l.start = l.start.Add(el / l.cfg.Window * l.cfg.Window)
		l.requests, l.input, l.output = 0, 0, 0
	}
}

// admit charges one request of input and output tokens if the window has
// room for it. A refused request is not charged; the state then names the
// exhausted dimension ("requests" or "tokens").
func (l *limiter) admit(now time.Time, input, output int) (bool, *rlState) {
	l.roll(now)
	st := &rlState{cfg: l.cfg, now: now, end: l.start.Add(l.cfg.Window), cost: input + output}
	switch {
	case l.cfg.Requests > 0 && l.requests+1 > l.cfg.Requests:
		st.exhausted = "requests"
	case l.cfg.Tokens > 0 && l.input+l.output+input+output > l.cfg.Tokens:
		st.exhausted = "tokens"
	default:
		l.requests++
		l.input += input
		l.output += output
	}
	st.requests, st.input, st.output = l.requests, l.input, l.output
	return st.exhausted == "", st
}

// untilReset is how long until a budget of which used is spent is whole
// again: zero when nothing is used, else the rest of the window.
func (st *rlState) untilReset(used int) time.Duration {
	if used == 0 {
		return 0
	}
	return max(st.end.Sub(st.now), 0)
}

// resetTime is the instant untilReset points at.
func (st *rlState) resetTime(used int) time.Time { return st.now.Add(st.untilReset(used)) }

// fault is the error a refused request gets, in format f.
func (st *rlState) fault(f Format, model string) *Fault {
	ft := &Fault{RetryAfter: st.retryAfter()}
	if f != FormatOpenAI {
		return ft
	}
	limit, used, requested := st.cfg.Requests, st.requests, 1
	if st.exhausted == "tokens" {
		limit, used, requested = st.cfg.Tokens, st.input+st.output, st.cost
	}
	ft.Type = st.exhausted
	ft.Message = fmt.Sprintf("Rate limit reached for %s in organization org-llmtest on %s per window: Limit %d, Used %d, Requested %d. Please try again in %s.",
		model, st.exhausted, limit, used, requested, goDuration(ft.RetryAfter))
	return ft
}

// retryAfter is how long a refused request should wait: the rest of the
// window.
func (st *rlState) retryAfter() time.Duration { return max(st.end.Sub(st.now), time.Millisecond) }

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
