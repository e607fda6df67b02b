package openai

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/jsonscan"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// responseObject is a Responses API response as far as Chorus reads it.
type responseObject struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	Model             string          `json:"model"`
	Status            string          `json:"status"`
	Error             json.RawMessage `json:"error"`
	IncompleteDetails *struct {
		Reason flexString `json:"reason"`
	} `json:"incomplete_details"`
	Output []responseItem  `json:"output"`
	Usage  json.RawMessage `json:"usage"`
}

// responseItem is one output item; which fields are set depends on Type.
type responseItem struct {
	Type             string          `json:"type"`
	ID               flexString      `json:"id"`
	Content          []responsePart  `json:"content"`
	Summary          []responsePart  `json:"summary"`
	EncryptedContent flexString      `json:"encrypted_content"`
	CallID           flexString      `json:"call_id"`
	Name             flexString      `json:"name"`
	Arguments        json.RawMessage `json:"arguments"`
}

type responsePart struct {
	Type    string     `json:"type"`
	Text    flexString `json:"text"`
	Refusal flexString `json:"refusal"`
}

// ParseChat parses a buffered Responses answer. A body that is only an error
// object, or a response whose status is failed, is an *llm.APIError;
// malformed JSON is an *llm.DecodeError.
func (ResponsesCodec) ParseChat(body []byte) (*llm.ChatResult, error) {
	var r responseObject
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, &llm.DecodeError{Provider: formatName, Err: fmt.Errorf("response: %w", err)}
	}
	hasError := len(r.Error) > 0 && string(r.Error) != "null"
	if hasError && (r.Status == "" || r.Status == "failed") && len(r.Output) == 0 {
		if r.Status == "" {
			info, status := errorFromBody(&errorBody{Error: r.Error})
			if info == (wire.ErrorInfo{}) {
				info.Message = clip(r.Error)
			}
			return nil, apiError(info, status)
		}
		return nil, responseFailed(r.Error)
	}
	if r.Status == "failed" {
		return nil, responseFailed(r.Error)
	}
	res := &llm.ChatResult{ID: r.ID, Model: r.Model}
	if u, ok, err := parseResponsesUsage(r.Usage); err != nil {
		return nil, &llm.DecodeError{Provider: formatName, Err: fmt.Errorf("usage: %w", err)}
	} else if ok {
		res.Usage = u
	}
	var content, refusal, reasoning strings.Builder
	pending := -1 // index in res.ThinkingBlocks of a block waiting for its follower
	for i := range r.Output {
		it := &r.Output[i]
		if pending >= 0 {
			res.ThinkingBlocks[pending].Signature = followerOf(it)
			pending = -1
		}
		switch it.Type {
		case "reasoning":
			text := reasoningText(it.Summary, it.Content)
			appendSep(&reasoning, text)
			res.ThinkingBlocks = append(res.ThinkingBlocks, llm.ThinkingBlock{
				Format: ResponsesFormat, ID: it.ID.s, Text: text, Data: it.EncryptedContent.s,
			})
			pending = len(res.ThinkingBlocks) - 1
		case "message":
			for _, p := range it.Content {
				switch p.Type {
				case "output_text", "text":
					content.WriteString(p.Text.s)
				case "refusal":
					refusal.WriteString(p.Refusal.s)
				}
			}
		case "function_call":
			args := argumentsText(it.Arguments)
			if strings.TrimSpace(args) == "" {
				args = emptyArguments
			}
			id := it.CallID.s
			if id == "" {
				id = it.ID.s
			}
			if id == "" {
				id = syntheticCallID(len(res.ToolCalls))
			}
			res.ToolCalls = append(res.ToolCalls, llm.ToolCall{ID: id, Name: it.Name.s, Arguments: args})
		}
	}
	res.Content, res.Refusal, res.Reasoning = content.String(), refusal.String(), reasoning.String()
	reason := ""
	if r.IncompleteDetails != nil {
		reason = r.IncompleteDetails.Reason.s
	}
	res.FinishReason = responsesFinish(r.Status, reason, len(res.ToolCalls), res.Refusal != "")
	return res, nil
}

// followerOf is the Signature recorded on a reasoning block for the item
// that followed it: "<type>:<id>", the id being a function call's call_id.
func followerOf(it *responseItem) string {
	switch it.Type {
	case "function_call":
		return follower(followsFunctionCall, it.CallID.s)
	case "reasoning":
		return ""
	}
	return follower(it.Type, it.ID.s)
}

// reasoningText is a reasoning item's visible text: its summary parts, or
// its raw reasoning_text content when it has no summary, joined with a
// blank line.
func reasoningText(summary, content []responsePart) string {
	var b strings.Builder
	for _, p := range summary {
		appendSep(&b, p.Text.s)
	}
	if b.Len() == 0 {
		for _, p := range content {
			if p.Type == "reasoning_text" || p.Type == "text" {
				appendSep(&b, p.Text.s)
			}
		}
	}
	return b.String()
}

// reasoningSep separates reasoning summary parts and reasoning items.
const reasoningSep = "\n\n"

func appendSep(b *strings.Builder, s string) {
	if s == "" {
		return
	}
	if b.Len() > 0 {
		b.WriteString(reasoningSep)
	}
	b.WriteString(s)
}

// responsesFinish maps a response status (and incomplete_details.reason)
// to the canonical finish reason, per provider-wire-notes §3.2; a
// completed answer with a refusal part is content_filter.
func responsesFinish(status, reason string, calls int, refused bool) llm.FinishReason {
	switch status {
	case "completed":
		return wire.FinishFor(wire.RefusalFinish(llm.FinishStop, refused), calls)
	case "incomplete":
		switch {
		case reason == "content_filter":
			return llm.FinishContentFilter
		case strings.HasPrefix(reason, "max_output"):
			return llm.FinishLength
		case calls > 0:
			return llm.FinishToolCalls
		default:
			return llm.FinishLength
		}
	}
	return llm.FinishUnknown
}

// responseFailed turns the error object of a failed response ({code,
// message}) into an *llm.APIError.
func responseFailed(v []byte) *llm.APIError {
	info := wire.ErrorInfo{}
	if len(v) > 0 && isObject(v) {
		var eo errorObject
		if json.Unmarshal(v, &eo) == nil {
			info = wire.ErrorInfo{Type: eo.Type.s, Code: eo.Code.s, Message: eo.Message.s}
		}
	}
	if info == (wire.ErrorInfo{}) {
		info.Message = "response failed"
		if len(v) > 0 && !jsonscan.IsNull(v) {
			info.Message += ": " + clip(v)
		}
	}
	return apiError(info, 0)
}

// parseResponsesUsage reads a Responses usage object with jsonscan and
// normalises it (invariant 9). ok is false when usage is absent or null.
// Numbers that do not parse stay zero.
func parseResponsesUsage(v []byte) (u llm.Usage, ok bool, err error) {
	if jsonscan.IsNull(v) || !isObject(v) {
		return llm.Usage{}, false, nil
	}
	var input, output, cached, reasoning int
	o := jsonscan.NewObject(v)
	for o.Next() {
		val := o.Value()
		switch string(o.Key()) {
		case "input_tokens":
			input = intOr0(val)
		case "output_tokens":
			output = intOr0(val)
		case "input_tokens_details":
			cached, err = detailInt(val, "cached_tokens")
		case "output_tokens_details":
			reasoning, err = detailInt(val, "reasoning_tokens")
		}
		if err != nil {
			return llm.Usage{}, false, err
		}
	}
	if o.Err() != nil {
		return llm.Usage{}, false, o.Err()
	}
	prompt := input - cached
	if prompt < 0 {
		prompt = 0
	}
	return llm.Usage{PromptTokens: prompt, CacheReadTokens: cached, CompletionTokens: output, ReasoningTokens: reasoning}, true, nil
}

// detailInt reads one integer member of a details object (null, absent
// or not an object give 0).
func detailInt(v []byte, key string) (int, error) {
	if !isObject(v) {
		return 0, nil
	}
	n := 0
	d := jsonscan.NewObject(v)
	for d.Next() {
		if d.KeyIs(key) {
			n = intOr0(d.Value())
		}
	}
	return n, d.Err()
}
