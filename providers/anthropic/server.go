package anthropic

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// This file is the server side of the Messages format, for a gateway that
// answers Anthropic clients: it decodes what a client sends into llm values
// and encodes results, events and errors the way Anthropic answers. Its
// request types are request.go's, read back.

// ServerMessages is a client's decoded POST /v1/messages (or
// /v1/messages/count_tokens) request.
type ServerMessages struct {
	Chat   *llm.ChatRequest
	Stream bool
}

type serverRequest struct {
	Model         string          `json:"model"`
	MaxTokens     int             `json:"max_tokens"`
	System        json.RawMessage `json:"system"`
	Messages      []serverMessage `json:"messages"`
	Tools         []tool          `json:"tools"`
	ToolChoice    *toolChoice     `json:"tool_choice"`
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	StopSequences []string        `json:"stop_sequences"`
	Stream        bool            `json:"stream"`
	Thinking      *thinkingConfig `json:"thinking"`
	OutputConfig  *outputConfig   `json:"output_config"`
	TopK          *int            `json:"top_k"`
	Metadata      *struct {
		UserID string `json:"user_id"`
	} `json:"metadata"`
	ServiceTier  string        `json:"service_tier"`
	CacheControl *cacheControl `json:"cache_control"`
}

// MessagesFields is every top-level field of a Messages request, as the
// official SDKs define it, and what the gateway does with it. A field not
// named here is passed through like the ones marked so: sent unchanged to
// an Anthropic upstream, refused for any other format.
var MessagesFields = []llm.WireField{
	{Name: "model", Class: llm.FieldMapped, Note: "provider/model, an alias, or bare (the anthropic provider)"},
	{Name: "max_tokens", Class: llm.FieldMapped, Note: ""},
	{Name: "system", Class: llm.FieldMapped, Note: "a string or text blocks; cache_control on a block kept"},
	{Name: "messages", Class: llm.FieldMapped, Note: "text, image, document, thinking, redacted_thinking, tool_use, tool_result blocks; cache_control on a block kept"},
	{Name: "tools", Class: llm.FieldMapped, Note: "custom tools; cache_control kept"},
	{Name: "tool_choice", Class: llm.FieldMapped, Note: "auto, any, none, tool; disable_parallel_tool_use"},
	{Name: "temperature", Class: llm.FieldMapped, Note: ""},
	{Name: "top_p", Class: llm.FieldMapped, Note: ""},
	{Name: "top_k", Class: llm.FieldMapped, Note: "Gemini topK; refused by OpenAI"},
	{Name: "stop_sequences", Class: llm.FieldMapped, Note: ""},
	{Name: "thinking", Class: llm.FieldMapped, Note: "enabled with its budget"},
	{Name: "output_config", Class: llm.FieldMapped, Note: "format json_schema"},
	{Name: "metadata", Class: llm.FieldMapped, Note: "user_id: OpenAI user; dropped by Gemini"},
	{Name: "service_tier", Class: llm.FieldMapped, Note: "auto, standard_only (OpenAI: auto)"},
	{Name: "stream", Class: llm.FieldServed, Note: ""},
	{Name: "container", Class: llm.FieldPassthrough, Note: ""},
	{Name: "context_management", Class: llm.FieldPassthrough, Note: ""},
	{Name: "mcp_servers", Class: llm.FieldPassthrough, Note: ""},
	{Name: "inference_geo", Class: llm.FieldPassthrough, Note: ""},
	{Name: "speed", Class: llm.FieldPassthrough, Note: ""},
	{Name: "diagnostics", Class: llm.FieldPassthrough, Note: ""},
	{Name: "cache_control", Class: llm.FieldMapped, Note: "automatic caching: a breakpoint on the last message"},
}

var messagesFields = wire.NewClassified(MessagesFields)

type serverMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// serverBlock is a request content block as a client sends it.
type serverBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Source    *source         `json:"source"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	Data      string          `json:"data"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	// CacheControl marks a cache breakpoint after this block.
	CacheControl *cacheControl `json:"cache_control"`
}

// mark is the llm breakpoint of a block's cache_control.
func (c *cacheControl) mark() *llm.CacheMark {
	if c == nil {
		return nil
	}
	return &llm.CacheMark{TTL: llm.CacheTTL(c.TTL)}
}

func anyMarked(bs []serverBlock) bool {
	for i := range bs {
		if bs[i].CacheControl != nil {
			return true
		}
	}
	return false
}

func badField(field, format string, args ...any) error {
	return &llm.ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// DecodeServerMessages decodes a client's Messages request. tool_result
// blocks become tool messages (in order, before the rest of their user
// turn); thinking blocks keep their signatures (invariant 7). Errors are
// *llm.ConfigError naming the field at fault. countOnly skips the checks a
// count_tokens request need not pass (max_tokens).
func DecodeServerMessages(body []byte, countOnly bool) (*ServerMessages, error) {
	var b serverRequest
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, badField("body", "is not a messages request: %v", err)
	}
	if b.MaxTokens <= 0 && !countOnly {
		return nil, badField("max_tokens", "is required")
	}
	req := &llm.ChatRequest{Model: b.Model, MaxTokens: b.MaxTokens, Temperature: b.Temperature, TopP: b.TopP, Stop: b.StopSequences,
		TopK: b.TopK, ServiceTier: b.ServiceTier}
	if b.Metadata != nil {
		req.User = b.Metadata.UserID
	}
	req.Extra = wire.ExtraFields(body, messagesFields, formatName)
	if len(b.System) > 0 && string(b.System) != "null" {
		text, blocks, err := decodeBlocksText(b.System, "system")
		if err != nil {
			return nil, err
		}
		if !anyMarked(blocks) {
			req.Messages = append(req.Messages, llm.SystemText(text))
		} else {
			// A block marked as a cache breakpoint is a system message of
			// its own, marked: the prefix the client caches is kept.
			for i, sb := range blocks {
				if sb.Type != "text" {
					return nil, badField(fmt.Sprintf("system[%d].type", i), "%q is not a text block", sb.Type)
				}
				m := llm.SystemText(sb.Text)
				m.Cache = sb.CacheControl.mark()
				req.Messages = append(req.Messages, m)
			}
		}
	}
	for i := range b.Messages {
		ms, err := decodeServerMessage(&b.Messages[i], fmt.Sprintf("messages[%d]", i))
		if err != nil {
			return nil, err
		}
		req.Messages = append(req.Messages, ms...)
	}
	if b.CacheControl != nil && len(req.Messages) > 0 {
		// Automatic caching: the prefix up to the last message is cached.
		if last := &req.Messages[len(req.Messages)-1]; last.Cache == nil {
			last.Cache = b.CacheControl.mark()
		}
	}
	for _, t := range b.Tools {
		req.Tools = append(req.Tools, llm.Tool{Name: t.Name, Description: t.Description, Parameters: t.InputSchema, Strict: t.Strict, Cache: t.CacheControl.mark()})
	}
	if tc := b.ToolChoice; tc != nil {
		switch tc.Type {
		case "auto":
			req.ToolChoice.Mode = llm.ToolChoiceAuto
		case "any":
			req.ToolChoice.Mode = llm.ToolChoiceRequired
		case "none":
			req.ToolChoice.Mode = llm.ToolChoiceNone
		case "tool":
			req.ToolChoice = llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: tc.Name}
		default:
			return nil, badField("tool_choice.type", "%q is unknown", tc.Type)
		}
		if tc.DisableParallelToolUse {
			req.ParallelToolCalls = llm.Ptr(false)
		}
	}
	if th := b.Thinking; th != nil && th.Type == "enabled" {
		req.Reasoning = &llm.Reasoning{Effort: llm.EffortMedium, BudgetTokens: th.BudgetTokens}
	}
	if oc := b.OutputConfig; oc != nil && oc.Format.Type == "json_schema" {
		req.ResponseFormat = &llm.ResponseFormat{Type: llm.ResponseJSONSchema, Name: "output", Schema: oc.Format.Schema, Strict: true}
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	return &ServerMessages{Chat: req, Stream: b.Stream}, nil
}

// decodeBlocksText reads a string or an array of text blocks.
func decodeBlocksText(raw json.RawMessage, field string) (string, []serverBlock, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil, nil
	}
	var bs []serverBlock
	if err := json.Unmarshal(raw, &bs); err != nil {
		return "", nil, badField(field, "is neither a string nor an array of blocks")
	}
	var sb strings.Builder
	for i, b := range bs {
		if b.Type == "text" {
			if i > 0 && field == "system" {
				sb.WriteString("\n\n")
			}
			sb.WriteString(b.Text)
		}
	}
	return sb.String(), bs, nil
}

func decodeSource(s *source, field string) (llm.Part, error) {
	if s == nil {
		return llm.Part{}, badField(field, "is missing")
	}
	switch s.Type {
	case "base64":
		data, err := base64.StdEncoding.DecodeString(s.Data)
		if err != nil {
			return llm.Part{}, badField(field+".data", "is not base64")
		}
		return llm.Part{MIMEType: s.MediaType, Data: data}, nil
	case "url":
		return llm.Part{URL: s.URL}, nil
	}
	return llm.Part{}, badField(field+".type", "%q is not served", s.Type)
}

func decodeServerMessage(sm *serverMessage, field string) ([]llm.Message, error) {
	role := llm.Role(sm.Role)
	if role != llm.RoleUser && role != llm.RoleAssistant {
		return nil, badField(field+".role", "unknown role %q", sm.Role)
	}
	var s string
	if err := json.Unmarshal(sm.Content, &s); err == nil {
		return []llm.Message{{Role: role, Content: s}}, nil
	}
	var bs []serverBlock
	if err := json.Unmarshal(sm.Content, &bs); err != nil {
		return nil, badField(field+".content", "is neither a string nor an array of blocks")
	}
	var out []llm.Message
	m := llm.Message{Role: role}
	var texts []string
	// flush ends the message at a block marked as a cache breakpoint: the
	// mark is the message's (llm.CacheMark is after a message's last
	// block), and the blocks after it go on in a message of the same role.
	flush := func(mark *llm.CacheMark) {
		if len(texts) == len(m.Parts) {
			m.Content, m.Parts = strings.Join(texts, ""), nil
		}
		m.Cache = mark
		if m.Content != "" || len(m.Parts) > 0 || len(m.ToolCalls) > 0 || len(m.ThinkingBlocks) > 0 {
			out = append(out, m)
		}
		m, texts = llm.Message{Role: role}, nil
	}
	for i, b := range bs {
		f := fmt.Sprintf("%s.content[%d]", field, i)
		switch b.Type {
		case "text":
			texts = append(texts, b.Text)
			m.Parts = append(m.Parts, llm.TextPart(b.Text))
		case "image", "document":
			p, err := decodeSource(b.Source, f+".source")
			if err != nil {
				return nil, err
			}
			p.Type = llm.PartImage
			if b.Type == "document" {
				p.Type = llm.PartDocument
			}
			m.Parts = append(m.Parts, p)
		case "thinking":
			m.ThinkingBlocks = append(m.ThinkingBlocks, llm.ThinkingBlock{Format: formatName, Text: b.Thinking, Signature: b.Signature})
		case "redacted_thinking":
			m.ThinkingBlocks = append(m.ThinkingBlocks, llm.ThinkingBlock{Format: formatName, Redacted: true, Data: b.Data})
		case "tool_use":
			args := string(b.Input)
			if args == "" || args == "null" {
				args = "{}"
			}
			m.ToolCalls = append(m.ToolCalls, llm.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		case "tool_result":
			tr := llm.Message{Role: llm.RoleTool, ToolCallID: b.ToolUseID, IsError: b.IsError}
			if len(b.Content) > 0 && string(b.Content) != "null" {
				text, blocks, err := decodeBlocksText(b.Content, f+".content")
				if err != nil {
					return nil, err
				}
				tr.Content = text
				for j, ib := range blocks {
					if ib.Type == "image" {
						p, err := decodeSource(ib.Source, fmt.Sprintf("%s.content[%d].source", f, j))
						if err != nil {
							return nil, err
						}
						p.Type = llm.PartImage
						tr.Parts = append(tr.Parts, p)
					}
				}
			}
			tr.Cache = b.CacheControl.mark()
			out = append(out, tr)
			continue
		default:
			return nil, badField(f+".type", "%q is not served", b.Type)
		}
		if b.CacheControl != nil {
			flush(b.CacheControl.mark())
		}
	}
	flush(nil)
	return out, nil
}

// stopReason is finishReason's inverse.
func stopReason(f llm.FinishReason) string {
	switch f {
	case llm.FinishLength:
		return "max_tokens"
	case llm.FinishToolCalls:
		return "tool_use"
	case llm.FinishContentFilter:
		return "refusal"
	}
	return "end_turn"
}

type serverUsage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
}

func usageOf(u llm.Usage) serverUsage {
	return serverUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, CacheReadInputTokens: u.CacheReadTokens, CacheCreationInputTokens: u.CacheWriteTokens}
}

func toolInputOf(args string) json.RawMessage {
	if strings.TrimSpace(args) == "" || !json.Valid([]byte(args)) {
		return json.RawMessage(`{}`)
	}
	return json.RawMessage(args)
}

// EncodeServerMessage encodes a buffered answer as a message object:
// thinking blocks (with their signatures), then text, then tool_use blocks.
func EncodeServerMessage(res *llm.ChatResult, id, model string) ([]byte, error) {
	var content []block
	for _, tb := range res.ThinkingBlocks {
		if tb.Format != formatName {
			continue
		}
		if tb.Redacted {
			content = append(content, block{Type: "redacted_thinking", Data: tb.Data})
		} else {
			content = append(content, block{Type: "thinking", Thinking: tb.Text, Signature: tb.Signature})
		}
	}
	if len(content) == 0 && res.Reasoning != "" {
		content = append(content, block{Type: "thinking", Thinking: res.Reasoning})
	}
	text := res.Content
	if text == "" {
		text = res.Refusal
	}
	if text != "" || len(res.ToolCalls) == 0 {
		content = append(content, block{Type: "text", Text: text})
	}
	for _, tc := range res.ToolCalls {
		content = append(content, block{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: toolInputOf(tc.Arguments)})
	}
	return json.Marshal(struct {
		ID           string      `json:"id"`
		Type         string      `json:"type"`
		Role         string      `json:"role"`
		Model        string      `json:"model"`
		Content      []block     `json:"content"`
		StopReason   string      `json:"stop_reason"`
		StopSequence *string     `json:"stop_sequence"`
		Usage        serverUsage `json:"usage"`
	}{id, "message", "assistant", model, content, stopReasonOf(res.FinishReason, res), stopSequenceOf(res), usageOf(res.Usage)})
}

// stopSequenceOf is the answer's stop_sequence: the sequence that ended it,
// or null.
func stopSequenceOf(res *llm.ChatResult) *string {
	if res == nil || res.StopSequence == "" || res.FinishReason != llm.FinishStop {
		return nil
	}
	s := res.StopSequence
	return &s
}

// stopReasonOf is the answer's stop_reason: stop_sequence when a stop
// sequence ended it.
func stopReasonOf(fin llm.FinishReason, res *llm.ChatResult) string {
	if stopSequenceOf(res) != nil && fin == llm.FinishStop {
		return "stop_sequence"
	}
	return stopReason(fin)
}

// ServerStream encodes llm events as Anthropic's streamed events:
// message_start, then per block content_block_start, its deltas
// (thinking_delta, text_delta, input_json_delta) and content_block_stop,
// then message_delta with the stop reason and usage, and message_stop.
// A thinking block's signature arrives as an EventReasoning with empty
// Text and the Signature (Anthropic's own streams give one per block) and
// is sent as its signature_delta, which ends the block; reasoning from a
// format without signatures ends its block without one. Not safe for
// concurrent use.
type ServerStream struct {
	id, model string
	started   bool
	open      string // type of the open block: "", "thinking", "text", "tool_use"
	openTool  int
	index     int          // index of the next block
	held      wire.HeldEnd // usage and finish, sent at the end
	pinged    bool         // the ping after the first content_block_start is sent
}

// NewServerStream returns the encoder of one streamed answer.
func NewServerStream(id, model string) *ServerStream {
	return &ServerStream{id: id, model: model, openTool: -1}
}

func frame(dst []byte, name string, v any) []byte {
	b, _ := json.Marshal(v) // plain values: cannot fail
	dst = append(dst, "event: "...)
	dst = append(dst, name...)
	dst = append(dst, "\ndata: "...)
	dst = append(dst, b...)
	return append(dst, '\n', '\n')
}

type obj = map[string]any

func (s *ServerStream) start(dst []byte) []byte {
	if s.started {
		return dst
	}
	s.started = true
	return frame(dst, "message_start", obj{"type": "message_start", "message": obj{
		"id": s.id, "type": "message", "role": "assistant", "model": s.model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": usageOf(llm.Usage{}),
	}})
}

func (s *ServerStream) closeBlock(dst []byte) []byte {
	if s.open == "" {
		return dst
	}
	dst = frame(dst, "content_block_stop", obj{"type": "content_block_stop", "index": s.index})
	s.open, s.openTool = "", -1
	s.index++
	return dst
}

func (s *ServerStream) openBlock(dst []byte, kind string, cb obj) []byte {
	dst = s.closeBlock(dst)
	s.open = kind
	dst = frame(dst, "content_block_start", obj{"type": "content_block_start", "index": s.index, "content_block": cb})
	if !s.pinged { // as Anthropic streams: a ping after the first block's start
		s.pinged = true
		dst = append(dst, "event: ping\ndata: {\"type\":\"ping\"}\n\n"...)
	}
	return dst
}

func (s *ServerStream) delta(dst []byte, d obj) []byte {
	return frame(dst, "content_block_delta", obj{"type": "content_block_delta", "index": s.index, "delta": d})
}

// Event appends the frames of one event to dst.
func (s *ServerStream) Event(dst []byte, ev *llm.Event) []byte {
	dst = s.start(dst)
	switch ev.Type {
	case llm.EventReasoning:
		if s.open != "thinking" {
			dst = s.openBlock(dst, "thinking", obj{"type": "thinking", "thinking": "", "signature": ""})
		}
		if ev.Text == "" && ev.Signature != "" {
			// The block's signature ends it: reasoning that follows is
			// another block, with its own signature.
			s.open = "thinking-signed"
			return s.delta(dst, obj{"type": "signature_delta", "signature": ev.Signature})
		}
		return s.delta(dst, obj{"type": "thinking_delta", "thinking": ev.Text})
	case llm.EventText, llm.EventRefusal:
		if s.open != "text" {
			dst = s.openBlock(dst, "text", obj{"type": "text", "text": ""})
		}
		return s.delta(dst, obj{"type": "text_delta", "text": ev.Text})
	case llm.EventToolCallStart:
		dst = s.openBlock(dst, "tool_use", obj{"type": "tool_use", "id": ev.ToolCallID, "name": ev.ToolName, "input": obj{}})
		s.openTool = ev.ToolIndex
		if ev.Text != "" {
			dst = s.delta(dst, obj{"type": "input_json_delta", "partial_json": ev.Text})
		}
		return dst
	case llm.EventToolCallDelta:
		if s.open == "tool_use" && s.openTool == ev.ToolIndex {
			return s.delta(dst, obj{"type": "input_json_delta", "partial_json": ev.Text})
		}
	case llm.EventUsage, llm.EventFinish:
		s.held.Hold(ev)
	}
	return dst
}

// End appends the frames that close a completed answer; res, when not nil,
// supplies the usage and stop reason the events did not carry.
func (s *ServerStream) End(dst []byte, res *llm.ChatResult) []byte {
	dst = s.start(dst)
	if s.index == 0 && s.open == "" {
		dst = s.openBlock(dst, "text", obj{"type": "text", "text": ""})
	}
	dst = s.closeBlock(dst)
	fin, u := s.held.Final(res)
	dst = frame(dst, "message_delta", obj{"type": "message_delta", "delta": obj{"stop_reason": stopReasonOf(fin, res), "stop_sequence": stopSequenceOf(res)}, "usage": usageOf(u)})
	return frame(dst, "message_stop", obj{"type": "message_stop"})
}

// Error appends an in-band error event (event: error), which the Anthropic
// SDKs raise from the stream; no message_stop follows.
func (s *ServerStream) Error(dst []byte, status int, message string) []byte {
	dst = append(dst, "event: error\ndata: "...)
	dst = append(dst, ServerError(status, message)...)
	return append(dst, '\n', '\n')
}

// ServerError encodes {"type":"error","error":{"type","message"}} with
// Anthropic's error type for the status; the SDKs pick their exception
// from the status (429 RateLimitError, 401 AuthenticationError, ...).
func ServerError(status int, message string) []byte {
	typ := "api_error"
	switch {
	case status == http.StatusBadRequest:
		typ = "invalid_request_error"
	case status == http.StatusUnauthorized:
		typ = "authentication_error"
	case status == http.StatusForbidden:
		typ = "permission_error"
	case status == http.StatusNotFound:
		typ = "not_found_error"
	case status == http.StatusRequestEntityTooLarge:
		typ = "request_too_large"
	case status == http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case status == 529, status == http.StatusServiceUnavailable:
		typ = "overloaded_error"
	case status < 500:
		typ = "invalid_request_error"
	}
	b, _ := json.Marshal(obj{"type": "error", "error": obj{"type": typ, "message": message}})
	return b
}

// EncodeServerCountTokens encodes a count_tokens answer.
func EncodeServerCountTokens(n int) []byte {
	b, _ := json.Marshal(obj{"input_tokens": n})
	return b
}

// ServerModel is one entry of a model list (GET /v1/models).
type ServerModel struct {
	ID          string
	DisplayName string
	Created     time.Time
}

type serverModel struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
	CreatedAt   string `json:"created_at"`
}

func serverModelOf(m ServerModel) serverModel {
	name := m.DisplayName
	if name == "" {
		name = m.ID
	}
	return serverModel{Type: "model", ID: m.ID, DisplayName: name, CreatedAt: m.Created.UTC().Format(time.RFC3339)}
}

// EncodeServerModels encodes a page of GET /v1/models as Anthropic answers
// it: {"data":[{type:"model", id, display_name, created_at}], has_more,
// first_id, last_id}; the SDKs' pagers ask for the next page with
// after_id=last_id while has_more.
func EncodeServerModels(page []ServerModel, hasMore bool) ([]byte, error) {
	data := make([]serverModel, len(page))
	for i, m := range page {
		data[i] = serverModelOf(m)
	}
	var first, last *string
	if len(page) > 0 {
		first, last = &page[0].ID, &page[len(page)-1].ID
	}
	return json.Marshal(struct {
		Data    []serverModel `json:"data"`
		HasMore bool          `json:"has_more"`
		FirstID *string       `json:"first_id"`
		LastID  *string       `json:"last_id"`
	}{data, hasMore, first, last})
}

// EncodeServerModel encodes GET /v1/models/{model_id}.
func EncodeServerModel(m ServerModel) ([]byte, error) { return json.Marshal(serverModelOf(m)) }
