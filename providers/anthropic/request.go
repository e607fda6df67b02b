package anthropic

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// Request defaults.
const (
	// DefaultMaxTokens is max_tokens when the request sets none. Anthropic
	// requires the field.
	DefaultMaxTokens = 8192
	// MinThinkingBudget is Anthropic's smallest accepted budget_tokens.
	MinThinkingBudget = 1024
)

// Effort presets for budget_tokens.
const (
	budgetLow    = 1024
	budgetMedium = 8192
	budgetHigh   = 16384
)

// objectSchema is sent where a schema is required and the caller gave none.
var objectSchema = json.RawMessage(`{"type":"object"}`)

type messagesRequest struct {
	Model         string          `json:"model"`
	MaxTokens     int             `json:"max_tokens"`
	System        []block         `json:"system,omitempty"`
	Messages      []message       `json:"messages"`
	Tools         []tool          `json:"tools,omitempty"`
	ToolChoice    *toolChoice     `json:"tool_choice,omitempty"`
	Temperature   *float64        `json:"temperature,omitempty"`
	TopP          *float64        `json:"top_p,omitempty"`
	StopSequences []string        `json:"stop_sequences,omitempty"`
	Stream        bool            `json:"stream,omitempty"`
	Thinking      *thinkingConfig `json:"thinking,omitempty"`
	OutputConfig  *outputConfig   `json:"output_config,omitempty"`
	// The optional fields Anthropic honours (honours.go).
	TopK        *int             `json:"top_k,omitempty"`
	Metadata    *requestMetadata `json:"metadata,omitempty"`
	ServiceTier string           `json:"service_tier,omitempty"`
}

// requestMetadata is Anthropic's metadata: the end user's id.
type requestMetadata struct {
	UserID string `json:"user_id,omitempty"`
}

type message struct {
	Role    string  `json:"role"`
	Content []block `json:"content"`
}

// block is one request content block. Only the fields of its Type are set;
// the custom marshaller writes exactly those.
type block struct {
	Type string

	Text string // text

	Source *source // image, document

	Thinking  string // thinking (always written, empty included)
	Signature string // thinking
	Data      string // redacted_thinking

	ID    string          // tool_use
	Name  string          // tool_use
	Input json.RawMessage // tool_use

	ToolUseID string // tool_result
	Content   any    // tool_result: string or []block; nil omits it
	IsError   bool   // tool_result

	Cache *llm.CacheMark // any type: cache_control (cache.go)
}

type source struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

// MarshalJSON writes the fields of the block's type only, and its
// cache_control when it is a cache breakpoint.
func (b block) MarshalJSON() ([]byte, error) {
	data, err := b.marshalFields()
	if err != nil || b.Cache == nil {
		return data, err
	}
	return withCacheControl(data, b.Cache)
}

func (b block) marshalFields() ([]byte, error) {
	switch b.Type {
	case "text":
		return json.Marshal(struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}{b.Type, b.Text})
	case "image", "document":
		return json.Marshal(struct {
			Type   string  `json:"type"`
			Source *source `json:"source"`
		}{b.Type, b.Source})
	case "thinking":
		return json.Marshal(struct {
			Type      string `json:"type"`
			Thinking  string `json:"thinking"`
			Signature string `json:"signature"`
		}{b.Type, b.Thinking, b.Signature})
	case "redacted_thinking":
		return json.Marshal(struct {
			Type string `json:"type"`
			Data string `json:"data"`
		}{b.Type, b.Data})
	case "tool_use":
		return json.Marshal(struct {
			Type  string          `json:"type"`
			ID    string          `json:"id"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		}{b.Type, b.ID, b.Name, b.Input})
	case "tool_result":
		return json.Marshal(struct {
			Type      string `json:"type"`
			ToolUseID string `json:"tool_use_id"`
			Content   any    `json:"content,omitempty"`
			IsError   bool   `json:"is_error,omitempty"`
		}{b.Type, b.ToolUseID, b.Content, b.IsError})
	}
	return nil, fmt.Errorf("anthropic: unknown block type %q", b.Type)
}

type tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
	Strict      bool            `json:"strict,omitempty"`
	// CacheControl marks a breakpoint after this tool (cache.go).
	CacheControl *cacheControl `json:"cache_control,omitempty"`
}

type toolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
}

type thinkingConfig struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens"`
}

type outputConfig struct {
	Format outputFormat `json:"format"`
}

type outputFormat struct {
	Type   string          `json:"type"`
	Schema json.RawMessage `json:"schema"`
}

// ChatRequest builds POST /v1/messages. Errors are *llm.ConfigError.
func (Codec) ChatRequest(req *llm.ChatRequest, o wire.BuildOptions) (*wire.Request, error) {
	if req == nil {
		return nil, &llm.ConfigError{Field: "request", Msg: "is nil"}
	}
	out := messagesRequest{Model: req.Model, Stream: o.Stream, StopSequences: req.Stop}

	budget, err := thinkingBudget(req)
	if err != nil {
		return nil, err
	}
	switch {
	case budget > 0 && req.MaxTokens == 0:
		out.MaxTokens = budget + DefaultMaxTokens
	case req.MaxTokens > 0:
		out.MaxTokens = req.MaxTokens
	default:
		out.MaxTokens = DefaultMaxTokens
	}
	if budget > 0 {
		out.Thinking = &thinkingConfig{Type: "enabled", BudgetTokens: budget}
	} else {
		if !o.Learned.NoTemperature {
			out.Temperature = req.Temperature
		}
		if !o.Learned.NoTopP {
			out.TopP = req.TopP
		}
	}

	if err := buildMessages(req.Messages, &out); err != nil {
		return nil, err
	}

	for i := range req.Tools {
		t := &req.Tools[i]
		schema := objectSchema
		if len(bytes.TrimSpace(t.Parameters)) > 0 {
			schema = t.Parameters
		}
		out.Tools = append(out.Tools, tool{Name: t.Name, Description: t.Description, InputSchema: schema, Strict: t.Strict, CacheControl: cacheControlOf(t.Cache)})
	}
	if err := checkBreakpoints(req); err != nil {
		return nil, err
	}
	out.ToolChoice = buildToolChoice(req, o.Learned)

	if rf := req.ResponseFormat; rf != nil {
		switch rf.Type {
		case llm.ResponseJSONSchema:
			if len(rf.Schema) == 0 || !json.Valid(rf.Schema) {
				return nil, &llm.ConfigError{Field: "response_format.schema", Msg: "json_schema needs a valid JSON Schema"}
			}
			out.OutputConfig = &outputConfig{Format: outputFormat{Type: "json_schema", Schema: rf.Schema}}
		case llm.ResponseJSONObject:
			out.OutputConfig = &outputConfig{Format: outputFormat{Type: "json_schema", Schema: objectSchema}}
		case llm.ResponseText, "":
		default:
			return nil, &llm.ConfigError{Field: "response_format.type", Msg: fmt.Sprintf("unknown type %q", rf.Type)}
		}
	}

	out.TopK = req.TopK
	if req.User != "" {
		out.Metadata = &requestMetadata{UserID: req.User}
	}
	if slices.Contains(serviceTiers, req.ServiceTier) {
		out.ServiceTier = req.ServiceTier
	}
	wreq, err := wire.PostJSON("/v1/messages", &out, o.Stream, req.Headers)
	if err != nil {
		return nil, err
	}
	wreq.Body = wire.SpliceExtra(wreq.Body, req.Extra, formatName)
	return wreq, nil
}

// thinkingBudget returns budget_tokens, or 0 when thinking is off.
func thinkingBudget(req *llm.ChatRequest) (int, error) {
	r := req.Reasoning
	if r == nil || r.Effort == llm.EffortNone {
		return 0, nil
	}
	if r.BudgetTokens > 0 {
		b := max(r.BudgetTokens, MinThinkingBudget)
		if req.MaxTokens > 0 && b >= req.MaxTokens {
			return 0, &llm.ConfigError{Field: "reasoning.budget_tokens",
				Msg: fmt.Sprintf("budget %d (Anthropic minimum %d) must be below max_tokens %d", b, MinThinkingBudget, req.MaxTokens)}
		}
		return b, nil
	}
	var b int
	switch r.Effort {
	case llm.EffortLow:
		b = budgetLow
	case llm.EffortMedium:
		b = budgetMedium
	case llm.EffortHigh, llm.EffortMax:
		b = budgetHigh
	case "":
		return 0, nil
	default:
		return 0, &llm.ConfigError{Field: "reasoning.effort", Msg: fmt.Sprintf("unknown effort %q", r.Effort)}
	}
	if req.MaxTokens > 0 && b > req.MaxTokens/2 {
		b = max(req.MaxTokens/2, MinThinkingBudget)
		if b >= req.MaxTokens {
			return 0, &llm.ConfigError{Field: "max_tokens",
				Msg: fmt.Sprintf("%d leaves no room for the minimum thinking budget of %d", req.MaxTokens, MinThinkingBudget)}
		}
	}
	return b, nil
}

func buildToolChoice(req *llm.ChatRequest, l wire.Learned) *toolChoice {
	if len(req.Tools) == 0 {
		return nil
	}
	var tc toolChoice
	switch req.ToolChoice.Mode {
	case llm.ToolChoiceAuto:
		tc.Type = "auto"
	case llm.ToolChoiceRequired:
		tc.Type = "any"
	case llm.ToolChoiceTool:
		tc.Type, tc.Name = "tool", req.ToolChoice.Name
	case llm.ToolChoiceNone:
		return &toolChoice{Type: "none"}
	}
	if p := req.ParallelToolCalls; p != nil && !*p && !l.NoParallelToolCalls {
		if tc.Type == "" {
			tc.Type = "auto"
		}
		tc.DisableParallelToolUse = true
	}
	if tc.Type == "" {
		return nil
	}
	return &tc
}

// buildMessages fills out.System and out.Messages from the history.
func buildMessages(msgs []llm.Message, out *messagesRequest) error {
	results := -1 // index in out.Messages of the open user message of merged tool results
	for i := range msgs {
		m := &msgs[i]
		f := fmt.Sprintf("messages[%d]", i)
		if m.Role != llm.RoleTool {
			results = -1
		}
		switch m.Role {
		case llm.RoleSystem, llm.RoleDeveloper:
			text, err := systemText(m, f)
			if err != nil {
				return err
			}
			out.System = append(out.System, block{Type: "text", Text: text})
		case llm.RoleUser:
			content, err := contentBlocks(m, f)
			if err != nil {
				return err
			}
			out.Messages = append(out.Messages, message{Role: "user", Content: content})
		case llm.RoleAssistant:
			content, err := assistantBlocks(m, f)
			if err != nil {
				return err
			}
			out.Messages = append(out.Messages, message{Role: "assistant", Content: content})
		case llm.RoleTool:
			b, err := toolResult(m, f)
			if err != nil {
				return err
			}
			if results < 0 {
				out.Messages = append(out.Messages, message{Role: "user"})
				results = len(out.Messages) - 1
			}
			out.Messages[results].Content = append(out.Messages[results].Content, b)
		default:
			return &llm.ConfigError{Field: f + ".role", Msg: fmt.Sprintf("unknown role %q", m.Role)}
		}
		markLastBlock(out, m) // cache.go
	}
	return nil
}

// systemText is a system message's text: Content and its text parts.
func systemText(m *llm.Message, f string) (string, error) {
	if len(m.Parts) == 0 {
		return m.Content, nil
	}
	pieces := make([]string, 0, len(m.Parts)+1)
	if m.Content != "" {
		pieces = append(pieces, m.Content)
	}
	for j := range m.Parts {
		p := &m.Parts[j]
		if p.Type != llm.PartText {
			return "", &llm.ConfigError{Field: fmt.Sprintf("%s.parts[%d].type", f, j), Msg: "system messages take text only"}
		}
		pieces = append(pieces, p.Text)
	}
	return strings.Join(pieces, "\n"), nil
}

// contentBlocks is Content as a text block followed by each part.
func contentBlocks(m *llm.Message, f string) ([]block, error) {
	out := make([]block, 0, len(m.Parts)+1)
	if m.Content != "" {
		out = append(out, block{Type: "text", Text: m.Content})
	}
	for j := range m.Parts {
		b, err := partBlock(&m.Parts[j], fmt.Sprintf("%s.parts[%d]", f, j))
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

func partBlock(p *llm.Part, f string) (block, error) {
	switch p.Type {
	case llm.PartText:
		return block{Type: "text", Text: p.Text}, nil
	case llm.PartImage:
		if len(p.Data) > 0 {
			if p.MIMEType == "" {
				return block{}, &llm.ConfigError{Field: f + ".mime_type", Msg: "an inline image needs its MIME type"}
			}
			return block{Type: "image", Source: &source{Type: "base64", MediaType: wire.MIMEType(p.MIMEType), Data: base64.StdEncoding.EncodeToString(p.Data)}}, nil
		}
		if p.URL != "" {
			return block{Type: "image", Source: &source{Type: "url", URL: p.URL}}, nil
		}
		return block{}, &llm.ConfigError{Field: f, Msg: "image needs data or a URL"}
	case llm.PartDocument:
		if len(p.Data) == 0 {
			return block{}, &llm.ConfigError{Field: f, Msg: "document needs inline data"}
		}
		if !strings.EqualFold(p.MIMEType, "application/pdf") {
			return block{}, &llm.ConfigError{Field: f + ".mime_type", Msg: fmt.Sprintf("%q is not supported; documents are application/pdf", p.MIMEType)}
		}
		return block{Type: "document", Source: &source{Type: "base64", MediaType: "application/pdf", Data: base64.StdEncoding.EncodeToString(p.Data)}}, nil
	}
	return block{}, &llm.ConfigError{Field: f + ".type", Msg: fmt.Sprintf("unknown part type %q", p.Type)}
}

// assistantBlocks replays thinking blocks first, then text, then tool calls.
func assistantBlocks(m *llm.Message, f string) ([]block, error) {
	out := make([]block, 0, len(m.ThinkingBlocks)+len(m.ToolCalls)+1)
	for j := range m.ThinkingBlocks {
		tb := &m.ThinkingBlocks[j]
		if tb.Format != formatName {
			continue // another format's reasoning: never sent to Anthropic
		}
		bf := fmt.Sprintf("%s.thinking_blocks[%d]", f, j)
		if tb.Redacted {
			if tb.Data == "" {
				return nil, &llm.ConfigError{Field: bf + ".data", Msg: "a redacted thinking block needs its data to be replayed"}
			}
			out = append(out, block{Type: "redacted_thinking", Data: tb.Data})
			continue
		}
		if tb.Signature == "" {
			return nil, &llm.ConfigError{Field: bf + ".signature", Msg: "an Anthropic thinking block needs its signature to be replayed"}
		}
		out = append(out, block{Type: "thinking", Thinking: tb.Text, Signature: tb.Signature})
	}
	n := len(out)
	if m.Content != "" {
		out = append(out, block{Type: "text", Text: m.Content})
	}
	for j := range m.Parts {
		p := &m.Parts[j]
		if p.Type != llm.PartText {
			return nil, &llm.ConfigError{Field: fmt.Sprintf("%s.parts[%d].type", f, j), Msg: "assistant messages take text parts only"}
		}
		if p.Text != "" {
			out = append(out, block{Type: "text", Text: p.Text})
		}
	}
	for j := range m.ToolCalls {
		tc := &m.ToolCalls[j]
		input, err := toolInput(tc.Arguments)
		if err != nil {
			return nil, &llm.ConfigError{Field: fmt.Sprintf("%s.tool_calls[%d].arguments", f, j), Msg: err.Error()}
		}
		out = append(out, block{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: input})
	}
	if len(out) == n {
		// Anthropic rejects an assistant turn without text or tool use.
		out = append(out, block{Type: "text", Text: " "})
	}
	return out, nil
}

// toolInput is a call's Arguments as the JSON object Anthropic wants.
func toolInput(args string) (json.RawMessage, error) {
	s := strings.TrimSpace(args)
	if s == "" || s == "null" {
		return json.RawMessage("{}"), nil
	}
	if !json.Valid([]byte(s)) {
		return nil, fmt.Errorf("is not valid JSON")
	}
	if s[0] != '{' {
		return nil, fmt.Errorf("must be a JSON object")
	}
	return json.RawMessage(s), nil
}

// toolResult is one tool message as a tool_result block. Its content is a
// string, or blocks when the message carries non-text parts (images).
func toolResult(m *llm.Message, f string) (block, error) {
	b := block{Type: "tool_result", ToolUseID: m.ToolCallID, IsError: m.IsError}
	if m.ToolCallID == "" {
		return block{}, &llm.ConfigError{Field: f + ".tool_call_id", Msg: "a tool message needs the id of the call it answers"}
	}
	rich := false
	for j := range m.Parts {
		if m.Parts[j].Type != llm.PartText {
			rich = true
			break
		}
	}
	if rich {
		content, err := contentBlocks(m, f)
		if err != nil {
			return block{}, err
		}
		b.Content = content
		return b, nil
	}
	text := m.Content
	for j := range m.Parts {
		if t := m.Parts[j].Text; t != "" {
			if text != "" {
				text += "\n"
			}
			text += t
		}
	}
	if text != "" {
		b.Content = text
	}
	return b, nil
}
