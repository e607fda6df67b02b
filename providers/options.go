package providers

import (
	"log/slog"
	"net/http"
	"time"
)

// Defaults for the client's timing knobs. Tests change them per client with
// the options, never globally.
const (
	// DefaultTimeout is the whole-call budget: queueing, every attempt, every
	// backoff and, for streams, the whole stream.
	DefaultTimeout = 10 * time.Minute
	// DefaultIdleTimeout ends a stream that sends nothing, keepalive
	// comments included, for this long (time to first byte included).
	DefaultIdleTimeout = 90 * time.Second
	// DefaultStreamBuffer is the capacity of a stream's event channel. An
	// llm.Event is 112 bytes: 64 of them were 7 KiB of every open stream's
	// 17 KiB (BenchmarkStreamMemory), and a smaller channel cost no CPU per
	// delta when the consumer keeps up (BenchmarkStreamChannelMemory: 16
	// and 8 measured as 64 or better). WithStreamBuffer sets another.
	DefaultStreamBuffer = 16
)

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the HTTP client (default NewHTTPClient()).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithRetryPolicy sets the retry ladder.
func WithRetryPolicy(p RetryPolicy) Option { return func(c *Client) { c.retry = p.withDefaults() } }

// WithTimeout sets the whole-call budget; zero or negative means none.
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// WithIdleTimeout sets the stream idle watchdog; zero or negative disables it.
func WithIdleTimeout(d time.Duration) Option { return func(c *Client) { c.idle = d } }

// WithStreamBuffer sets the capacity of each stream's event channel.
func WithStreamBuffer(n int) Option {
	return func(c *Client) {
		if n >= 0 {
			c.buffer = n
		}
	}
}

// WithLearned shares learn-once state between the Clients of one endpoint
// (provider id and base URL), whichever key each holds, or keeps it across
// a Client's replacement (an actor restart).
func WithLearned(l *Learned) Option {
	return func(c *Client) {
		if l != nil {
			c.learned = l
		}
	}
}

// WithAttemptObserver receives every HTTP attempt. Each observer given
// receives every attempt.
func WithAttemptObserver(o AttemptObserver) Option {
	return func(c *Client) {
		if o != nil {
			c.attemptObs = append(c.attemptObs, o)
		}
	}
}

// WithLearnObserver receives every newly learned flag.
func WithLearnObserver(o LearnObserver) Option { return func(c *Client) { c.learnObs = o } }

// WithLogger routes the client's few log lines (learned flags, observer
// panics) to l. The default discards them.
func WithLogger(l *slog.Logger) Option {
	return func(c *Client) {
		if l != nil {
			c.logger = l
		}
	}
}

// WithoutRateLimitRetry makes the client hand 429 and 529 answers back at
// once instead of waiting them out, whatever retry policy is set; the
// runtime uses it so that its credential actors pace and rotate.
func WithoutRateLimitRetry() Option {
	return func(c *Client) { c.noRateLimitRetry = true }
}
