package llmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/chorusrt/chorus/llm"
)

// gemini renders the Gemini generateContent format.
type gemini struct{}

type gmCall struct {
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

type gmPart struct {
	Text             *string `json:"text,omitempty"`
	Thought          bool    `json:"thought,omitempty"`
	FunctionCall     *gmCall `json:"functionCall,omitempty"`
	ThoughtSignature string  `json:"thoughtSignature,omitempty"`
}

type gmContent struct {
	Parts []gmPart `json:"parts"`
	Role  string   `json:"role"`
}

type gmCandidate struct {
	Content      gmContent `json:"content"`
	FinishReason string    `json:"finishReason,omitempty"`
	Index        int       `json:"index"`
}

type gmUsage struct {
	PromptTokenCount        int `json:"promptTokenCount"`
	CandidatesTokenCount    int `json:"candidatesTokenCount,omitempty"`
	TotalTokenCount         int `json:"totalTokenCount"`
	CachedContentTokenCount int `json:"cachedContentTokenCount,omitempty"`
	ThoughtsTokenCount      int `json:"thoughtsTokenCount,omitempty"`
}

type gmResponse struct {
	Candidates    []gmCandidate `json:"candidates"`
	UsageMetadata *gmUsage      `json:"usageMetadata,omitempty"`
	ModelVersion  string        `json:"modelVersion"`
	ResponseID    string        `json:"responseId"`
	Padding       string        `json:"padding,omitempty"`
}

func gmUsageOf(u llm.Usage) *gmUsage {
	g := &gmUsage{
		PromptTokenCount:        u.PromptTokens + u.CacheReadTokens + u.CacheWriteTokens,
		CandidatesTokenCount:    u.CompletionTokens - u.ReasoningTokens,
		CachedContentTokenCount: u.CacheReadTokens,
		ThoughtsTokenCount:      u.ReasoningTokens,
	}
	g.TotalTokenCount = g.PromptTokenCount + u.CompletionTokens
	return g
}

func gmFinish(p *plan) string {
	if p.rawFinish != "" {
		return p.rawFinish
	}
	switch p.finish {
	case llm.FinishLength:
		return "MAX_TOKENS"
	case llm.FinishContentFilter:
		return "SAFETY"
	case llm.FinishStop, llm.FinishToolCalls:
		return "STOP"
	default:
		return "OTHER"
	}
}

func (p *plan) gmID() string { return fmt.Sprintf("llmtest-%d", p.seq) }

func (p *plan) gmResp(parts []gmPart, finish string, u *gmUsage) []byte {
	if parts == nil {
		parts = []gmPart{}
	}
	return marshal(gmResponse{
		Candidates:    []gmCandidate{{Content: gmContent{Parts: parts, Role: "model"}, FinishReason: finish}},
		UsageMetadata: u, ModelVersion: p.model, ResponseID: p.gmID(),
	})
}

func (gemini) contentType() string { return "text/event-stream" }

func (gemini) buffered(p *plan) []byte {
	var parts []gmPart
	for _, t := range p.thoughts {
		if !t.redacted && t.text != "" {
			parts = append(parts, gmPart{Text: strp(t.text), Thought: true})
		}
	}
	sig := p.signature
	if text := join(p.refusal) + p.textString(); text != "" {
		parts = append(parts, gmPart{Text: strp(text), ThoughtSignature: sig})
		sig = ""
	}
	for _, t := range p.tools {
		part := gmPart{FunctionCall: &gmCall{Name: t.name, Args: argsObject(t.args)}, ThoughtSignature: t.signature}
		if part.ThoughtSignature == "" && sig != "" {
			part.ThoughtSignature, sig = sig, ""
		}
		parts = append(parts, part)
	}
	if sig != "" {
		parts = append(parts, gmPart{Text: strp(""), ThoughtSignature: sig})
	}
	return p.gmResp(parts, gmFinish(p), gmUsageOf(p.usage))
}

func (gemini) frames(p *plan, _ *exchange) []frame {
	var out []frame
	u := gmUsageOf(p.usage)
	partial := &gmUsage{PromptTokenCount: u.PromptTokenCount, TotalTokenCount: u.PromptTokenCount,
		CachedContentTokenCount: u.CachedContentTokenCount}
	add := func(part gmPart) {
		out = append(out, frame{kind: fDelta, data: p.gmResp([]gmPart{part}, "", partial)})
	}
	for _, t := range p.thoughts {
		for _, d := range t.deltas {
			add(gmPart{Text: strp(d), Thought: true})
		}
	}
	for _, d := range p.refusal {
		add(gmPart{Text: strp(d)})
	}
	for _, d := range p.text {
		add(gmPart{Text: strp(d)})
	}
	for _, t := range p.tools {
		add(gmPart{FunctionCall: &gmCall{Name: t.name, Args: argsObject(t.args)}, ThoughtSignature: t.signature})
	}
	out = append(out, frame{kind: fTail, data: p.gmResp([]gmPart{{Text: strp(""), ThoughtSignature: p.signature}}, gmFinish(p), u)})
	return out
}

// gmStatus is Google's status string for an HTTP status.
func gmStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case http.StatusServiceUnavailable:
		return "UNAVAILABLE"
	case http.StatusGatewayTimeout:
		return "DEADLINE_EXCEEDED"
	default:
		return "INTERNAL"
	}
}

type gmDetail struct {
	Type       string        `json:"@type"`
	Violations []gmViolation `json:"violations,omitempty"`
	RetryDelay string        `json:"retryDelay,omitempty"`
}

type gmViolation struct {
	QuotaID string `json:"quotaId"`
}

type gmError struct {
	Code    int        `json:"code"`
	Message string     `json:"message"`
	Status  string     `json:"status"`
	Details []gmDetail `json:"details,omitempty"`
}

// retryDelay formats d as a protobuf Duration in JSON ("34.4s").
func retryDelay(d time.Duration) string {
	ms := (d + time.Millisecond - 1) / time.Millisecond
	return strconv.FormatFloat(float64(ms)/1000, 'f', -1, 64) + "s"
}

func (gemini) errorBody(status int, f *Fault) []byte {
	e := gmError{Code: status, Message: f.Message, Status: f.Type}
	if e.Status == "" {
		e.Status = gmStatus(status)
	}
	if e.Message == "" {
		switch status {
		case http.StatusTooManyRequests:
			e.Message = "Resource has been exhausted (e.g. check quota)."
		case http.StatusServiceUnavailable:
			e.Message = "The model is overloaded. Please try again later."
		default:
			e.Message = http.StatusText(status)
		}
	}
	if f.QuotaID != "" {
		e.Details = append(e.Details, gmDetail{Type: "type.googleapis.com/google.rpc.QuotaFailure", Violations: []gmViolation{{QuotaID: f.QuotaID}}})
	}
	if f.RetryAfter > 0 {
		e.Details = append(e.Details, gmDetail{Type: "type.googleapis.com/google.rpc.RetryInfo", RetryDelay: retryDelay(f.RetryAfter)})
	}
	return marshal(struct {
		Error gmError `json:"error"`
	}{e})
}

func (g gemini) streamError(f *Fault) frame {
	status := f.Status
	if status == 0 {
		status = http.StatusInternalServerError
	}
	return frame{kind: fTail, data: g.errorBody(status, f)}
}

func (gemini) malformed() frame { return frame{data: []byte("{not json")} }

func (gemini) oversize(p *plan, padding string) frame {
	return frame{data: marshal(gmResponse{
		Candidates:   []gmCandidate{{Content: gmContent{Parts: []gmPart{{Text: strp("")}}, Role: "model"}}},
		ModelVersion: p.model, ResponseID: p.gmID(), Padding: padding,
	})}
}

func (gemini) rateHeaders(http.Header, *rlState) {}
