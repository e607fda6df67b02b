package openai

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// responsesPath is the Responses API endpoint, relative to a base URL that
// carries the API version (https://api.openai.com/v1).
const responsesPath = "/responses"

// ResponsesFormat names the Responses wire format. It is also the Format of
// the llm.ThinkingBlocks it produces and the only Format it replays.
const ResponsesFormat = "openai-responses"

// includeEncryptedReasoning asks for reasoning items' encrypted_content,
// which stateless (store:false) replay needs.
const includeEncryptedReasoning = "reasoning.encrypted_content"

// ResponsesCodec is the OpenAI Responses API (POST /responses) used as a
// chat route: package providers sends a model's chat requests here when the
// credential's configuration marks the model, or when the provider answered
// that the model is only served by /v1/responses. It implements wire.Codec;
// the zero value is ready to use.
//
// Requests are stateless: store is always false, previous_response_id is
// never sent, and include:["reasoning.encrypted_content"] asks for each
// reasoning item's encrypted content so that it can be replayed on the next
// turn. Mapping decisions:
//
//   - System messages become instructions, joined with a blank line.
//   - User messages are {role:"user", content} with a plain string for one
//     piece of text, else input_text, input_image (a data: URL for inline
//     bytes) and input_file (PDF as a data: URL) parts.
//   - An assistant turn is replayed as its items: reasoning items from
//     ThinkingBlocks of Format "openai-responses" that carry encrypted content
//     in Data (summary text from Text, the item id from ID), then its
//     message and function_call items. Blocks of other formats and blocks
//     without encrypted content cannot be replayed statelessly and are
//     skipped. The API requires a reasoning item to be followed by the item
//     it preceded in the answer; the codec records that item in the block's
//     Signature as "<item type>:<id>" ("message:msg_…",
//     "function_call:call_…") and puts each reasoning item back in front of
//     it, giving the message its original id. A block whose item is not part
//     of the replayed turn (a built-in tool call) is skipped; a block with no
//     Signature goes first. Plain Reasoning text is not replayed.
//   - Tool results are function_call_output items; a result with images or
//     documents sends its output as input_text/input_image/input_file parts.
//     As on Chat Completions there is no error flag: an IsError result is
//     sent as its text.
//   - Tools are flat {type:"function", name, description, parameters,
//     strict}, strict always explicit (the API defaults it to true).
//     tool_choice, parallel_tool_calls (only with tools, unless learned
//     off), max_output_tokens, temperature and top_p (unless learned off)
//     and text.format for structured output (json_schema is a
//     *llm.ConfigError under Quirks.NoJSONSchema) are mapped directly.
//   - Reasoning becomes reasoning{effort, summary:"auto"}; EffortNone sends
//     effort "none" without a summary, EffortMax is "high" (the value every
//     reasoning model accepts), an empty effort sends only the summary
//     request. Without llm.Reasoning nothing is sent and the model reasons at
//     its default.
//   - The Responses API has no stop sequences: a request with Stop is a
//     *llm.ConfigError rather than an answer that silently ignores them.
//     Seed has no equivalent and is not sent.
//
// Answers: message output_text becomes Content, refusal parts Refusal,
// function_call items ToolCalls (call_id is the ToolCall.ID), and each
// reasoning item one ThinkingBlock{Format:"openai-responses", ID, Text:
// its summary (or, for servers that send raw reasoning text such as
// DeepSeek, that text), Data: encrypted_content}; Reasoning joins the
// blocks' texts, parts and items separated by a blank line. Built-in tool
// calls (web search, code interpreter) are not function calls and are left
// out. Finish: completed is stop, or tool_calls with calls, or
// content_filter when the message holds a refusal part; incomplete for
// content_filter is content_filter, for max_output_tokens length, otherwise
// tool_calls with calls and length without; failed and cancelled have no
// canonical reason (""). Usage: input_tokens minus
// input_tokens_details.cached_tokens is PromptTokens, cached tokens are
// CacheReadTokens, output_tokens (reasoning included) CompletionTokens and
// output_tokens_details.reasoning_tokens ReasoningTokens.
//
// Streams are decoded with jsonscan like Chat Completions: output text,
// refusal, reasoning summary (and reasoning text) and function-call
// argument deltas become the same llm.Events, ToolIndex being the call's
// position among the answer's function calls. A stream completes with
// response.completed or response.incomplete; response.failed and error
// events become *llm.APIError (retryable unless the code names a quota,
// auth or request problem).
type ResponsesCodec struct {
	// NoEncryptedReasoning leaves include:["reasoning.encrypted_content"]
	// out and replays no reasoning items: the model rejected encrypted
	// reasoning ("Encrypted content is not supported with this model", a
	// non-reasoning model). Package providers sets it from learn-once state.
	NoEncryptedReasoning bool
}

var _ wire.Codec = ResponsesCodec{}

// Format returns "openai-responses".
func (ResponsesCodec) Format() string { return ResponsesFormat }

// Authorize sets "Authorization: Bearer <key>", as Chat Completions does.
func (ResponsesCodec) Authorize(h http.Header, key string, q wire.Quirks) {
	Codec{}.Authorize(h, key, q)
}

// ParseError reads an error body; the shapes are those of Chat Completions.
func (ResponsesCodec) ParseError(status int, body []byte) wire.ErrorInfo {
	return Codec{}.ParseError(status, body)
}

type responsesBody struct {
	Model             string              `json:"model"`
	Instructions      string              `json:"instructions,omitempty"`
	Input             []any               `json:"input"`
	Tools             []responsesTool     `json:"tools,omitempty"`
	ToolChoice        any                 `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool               `json:"parallel_tool_calls,omitempty"`
	MaxOutputTokens   int                 `json:"max_output_tokens,omitempty"`
	Temperature       *float64            `json:"temperature,omitempty"`
	TopP              *float64            `json:"top_p,omitempty"`
	Reasoning         *responsesReasoning `json:"reasoning,omitempty"`
	Text              *responsesText      `json:"text,omitempty"`
	Store             bool                `json:"store"`
	Include           []string            `json:"include,omitempty"`
	Stream            bool                `json:"stream,omitempty"`
	// Prompt caching (cache.go).
	PromptCacheKey       string `json:"prompt_cache_key,omitempty"`
	PromptCacheRetention string `json:"prompt_cache_retention,omitempty"`
	// The optional fields (honours.go).
	TopLogprobs      *int              `json:"top_logprobs,omitempty"`
	Truncation       string            `json:"truncation,omitempty"`
	ServiceTier      string            `json:"service_tier,omitempty"`
	User             string            `json:"user,omitempty"`
	SafetyIdentifier string            `json:"safety_identifier,omitempty"`
	Metadata         map[string]string `json:"metadata,omitempty"`
}

type responsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict"`
}

type responsesNamedTool struct {
	Type string `json:"type"`
	Name string `json:"name"`
}

type responsesReasoning struct {
	Effort  string `json:"effort,omitempty"`
	Summary string `json:"summary,omitempty"`
}

type responsesText struct {
	Format    *responsesTextFormat `json:"format,omitempty"`
	Verbosity string               `json:"verbosity,omitempty"`
}

type responsesTextFormat struct {
	Type   string          `json:"type"`
	Name   string          `json:"name,omitempty"`
	Schema json.RawMessage `json:"schema,omitempty"`
	Strict bool            `json:"strict,omitempty"`
}

// easyMessage is a role/content input message. Content is a string or a
// []inputPart.
type easyMessage struct {
	Role    string `json:"role"`
	Content any    `json:"content"`
}

type inputPart struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	ImageURL string `json:"image_url,omitempty"`
	Detail   string `json:"detail,omitempty"`
	Filename string `json:"filename,omitempty"`
	FileData string `json:"file_data,omitempty"`
}

// outputMessage is an assistant message replayed as the output item it was.
type outputMessage struct {
	Type    string       `json:"type"`
	ID      string       `json:"id,omitempty"`
	Role    string       `json:"role"`
	Status  string       `json:"status"`
	Content []outputPart `json:"content"`
}

type outputPart struct {
	Type        string  `json:"type"`
	Text        string  `json:"text,omitempty"`
	Refusal     string  `json:"refusal,omitempty"`
	Annotations *[]bool `json:"annotations,omitempty"` // [] on output_text, absent on refusal
}

type reasoningItem struct {
	Type             string        `json:"type"`
	ID               string        `json:"id,omitempty"`
	EncryptedContent string        `json:"encrypted_content"`
	Summary          []summaryText `json:"summary"`
}

type summaryText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type functionCallItem struct {
	Type      string `json:"type"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type functionOutputItem struct {
	Type   string `json:"type"`
	CallID string `json:"call_id"`
	Output any    `json:"output"`
}

// ChatRequest builds a POST /responses request. Errors are *llm.ConfigError
// naming the field at fault; nothing is sent.
func (c ResponsesCodec) ChatRequest(req *llm.ChatRequest, o wire.BuildOptions) (*wire.Request, error) {
	if req == nil {
		return nil, &llm.ConfigError{Field: "request", Msg: "is nil"}
	}
	if strings.TrimSpace(req.Model) == "" {
		return nil, &llm.ConfigError{Field: "model", Msg: "is empty"}
	}
	if len(req.Stop) > 0 {
		return nil, &llm.ConfigError{Field: "stop", Msg: "the OpenAI Responses API has no stop sequences"}
	}
	body := responsesBody{Model: req.Model, Store: false, Stream: o.Stream}
	if !c.NoEncryptedReasoning {
		body.Include = []string{includeEncryptedReasoning}
	}
	instructions, input, err := c.buildInput(req)
	if err != nil {
		return nil, err
	}
	body.Instructions, body.Input = instructions, input

	if len(req.Tools) > 0 {
		body.Tools = make([]responsesTool, len(req.Tools))
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
			body.Tools[i] = responsesTool{Type: "function", Name: t.Name, Description: t.Description, Parameters: params, Strict: t.Strict}
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
		body.ToolChoice = responsesNamedTool{Type: "function", Name: req.ToolChoice.Name}
	default:
		return nil, &llm.ConfigError{Field: "tool_choice.mode", Msg: fmt.Sprintf("unknown mode %q", req.ToolChoice.Mode)}
	}

	if rf := req.ResponseFormat; rf != nil {
		switch rf.Type {
		case "", llm.ResponseText:
		case llm.ResponseJSONObject:
			body.Text = &responsesText{Format: &responsesTextFormat{Type: "json_object"}}
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
			body.Text = &responsesText{Format: &responsesTextFormat{Type: "json_schema", Name: name, Schema: rf.Schema, Strict: rf.Strict}}
		default:
			return nil, &llm.ConfigError{Field: "response_format.type", Msg: fmt.Sprintf("unknown type %q", rf.Type)}
		}
	}

	if req.MaxTokens < 0 {
		return nil, &llm.ConfigError{Field: "max_tokens", Msg: "is negative"}
	}
	body.MaxOutputTokens = req.MaxTokens
	body.Temperature, body.TopP, _ = sampling(req, o.Learned) // no seed on this route
	if r := req.Reasoning; r != nil {
		switch r.Effort {
		case "":
			body.Reasoning = &responsesReasoning{Summary: "auto"}
		case llm.EffortNone:
			body.Reasoning = &responsesReasoning{Effort: "none"}
		case llm.EffortLow, llm.EffortMedium, llm.EffortHigh, llm.EffortMax:
			body.Reasoning = &responsesReasoning{Effort: effortString(r.Effort), Summary: "auto"}
		default:
			return nil, &llm.ConfigError{Field: "reasoning.effort", Msg: fmt.Sprintf("unknown effort %q", r.Effort)}
		}
	}

	body.PromptCacheKey, body.PromptCacheRetention = promptCache(req, o)
	if !req.Plain() {
		responsesOptional(&body, req)
	}
	wreq, err := wire.PostJSON(responsesPath, &body, o.Stream, req.Headers)
	if err != nil {
		return nil, err
	}
	wreq.Body = wire.SpliceExtra(wreq.Body, req.Extra, ResponsesFormat)
	return wreq, nil
}

// responsesOptional sets the Responses body's optional fields: every one
// of them is the Responses API's own (ResponsesCodec.Honours).
func responsesOptional(body *responsesBody, req *llm.ChatRequest) {
	if req.Store != nil && *req.Store {
		body.Store = true // kept by OpenAI: reasoning need not travel encrypted
		body.Include = slices.DeleteFunc(body.Include, func(s string) bool { return s == includeEncryptedReasoning })
	}
	for _, inc := range req.Include {
		if !slices.Contains(body.Include, inc) && (inc != includeEncryptedReasoning || !body.Store) {
			body.Include = append(body.Include, inc)
		}
	}
	if lp := req.Logprobs; lp != nil {
		if !slices.Contains(body.Include, "message.output_text.logprobs") {
			body.Include = append(body.Include, "message.output_text.logprobs")
		}
		if lp.TopLogprobs > 0 {
			n := lp.TopLogprobs
			body.TopLogprobs = &n
		}
	}
	body.Truncation, body.ServiceTier, body.User, body.SafetyIdentifier, body.Metadata = req.Truncation, req.ServiceTier, req.User, req.SafetyIdentifier, req.Metadata
	if req.Verbosity != "" {
		if body.Text == nil {
			body.Text = &responsesText{}
		}
		body.Text.Verbosity = req.Verbosity
	}
	if r := req.Reasoning; r != nil && r.Summary != "" && body.Reasoning != nil {
		body.Reasoning.Summary = r.Summary
	}
}

// buildInput returns the instructions (every system message) and the input
// items of the history.
func (c ResponsesCodec) buildInput(req *llm.ChatRequest) (string, []any, error) {
	var instructions []string
	input := make([]any, 0, len(req.Messages)+2)
	for i := range req.Messages {
		m := &req.Messages[i]
		f := fmt.Sprintf("messages[%d]", i)
		if m.Role != llm.RoleAssistant && len(m.ToolCalls) > 0 {
			return "", nil, &llm.ConfigError{Field: f + ".tool_calls", Msg: "only assistant messages carry tool calls"}
		}
		switch m.Role {
		case llm.RoleSystem, llm.RoleDeveloper: // instructions are the developer's
			pieces, err := textPieces(m, f, "system")
			if err != nil {
				return "", nil, err
			}
			instructions = append(instructions, pieces...)
		case llm.RoleUser:
			content, err := responsesUserContent(m, f)
			if err != nil {
				return "", nil, err
			}
			input = append(input, easyMessage{Role: "user", Content: content})
		case llm.RoleAssistant:
			items, err := c.assistantItems(m, f)
			if err != nil {
				return "", nil, err
			}
			input = append(input, items...)
		case llm.RoleTool:
			if m.ToolCallID == "" {
				return "", nil, &llm.ConfigError{Field: f + ".tool_call_id", Msg: "a tool message needs the id of the call it answers"}
			}
			out, err := responsesToolOutput(m, f)
			if err != nil {
				return "", nil, err
			}
			input = append(input, functionOutputItem{Type: "function_call_output", CallID: m.ToolCallID, Output: out})
		default:
			return "", nil, &llm.ConfigError{Field: f + ".role", Msg: fmt.Sprintf("unknown role %q", m.Role)}
		}
	}
	return strings.Join(instructions, "\n\n"), input, nil
}

// responsesUserContent is a string for plain text and parts otherwise.
func responsesUserContent(m *llm.Message, f string) (any, error) {
	if textOnly(m) {
		pieces, err := textPieces(m, f, "user")
		if err != nil {
			return nil, err
		}
		if len(pieces) == 1 {
			return pieces[0], nil
		}
		parts := make([]inputPart, len(pieces))
		for i, s := range pieces {
			parts[i] = inputPart{Type: "input_text", Text: s}
		}
		if len(parts) == 0 {
			return "", nil
		}
		return parts, nil
	}
	return convertParts(m, f, func(t string) inputPart { return inputPart{Type: "input_text", Text: t} }, responsesPart)
}

func responsesPart(p *llm.Part, f string) (inputPart, error) {
	switch p.Type {
	case llm.PartText:
		return inputPart{Type: "input_text", Text: p.Text}, nil
	case llm.PartImage:
		u, err := mediaURL(p, f)
		if err != nil {
			return inputPart{}, err
		}
		return inputPart{Type: "input_image", ImageURL: u, Detail: "auto"}, nil
	case llm.PartDocument:
		u, err := mediaURL(p, f)
		if err != nil {
			return inputPart{}, err
		}
		return inputPart{Type: "input_file", Filename: "document.pdf", FileData: u}, nil
	}
	return inputPart{}, &llm.ConfigError{Field: f + ".type", Msg: fmt.Sprintf("unknown part type %q", p.Type)}
}

// responsesToolOutput is a tool result's output: its text, or parts when
// it carries images or documents.
func responsesToolOutput(m *llm.Message, f string) (any, error) {
	media := false
	for j := range m.Parts {
		if m.Parts[j].Type != llm.PartText {
			media = true
			break
		}
	}
	if !media {
		var text strings.Builder
		text.WriteString(m.Content)
		for j := range m.Parts {
			if s := m.Parts[j].Text; s != "" {
				if text.Len() > 0 {
					text.WriteString("\n")
				}
				text.WriteString(s)
			}
		}
		return text.String(), nil
	}
	parts := make([]inputPart, 0, len(m.Parts)+1)
	if m.Content != "" {
		parts = append(parts, inputPart{Type: "input_text", Text: m.Content})
	}
	for j := range m.Parts {
		p := &m.Parts[j]
		if p.Type == llm.PartText && p.Text == "" {
			continue
		}
		ip, err := responsesPart(p, fmt.Sprintf("%s.parts[%d]", f, j))
		if err != nil {
			return nil, err
		}
		if ip.Type == "input_image" {
			ip.Detail = "auto"
		}
		parts = append(parts, ip)
	}
	return parts, nil
}

// Item kinds recorded in a reasoning block's Signature: the type of the
// output item that followed the reasoning item in the answer.
const (
	followsMessage      = "message"
	followsFunctionCall = "function_call"
)

// follower encodes the item that followed a reasoning item.
func follower(kind, id string) string {
	if kind == "" || id == "" {
		return ""
	}
	return kind + ":" + id
}

// assistantItems replays one assistant turn: its message and function calls
// in their natural order, each preceded by the reasoning items that preceded
// it in the answer.
func (c ResponsesCodec) assistantItems(m *llm.Message, f string) ([]any, error) {
	text, err := textPieces(m, f, "assistant")
	if err != nil {
		return nil, err
	}
	content := strings.Join(text, "")
	hasMessage := content != "" || m.Refusal != ""

	calls := make([]functionCallItem, len(m.ToolCalls))
	for j := range m.ToolCalls {
		tc := &m.ToolCalls[j]
		tf := fmt.Sprintf("%s.tool_calls[%d]", f, j)
		if tc.ID == "" {
			return nil, &llm.ConfigError{Field: tf + ".id", Msg: "is empty"}
		}
		if tc.Name == "" {
			return nil, &llm.ConfigError{Field: tf + ".name", Msg: "is empty"}
		}
		args := tc.Arguments
		if strings.TrimSpace(args) == "" {
			args = emptyArguments
		}
		calls[j] = functionCallItem{Type: "function_call", CallID: tc.ID, Name: tc.Name, Arguments: args}
	}

	// Slot 0 is the message, slot 1+j function call j.
	before := make([][]reasoningItem, 1+len(calls))
	messageID := ""
	if !c.NoEncryptedReasoning {
		for _, b := range m.ThinkingBlocks {
			if b.Format != ResponsesFormat || b.Data == "" {
				continue // foreign, or not replayable without server-side state
			}
			slot := -1
			kind, id, _ := strings.Cut(b.Signature, ":")
			switch {
			case b.Signature == "":
				if hasMessage {
					slot = 0
				} else if len(calls) > 0 {
					slot = 1
				}
			case kind == followsMessage && hasMessage:
				slot, messageID = 0, id
			case kind == followsFunctionCall:
				for j := range calls {
					if calls[j].CallID == id {
						slot = 1 + j
						break
					}
				}
			}
			if slot < 0 {
				continue // the item it preceded is not part of this turn
			}
			ri := reasoningItem{Type: "reasoning", ID: b.ID, EncryptedContent: b.Data, Summary: []summaryText{}}
			if b.Text != "" {
				ri.Summary = []summaryText{{Type: "summary_text", Text: b.Text}}
			}
			before[slot] = append(before[slot], ri)
		}
	}

	out := make([]any, 0, len(calls)+len(m.ThinkingBlocks)+1)
	for _, ri := range before[0] {
		out = append(out, ri)
	}
	if hasMessage {
		switch {
		case messageID != "" || m.Refusal != "":
			om := outputMessage{Type: "message", ID: messageID, Role: "assistant", Status: "completed"}
			if m.Refusal != "" {
				om.Content = append(om.Content, outputPart{Type: "refusal", Refusal: m.Refusal})
			}
			if content != "" {
				om.Content = append(om.Content, outputPart{Type: "output_text", Text: content, Annotations: &[]bool{}})
			}
			out = append(out, om)
		default:
			out = append(out, easyMessage{Role: "assistant", Content: content})
		}
	}
	for j := range calls {
		for _, ri := range before[1+j] {
			out = append(out, ri)
		}
		out = append(out, calls[j])
	}
	return out, nil
}
