package batch

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/fnv"
	"math"
	"strconv"
	"time"

	"github.com/chorusrt/chorus/llm"
)

// outputLine is one line of an OpenAI Batch output file.
type outputLine struct {
	ID       string       `json:"id"`
	CustomID string       `json:"custom_id"`
	Response *outResponse `json:"response"`
	Error    *outError    `json:"error"`
	// Cache is "hit" on a line answered from the runner's response cache
	// (at zero cost); absent otherwise.
	Cache string `json:"cache,omitempty"`
}

type outResponse struct {
	StatusCode int    `json:"status_code"`
	RequestID  string `json:"request_id"`
	Body       any    `json:"body"`
}

type outError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// LineID is the output line's id: derived from the custom_id, so a rerun
// writes the same ids.
func LineID(customID string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(customID))
	return "batch_req_" + strconv.FormatUint(h.Sum64(), 16)
}

// encodeLine renders one output line, newline included.
func encodeLine(l outputLine) ([]byte, error) {
	b, err := json.Marshal(l)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

func successLine(customID, requestID string, body any) outputLine {
	return outputLine{ID: LineID(customID), CustomID: customID,
		Response: &outResponse{StatusCode: 200, RequestID: requestID, Body: body}}
}

func errorLine(customID string, err error) outputLine {
	code, msg := classify(err)
	return outputLine{ID: LineID(customID), CustomID: customID, Error: &outError{Code: code, Message: msg}}
}

// classify turns an error into an OpenAI-style error code and message.
// Messages come from Chorus's typed errors, which never hold a key.
func classify(err error) (code, msg string) {
	msg = err.Error()
	var (
		fe *fieldError
		ce *llm.ConfigError
		rl *llm.RateLimitError
		ae *llm.APIError
		ue *llm.UnsupportedError
		te *llm.TransportError
		de *llm.DecodeError
		se *llm.StreamError
	)
	switch {
	case errors.As(err, &fe), errors.As(err, &ce):
		return "invalid_request", msg
	case errors.As(err, &rl):
		if rl.QuotaExhausted {
			return "insufficient_quota", msg
		}
		return "rate_limit_exceeded", msg
	case errors.As(err, &ae):
		switch {
		case ae.Code != "":
			return ae.Code, msg
		case ae.Type != "":
			return ae.Type, msg
		}
		return "http_" + strconv.Itoa(ae.Status), msg
	case errors.As(err, &ue):
		return "unsupported", msg
	case errors.Is(err, llm.ErrOverloaded):
		return "overloaded", msg
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, llm.ErrIdleTimeout):
		return "timeout", msg
	case errors.As(err, &te):
		return "transport_error", msg
	case errors.As(err, &de), errors.As(err, &se), errors.Is(err, llm.ErrPrematureClose):
		return "decode_error", msg
	}
	return "error", msg
}

// The chat.completion body, as OpenAI writes it.
type chatCompletion struct {
	ID      string          `json:"id"`
	Object  string          `json:"object"`
	Created int64           `json:"created"`
	Model   string          `json:"model"`
	Choices []chatChoice    `json:"choices"`
	Usage   completionUsage `json:"usage"`
}

type chatChoice struct {
	Index        int         `json:"index"`
	Message      chatMessage `json:"message"`
	Logprobs     any         `json:"logprobs"`
	FinishReason *string     `json:"finish_reason"`
}

type chatMessage struct {
	Role             string         `json:"role"`
	Content          *string        `json:"content"`
	Refusal          *string        `json:"refusal"`
	ReasoningContent string         `json:"reasoning_content,omitempty"`
	ToolCalls        []chatToolCall `json:"tool_calls,omitempty"`
}

type chatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type completionUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
	// Cost is the answer's cost in US dollars, as OpenRouter reports it,
	// when the model has a price; absent otherwise (never a guess).
	Cost *float64 `json:"cost,omitempty"`
}

// servedModel is "provider/model" for the model that answered: the
// provider from the response metadata, the model as the provider named it
// (else as requested).
func servedModel(meta llm.ResponseMeta, reported, requested string) string {
	m := reported
	if m == "" {
		m = meta.Model
	}
	if m == "" {
		return requested
	}
	if meta.Provider == "" {
		return m
	}
	return meta.Provider + "/" + m
}

func completionBody(res *llm.ChatResult, requested string, now time.Time) chatCompletion {
	msg := chatMessage{Role: "assistant"}
	if res.Content != "" || len(res.ToolCalls) == 0 {
		c := res.Content
		msg.Content = &c
	}
	if res.Refusal != "" {
		r := res.Refusal
		msg.Refusal = &r
	}
	msg.ReasoningContent = res.Reasoning
	for _, tc := range res.ToolCalls {
		var c chatToolCall
		c.ID, c.Type = tc.ID, "function"
		c.Function.Name, c.Function.Arguments = tc.Name, tc.Arguments
		msg.ToolCalls = append(msg.ToolCalls, c)
	}
	choice := chatChoice{Message: msg}
	if res.FinishReason != "" {
		fr := string(res.FinishReason)
		choice.FinishReason = &fr
	}
	var u completionUsage
	u.PromptTokens = res.Usage.InputTokens()
	u.CompletionTokens = res.Usage.CompletionTokens
	u.TotalTokens = res.Usage.TotalTokens()
	u.PromptTokensDetails.CachedTokens = res.Usage.CacheReadTokens
	u.CompletionTokensDetails.ReasoningTokens = res.Usage.ReasoningTokens
	id := res.ID
	if id == "" {
		id = res.Meta.RequestID
	}
	return chatCompletion{ID: id, Object: "chat.completion", Created: now.Unix(),
		Model: servedModel(res.Meta, res.Model, requested), Choices: []chatChoice{choice}, Usage: u}
}

// The embeddings list body.
type embeddingList struct {
	Object string           `json:"object"`
	Data   []embeddingDatum `json:"data"`
	Model  string           `json:"model"`
	Usage  struct {
		PromptTokens int      `json:"prompt_tokens"`
		TotalTokens  int      `json:"total_tokens"`
		Cost         *float64 `json:"cost,omitempty"`
	} `json:"usage"`
}

type embeddingDatum struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"`
}

func embeddingBody(res *llm.EmbedResult, requested string, b64 bool) embeddingList {
	out := embeddingList{Object: "list", Model: servedModel(res.Meta, res.Model, requested), Data: make([]embeddingDatum, len(res.Vectors))}
	for i, v := range res.Vectors {
		var e any = v
		if b64 {
			e = float32Base64(v)
		}
		out.Data[i] = embeddingDatum{Object: "embedding", Index: i, Embedding: e}
	}
	out.Usage.PromptTokens = res.Usage.InputTokens()
	out.Usage.TotalTokens = res.Usage.TotalTokens()
	return out
}

// float32Base64 encodes a vector as OpenAI's base64 format does:
// little-endian float32 values.
func float32Base64(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return base64.StdEncoding.EncodeToString(b)
}
