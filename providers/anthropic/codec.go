package anthropic

import (
	"encoding/json"
	"net/http"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// DefaultBaseURL is the Anthropic API base URL, without a version: request
// paths start with /v1.
const DefaultBaseURL = "https://api.anthropic.com"

// DefaultVersion is the anthropic-version header sent when the provider's
// quirks name none.
const DefaultVersion = "2023-06-01"

// providerName names the format in errors the codec builds itself.
const providerName = "anthropic"

// formatName is the Format of the ThinkingBlocks this codec produces and the
// only Format it replays.
const formatName = "anthropic"

// Codec is the Anthropic Messages wire format. The zero value is ready to use.
type Codec struct{}

var _ wire.Codec = Codec{}

// Format returns "anthropic".
func (Codec) Format() string { return formatName }

// Authorize sets x-api-key and anthropic-version (q.AnthropicVersion, or
// DefaultVersion when empty).
func (Codec) Authorize(h http.Header, key string, q wire.Quirks) {
	h.Set("X-Api-Key", key)
	v := q.AnthropicVersion
	if v == "" {
		v = DefaultVersion
	}
	h.Set("Anthropic-Version", v)
}

// NewStreamDecoder returns a decoder for one streamed Messages answer.
func (Codec) NewStreamDecoder() wire.StreamDecoder { return &decoder{} }

// errorBody is Anthropic's error envelope:
// {"type":"error","error":{"type":...,"message":...},"request_id":...}.
type errorBody struct {
	Type  string `json:"type"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	RequestID string `json:"request_id"`
}

// ParseError reads Anthropic's error envelope. Any other shape gives a zero
// ErrorInfo.
func (Codec) ParseError(status int, body []byte) wire.ErrorInfo {
	var e errorBody
	if err := json.Unmarshal(body, &e); err != nil || e.Error == nil {
		return wire.ErrorInfo{}
	}
	// Anthropic's error type does not tell pacing from an exhausted quota
	// (both may come as rate_limit_error): Quota stays unknown and the
	// message decides.
	return wire.ErrorInfo{Type: e.Error.Type, Message: e.Error.Message}
}

// apiError builds the error for an error envelope or stream error event.
// Anthropic marks overload (HTTP 529) and internal errors as worth retrying.
func apiError(typ, msg, requestID string) *llm.APIError {
	e := &llm.APIError{Provider: providerName, Type: typ, Message: msg, RequestID: requestID}
	switch typ {
	case "overloaded_error":
		e.Status = 529
		e.Retryable = true
	case "api_error":
		e.Retryable = true
	}
	return e
}

// finishReason maps Anthropic's stop_reason to the canonical reasons. Values
// with no canonical meaning (pause_turn, model_context_window_exceeded, ...)
// map to "".
func finishReason(s string) llm.FinishReason {
	switch s {
	case "end_turn", "stop_sequence":
		return llm.FinishStop
	case "max_tokens":
		return llm.FinishLength
	case "tool_use":
		return llm.FinishToolCalls
	case "refusal":
		return llm.FinishContentFilter
	}
	return llm.FinishUnknown
}
