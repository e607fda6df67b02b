package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

type messageResponse struct {
	Type       string          `json:"type"`
	ID         string          `json:"id"`
	Model      string          `json:"model"`
	Content    []responseBlock `json:"content"`
	StopReason string          `json:"stop_reason"`
	// StopSequence is the stop sequence that ended the answer, or null.
	StopSequence *string   `json:"stop_sequence"`
	Usage        wireUsage `json:"usage"`
	Error        *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	RequestID string `json:"request_id"`
}

type responseBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	Data      string          `json:"data"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

type wireUsage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
}

// canonical maps Anthropic usage to llm.Usage; the meanings already agree
// (input_tokens excludes cache reads and writes).
func (u wireUsage) canonical() llm.Usage {
	return llm.Usage{
		PromptTokens:     u.InputTokens,
		CacheReadTokens:  u.CacheReadInputTokens,
		CacheWriteTokens: u.CacheCreationInputTokens,
		CompletionTokens: u.OutputTokens,
	}
}

// ParseChat parses a buffered Messages answer. An error envelope is an
// *llm.APIError; a body that is not a Messages answer is an *llm.DecodeError.
func (Codec) ParseChat(body []byte) (*llm.ChatResult, error) {
	var r messageResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, &llm.DecodeError{Provider: providerName, Err: fmt.Errorf("messages answer: %w", err)}
	}
	if r.Type == "error" || r.Error != nil {
		if r.Error == nil {
			return nil, apiError("", "", r.RequestID)
		}
		return nil, apiError(r.Error.Type, r.Error.Message, r.RequestID)
	}
	if r.Type != "" && r.Type != "message" {
		return nil, &llm.DecodeError{Provider: providerName, Err: fmt.Errorf("unexpected object type %q", r.Type)}
	}
	res := &llm.ChatResult{ID: r.ID, Model: r.Model, Usage: r.Usage.canonical()}
	var content, reasoning strings.Builder
	for i := range r.Content {
		b := &r.Content[i]
		switch b.Type {
		case "text":
			content.WriteString(b.Text)
		case "thinking":
			reasoning.WriteString(b.Thinking)
			res.ThinkingBlocks = append(res.ThinkingBlocks, llm.ThinkingBlock{Format: formatName, Text: b.Thinking, Signature: b.Signature})
		case "redacted_thinking":
			res.ThinkingBlocks = append(res.ThinkingBlocks, llm.ThinkingBlock{Format: formatName, Redacted: true, Data: b.Data})
		case "tool_use":
			if b.ID == "" || b.Name == "" {
				return nil, &llm.DecodeError{Provider: providerName, Err: fmt.Errorf("content[%d]: a tool_use block without its id or name", i)}
			}
			args, err := compactInput(b.Input)
			if err != nil {
				return nil, &llm.DecodeError{Provider: providerName, Err: fmt.Errorf("content[%d].input: %w", i, err)}
			}
			res.ToolCalls = append(res.ToolCalls, llm.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		}
	}
	res.Content = content.String()
	res.Reasoning = reasoning.String()
	res.FinishReason = wire.FinishFor(finishReason(r.StopReason), len(res.ToolCalls))
	if r.StopSequence != nil {
		res.StopSequence = *r.StopSequence
	}
	return res, nil
}

// compactInput is a tool_use input as compact JSON; absent or null is "{}".
func compactInput(in json.RawMessage) (string, error) {
	t := bytes.TrimSpace(in)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return "{}", nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, t); err != nil {
		return "", err
	}
	return buf.String(), nil
}
