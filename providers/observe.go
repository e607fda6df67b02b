package providers

import (
	"context"
	"log/slog"
	"time"
)

// AttemptEvent describes one HTTP attempt. It never holds a key.
type AttemptEvent struct {
	Provider string
	// Op is "chat", "stream", "embed", "speech", "transcribe",
	// "count_tokens" or "list_models".
	Op      string
	Model   string
	Attempt int
	// Status is the HTTP status, 0 when no response arrived.
	Status   int
	Duration time.Duration
	// ErrClass is "" on success, else rate_limit, server, client, transport,
	// decode, idle_timeout, premature_close, canceled or other.
	ErrClass string
	// Err is the attempt's error (key-redacted), nil on success.
	Err error
	// Wait is the delay before the next attempt; zero when this was the last.
	Wait      time.Duration
	RequestID string
}

// AttemptObserver receives every attempt. It runs on the request's
// goroutine; panics are recovered and discarded.
type AttemptObserver func(AttemptEvent)

// LearnObserver receives every newly learned flag.
type LearnObserver func(LearnEvent)

func (c *Client) observeAttempt(ev AttemptEvent) {
	for _, o := range c.attemptObs {
		c.callObserver(o, ev)
	}
}

func (c *Client) callObserver(o AttemptObserver, ev AttemptEvent) {
	defer func() {
		if r := recover(); r != nil {
			c.logger.Warn("attempt observer panicked", slog.String("provider", c.cfg.ID))
		}
	}()
	o(ev)
}

type acceptKey struct{}

// WithAcceptHook returns a context whose calls run fn each time an attempt
// gets a 2xx response's headers: the provider accepted the request, before
// any of its body is read. A pacer of a provider that reports no limits
// counts what a window let through by this, not by when a stream ends (a
// 429 comes back at once, a stream's end long after). fn runs on the
// caller's goroutine, once per accepted attempt.
func WithAcceptHook(ctx context.Context, fn func()) context.Context {
	return context.WithValue(ctx, acceptKey{}, fn)
}

// accepted runs ctx's accept hook, if any.
func accepted(ctx context.Context) {
	if fn, ok := ctx.Value(acceptKey{}).(func()); ok {
		fn()
	}
}
