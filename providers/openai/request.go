package openai

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// chatPath is appended to a base URL that already carries the API version
// (https://api.openai.com/v1, https://api.z.ai/api/paas/v4, ...).
const chatPath = "/chat/completions"

// defaultParameters is sent for a tool without a schema.
var defaultParameters = json.RawMessage(`{"type":"object"}`)

type chatBody struct {
	Model               string          `json:"model"`
	Messages            []message       `json:"messages"`
	Tools               []tool          `json:"tools,omitempty"`
	ToolChoice          any             `json:"tool_choice,omitempty"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls,omitempty"`
	ResponseFormat      *responseFormat `json:"response_format,omitempty"`
	MaxTokens           int             `json:"max_tokens,omitempty"`
	MaxCompletionTokens int             `json:"max_completion_tokens,omitempty"`
	Temperature         *float64        `json:"temperature,omitempty"`
	TopP                *float64        `json:"top_p,omitempty"`
	Seed                *int64          `json:"seed,omitempty"`
	Stop                []string        `json:"stop,omitempty"`
	Stream              bool            `json:"stream,omitempty"`
	StreamOptions       *streamOptions  `json:"stream_options,omitempty"`
	Thinking            *thinking       `json:"thinking,omitempty"`
	ReasoningEffort     string          `json:"reasoning_effort,omitempty"`
	IncludeReasoning    bool            `json:"include_reasoning,omitempty"`
	// Prompt caching (cache.go).
	PromptCacheKey       string `json:"prompt_cache_key,omitempty"`
	PromptCacheRetention string `json:"prompt_cache_retention,omitempty"`
	// The optional fields (honours.go): each sent only where the
	// provider's Honours says.
	FrequencyPenalty *float64          `json:"frequency_penalty,omitempty"`
	PresencePenalty  *float64          `json:"presence_penalty,omitempty"`
	LogitBias        map[string]int    `json:"logit_bias,omitempty"`
	Logprobs         bool              `json:"logprobs,omitempty"`
	TopLogprobs      *int              `json:"top_logprobs,omitempty"`
	ServiceTier      string            `json:"service_tier,omitempty"`
	User             string            `json:"user,omitempty"`
	SafetyIdentifier string            `json:"safety_identifier,omitempty"`
	Metadata         map[string]string `json:"metadata,omitempty"`
	Store            *bool             `json:"store,omitempty"`
	Verbosity        string            `json:"verbosity,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type thinking struct {
	Type string `json:"type"`
}

// message is one chat message. Content is a string, a []contentPart, or nil
// (sent as null: an assistant turn that only calls tools).
type message struct {
	Role             string     `json:"role"`
	Content          any        `json:"content"`
	Refusal          string     `json:"refusal,omitempty"`
	ReasoningContent *string    `json:"reasoning_content,omitempty"`
	ToolCalls        []toolCall `json:"tool_calls,omitempty"`
	ToolCallID       string     `json:"tool_call_id,omitempty"`
}

type contentPart struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	ImageURL *imageURL `json:"image_url,omitempty"`
	File     *filePart `json:"file,omitempty"`
	// CacheControl is read from clients only (server.go): a breakpoint as
	// gateways accept it in this format; never sent.
	CacheControl *cacheControl `json:"cache_control,omitempty"`
}

// cacheControl is a prompt-cache breakpoint as gateways accept it in the
// OpenAI format (on a content part or a tool): {"type": "ephemeral",
// "ttl": "5m" | "1h"}. OpenAI caches prefixes on its own; an Anthropic
// upstream gets the mark as its cache_control.
type cacheControl struct {
	Type string `json:"type"`
	TTL  string `json:"ttl,omitempty"`
}

// mark is the llm breakpoint of a client's cache_control, checked.
func (c *cacheControl) mark(field string) (*llm.CacheMark, error) {
	if c == nil {
		return nil, nil
	}
	if c.Type != "ephemeral" {
		return nil, badField(field+".type", "want \"ephemeral\", got %q", c.Type)
	}
	switch llm.CacheTTL(c.TTL) {
	case llm.CacheTTLDefault, llm.CacheTTL5m, llm.CacheTTL1h:
		return &llm.CacheMark{TTL: llm.CacheTTL(c.TTL)}, nil
	}
	return nil, badField(field+".ttl", "unknown TTL %q (5m, 1h)", c.TTL)
}

type imageURL struct {
	URL string `json:"url"`
}

type filePart struct {
	Filename string `json:"filename"`
	FileData string `json:"file_data"`
}

type toolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function functionCall `json:"function"`
}

type functionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type tool struct {
	Type     string       `json:"type"`
	Function toolFunction `json:"function"`
	// CacheControl is read from clients only, as on a content part.
	CacheControl *cacheControl `json:"cache_control,omitempty"`
}

type toolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict,omitempty"`
}

type namedToolChoice struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

type responseFormat struct {
	Type       string      `json:"type"`
	JSONSchema *jsonSchema `json:"json_schema,omitempty"`
}

type jsonSchema struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
	Strict bool            `json:"strict,omitempty"`
}

// ChatRequest builds a POST /chat/completions request. Errors are
// *llm.ConfigError naming the field at fault; nothing is sent.
func (Codec) ChatRequest(req *llm.ChatRequest, o wire.BuildOptions) (*wire.Request, error) {
	if req == nil {
		return nil, &llm.ConfigError{Field: "request", Msg: "is nil"}
	}
	if strings.TrimSpace(req.Model) == "" {
		return nil, &llm.ConfigError{Field: "model", Msg: "is empty"}
	}
	if plainChat(req) {
		if wreq, ok := appendPlainChat(req, o); ok {
			return wreq, nil
		}
	}
	return chatRequestJSON(req, o)
}

// chatRequestJSON is ChatRequest through encoding/json: every request the
// append encoder (request_append.go) does not take.
func chatRequestJSON(req *llm.ChatRequest, o wire.BuildOptions) (*wire.Request, error) {
	body := chatBody{Model: req.Model}

	msgs, err := buildMessages(req, o.Quirks, o.Provider == "openai")
	if err != nil {
		return nil, err
	}
	body.Messages = msgs

	if len(req.Tools) > 0 {
		body.Tools = make([]tool, len(req.Tools))
		for i := range req.Tools {
			t := &req.Tools[i]
			if t.Name == "" {
				return nil, &llm.ConfigError{Field: fmt.Sprintf("tools[%d].name", i), Msg: "is empty"}
			}
			params := t.Parameters
			if len(params) == 0 {
				params = defaultParameters
			} else if !json.Valid(params) {
				return nil, &llm.ConfigError{Field: fmt.Sprintf("tools[%d].parameters", i), Msg: "is not valid JSON"}
			}
			body.Tools[i] = tool{Type: "function", Function: toolFunction{
				Name: t.Name, Description: t.Description, Parameters: params, Strict: t.Strict,
			}}
		}
		if req.ParallelToolCalls != nil && !o.Learned.NoParallelToolCalls {
			v := *req.ParallelToolCalls
			body.ParallelToolCalls = &v
		}
	}

	switch req.ToolChoice.Mode {
	case "":
	case llm.ToolChoiceAuto, llm.ToolChoiceNone, llm.ToolChoiceRequired:
		body.ToolChoice = string(req.ToolChoice.Mode)
	case llm.ToolChoiceTool:
		if req.ToolChoice.Name == "" {
			return nil, &llm.ConfigError{Field: "tool_choice.name", Msg: "is empty"}
		}
		var tc namedToolChoice
		tc.Type = "function"
		tc.Function.Name = req.ToolChoice.Name
		body.ToolChoice = tc
	default:
		return nil, &llm.ConfigError{Field: "tool_choice.mode", Msg: fmt.Sprintf("unknown mode %q", req.ToolChoice.Mode)}
	}

	if rf := req.ResponseFormat; rf != nil {
		switch rf.Type {
		case "", llm.ResponseText:
			// Plain text is the default; nothing is sent.
		case llm.ResponseJSONObject:
			body.ResponseFormat = &responseFormat{Type: "json_object"}
		case llm.ResponseJSONSchema:
			if o.Quirks.NoJSONSchema {
				return nil, &llm.ConfigError{Field: "response_format.type", Msg: "json_schema is not supported by " + providerName(o) + "; use json_object"}
			}
			if len(rf.Schema) == 0 || !json.Valid(rf.Schema) {
				return nil, &llm.ConfigError{Field: "response_format.schema", Msg: "json_schema needs a valid JSON Schema"}
			}
			name := rf.Name
			if name == "" {
				name = "response"
			}
			body.ResponseFormat = &responseFormat{Type: "json_schema", JSONSchema: &jsonSchema{
				Name: name, Schema: rf.Schema, Strict: rf.Strict,
			}}
		default:
			return nil, &llm.ConfigError{Field: "response_format.type", Msg: fmt.Sprintf("unknown type %q", rf.Type)}
		}
	}

	if err := chatScalars(&body, req, o); err != nil {
		return nil, err
	}
	wreq, err := wire.PostJSON(chatPath, &body, o.Stream, req.Headers)
	if err != nil {
		return nil, err
	}
	wreq.Body = wire.SpliceExtra(wreq.Body, req.Extra, formatName)
	return wreq, nil
}

// chatScalars sets the body's fields that are neither messages, tools,
// tool choice nor response format: both encoders share it.
func chatScalars(body *chatBody, req *llm.ChatRequest, o wire.BuildOptions) error {
	if req.MaxTokens < 0 {
		return &llm.ConfigError{Field: "max_tokens", Msg: "is negative"}
	}
	if req.MaxTokens > 0 {
		if o.Quirks.MaxCompletionTokens {
			body.MaxCompletionTokens = req.MaxTokens
		} else {
			body.MaxTokens = req.MaxTokens
		}
	}
	body.Temperature, body.TopP, body.Seed = sampling(req, o.Learned)
	if len(req.Stop) > 0 {
		body.Stop = req.Stop
	}
	if o.Stream {
		body.Stream = true
		if !o.Quirks.NoStreamOptions && !o.Learned.NoStreamOptions {
			body.StreamOptions = &streamOptions{IncludeUsage: true}
		}
	}
	if err := applyReasoning(body, req.Reasoning, o); err != nil {
		return err
	}
	body.PromptCacheKey, body.PromptCacheRetention = promptCache(req, o)
	if !req.Plain() {
		optionalFields(body, req, Codec{}.Honours(o))
	}
	return nil
}

// sampling returns copies of the request's temperature, top_p and seed,
// leaving out (nil) each one the provider has rejected (learned once). Chat
// Completions and the Responses API both send them this way.
func sampling(req *llm.ChatRequest, l wire.Learned) (temperature, topP *float64, seed *int64) {
	return unlessRejected(req.Temperature, l.NoTemperature), unlessRejected(req.TopP, l.NoTopP), unlessRejected(req.Seed, l.NoSeed)
}

// unlessRejected returns a copy of *v, or nil when v is nil or rejected.
func unlessRejected[T any](v *T, rejected bool) *T {
	if v == nil || rejected {
		return nil
	}
	c := *v
	return &c
}

func providerName(o wire.BuildOptions) string {
	if o.Provider != "" {
		return o.Provider
	}
	return "this provider"
}

// applyReasoning maps the provider-neutral effort onto the fields the
// provider's quirks say it accepts.
func applyReasoning(body *chatBody, r *llm.Reasoning, o wire.BuildOptions) error {
	q := o.Quirks
	effort := llm.Effort("")
	if r != nil {
		effort = r.Effort
	}
	switch effort {
	case "", llm.EffortNone, llm.EffortLow, llm.EffortMedium, llm.EffortHigh, llm.EffortMax:
	default:
		return &llm.ConfigError{Field: "reasoning.effort", Msg: fmt.Sprintf("unknown effort %q", effort)}
	}
	if q.IncludeReasoning && effort != llm.EffortNone {
		body.IncludeReasoning = true
	}
	if effort == "" {
		return nil
	}
	switch {
	case q.ThinkingObject:
		if effort == llm.EffortNone {
			body.Thinking = &thinking{Type: "disabled"}
			return nil
		}
		body.Thinking = &thinking{Type: "enabled"}
		if q.ReasoningEffort && !o.Learned.NoReasoningEffort {
			body.ReasoningEffort = effortString(effort)
		}
	case q.ReasoningEffort:
		if !o.Learned.NoReasoningEffort {
			body.ReasoningEffort = effortString(effort)
		}
	}
	return nil
}

// effortString maps an effort onto reasoning_effort's values: max has no
// wire value and becomes high.
func effortString(e llm.Effort) string {
	if e == llm.EffortMax {
		return string(llm.EffortHigh)
	}
	return string(e)
}

// buildMessages translates the history. Images and documents returned by a
// run of tool messages travel in one user message after that run, because a
// tool message carries text only and nothing may sit between an assistant's
// tool calls and their results.
//
// developer sends a developer message as "developer" (OpenAI's own API);
// elsewhere it is a system message, which every endpoint of the format
// takes.
func buildMessages(req *llm.ChatRequest, q wire.Quirks, developer bool) ([]message, error) {
	out := make([]message, 0, len(req.Messages)+1)
	echoAlways := q.EchoReasoningWithTools && len(req.Tools) > 0
	var pending []contentPart // media from the current run of tool messages
	flush := func() {
		if len(pending) > 0 {
			out = append(out, message{Role: "user", Content: pending})
			pending = nil
		}
	}
	for i := range req.Messages {
		m := &req.Messages[i]
		f := fmt.Sprintf("messages[%d]", i)
		if m.Role != llm.RoleTool {
			flush()
		}
		if m.Role != llm.RoleAssistant && len(m.ToolCalls) > 0 {
			return nil, &llm.ConfigError{Field: f + ".tool_calls", Msg: "only assistant messages carry tool calls"}
		}
		switch m.Role {
		case llm.RoleSystem, llm.RoleDeveloper:
			c, err := textContent(m, f)
			if err != nil {
				return nil, err
			}
			role := "system"
			if m.Role == llm.RoleDeveloper && developer {
				role = "developer"
			}
			out = append(out, message{Role: role, Content: c})
		case llm.RoleUser:
			c, err := userContent(m, f)
			if err != nil {
				return nil, err
			}
			out = append(out, message{Role: "user", Content: c})
		case llm.RoleAssistant:
			am, err := assistantMessage(m, f, echoAlways)
			if err != nil {
				return nil, err
			}
			out = append(out, am)
		case llm.RoleTool:
			if m.ToolCallID == "" {
				return nil, &llm.ConfigError{Field: f + ".tool_call_id", Msg: "a tool message needs the id of the call it answers"}
			}
			text, media, err := splitToolResult(m, f)
			if err != nil {
				return nil, err
			}
			if len(media) > 0 {
				if text == "" {
					text = "(image result attached below)"
				}
				pending = append(pending, contentPart{Type: "text", Text: "Images returned by tool call " + m.ToolCallID + ":"})
				pending = append(pending, media...)
			}
			// OpenAI has no error flag on tool results: an IsError result
			// is sent as its text, which should say what went wrong.
			out = append(out, message{Role: "tool", ToolCallID: m.ToolCallID, Content: text})
		default:
			return nil, &llm.ConfigError{Field: f + ".role", Msg: fmt.Sprintf("unknown role %q", m.Role)}
		}
	}
	flush()
	return out, nil
}

// textPieces returns the message's text: Content first, then each text part.
// A non-text part is an error naming it.
func textPieces(m *llm.Message, f, what string) ([]string, error) {
	var pieces []string
	if m.Content != "" {
		pieces = append(pieces, m.Content)
	}
	for j := range m.Parts {
		p := &m.Parts[j]
		if p.Type != llm.PartText {
			return nil, &llm.ConfigError{Field: fmt.Sprintf("%s.parts[%d].type", f, j), Msg: what + " messages carry text only"}
		}
		if p.Text != "" {
			pieces = append(pieces, p.Text)
		}
	}
	return pieces, nil
}

// textContent is a string for one piece of text and text parts otherwise.
func textContent(m *llm.Message, f string) (any, error) {
	pieces, err := textPieces(m, f, string(m.Role))
	if err != nil {
		return nil, err
	}
	switch len(pieces) {
	case 0:
		return "", nil
	case 1:
		return pieces[0], nil
	}
	parts := make([]contentPart, len(pieces))
	for i, s := range pieces {
		parts[i] = contentPart{Type: "text", Text: s}
	}
	return parts, nil
}

// userContent is a string when the message is plain text, else parts.
func userContent(m *llm.Message, f string) (any, error) {
	if textOnly(m) {
		return textContent(m, f)
	}
	return convertParts(m, f, func(t string) contentPart { return contentPart{Type: "text", Text: t} }, mediaPart)
}

// textOnly reports whether every part of m is text.
func textOnly(m *llm.Message) bool {
	for j := range m.Parts {
		if m.Parts[j].Type != llm.PartText {
			return false
		}
	}
	return true
}

// convertParts lays out a message with media as a format's parts: its
// Content as a text part first, then each part converted by part (field
// path f.parts[j] for errors), empty text parts dropped (some servers
// reject them). Chat Completions and the Responses API share it.
func convertParts[P any](m *llm.Message, f string, text func(string) P, part func(*llm.Part, string) (P, error)) ([]P, error) {
	parts := make([]P, 0, len(m.Parts)+1)
	if m.Content != "" {
		parts = append(parts, text(m.Content))
	}
	for j := range m.Parts {
		p := &m.Parts[j]
		if p.Type == llm.PartText && p.Text == "" {
			continue
		}
		cp, err := part(p, fmt.Sprintf("%s.parts[%d]", f, j))
		if err != nil {
			return nil, err
		}
		parts = append(parts, cp)
	}
	return parts, nil
}

func mediaPart(p *llm.Part, f string) (contentPart, error) {
	switch p.Type {
	case llm.PartText:
		return contentPart{Type: "text", Text: p.Text}, nil
	case llm.PartImage:
		u, err := mediaURL(p, f)
		if err != nil {
			return contentPart{}, err
		}
		return contentPart{Type: "image_url", ImageURL: &imageURL{URL: u}}, nil
	case llm.PartDocument:
		u, err := mediaURL(p, f)
		if err != nil {
			return contentPart{}, err
		}
		return contentPart{Type: "file", File: &filePart{Filename: "document.pdf", FileData: u}}, nil
	}
	return contentPart{}, &llm.ConfigError{Field: f + ".type", Msg: fmt.Sprintf("unknown part type %q", p.Type)}
}

// mediaURL checks an image or document part and returns the URL it is sent
// as: a data URL for inline bytes, else the image's own URL. Chat
// Completions and the Responses API share it; only their part shapes differ.
func mediaURL(p *llm.Part, f string) (string, error) {
	if p.Type == llm.PartDocument {
		if len(p.Data) == 0 {
			return "", &llm.ConfigError{Field: f, Msg: "document needs inline data"}
		}
		if p.MIMEType != "" && !strings.EqualFold(p.MIMEType, "application/pdf") {
			return "", &llm.ConfigError{Field: f + ".mime_type", Msg: fmt.Sprintf("%q is not supported; documents are application/pdf", p.MIMEType)}
		}
		return dataURL("application/pdf", p.Data), nil
	}
	if len(p.Data) > 0 {
		if p.MIMEType == "" {
			return "", &llm.ConfigError{Field: f + ".mime_type", Msg: "an inline image needs its MIME type"}
		}
		return dataURL(wire.MIMEType(p.MIMEType), p.Data), nil
	}
	if p.URL == "" {
		return "", &llm.ConfigError{Field: f, Msg: "image needs data or a URL"}
	}
	return p.URL, nil
}

func dataURL(mime string, data []byte) string {
	var b strings.Builder
	b.Grow(len("data:;base64,") + len(mime) + base64.StdEncoding.EncodedLen(len(data)))
	b.WriteString("data:")
	b.WriteString(mime)
	b.WriteString(";base64,")
	enc := base64.NewEncoder(base64.StdEncoding, &b)
	_, _ = enc.Write(data) // a strings.Builder never fails
	_ = enc.Close()
	return b.String()
}

func assistantMessage(m *llm.Message, f string, echoAlways bool) (message, error) {
	out := message{Role: "assistant", Refusal: m.Refusal}
	c, err := textContent(m, f)
	if err != nil {
		return message{}, err
	}
	if s, ok := c.(string); !ok || s != "" {
		out.Content = c // empty content stays nil and is sent as null
	}
	if m.Reasoning != "" || echoAlways {
		r := m.Reasoning
		out.ReasoningContent = &r
	}
	if len(m.ToolCalls) > 0 {
		out.ToolCalls = make([]toolCall, len(m.ToolCalls))
		for j := range m.ToolCalls {
			tc := &m.ToolCalls[j]
			tf := fmt.Sprintf("%s.tool_calls[%d]", f, j)
			if tc.ID == "" {
				return message{}, &llm.ConfigError{Field: tf + ".id", Msg: "is empty"}
			}
			if tc.Name == "" {
				return message{}, &llm.ConfigError{Field: tf + ".name", Msg: "is empty"}
			}
			args := tc.Arguments
			if strings.TrimSpace(args) == "" {
				args = "{}"
			}
			out.ToolCalls[j] = toolCall{ID: tc.ID, Type: "function", Function: functionCall{Name: tc.Name, Arguments: args}}
		}
	}
	return out, nil
}

// splitToolResult returns a tool result's text and its media parts.
func splitToolResult(m *llm.Message, f string) (string, []contentPart, error) {
	var text strings.Builder
	text.WriteString(m.Content)
	var media []contentPart
	for j := range m.Parts {
		p := &m.Parts[j]
		if p.Type == llm.PartText {
			if p.Text != "" {
				if text.Len() > 0 {
					text.WriteString("\n")
				}
				text.WriteString(p.Text)
			}
			continue
		}
		cp, err := mediaPart(p, fmt.Sprintf("%s.parts[%d]", f, j))
		if err != nil {
			return "", nil, err
		}
		media = append(media, cp)
	}
	return text.String(), media, nil
}
