package providers

import (
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
