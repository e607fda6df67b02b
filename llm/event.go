package llm

// EventType says what a streamed Event carries.
type EventType uint8

// Event types, in the order a stream may produce them.
const (
	// EventText is a content delta in Event.Text.
	EventText EventType = iota + 1
	// EventReasoning is a reasoning (thinking) delta in Event.Text.
	EventReasoning
	// EventRefusal is a refusal delta in Event.Text.
	EventRefusal
	// EventToolCallStart opens tool call Event.ToolIndex with its ToolCallID
	// and ToolName; Event.Text may hold the first argument fragment.
	EventToolCallStart
	// EventToolCallDelta appends Event.Text to the arguments of call ToolIndex.
	EventToolCallDelta
	// EventUsage reports cumulative usage in Event.Usage.
	EventUsage
	// EventFinish reports the canonical finish reason in Event.Finish.
	EventFinish
	// EventLogprobs carries the log probabilities of the output tokens
	// streamed since the last one, in Event.Logprobs (only when the request
	// asked for them: ChatRequest.Logprobs).
	EventLogprobs
)

var eventTypeNames = [...]string{"", "text", "reasoning", "refusal", "tool_call_start", "tool_call_delta", "usage", "finish", "logprobs"}

// String returns the event type's name.
func (t EventType) String() string {
	if int(t) < len(eventTypeNames) {
		return eventTypeNames[t]
	}
	return "unknown"
}

// Event is one typed delta of a stream. It is a small value: it travels by
// copy through the request's channel.
type Event struct {
	Type EventType
	// Text is the delta for text, reasoning, refusal and tool-argument events.
	Text string
	// ToolIndex is the call's position in ChatResult.ToolCalls, on every format.
	ToolIndex  int
	ToolCallID string
	ToolName   string
	// Signature is a tool call's opaque signature (Gemini), when present;
	// on an EventReasoning with empty Text, the signature of the thinking
	// block being streamed (Anthropic's signature_delta, sent once per
	// block before it ends).
	Signature string
	Usage     *Usage
	Finish    FinishReason
	// Logprobs is an EventLogprobs's tokens (a pointer: the event stays
	// small for every other type).
	Logprobs *TokenLogprobs
}

// TokenLogprobs are the log probabilities of a run of output tokens.
type TokenLogprobs struct {
	Tokens []TokenLogprob
}
