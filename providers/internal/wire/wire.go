// Package wire is the contract between the provider client (package
// providers) and the per-format codecs (providers/openai, providers/anthropic,
// providers/gemini). A codec knows one wire format: how to build a request,
// parse a buffered answer, decode a stream and read an error body. It does no
// I/O; transport, retries, budgets, learn-once state and observers live in
// package providers.
package wire

import (
	"net/http"

	"github.com/chorusrt/chorus/llm"
)

// Quirks are explicit per-provider differences within one wire format.
// They are set in the provider registry, never sniffed from URLs.
type Quirks struct {
	// ThinkingObject: send the top-level thinking{type} object (DeepSeek, GLM).
	ThinkingObject bool
	// EchoReasoningWithTools: with tools, always send reasoning_content on
	// assistant turns, empty included (DeepSeek).
	EchoReasoningWithTools bool
	// ReasoningEffort: the provider accepts reasoning_effort.
	ReasoningEffort bool
	// IncludeReasoning: send include_reasoning:true (OpenRouter opt-in).
	IncludeReasoning bool
	// NoJSONSchema: only json_object is accepted; json_schema is a ConfigError.
	NoJSONSchema bool
	// NoStreamOptions: never send stream_options (providers known to reject it).
	NoStreamOptions bool
	// MaxCompletionTokens: send max_completion_tokens instead of max_tokens.
	MaxCompletionTokens bool
	// AnthropicVersion is the anthropic-version header ("2023-06-01" when empty).
	AnthropicVersion string
}

// Learned is a snapshot of a credential's learn-once flags, read by the
// codec when it builds a request.
type Learned struct {
	// NoStreamOptions: the provider rejected stream_options.
	NoStreamOptions bool
	// NoParallelToolCalls: the provider rejected parallel_tool_calls.
	NoParallelToolCalls bool
	// NoReasoningEffort: the provider rejected reasoning_effort.
	NoReasoningEffort bool
	// NoTemperature, NoTopP, NoSeed: the provider rejected the parameter
	// (reasoning models reject sampling controls); it is omitted.
	NoTemperature bool
	NoTopP        bool
	NoSeed        bool
}

// BuildOptions are what a codec needs besides the request.
type BuildOptions struct {
	Provider string
	Stream   bool
	Quirks   Quirks
	Learned  Learned
}

// Request is a built HTTP request, relative to the provider's base URL.
type Request struct {
	Method string
	// Path is appended to the base URL; it may carry a query string.
	Path   string
	Body   []byte
	Header http.Header
}

// ErrorInfo is what a codec reads from an error body.
type ErrorInfo struct {
	Type    string
	Code    string
	Message string
	// Quota is what a 429 means, read from the error's structured fields
	// (codes, types, Google's QuotaFailure and RetryInfo details); the
	// message text decides only when it is QuotaUnknown.
	Quota QuotaVerdict
}

// QuotaVerdict is what a 429's structured fields say it means.
type QuotaVerdict int

const (
	// QuotaUnknown: the structured fields do not say; the message decides.
	QuotaUnknown QuotaVerdict = iota
	// QuotaPacing: a rate limit; wait, then retry within the budget.
	QuotaPacing
	// QuotaExhausted: billing or a quota that a wait within the call does
	// not restore (a per-day quota, insufficient_quota); final.
	QuotaExhausted
)

// Emit hands one event to the stream. It returns false when the caller has
// gone; the decoder must then stop and return ErrAborted.
type Emit func(ev llm.Event) bool

// Codec is one wire format.
type Codec interface {
	// Format names the wire format ("openai", "anthropic", "gemini").
	Format() string
	// ChatRequest builds a chat request. Errors are *llm.ConfigError.
	ChatRequest(req *llm.ChatRequest, o BuildOptions) (*Request, error)
	// Authorize sets the credential's headers.
	Authorize(h http.Header, key string, q Quirks)
	// ParseChat parses a buffered chat answer.
	ParseChat(body []byte) (*llm.ChatResult, error)
	// NewStreamDecoder returns a decoder for one streamed answer.
	NewStreamDecoder() StreamDecoder
	// ParseError reads an error body; unknown shapes give a zero ErrorInfo.
	ParseError(status int, body []byte) ErrorInfo
}

// StreamDecoder decodes one streamed answer. Feed is called once per SSE
// event (name may be empty) or, for a JSON-array stream, once per element.
type StreamDecoder interface {
	// Feed decodes one event and emits its canonical events in order. done
	// asks the reader to stop: the format's terminal event arrived
	// ([DONE], message_stop). An error event inside the stream is returned
	// as *llm.APIError (Retryable set as the format says). name and data are
	// only valid during the call.
	Feed(name, data []byte, emit Emit) (done bool, err error)
	// Complete reports whether the format's completion signal was seen (a
	// finish reason, a terminal event). A body that ends before it is a
	// premature close.
	Complete() bool
	// Result is everything accumulated so far.
	Result() *llm.ChatResult
}
