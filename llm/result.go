package llm

import (
	"strings"
	"time"
)

// FinishReason is why the model stopped. Only the five canonical values
// below ever appear; a provider reason with no canonical meaning is "".
type FinishReason string

// Canonical finish reasons.
const (
	FinishStop          FinishReason = "stop"
	FinishLength        FinishReason = "length"
	FinishToolCalls     FinishReason = "tool_calls"
	FinishContentFilter FinishReason = "content_filter"
	FinishUnknown       FinishReason = ""
)

// Valid reports whether r is one of the canonical finish reasons.
func (r FinishReason) Valid() bool {
	switch r {
	case FinishStop, FinishLength, FinishToolCalls, FinishContentFilter, FinishUnknown:
		return true
	}
	return false
}

// Usage counts tokens with one meaning on every provider.
type Usage struct {
	// PromptTokens is uncached input only.
	PromptTokens int
	// CacheReadTokens is input served from the provider's prompt cache.
	CacheReadTokens int
	// CacheWriteTokens is input written to the provider's prompt cache.
	CacheWriteTokens int
	// CompletionTokens is output, reasoning included.
	CompletionTokens int
	// ReasoningTokens is the reasoning part of CompletionTokens.
	ReasoningTokens int
}

// InputTokens is all input: uncached, cache reads and cache writes.
func (u Usage) InputTokens() int { return u.PromptTokens + u.CacheReadTokens + u.CacheWriteTokens }

// TotalTokens is all input plus all output.
func (u Usage) TotalTokens() int { return u.InputTokens() + u.CompletionTokens }

// IsZero reports whether nothing was counted.
func (u Usage) IsZero() bool { return u == Usage{} }

// Add returns the sum of two usages.
func (u Usage) Add(o Usage) Usage {
	return Usage{
		PromptTokens:     u.PromptTokens + o.PromptTokens,
		CacheReadTokens:  u.CacheReadTokens + o.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens + o.CacheWriteTokens,
		CompletionTokens: u.CompletionTokens + o.CompletionTokens,
		ReasoningTokens:  u.ReasoningTokens + o.ReasoningTokens,
	}
}

// RateLimit is the provider's rate-limit state as reported in the response
// headers of the successful attempt. A field the provider did not report is
// zero; HasX reports whether a pair was present at all.
type RateLimit struct {
	LimitRequests     int
	RemainingRequests int
	ResetRequests     time.Duration
	LimitTokens       int
	RemainingTokens   int
	ResetTokens       time.Duration
	// Anthropic reports input and output tokens separately as well.
	LimitInputTokens      int
	RemainingInputTokens  int
	LimitOutputTokens     int
	RemainingOutputTokens int
	// RetryAfter is the provider's retry-after hint, when it sent one.
	RetryAfter time.Duration
	// HasRequests and HasTokens say which limits were reported.
	HasRequests bool
	HasTokens   bool
}

// IsZero reports whether no rate-limit header was present.
func (r RateLimit) IsZero() bool { return r == RateLimit{} }

// ResponseMeta describes the HTTP exchange behind a result.
type ResponseMeta struct {
	Provider  string
	RequestID string
	// Model is the model version the provider says served the call.
	Model     string
	Status    int
	RateLimit RateLimit
	// Attempts is how many HTTP attempts the call took.
	Attempts int
	// Buffered is true when a streaming call was answered by a buffered
	// response (the provider rejected streaming or sent a non-SSE 200).
	Buffered bool
	// SystemFingerprint is OpenAI's system_fingerprint; ServiceTier the
	// tier that served the call, as the provider reports it.
	SystemFingerprint string
	ServiceTier       string
	// Dropped names the request's fields the target's format could not
	// honour and that were left out (llm.Honours.Check): the harmless
	// ones always, the others under DropUnsupported.
	Dropped []string
}

// ChatResult is a whole chat answer: the buffered result, or the
// accumulation of a stream.
type ChatResult struct {
	ID      string
	Model   string
	Content string
	// Refusal is the text of a safety refusal, kept apart from Content
	// (OpenAI's message.refusal and refusal parts). An answer with a
	// refusal that ends normally finishes FinishContentFilter, never
	// FinishStop. Formats that signal a refusal only by their finish
	// reason (Anthropic's refusal, Gemini's SAFETY family) leave it empty.
	Refusal        string
	Reasoning      string
	ThinkingBlocks []ThinkingBlock
	ToolCalls      []ToolCall
	// Images are images the assistant returned, where a format allows it.
	Images       []Part
	FinishReason FinishReason
	// StopSequence is the stop sequence that ended the answer, where the
	// format says (Anthropic's stop_sequence).
	StopSequence string
	// Logprobs are the output tokens' log probabilities, when asked for.
	Logprobs []TokenLogprob
	Usage    Usage
	Meta     ResponseMeta
}

// Message returns the assistant message that replays this result in the
// next request's history, reasoning and signatures included.
func (r *ChatResult) Message() Message {
	m := Message{
		Role:      RoleAssistant,
		Content:   r.Content,
		Reasoning: r.Reasoning,
		Refusal:   r.Refusal,
	}
	if len(r.ToolCalls) > 0 {
		m.ToolCalls = append([]ToolCall(nil), r.ToolCalls...)
	}
	if len(r.ThinkingBlocks) > 0 {
		m.ThinkingBlocks = append([]ThinkingBlock(nil), r.ThinkingBlocks...)
	}
	return m
}

// Clone returns a deep copy of r.
func (r *ChatResult) Clone() *ChatResult {
	if r == nil {
		return nil
	}
	c := *r
	c.ToolCalls = append([]ToolCall(nil), r.ToolCalls...)
	c.ThinkingBlocks = append([]ThinkingBlock(nil), r.ThinkingBlocks...)
	c.Images = append([]Part(nil), r.Images...)
	c.Logprobs = append([]TokenLogprob(nil), r.Logprobs...)
	c.Meta.Dropped = append([]string(nil), r.Meta.Dropped...)
	return &c
}

// ResultBuilder accumulates streamed events into a ChatResult. Decoders use
// it so every format assembles results the same way; it is not safe for
// concurrent use.
type ResultBuilder struct {
	res       ChatResult
	content   strings.Builder
	reasoning strings.Builder
	refusal   strings.Builder
	args      []*strings.Builder
}

// Apply folds one event into the result.
func (b *ResultBuilder) Apply(ev *Event) {
	switch ev.Type {
	case EventText:
		b.content.WriteString(ev.Text)
	case EventReasoning:
		b.reasoning.WriteString(ev.Text)
	case EventRefusal:
		b.refusal.WriteString(ev.Text)
	case EventToolCallStart:
		for len(b.res.ToolCalls) <= ev.ToolIndex {
			b.res.ToolCalls = append(b.res.ToolCalls, ToolCall{})
			b.args = append(b.args, &strings.Builder{})
		}
		tc := &b.res.ToolCalls[ev.ToolIndex]
		tc.ID, tc.Name = ev.ToolCallID, ev.ToolName
		if ev.Signature != "" {
			tc.Signature = ev.Signature
		}
		b.args[ev.ToolIndex].WriteString(ev.Text)
	case EventToolCallDelta:
		if ev.ToolIndex < len(b.args) {
			b.args[ev.ToolIndex].WriteString(ev.Text)
		}
	case EventUsage:
		if ev.Usage != nil {
			b.res.Usage = *ev.Usage
		}
	case EventLogprobs:
		if ev.Logprobs != nil {
			b.res.Logprobs = append(b.res.Logprobs, ev.Logprobs.Tokens...)
		}
	case EventFinish:
		b.res.FinishReason = ev.Finish
	}
}

// SetMeta records the response id and model.
func (b *ResultBuilder) SetMeta(id, model string) {
	if id != "" && b.res.ID == "" {
		b.res.ID = id
	}
	if model != "" && b.res.Model == "" {
		b.res.Model = model
	}
}

// SetServedBy records the provider's system fingerprint and the service
// tier that served the answer (ResponseMeta), each the first one seen.
func (b *ResultBuilder) SetServedBy(fingerprint, tier string) {
	if fingerprint != "" && b.res.Meta.SystemFingerprint == "" {
		b.res.Meta.SystemFingerprint = fingerprint
	}
	if tier != "" && b.res.Meta.ServiceTier == "" {
		b.res.Meta.ServiceTier = tier
	}
}

// AddThinkingBlock appends a completed reasoning block.
func (b *ResultBuilder) AddThinkingBlock(tb ThinkingBlock) {
	b.res.ThinkingBlocks = append(b.res.ThinkingBlocks, tb)
}

// SetToolSignature records a signature for the call at index i.
func (b *ResultBuilder) SetToolSignature(i int, sig string) {
	if i >= 0 && i < len(b.res.ToolCalls) {
		b.res.ToolCalls[i].Signature = sig
	}
}

// AddImage appends an image the assistant returned.
func (b *ResultBuilder) AddImage(p Part) { b.res.Images = append(b.res.Images, p) }

// ToolCallCount is the number of tool calls seen so far.
func (b *ResultBuilder) ToolCallCount() int { return len(b.res.ToolCalls) }

// HasRefusal reports whether a refusal delta was applied.
func (b *ResultBuilder) HasRefusal() bool { return b.refusal.Len() > 0 }

// FinishReason is the finish reason recorded so far.
func (b *ResultBuilder) FinishReason() FinishReason { return b.res.FinishReason }

// Result returns the accumulated result. The builder may keep accumulating
// after it; each call returns a fresh value.
func (b *ResultBuilder) Result() *ChatResult {
	r := b.res
	r.Content = b.content.String()
	r.Reasoning = b.reasoning.String()
	r.Refusal = b.refusal.String()
	r.ToolCalls = append([]ToolCall(nil), b.res.ToolCalls...)
	for i := range r.ToolCalls {
		r.ToolCalls[i].Arguments = b.args[i].String()
	}
	r.ThinkingBlocks = append([]ThinkingBlock(nil), b.res.ThinkingBlocks...)
	r.Images = append([]Part(nil), b.res.Images...)
	if len(r.ToolCalls) == 0 {
		r.ToolCalls = nil
	}
	if len(r.ThinkingBlocks) == 0 {
		r.ThinkingBlocks = nil
	}
	if len(r.Images) == 0 {
		r.Images = nil
	}
	return &r
}
