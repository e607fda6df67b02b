package faultmatrix

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

const (
	// Budget is each cell's whole-call budget.
	Budget = 2 * time.Second
	// Idle is the stream idle watchdog.
	Idle = 300 * time.Millisecond
	// Slack absorbs scheduling under -race on a loaded machine.
	Slack = 1500 * time.Millisecond
	// DefaultCooldown is the runtime actor's cooldown after a 429/529
	// without a retry hint.
	DefaultCooldown = time.Second
)

// The retry ladder every cell's client runs: three attempts, millisecond
// backoffs (a runner builds its providers.RetryPolicy from them).
const (
	MaxAttempts = 3
	BaseDelay   = 10 * time.Millisecond
	MaxDelay    = 20 * time.Millisecond
)

// Key is the API key of every cell's credential.
const Key = "sk-faultmatrix-SECRET-0123456789abcdef"

// KeyEcho is put in every error body a fault sends, so that redaction is
// exercised on every path.
const KeyEcho = "Incorrect API key provided: " + Key + "."

// Model is the model every cell asks for (the runtime's runner prefixes
// the provider id).
const Model = "m"

// Deltas is the answer every cell asks for: five deltas, so that a
// mid-stream fault after three of them leaves a known partial text.
var Deltas = []string{"one ", "two ", "three ", "four ", "five"}

// Full is the whole answer.
const Full = "one two three four five"

func reply() *llmtest.Reply { return &llmtest.Reply{Deltas: Deltas} }

// Format is one column of the matrix: a wire format and its credential.
type Format struct {
	Name string
	// Path every request of the format must go to ("" = not checked).
	Path string
	// Provider is the provider id, which is also its wire format's name.
	Provider string
	BaseURL  func(*llmtest.Server) string
	// Responses sends Model to the OpenAI Responses API
	// (Config.Models[Model].Responses).
	Responses bool
}

// Formats are the matrix's columns.
var Formats = []Format{
	{Name: "openai-chat", Path: "/v1/chat/completions", Provider: "openai", BaseURL: (*llmtest.Server).OpenAIBaseURL},
	{Name: "openai-responses", Path: "/v1/responses", Provider: "openai", BaseURL: (*llmtest.Server).OpenAIBaseURL, Responses: true},
	{Name: "anthropic", Path: "/v1/messages", Provider: "anthropic", BaseURL: (*llmtest.Server).AnthropicBaseURL},
	{Name: "gemini", Provider: "gemini", BaseURL: (*llmtest.Server).GeminiBaseURL},
}

// Want is a cell's documented outcome.
type Want struct {
	// OK: the call succeeds with Full.
	OK bool
	// Buffered: the success was served from a non-SSE body (Meta.Buffered).
	Buffered bool
	// Requests is the exact number of requests the server must see.
	Requests int
	// Partial, for a stream that failed after events: the text kept in the
	// *llm.StreamError (and delivered as events). Empty: no event may reach
	// the caller and the error is not a StreamError.
	Partial string
	// Err describes how the error (the cause, inside a StreamError) differs
	// from the documented one; "" when it matches.
	Err func(error) string
	// Echo: the provider's error message echoed the key; the error must
	// show it redacted (proof that the echo reached the client).
	Echo bool
	// MinElapsed is a lower bound on the call's duration (a honoured
	// retry-after, a stall the buffered call waits out).
	MinElapsed time.Duration
	// Runtime is how the outcome differs through the runtime.
	Runtime RuntimeWant
}

// RuntimeWant is the Runtime column: what a call through the runtime
// expects instead; zero fields expect what the plain client does.
type RuntimeWant struct {
	// MinElapsed replaces Want.MinElapsed (the actor's cooldown).
	MinElapsed time.Duration
	// Attempts is the result's Meta.Attempts when the call was placed
	// again (it counts the last placement's attempts); 0: Requests.
	Attempts int
}

// Fault is one row of the matrix: the script of a cell and its outcome,
// per mode.
type Fault struct {
	Name string
	Cell func(stream bool) ([]llmtest.Step, Want)
}

func stepFault(f llmtest.Fault) llmtest.Step { return llmtest.Step{Fault: &f} }
func stepReply() llmtest.Step                { return llmtest.Step{Reply: reply()} }

// Error matchers.
func isAPIStatus(status int) func(error) string {
	return func(err error) string {
		var api *llm.APIError
		var rl *llm.RateLimitError
		if !errors.As(err, &api) || api.Status != status || errors.As(err, &rl) {
			return fmt.Sprintf("want *llm.APIError with status %d, got %T %v", status, err, err)
		}
		return ""
	}
}

func isQuota(err error) string {
	var rl *llm.RateLimitError
	if !errors.As(err, &rl) || !rl.QuotaExhausted || rl.Status != 429 || rl.Retryable || !errors.Is(err, llm.ErrRateLimited) {
		return fmt.Sprintf("want *llm.RateLimitError{QuotaExhausted}, got %T %v", err, err)
	}
	return ""
}

func isType[T error](name string) func(error) string {
	return func(err error) string {
		var target T
		if !errors.As(err, &target) {
			return fmt.Sprintf("want %s, got %T %v", name, err, err)
		}
		return ""
	}
}

func isSentinel(target error) func(error) string {
	return func(err error) string {
		if !errors.Is(err, target) {
			return fmt.Sprintf("want %v, got %T %v", target, err, err)
		}
		return ""
	}
}

// isInStreamError: the error event a provider sends inside a 200 stream,
// typed as the provider's API error (status 0 or the status it names).
func isInStreamError(err error) string {
	var api *llm.APIError
	if !errors.As(err, &api) {
		return fmt.Sprintf("want *llm.APIError from the in-stream error event, got %T %v", err, err)
	}
	return ""
}

// Faults is the list of faults, in its order.
func Faults() []Fault {
	decode := isType[*llm.DecodeError]("*llm.DecodeError")
	transport := isType[*llm.TransportError]("*llm.TransportError")
	midStream := func(kind llmtest.FaultKind, after int, buffered Want, bufSteps []llmtest.Step, streamErr func(error) string) func(bool) ([]llmtest.Step, Want) {
		return func(stream bool) ([]llmtest.Step, Want) {
			if !stream {
				return bufSteps, buffered
			}
			f := llmtest.Fault{Kind: kind, After: after, Message: KeyEcho, Reply: reply()}
			if kind == llmtest.FaultStall {
				f.Stall = 10 * time.Second
			}
			return []llmtest.Step{stepFault(f)}, Want{Requests: 1, Partial: strings.Join(Deltas[:after], ""), Err: streamErr,
				Echo: kind == llmtest.FaultInStreamError}
		}
	}
	return []Fault{
		// Through the runtime the actor cools the credential for the
		// retry-after, then the call is placed again.
		{"429-retry-after", func(bool) ([]llmtest.Step, Want) {
			return []llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultStatus, Status: 429, RetryAfter: 150 * time.Millisecond, Message: KeyEcho}), stepReply()},
				Want{OK: true, Requests: 2, MinElapsed: 140 * time.Millisecond, Runtime: RuntimeWant{Attempts: 1}}
		}},
		{"429-quota-exhausted", func(bool) ([]llmtest.Step, Want) {
			return []llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultStatus, Status: 429, Code: "insufficient_quota",
					Message: "You exceeded your current quota, please check your plan and billing details. " + KeyEcho}), stepReply()},
				Want{Requests: 1, Err: isQuota, Echo: true}
		}},
		// The client's ladder spends its attempts; the runtime has no other
		// target to fall back to.
		{"500-persistent", func(bool) ([]llmtest.Step, Want) {
			var steps []llmtest.Step
			for i := 0; i < MaxAttempts; i++ {
				steps = append(steps, stepFault(llmtest.Fault{Kind: llmtest.FaultStatus, Status: 500, Message: KeyEcho}))
			}
			return append(steps, stepReply()), Want{Requests: MaxAttempts, Err: isAPIStatus(500), Echo: true}
		}},
		{"503-transient", func(bool) ([]llmtest.Step, Want) {
			return []llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultStatus, Status: 503, Message: KeyEcho}), stepReply()},
				Want{OK: true, Requests: 2}
		}},
		// 529 without a hint: the client retries at once; through the
		// runtime, the actor's default cooldown, then success.
		{"529-overloaded", func(bool) ([]llmtest.Step, Want) {
			return []llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultStatus, Status: 529, Message: KeyEcho}), stepReply()},
				Want{OK: true, Requests: 2, Runtime: RuntimeWant{MinElapsed: DefaultCooldown - 50*time.Millisecond, Attempts: 1}}
		}},
		{"reset-before-headers", func(bool) ([]llmtest.Step, Want) {
			return []llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultResetBeforeHeaders}), stepReply()},
				Want{OK: true, Requests: 2}
		}},
		// Buffered: half the body, then a reset: a transport failure, retried.
		{"reset-mid-stream", midStream(llmtest.FaultResetMidStream, 3,
			Want{OK: true, Requests: 2},
			[]llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultResetMidStream, Reply: reply()}), stepReply()},
			transport)},
		// Buffered calls have no idle watchdog (only the whole-call budget):
		// a stall shorter than the budget is waited out.
		{"stall-past-idle", midStream(llmtest.FaultStall, 2,
			Want{OK: true, Requests: 1, MinElapsed: 2 * Idle},
			[]llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultStall, Stall: 2 * Idle, Reply: reply()})},
			isSentinel(llm.ErrIdleTimeout))},
		// Buffered: a body that is not JSON is a decode error, final.
		{"malformed-sse-line", midStream(llmtest.FaultMalformedLine, 3,
			Want{Requests: 1, Err: decode},
			[]llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultMalformedLine, Reply: reply()}), stepReply()},
			decode)},
		// Buffered: a body cut mid-JSON reached nobody: retried, like a
		// reset before the first event.
		{"truncated-json", midStream(llmtest.FaultTruncatedJSON, 3,
			Want{OK: true, Requests: 2},
			[]llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultTruncatedJSON, Reply: reply()}), stepReply()},
			decode)},
		// Buffered: a body shorter than its Content-Length: a transport
		// failure, retried.
		{"no-terminator", midStream(llmtest.FaultPrematureClose, 3,
			Want{OK: true, Requests: 2},
			[]llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultPrematureClose, Reply: reply()}), stepReply()},
			isSentinel(llm.ErrPrematureClose))},
		// Buffered: the fake sends the plain reply.
		{"oversize-line", midStream(llmtest.FaultOversizeLine, 3,
			Want{OK: true, Requests: 1},
			[]llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultOversizeLine, Reply: reply()})},
			decode)},
		{"non-sse-200", func(stream bool) ([]llmtest.Step, Want) {
			return []llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultNonSSE200, Reply: reply()})},
				Want{OK: true, Buffered: stream, Requests: 1}
		}},
		{"slow-drip", func(bool) ([]llmtest.Step, Want) {
			// 5 deltas over 500ms: every gap is under the idle timeout.
			return []llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultSlowDrip, Stall: 500 * time.Millisecond, Reply: reply()})},
				Want{OK: true, Requests: 1, MinElapsed: 400 * time.Millisecond}
		}},
		// Buffered: a 200 whose body is the format's error object.
		{"in-stream-error", midStream(llmtest.FaultInStreamError, 3,
			Want{Requests: MaxAttempts, Err: isInStreamError, Echo: true},
			[]llmtest.Step{
				stepFault(llmtest.Fault{Kind: llmtest.FaultInStreamError, Status: 500, Message: KeyEcho}),
				stepFault(llmtest.Fault{Kind: llmtest.FaultInStreamError, Status: 500, Message: KeyEcho}),
				stepFault(llmtest.Fault{Kind: llmtest.FaultInStreamError, Status: 500, Message: KeyEcho}),
				stepReply(),
			},
			isInStreamError)},
		{"wrong-key-401", func(bool) ([]llmtest.Step, Want) {
			return []llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultStatus, Status: 401, Message: KeyEcho}), stepReply()},
				Want{Requests: 1, Err: isAPIStatus(401), Echo: true}
		}},
		{"unknown-model-404", func(bool) ([]llmtest.Step, Want) {
			return []llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultStatus, Status: 404, Message: "The model `m` does not exist or you do not have access to it. " + KeyEcho}), stepReply()},
				Want{Requests: 1, Err: isAPIStatus(404), Echo: true}
		}},
	}
}
