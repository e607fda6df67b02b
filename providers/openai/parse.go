package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

type chatResponse struct {
	ID                string          `json:"id"`
	Model             string          `json:"model"`
	Choices           []chatChoice    `json:"choices"`
	Usage             json.RawMessage `json:"usage"`
	Error             json.RawMessage `json:"error"`
	SystemFingerprint flexString      `json:"system_fingerprint"`
	ServiceTier       flexString      `json:"service_tier"`
}

type chatChoice struct {
	Index        int             `json:"index"`
	Message      respMessage     `json:"message"`
	FinishReason json.RawMessage `json:"finish_reason"`
	Logprobs     *wireLogprobs   `json:"logprobs"`
}

// wireLogprobs is a choice's logprobs (Chat Completions): content tokens.
type wireLogprobs struct {
	Content []wireTokenLogprob `json:"content"`
}

type wireTokenLogprob struct {
	Token       string             `json:"token"`
	Logprob     float64            `json:"logprob"`
	Bytes       []int              `json:"bytes"`
	TopLogprobs []wireTokenLogprob `json:"top_logprobs,omitempty"`
}

func logprobsOf(w []wireTokenLogprob) []llm.TokenLogprob {
	out := make([]llm.TokenLogprob, len(w))
	for i, t := range w {
		out[i] = llm.TokenLogprob{Token: t.Token, Logprob: t.Logprob, Bytes: t.Bytes}
		for _, a := range t.TopLogprobs {
			out[i].Top = append(out[i].Top, llm.TopLogprob{Token: a.Token, Logprob: a.Logprob, Bytes: a.Bytes})
		}
	}
	return out
}

func wireLogprobsOf(l []llm.TokenLogprob) []wireTokenLogprob {
	out := make([]wireTokenLogprob, len(l))
	for i, t := range l {
		out[i] = wireTokenLogprob{Token: t.Token, Logprob: t.Logprob, Bytes: t.Bytes, TopLogprobs: []wireTokenLogprob{}}
		for _, a := range t.Top {
			out[i].TopLogprobs = append(out[i].TopLogprobs, wireTokenLogprob{Token: a.Token, Logprob: a.Logprob, Bytes: a.Bytes})
		}
	}
	return out
}

type respMessage struct {
	Content          json.RawMessage `json:"content"`
	Refusal          flexString      `json:"refusal"`
	ReasoningContent flexString      `json:"reasoning_content"`
	Reasoning        flexString      `json:"reasoning"`
	ReasoningDetails json.RawMessage `json:"reasoning_details"`
	ToolCalls        []respToolCall  `json:"tool_calls"`
	FunctionCall     *respFunction   `json:"function_call"` // legacy functions API
	// Images are assistant images (OpenRouter's image output).
	Images []respImage `json:"images"`
}

type respImage struct {
	ImageURL struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

type respToolCall struct {
	ID       flexString   `json:"id"`
	Function respFunction `json:"function"`
}

type respFunction struct {
	Name      flexString      `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ParseChat parses a buffered chat completion. A body holding an error
// object and no choices is an *llm.APIError; malformed JSON is an
// *llm.DecodeError.
func (Codec) ParseChat(body []byte) (*llm.ChatResult, error) {
	if res, ok := parseChatFast(body); ok {
		return res, nil
	}
	return parseChatSlow(body)
}

// parseChatSlow is ParseChat with encoding/json: every answer it can hold.
func parseChatSlow(body []byte) (*llm.ChatResult, error) {
	var r chatResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, &llm.DecodeError{Provider: formatName, Err: fmt.Errorf("chat completion: %w", err)}
	}
	if len(r.Choices) == 0 && len(r.Error) > 0 && string(r.Error) != "null" {
		info, status := errorFromBody(&errorBody{Error: r.Error})
		return nil, apiError(info, status)
	}
	res := &llm.ChatResult{ID: r.ID, Model: r.Model}
	if u, ok, err := parseUsage(r.Usage); err != nil {
		return nil, &llm.DecodeError{Provider: formatName, Err: fmt.Errorf("usage: %w", err)}
	} else if ok {
		res.Usage = u
	}
	if len(r.Choices) == 0 {
		return res, nil
	}
	ch := &r.Choices[0]
	for i := range r.Choices {
		if r.Choices[i].Index == 0 {
			ch = &r.Choices[i]
			break
		}
	}
	res.Meta.SystemFingerprint, res.Meta.ServiceTier = r.SystemFingerprint.s, r.ServiceTier.s
	if ch.Logprobs != nil && len(ch.Logprobs.Content) > 0 {
		res.Logprobs = logprobsOf(ch.Logprobs.Content)
	}
	m := &ch.Message
	content, refusal := messageContent(m.Content)
	res.Content = content
	res.Refusal = m.Refusal.s
	if res.Refusal == "" {
		res.Refusal = refusal
	}
	switch {
	case m.ReasoningContent.s != "":
		res.Reasoning = m.ReasoningContent.s
	case m.Reasoning.s != "":
		res.Reasoning = m.Reasoning.s
	default:
		s, err := foldReasoningDetails(m.ReasoningDetails)
		if err != nil {
			return nil, &llm.DecodeError{Provider: formatName, Err: fmt.Errorf("reasoning_details: %w", err)}
		}
		res.Reasoning = s
	}
	for _, im := range m.Images {
		if im.ImageURL.URL != "" {
			res.Images = append(res.Images, imagePart(im.ImageURL.URL))
		}
	}
	for i := range m.ToolCalls {
		tc := &m.ToolCalls[i]
		if tc.Function.Name.s == "" {
			// A call names the function it calls; without it there is
			// nothing to run and no way to answer it.
			return nil, &llm.DecodeError{Provider: formatName, Err: fmt.Errorf("tool_calls[%d]: no function name", i)}
		}
		res.ToolCalls = append(res.ToolCalls, llm.ToolCall{
			ID:        tc.ID.s,
			Name:      tc.Function.Name.s,
			Arguments: argumentsText(tc.Function.Arguments),
		})
	}
	if fc := m.FunctionCall; fc != nil && fc.Name.s != "" {
		res.ToolCalls = append(res.ToolCalls, llm.ToolCall{
			Name:      fc.Name.s,
			Arguments: argumentsText(fc.Arguments),
		})
	}
	for i := range res.ToolCalls {
		if res.ToolCalls[i].ID == "" {
			res.ToolCalls[i].ID = syntheticCallID(i)
		}
		if strings.TrimSpace(res.ToolCalls[i].Arguments) == "" {
			res.ToolCalls[i].Arguments = emptyArguments
		}
	}
	var finish llm.FinishReason
	if hasFinish(ch.FinishReason) {
		finish = mapFinish(ch.FinishReason)
	}
	res.FinishReason = wire.FinishFor(wire.RefusalFinish(finish, res.Refusal != ""), len(res.ToolCalls))
	return res, nil
}

// syntheticCallID names a call whose provider gave no id (the legacy
// function_call, some local servers). It is replayed as is.
func syntheticCallID(pos int) string { return "call_" + strconv.Itoa(pos) }

// messageContent reads content that is a string, null, or an array of
// parts ({type:text,text} and {type:refusal,refusal}).
func messageContent(raw json.RawMessage) (content, refusal string) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", ""
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s, ""
		}
		return "", ""
	}
	var parts []struct {
		Type    string     `json:"type"`
		Text    flexString `json:"text"`
		Refusal flexString `json:"refusal"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return "", ""
	}
	var c, r strings.Builder
	for _, p := range parts {
		switch p.Type {
		case "text", "output_text":
			c.WriteString(p.Text.s)
		case "refusal":
			r.WriteString(p.Refusal.s)
		}
	}
	return c.String(), r.String()
}

// argumentsText returns tool arguments as JSON text: a string value is
// decoded, an object sent as such (some local servers) is kept verbatim,
// and null or absent is "".
func argumentsText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
		return ""
	}
	return string(raw)
}
