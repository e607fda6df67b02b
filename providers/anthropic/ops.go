package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// Paths of the non-chat operations.
const (
	countTokensPath = "/v1/messages/count_tokens"
	modelsPath      = "/v1/models"
)

// ModelsPageSize is the limit asked for on each GET /v1/models page (the
// API's maximum).
const ModelsPageSize = 100

// countTokensFields are the Messages fields /v1/messages/count_tokens
// accepts; the others (max_tokens, stream, sampling, stop sequences) are
// rejected by the endpoint and do not change the input count.
var countTokensFields = []string{"model", "messages", "system", "tools", "tool_choice", "thinking"}

// CountTokensRequest builds POST /v1/messages/count_tokens for a chat
// request: the request the chat call would send (system, messages, tools,
// tool choice and thinking, so the count is the one the chat call will be
// billed), without the fields the endpoint rejects. Errors are
// *llm.ConfigError.
func CountTokensRequest(req *llm.ChatRequest, o wire.BuildOptions) (*wire.Request, error) {
	o.Stream = false
	chat, err := Codec{}.ChatRequest(req, o)
	if err != nil {
		return nil, err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(chat.Body, &all); err != nil {
		return nil, &llm.ConfigError{Field: "request", Msg: "cannot encode: " + err.Error()}
	}
	var buf bytes.Buffer
	buf.WriteByte('{')
	n := 0
	for _, k := range countTokensFields {
		v, ok := all[k]
		if !ok {
			continue
		}
		if n > 0 {
			buf.WriteByte(',')
		}
		n++
		buf.WriteString(strconv.Quote(k))
		buf.WriteByte(':')
		buf.Write(v)
	}
	buf.WriteByte('}')
	chat.Path = countTokensPath
	chat.Body = buf.Bytes()
	chat.Header.Set("Accept", "application/json")
	return chat, nil
}

// ParseCountTokens parses {"input_tokens":N}. An error envelope is an
// *llm.APIError; a body without input_tokens is an *llm.DecodeError.
func ParseCountTokens(body []byte) (*llm.CountTokensResult, error) {
	var r struct {
		InputTokens *int `json:"input_tokens"`
		errorBody
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, &llm.DecodeError{Provider: providerName, Err: fmt.Errorf("count_tokens: %w", err)}
	}
	if r.InputTokens == nil {
		if r.Error != nil {
			return nil, apiError(r.Error.Type, r.Error.Message, r.RequestID)
		}
		return nil, &llm.DecodeError{Provider: providerName, Err: fmt.Errorf("count_tokens: no input_tokens in the answer")}
	}
	return &llm.CountTokensResult{InputTokens: *r.InputTokens}, nil
}

// ModelsRequest builds GET /v1/models?limit=100, with after_id set to the
// cursor of the previous page when there was one.
func ModelsRequest(afterID string, o wire.BuildOptions) *wire.Request {
	q := url.Values{"limit": {strconv.Itoa(ModelsPageSize)}}
	if afterID != "" {
		q.Set("after_id", afterID)
	}
	h := make(http.Header, 2)
	h.Set("Accept", "application/json")
	return &wire.Request{Method: http.MethodGet, Path: modelsPath + "?" + q.Encode(), Header: h}
}

type modelsPage struct {
	Data []struct {
		ID             string `json:"id"`
		DisplayName    string `json:"display_name"`
		CreatedAt      string `json:"created_at"`
		MaxInputTokens int    `json:"max_input_tokens"`
		MaxTokens      int    `json:"max_tokens"`
	} `json:"data"`
	HasMore bool   `json:"has_more"`
	LastID  string `json:"last_id"`
	errorBody
}

// ParseModels parses a GET /v1/models page: id, display_name and
// created_at (RFC 3339; an unparseable date stays zero), and the token
// limits max_input_tokens and max_tokens only when the API reports them.
// next is last_id when has_more is true, "" otherwise.
func ParseModels(body []byte) (models []llm.ModelInfo, next string, err error) {
	var r modelsPage
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, "", &llm.DecodeError{Provider: providerName, Err: fmt.Errorf("models: %w", err)}
	}
	if r.Data == nil && r.Error != nil {
		return nil, "", apiError(r.Error.Type, r.Error.Message, r.RequestID)
	}
	models = make([]llm.ModelInfo, 0, len(r.Data))
	for _, d := range r.Data {
		if d.ID == "" {
			continue
		}
		m := llm.ModelInfo{ID: d.ID, DisplayName: d.DisplayName, ContextWindow: max(d.MaxInputTokens, 0), MaxOutputTokens: max(d.MaxTokens, 0)}
		if ts, err := time.Parse(time.RFC3339, d.CreatedAt); err == nil {
			m.Created = ts.UTC()
		}
		models = append(models, m)
	}
	if r.HasMore {
		next = r.LastID
		if next == "" && len(models) > 0 {
			next = models[len(models)-1].ID
		}
	}
	return models, next, nil
}
