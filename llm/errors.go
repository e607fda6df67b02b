package llm

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Sentinel errors matched with errors.Is.
var (
	// ErrIdleTimeout means a stream sent nothing for longer than its idle timeout.
	ErrIdleTimeout = errors.New("llm: stream idle timeout")
	// ErrPrematureClose means a stream ended without the provider's completion signal.
	ErrPrematureClose = errors.New("llm: stream closed before completion")
	// ErrUnsupported means the provider or format does not offer the operation.
	ErrUnsupported = errors.New("llm: unsupported")
	// ErrOverloaded means a local admission queue is full.
	ErrOverloaded = errors.New("llm: overloaded")
	// ErrRateLimited is matched by every *RateLimitError.
	ErrRateLimited = errors.New("llm: rate limited")
)

// ConfigError is a request or configuration the caller must fix. Nothing was
// sent. Field names what is wrong, in the caller's terms (e.g. "messages[2].role").
type ConfigError struct {
	Field string
	Msg   string
}

func (e *ConfigError) Error() string {
	if e.Field == "" {
		return "llm: invalid config: " + e.Msg
	}
	return "llm: invalid " + e.Field + ": " + e.Msg
}

// APIError is an error answer from a provider.
type APIError struct {
	Provider string
	Status   int    // HTTP status; 0 for an error event inside a 200 stream
	Type     string // provider error type (Anthropic error.type, Gemini error.status)
	Code     string // provider error code
	Message  string
	// Retryable reports whether the retry ladder may try again.
	Retryable bool
	RequestID string
	// RetryAfter is the provider's retry hint (retry-after, retry-after-ms,
	// Gemini RetryInfo); zero when it gave none.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	s := "llm: " + e.Provider + " API error"
	if e.Status != 0 {
		s += " " + strconv.Itoa(e.Status)
	}
	if e.Code != "" {
		s += " (" + e.Code + ")"
	} else if e.Type != "" {
		s += " (" + e.Type + ")"
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.RequestID != "" {
		s += " [request " + e.RequestID + "]"
	}
	return s
}

// RateLimitError is a 429 (or 529 overload) that outlived the retry ladder,
// or a 429 that means the quota is exhausted (never retried).
type RateLimitError struct {
	APIError
	// QuotaExhausted means billing or quota, not pacing: waiting will not help.
	QuotaExhausted bool
	Attempts       int
	// QuotaID names the provider's quota that refused, when the answer
	// names one (Gemini's QuotaFailure quotaId, such as
	// "GenerateRequestsPerMinutePerProjectPerModel"): a refusal by a quota
	// window, which a pacer may learn the window's limit from.
	QuotaID string
}

func (e *RateLimitError) Error() string {
	s := e.APIError.Error()
	if e.QuotaExhausted {
		s += " (quota exhausted)"
	} else if e.RetryAfter > 0 {
		s += " (retry after " + e.RetryAfter.String() + ")"
	}
	if e.Attempts > 1 {
		s += fmt.Sprintf(" after %d attempts", e.Attempts)
	}
	return s
}

// Unwrap returns the embedded APIError.
func (e *RateLimitError) Unwrap() error { return &e.APIError }

// Is matches ErrRateLimited.
func (e *RateLimitError) Is(target error) bool { return target == ErrRateLimited }

// StreamError is a stream that failed after events reached the caller.
// Partial holds everything received; the call is never retried.
type StreamError struct {
	Partial *ChatResult
	Err     error
}

func (e *StreamError) Error() string {
	return "llm: stream failed after partial output: " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *StreamError) Unwrap() error { return e.Err }

// UnsupportedError says which operation or feature a provider lacks.
type UnsupportedError struct {
	Provider string
	Op       string
}

func (e *UnsupportedError) Error() string {
	return "llm: " + e.Provider + " does not support " + e.Op
}

// Is matches ErrUnsupported.
func (e *UnsupportedError) Is(target error) bool { return target == ErrUnsupported }

// TransportError is a network failure talking to a provider (connection
// refused or reset, TLS, a truncated body).
type TransportError struct {
	Provider string
	Err      error
}

func (e *TransportError) Error() string { return "llm: " + e.Provider + " transport: " + e.Err.Error() }

// Unwrap returns the cause.
func (e *TransportError) Unwrap() error { return e.Err }

// DecodeError is a provider answer Chorus could not parse.
type DecodeError struct {
	Provider string
	Err      error
}

func (e *DecodeError) Error() string { return "llm: " + e.Provider + " decode: " + e.Err.Error() }

// Unwrap returns the cause.
func (e *DecodeError) Unwrap() error { return e.Err }
