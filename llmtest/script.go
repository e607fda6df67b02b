package llmtest

import (
	"strconv"
	"time"

	"github.com/chorusrt/chorus/llm"
)

// Step is one scripted answer: the server consumes one Step per request, in
// the order they were pushed. A Step with a Fault fails (a fault without its
// own Reply interrupts Step.Reply, else the default reply); a Step with
// both nil is answered with the server's default reply.
type Step struct {
	Reply *Reply
	Fault *Fault
}

// Reply is a successful answer, rendered in the wire format of the endpoint
// that was called.
type Reply struct {
	// Text is the assistant's text.
	Text string
	// Deltas is an explicit split of the text for streams (their
	// concatenation replaces Text). When empty, Text is split into chunks of
	// about 4 bytes on rune boundaries.
	Deltas []string
	// Reasoning is the model's visible reasoning: OpenAI-format
	// reasoning_content deltas, one Anthropic thinking block, Gemini parts
	// with thought:true. It is split like Text.
	Reasoning string
	// Signature signs the reasoning: the Anthropic thinking block's
	// signature (sent as a signature_delta), or the Gemini thoughtSignature
	// sent on a trailing empty text part (streams) or the first text part
	// (buffered) when no tool call carries it. Ignored by the OpenAI format.
	Signature string
	// Thinking lists explicit reasoning blocks, in order, each with its own
	// signature (Anthropic thinking and, with Redacted, redacted_thinking
	// blocks). When set it replaces Reasoning and Signature; other formats
	// send the texts one after the other.
	Thinking []llm.ThinkingBlock
	// Refusal is an OpenAI-format refusal (refusal deltas). Anthropic sends
	// it as text with stop_reason "refusal"; Gemini with finishReason
	// "SAFETY". Either way the finish defaults to content_filter.
	Refusal string
	// ToolCalls are the function calls the model makes. Arguments (a JSON
	// object) are streamed in fragments of about 4 bytes on the OpenAI and
	// Anthropic formats; Gemini sends each call whole, with
	// ToolCall.Signature as its thoughtSignature. An empty ID gets a
	// deterministic one ("call_llmtest_<n>", "toolu_llmtest_<n>").
	ToolCalls []llm.ToolCall
	// Finish is the canonical finish reason, mapped to the format's own
	// string. Default: stop, tool_calls when there are tool calls,
	// content_filter with a refusal.
	Finish llm.FinishReason
	// RawFinish, when set, is sent verbatim as the provider's finish string
	// (e.g. "pause_turn", "MALFORMED_FUNCTION_CALL"), overriding Finish.
	RawFinish string
	// Usage, when set, is reported as is (mapped to the format's fields).
	// When nil the server computes it deterministically: prompt tokens =
	// len(request body)/4, completion tokens = the number of deltas of the
	// reply (reasoning, refusal, text and tool-argument fragments),
	// reasoning tokens = the number of reasoning deltas.
	Usage *llm.Usage
	// Logprobs are the answer's token log probabilities, sent in the
	// OpenAI format only (choices[].logprobs.content): buffered all at
	// once; streamed, the i-th with the i-th text delta and any left over
	// with the last.
	Logprobs []llm.TokenLogprob
	// Model is the model the answer names. Default: the requested model,
	// or "llmtest-model" when the request names none.
	Model string
	// Header holds extra response headers.
	Header map[string]string
}

// FaultKind says what goes wrong.
type FaultKind int

// Fault kinds. "After" deltas means Fault.After content deltas (reasoning,
// refusal, text or tool-argument chunks; on Gemini a chunk) are sent first.
const (
	// FaultStatus answers with Fault.Status (default 500), the retry-after
	// headers and the format's error body.
	FaultStatus FaultKind = iota + 1
	// FaultResetBeforeHeaders resets the connection (RST where the platform
	// allows, else a close) before any response byte.
	FaultResetBeforeHeaders
	// FaultResetMidStream sends After deltas, flushes, then resets the
	// connection. On a buffered request it sends half the body first.
	FaultResetMidStream
	// FaultStall sends After deltas, then blocks until Fault.Stall elapses,
	// the client goes away or the server closes; a stall that elapses
	// continues the answer normally. On a buffered request it stalls before
	// the headers.
	FaultStall
	// FaultMalformedLine sends After deltas, then a `data: {not json` event,
	// then the rest of the stream. A buffered request gets `{not json`.
	FaultMalformedLine
	// FaultTruncatedJSON sends After deltas, then the next event cut in the
	// middle of its JSON, then ends the body cleanly. A buffered request gets
	// a body cut mid-JSON (with a matching Content-Length).
	FaultTruncatedJSON
	// FaultPrematureClose sends After deltas, then ends the body cleanly
	// without the finish event or the terminator ([DONE], message_stop,
	// finishReason, the closing "]"). A buffered request gets a body shorter
	// than its Content-Length.
	FaultPrematureClose
	// FaultNonSSE200 answers a streaming request with a buffered
	// application/json body (Fault.Reply or the default reply).
	FaultNonSSE200
	// FaultInStreamError sends After deltas, then the format's in-stream
	// error event, and ends. A buffered request gets status 200 with the
	// format's error body.
	FaultInStreamError
	// FaultOversizeLine sends After deltas, then one 2 MiB data line (a
	// valid, content-free event padded to that size), then the rest of the
	// stream. A buffered request gets the plain reply.
	FaultOversizeLine
	// FaultSlowDrip delays every delta by Fault.Stall divided by the number
	// of deltas; the answer still completes. A buffered body is written in
	// pieces over Fault.Stall.
	FaultSlowDrip
)

var faultKindNames = [...]string{"", "status", "reset-before-headers", "reset-mid-stream", "stall",
	"malformed-line", "truncated-json", "premature-close", "non-sse-200", "in-stream-error",
	"oversize-line", "slow-drip"}

// String returns the fault kind's name.
func (k FaultKind) String() string {
	if k > 0 && int(k) < len(faultKindNames) {
		return faultKindNames[k]
	}
	return "unknown"
}

// Fault is a scripted failure.
type Fault struct {
	// Kind is what goes wrong; zero means FaultStatus.
	Kind FaultKind
	// Status is the HTTP status for FaultStatus (default 500) and the code
	// named in in-stream error bodies.
	Status int
	// RetryAfter, when positive, is sent as retry-after (whole seconds,
	// rounded up) and retry-after-ms on the OpenAI and Anthropic formats,
	// and as a google.rpc.RetryInfo retryDelay in Gemini error bodies
	// (Gemini sends no retry-after header).
	RetryAfter time.Duration
	// Code, Type and Message fill the error body; empty fields get the
	// format's usual values for Status. Code "insufficient_quota" gives
	// OpenAI's quota-exhausted message. On Gemini, Type overrides the
	// status string (e.g. "RESOURCE_EXHAUSTED").
	Code, Type, Message string
	// QuotaID, on Gemini, adds a google.rpc.QuotaFailure detail with one
	// violation of this quota id (e.g.
	// "GenerateRequestsPerMinutePerProjectPerModel-FreeTier").
	QuotaID string
	// After is how many content deltas are sent before a mid-stream fault.
	After int
	// Stall is how long FaultStall blocks, and the total delay FaultSlowDrip
	// spreads over the deltas.
	Stall time.Duration
	// Reply is the answer a mid-stream fault interrupts, or the one that
	// FaultNonSSE200 returns. Default: the Step's Reply, else the server's
	// default reply.
	Reply *Reply
	// Header holds extra response headers (where headers are sent at all).
	Header map[string]string
}

// Respond returns a Step answering with r.
func Respond(r Reply) Step { return Step{Reply: &r} }

// Fail returns a Step failing with f.
func Fail(f Fault) Step { return Step{Fault: &f} }

// Text returns a Step answering with s, streamed in ~4-byte chunks.
func Text(s string) Step { return Respond(Reply{Text: s}) }

// Deltas returns a Step answering with the concatenation of parts,
// streamed one part per delta.
func Deltas(parts ...string) Step { return Respond(Reply{Deltas: parts}) }

// ToolCalls returns a Step answering with the given tool calls and finish
// reason tool_calls.
func ToolCalls(calls ...llm.ToolCall) Step { return Respond(Reply{ToolCalls: calls}) }

// Status returns a Step answering with HTTP status code and, when
// retryAfter is positive, the retry-after headers.
func Status(code int, retryAfter time.Duration) Step {
	return Fail(Fault{Kind: FaultStatus, Status: code, RetryAfter: retryAfter})
}

// RateLimit configures the rate-limit emulation (WithRateLimit): a budget
// of Requests requests and Tokens tokens (a request's input, estimated as
// its body's length / 4, plus its output) per Window, enforced the way
// Model says. A zero Requests or Tokens means that dimension is unlimited
// (and not reported).
//
// Each format reports the budget the way its provider does: OpenAI's
// x-ratelimit-limit/remaining/reset-requests|tokens (resets as Go
// durations meaning "until whole again"), retry-after and retry-after-ms
// on a 429; Anthropic's anthropic-ratelimit-requests-*, -tokens-*,
// -input-tokens-*, -output-tokens-* (RFC 3339 resets); Gemini no header
// at all, and a 429 RESOURCE_EXHAUSTED whose details carry a QuotaFailure
// (a per-minute quota id, or a per-day one when Window is 24h or more) and,
// except for a per-day quota, a RetryInfo retryDelay.
type RateLimit struct {
	Requests, Tokens int
	Window           time.Duration
	// Model is the limiter's algorithm; the zero value is FixedWindow.
	Model LimiterModel
	// PerKey gives each API key a budget of its own; by default every key
	// draws on one budget (one organisation's).
	PerKey bool
	// Orgs maps API keys to organisations: keys of one organisation share
	// one budget, whatever PerKey says.
	Orgs map[string]string
	// QuotaID overrides the quota id of Gemini's QuotaFailure detail.
	QuotaID string
}

// LimiterModel is how a RateLimit admits requests over time.
type LimiterModel int

const (
	// FixedWindow admits the budget once per window; windows start at the
	// first request and follow each other ([t0, t0+w), [t0+w, t0+2w), ...);
	// a reset is the window's end.
	FixedWindow LimiterModel = iota
	// TokenBucket starts full and refills continuously at the budget per
	// window, up to the budget (OpenAI's and Anthropic's limiters); a reset
	// is the time until the bucket is full again, and a refused request's
	// retry-after the time until it fits.
	TokenBucket
	// SlidingWindow admits at most the budget within any trailing window;
	// a reset is when the last charge in the window leaves it.
	SlidingWindow
)

// String names the model.
func (m LimiterModel) String() string {
	switch m {
	case FixedWindow:
		return "fixed-window"
	case TokenBucket:
		return "token-bucket"
	case SlidingWindow:
		return "sliding-window"
	}
	return "LimiterModel(" + strconv.Itoa(int(m)) + ")"
}

// Option configures a Server.
type Option func(*config)

type config struct {
	def      Reply
	rl       RateLimit
	first    time.Duration
	perDelta time.Duration
	now      func() time.Time
	batch    *batchAPI    // WithBatchAPI
	cache    *promptCache // WithPromptCache
}

// WithDefault sets the reply used when the script is empty. The default
// default is Reply{Text: "simulated reply"}.
func WithDefault(r Reply) Option { return func(c *config) { c.def = r } }

// WithRateLimit turns on rate-limit emulation with l (see RateLimit).
func WithRateLimit(l RateLimit) Option { return func(c *config) { c.rl = l } }

// WithClock makes the rate-limit emulation read the time from now instead of
// the wall clock, so a test can step through a window deterministically
// (on a loaded machine a real 200 ms window may pass between two requests).
// Latency (WithLatency) still uses real time.
func WithClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

// WithLatency delays every answer: first before the response headers,
// perDelta before each streamed delta.
func WithLatency(first, perDelta time.Duration) Option {
	return func(c *config) { c.first, c.perDelta = first, perDelta }
}
