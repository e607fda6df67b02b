package providers

import (
	"context"
	"errors"
	"github.com/chorusrt/chorus/providers/internal/wire"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/chorusrt/chorus/llm"
)

// RetryPolicy shapes the retry ladder. Zero fields take the defaults.
type RetryPolicy struct {
	// MaxAttempts counts the first attempt; 1 disables retries. Default 5.
	MaxAttempts int
	// BaseDelay is the first backoff; it doubles per retry. Default 1s.
	BaseDelay time.Duration
	// MaxDelay caps the computed backoff (after jitter). Default 30s.
	MaxDelay time.Duration
	// MaxRetryAfter caps a provider's retry-after hint. Default 120s. A hint
	// above the cap, or beyond the call's remaining budget, ends the ladder
	// with the rate-limit error instead of sleeping past the deadline.
	MaxRetryAfter time.Duration
	// Jitter is the ± fraction applied to computed backoffs. Default 0.2.
	Jitter float64
	// NoRateLimitRetry leaves 429 and 529 answers to the caller instead of
	// waiting them out: the runtime sets it so that a rate-limited
	// credential cools down in its actor while another credential serves.
	NoRateLimitRetry bool
}

// DefaultRetryPolicy is the ladder used when none is set.
var DefaultRetryPolicy = RetryPolicy{MaxAttempts: 5, BaseDelay: time.Second, MaxDelay: 30 * time.Second, MaxRetryAfter: 120 * time.Second, Jitter: 0.2}

func (p RetryPolicy) withDefaults() RetryPolicy {
	d := DefaultRetryPolicy
	if p.MaxAttempts > 0 {
		d.MaxAttempts = p.MaxAttempts
	}
	if p.BaseDelay > 0 {
		d.BaseDelay = p.BaseDelay
	}
	if p.MaxDelay > 0 {
		d.MaxDelay = p.MaxDelay
	}
	if p.MaxRetryAfter > 0 {
		d.MaxRetryAfter = p.MaxRetryAfter
	}
	if p.Jitter > 0 {
		d.Jitter = min(p.Jitter, 1)
	}
	d.NoRateLimitRetry = p.NoRateLimitRetry
	return d
}

// backoff is the wait before retry number n (n >= 1).
func (p RetryPolicy) backoff(n int) time.Duration {
	shift := min(n-1, 20)
	d := float64(p.BaseDelay) * float64(uint64(1)<<shift)
	d *= 1 + p.Jitter*(2*rand.Float64()-1)
	return min(time.Duration(d), p.MaxDelay)
}

// retryableStatus is the set of HTTP statuses worth another attempt.
func retryableStatus(status int) bool {
	switch status {
	case 408, 429, 500, 502, 503, 504, 529, 520, 521, 522, 523, 524:
		return true
	}
	return false
}

// quotaExhausted reports a 429 that means billing or quota, not pacing:
// by the error's structured fields first (the codec's verdict, then
// OpenAI-format codes), the message text last.
func quotaExhausted(info wire.ErrorInfo, msg string) bool {
	switch info.Quota {
	case wire.QuotaPacing:
		return false
	case wire.QuotaExhausted:
		return true
	}
	switch strings.ToLower(info.Code) {
	case "insufficient_quota", "billing_hard_limit_reached", "insufficient_balance":
		return true
	case "rate_limit_exceeded", "rate_limit_error":
		return false
	}
	s := strings.ToLower(info.Code + " " + info.Type + " " + msg)
	return containsAny(s, "insufficient_quota", "insufficient balance", "insufficient_balance", "exceeded your current quota",
		"no resource package", "billing", "credit balance is too low", "quota exceeded for quota metric")
}

// errClass names an error for the attempt observer.
func errClass(err error) string {
	if err == nil {
		return ""
	}
	var rl *llm.RateLimitError
	var api *llm.APIError
	var te *llm.TransportError
	var de *llm.DecodeError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, llm.ErrIdleTimeout):
		return "idle_timeout"
	case errors.Is(err, llm.ErrPrematureClose):
		return "premature_close"
	case errors.As(err, &rl):
		return "rate_limit"
	case errors.As(err, &api):
		if api.Status >= 500 || api.Status == 0 {
			return "server"
		}
		return "client"
	case errors.As(err, &te):
		return "transport"
	case errors.As(err, &de):
		return "decode"
	}
	return "other"
}

// Retryable reports whether err is worth another attempt: a retryable
// provider answer (429 included), a transport failure, an idle timeout or a
// premature close. The runtime uses it to decide a fallback.
func Retryable(err error) bool { return retryable(err) }

// retryable reports whether the ladder may try err again.
func retryable(err error) bool {
	var api *llm.APIError
	if errors.As(err, &api) {
		return api.Retryable
	}
	var te *llm.TransportError
	if errors.As(err, &te) {
		return true
	}
	return errors.Is(err, llm.ErrIdleTimeout) || errors.Is(err, llm.ErrPrematureClose) || errors.Is(err, errCutShort)
}

// retryHint is the provider's requested wait carried by err, if any.
func retryHint(err error) time.Duration {
	var rl *llm.RateLimitError
	if errors.As(err, &rl) {
		return rl.RetryAfter
	}
	return 0
}

// nextWait decides the wait before the next attempt; ok is false when the
// ladder must stop (no attempts left, or the wait does not fit the budget).
func (p RetryPolicy) nextWait(ctx context.Context, attempt int, err error) (time.Duration, bool) {
	if attempt >= p.MaxAttempts || !retryable(err) {
		return 0, false
	}
	var rl *llm.RateLimitError
	if p.NoRateLimitRetry && errors.As(err, &rl) {
		return 0, false
	}
	wait := p.backoff(attempt)
	if h := retryHint(err); h > 0 {
		if h > p.MaxRetryAfter {
			return 0, false
		}
		wait = h
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= wait {
		return 0, false
	}
	return wait, true
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// attemptResult is what one attempt tells the ladder.
type attemptResult struct {
	status    int
	requestID string
	err       error
	// relearned: the attempt taught a learn-once flag; try again at once.
	relearned bool
}

// ladder runs attempts of one operation until one succeeds, the error is
// final, the attempts run out, or the budget in ctx cannot hold the next
// wait. Every attempt is reported to the attempt observer. Operations other
// than streaming chat use it as is; streams use it with an attempt that
// marks itself final once an event reached the caller.
func (c *Client) ladder(ctx context.Context, op, model string, fn func(ctx context.Context, attempt int) attemptResult) error {
	for attempt := 1; ; attempt++ {
		start := time.Now()
		r := fn(ctx, attempt)
		ev := AttemptEvent{Provider: c.cfg.ID, Op: op, Model: model, Attempt: attempt, Status: r.status, Duration: time.Since(start), Err: r.err, ErrClass: errClass(r.err), RequestID: r.requestID}
		if r.err == nil {
			c.observeAttempt(ev)
			c.attemptHook(ctx, ev)
			return nil
		}
		wait, again := c.next(ctx, attempt, r.err, r.relearned)
		if again {
			ev.Wait = wait
		}
		c.observeAttempt(ev)
		c.attemptHook(ctx, ev)
		if !again {
			return finalError(ctx, r.err, attempt)
		}
		if serr := sleep(ctx, wait); serr != nil {
			return finalError(ctx, r.err, attempt)
		}
	}
}

// next decides whether and when to try again.
func (c *Client) next(ctx context.Context, attempt int, err error, relearned bool) (time.Duration, bool) {
	var final *finalErr
	if ctx.Err() != nil || errors.As(err, &final) {
		return 0, false
	}
	if relearned {
		return 0, attempt < c.retry.MaxAttempts
	}
	return c.retry.nextWait(ctx, attempt, err)
}

// finalError is the error a call returns when the ladder stops: the last
// provider error (a budget that ran out while waiting keeps the provider's
// error, which says more), or the context's error when the call was cut.
func finalError(ctx context.Context, err error, attempts int) error {
	var final *finalErr
	if errors.As(err, &final) {
		err = final.err
	}
	var rl *llm.RateLimitError
	if errors.As(err, &rl) {
		rl.Attempts = attempts
	}
	if err == nil {
		return ctxErr(ctx)
	}
	return err
}

// finalErr marks an attempt's error as the end of the ladder (a stream
// whose events already reached the caller).
type finalErr struct{ err error }

func (e *finalErr) Error() string { return e.err.Error() }
func (e *finalErr) Unwrap() error { return e.err }
