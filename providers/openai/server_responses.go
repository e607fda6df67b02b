package openai

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// This file is the server side of the Responses format (POST /responses),
// for a gateway that answers OpenAI clients statelessly: it decodes what a
// client sends into an llm.ChatRequest and encodes llm results and events
// as response objects and Responses stream events. It reuses the wire
// types of responses.go where the shapes are the same.
//
// Stateless means: previous_response_id, conversation and background are
// refused (the client sends the whole conversation as input, reasoning
// items with their encrypted_content included), nothing is stored, and
// every answer says "store": false.

// ServerResponses is a client's decoded POST /responses request.
type ServerResponses struct {
	Chat *llm.ChatRequest
	// Stream asks for Responses stream events.
	Stream bool
	echo   responsesEcho
}

// responsesEcho is what a response object repeats of its request.
type responsesEcho struct {
	Instructions      *string
	MaxOutputTokens   *int
	Temperature, TopP *float64
	ParallelToolCalls bool
	ToolChoice        json.RawMessage
	Tools             json.RawMessage
	Text              json.RawMessage
	Reasoning         json.RawMessage
	Metadata          json.RawMessage
	User              *string
}

type serverResponsesBody struct {
	Model              string            `json:"model"`
	Input              json.RawMessage   `json:"input"`
	Instructions       *string           `json:"instructions"`
	Tools              []json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls  *bool             `json:"parallel_tool_calls"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	Temperature        *float64          `json:"temperature"`
	TopP               *float64          `json:"top_p"`
	Reasoning          json.RawMessage   `json:"reasoning"`
	Text               json.RawMessage   `json:"text"`
	Stream             bool              `json:"stream"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Conversation       json.RawMessage   `json:"conversation"`
	Background         bool              `json:"background"`
	Metadata           json.RawMessage   `json:"metadata"`
	User               *string           `json:"user"`
	// The optional fields (honours.go).
	Store                *bool    `json:"store"`
	Include              []string `json:"include"`
	Truncation           string   `json:"truncation"`
	ServiceTier          string   `json:"service_tier"`
	PromptCacheKey       string   `json:"prompt_cache_key"`
	PromptCacheRetention string   `json:"prompt_cache_retention"`
	SafetyIdentifier     string   `json:"safety_identifier"`
	TopLogprobs          *int     `json:"top_logprobs"`
}

// ResponsesFields is every top-level field of a Responses request, as the
// official SDKs define it, and what the gateway does with it. A field not
// named here is passed through like the ones marked so: sent unchanged to
// OpenAI's Responses API, refused for any other upstream.
var ResponsesFields = []llm.WireField{
	{Name: "model", Class: llm.FieldMapped, Note: "provider/model, an alias, or bare (the openai provider)"},
	{Name: "input", Class: llm.FieldMapped, Note: "messages, function_call, function_call_output, reasoning items"},
	{Name: "instructions", Class: llm.FieldMapped, Note: "a system message"},
	{Name: "tools", Class: llm.FieldMapped, Note: "function tools (other types: 400)"},
	{Name: "tool_choice", Class: llm.FieldMapped, Note: ""},
	{Name: "parallel_tool_calls", Class: llm.FieldMapped, Note: "sent with tools (it means nothing without)"},
	{Name: "max_output_tokens", Class: llm.FieldMapped, Note: ""},
	{Name: "temperature", Class: llm.FieldMapped, Note: ""},
	{Name: "top_p", Class: llm.FieldMapped, Note: ""},
	{Name: "reasoning", Class: llm.FieldMapped, Note: "effort; summary to the Responses API only"},
	{Name: "text", Class: llm.FieldMapped, Note: "format; verbosity to OpenAI only"},
	{Name: "store", Class: llm.FieldMapped, Note: "store:true to OpenAI only"},
	{Name: "include", Class: llm.FieldMapped, Note: "reasoning.encrypted_content everywhere (reasoning replays); the others to the Responses API only"},
	{Name: "truncation", Class: llm.FieldMapped, Note: "auto to the Responses API only"},
	{Name: "service_tier", Class: llm.FieldMapped, Note: ""},
	{Name: "prompt_cache_key", Class: llm.FieldMapped, Note: "OpenAI only"},
	{Name: "prompt_cache_retention", Class: llm.FieldMapped, Note: "OpenAI only"},
	{Name: "safety_identifier", Class: llm.FieldMapped, Note: "OpenAI only"},
	{Name: "metadata", Class: llm.FieldMapped, Note: "OpenAI only"},
	{Name: "user", Class: llm.FieldMapped, Note: ""},
	{Name: "top_logprobs", Class: llm.FieldMapped, Note: "with include message.output_text.logprobs"},
	{Name: "stream", Class: llm.FieldServed, Note: ""},
	{Name: "stream_options", Class: llm.FieldServed, Note: ""},
	{Name: "previous_response_id", Class: llm.FieldRefused, Note: "the gateway is stateless"},
	{Name: "conversation", Class: llm.FieldRefused, Note: "the gateway is stateless"},
	{Name: "background", Class: llm.FieldRefused, Note: "true"},
	{Name: "prompt", Class: llm.FieldPassthrough, Note: "a stored prompt template"},
	{Name: "max_tool_calls", Class: llm.FieldPassthrough, Note: ""},
	{Name: "context_management", Class: llm.FieldPassthrough, Note: ""},
	{Name: "moderation", Class: llm.FieldPassthrough, Note: ""},
	{Name: "access_programs", Class: llm.FieldPassthrough, Note: ""},
	{Name: "image", Class: llm.FieldPassthrough, Note: ""},
	{Name: "prompt_cache_options", Class: llm.FieldPassthrough, Note: ""},
}

var responsesFields = wire.NewClassified(ResponsesFields)

type serverResponsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

// serverInputItem is one input item; which fields are set depends on Type
// (a message may have no type).
type serverInputItem struct {
	Type             string          `json:"type"`
	ID               string          `json:"id"`
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	CallID           string          `json:"call_id"`
	Name             string          `json:"name"`
	Arguments        string          `json:"arguments"`
	Output           json.RawMessage `json:"output"`
	Summary          []summaryText   `json:"summary"`
	EncryptedContent *string         `json:"encrypted_content"`
}

type serverInputPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL string `json:"image_url"`
	FileID   string `json:"file_id"`
	FileData string `json:"file_data"`
	Filename string `json:"filename"`
}

// DecodeServerResponses decodes a client's Responses request. input may be
// a string or a list of items: messages (roles user, system, developer,
// assistant; content a string or input_text, input_image, input_file,
// output_text and refusal parts), function_call, function_call_output and
// reasoning items. Consecutive reasoning, assistant message and
// function_call items are one assistant turn; a reasoning item becomes a
// ThinkingBlock of Format "openai-responses" (Data its encrypted_content,
// Signature the item that followed it, as ResponsesCodec records them), so
// that it replays to OpenAI unchanged. Only function tools are served;
// strict defaults to true, as on the API. The result is validated: errors
// are *llm.ConfigError naming the field at fault in the client's terms.
func DecodeServerResponses(body []byte) (*ServerResponses, error) {
	var b serverResponsesBody
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, badField("body", "is not a Responses request: %v", err)
	}
	switch {
	case b.PreviousResponseID != nil && *b.PreviousResponseID != "":
		return nil, badField("previous_response_id", "is not served: the gateway is stateless; send the whole conversation as input")
	case len(b.Conversation) > 0 && string(b.Conversation) != "null":
		return nil, badField("conversation", "is not served: the gateway is stateless; send the whole conversation as input")
	case b.Background:
		return nil, badField("background", "is not served")
	}
	req := &llm.ChatRequest{Model: b.Model, ParallelToolCalls: b.ParallelToolCalls, Temperature: b.Temperature, TopP: b.TopP}
	if b.MaxOutputTokens != nil {
		req.MaxTokens = *b.MaxOutputTokens
	}
	if b.Instructions != nil && *b.Instructions != "" {
		req.Messages = append(req.Messages, llm.Message{Role: llm.RoleSystem, Content: *b.Instructions})
	}
	msgs, err := decodeResponsesInput(b.Input)
	if err != nil {
		return nil, err
	}
	req.Messages = append(req.Messages, msgs...)
	for i, raw := range b.Tools {
		var t serverResponsesTool
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, badField(fmt.Sprintf("tools[%d]", i), "is not a tool: %v", err)
		}
		if t.Type != "function" {
			return nil, badField(fmt.Sprintf("tools[%d].type", i), "%q is not served (function only)", t.Type)
		}
		strict := t.Strict == nil || *t.Strict
		req.Tools = append(req.Tools, llm.Tool{Name: t.Name, Description: t.Description, Parameters: t.Parameters, Strict: strict})
	}
	if req.ToolChoice, err = decodeResponsesToolChoice(b.ToolChoice); err != nil {
		return nil, err
	}
	if len(b.Text) > 0 && string(b.Text) != "null" {
		var t struct {
			Format *struct {
				Type   string          `json:"type"`
				Name   string          `json:"name"`
				Schema json.RawMessage `json:"schema"`
				Strict *bool           `json:"strict"`
			} `json:"format"`
		}
		if err := json.Unmarshal(b.Text, &t); err != nil {
			return nil, badField("text", "is not {format}: %v", err)
		}
		if f := t.Format; f != nil {
			switch f.Type {
			case "", "text":
			case "json_object":
				req.ResponseFormat = &llm.ResponseFormat{Type: llm.ResponseJSONObject}
			case "json_schema":
				req.ResponseFormat = &llm.ResponseFormat{Type: llm.ResponseJSONSchema, Name: f.Name, Schema: f.Schema, Strict: f.Strict != nil && *f.Strict}
			default:
				return nil, badField("text.format.type", "%q is unknown", f.Type)
			}
		}
	}
	if len(b.Reasoning) > 0 && string(b.Reasoning) != "null" {
		var r responsesReasoning
		if err := json.Unmarshal(b.Reasoning, &r); err != nil {
			return nil, badField("reasoning", "is not {effort, summary}: %v", err)
		}
		e := llm.Effort(r.Effort)
		switch e {
		case "minimal":
			e = llm.EffortLow
		case "xhigh":
			e = llm.EffortMax
		}
		req.Reasoning = &llm.Reasoning{Effort: e}
		if r.Summary != "auto" { // auto is what the Responses route asks for anyway
			req.Reasoning.Summary = r.Summary
		}
	}
	if len(b.Text) > 0 && string(b.Text) != "null" {
		var t struct {
			Verbosity string `json:"verbosity"`
		}
		_ = json.Unmarshal(b.Text, &t) // its shape was checked above
		req.Verbosity = t.Verbosity
	}
	req.PreferResponses = true // the Responses API serves it, where the provider is OpenAI's
	req.Truncation, req.ServiceTier, req.SafetyIdentifier = b.Truncation, b.ServiceTier, b.SafetyIdentifier
	if b.Store != nil && *b.Store {
		req.Store = b.Store // store:false is the stateless route's own
	}
	if req.Truncation == "disabled" {
		req.Truncation = "" // every format's own behaviour
	}
	for _, inc := range b.Include {
		switch inc {
		case "message.output_text.logprobs":
			req.Logprobs = &llm.Logprobs{}
			continue
		case includeEncryptedReasoning:
			continue // the route asks for it (reasoning replays), unless stored
		}
		req.Include = append(req.Include, inc)
	}
	if b.TopLogprobs != nil && *b.TopLogprobs > 0 {
		if req.Logprobs == nil {
			req.Logprobs = &llm.Logprobs{}
		}
		req.Logprobs.TopLogprobs = *b.TopLogprobs
	}
	if b.PromptCacheKey != "" || b.PromptCacheRetention != "" {
		req.Cache = &llm.PromptCache{Key: b.PromptCacheKey, Retention: b.PromptCacheRetention}
	}
	if b.User != nil {
		req.User = *b.User
	}
	if len(b.Metadata) > 0 && string(b.Metadata) != "null" {
		if err := json.Unmarshal(b.Metadata, &req.Metadata); err != nil {
			return nil, badField("metadata", "is not an object of strings")
		}
	}
	req.Extra = wire.ExtraFields(body, responsesFields, ResponsesFormat)
	if err := req.Validate(); err != nil {
		return nil, err
	}
	out := &ServerResponses{Chat: req, Stream: b.Stream}
	out.echo = responsesEcho{
		Instructions: b.Instructions, MaxOutputTokens: b.MaxOutputTokens, Temperature: b.Temperature, TopP: b.TopP,
		ParallelToolCalls: b.ParallelToolCalls == nil || *b.ParallelToolCalls,
		ToolChoice:        b.ToolChoice, Text: b.Text, Reasoning: b.Reasoning, Metadata: b.Metadata, User: b.User,
	}
	if len(b.Tools) > 0 {
		out.echo.Tools, _ = json.Marshal(b.Tools)
	}
	return out, nil
}

func decodeResponsesToolChoice(raw json.RawMessage) (llm.ToolChoice, error) {
	if tc, done, err := decodeToolChoiceMode(raw); done {
		return tc, err
	}
	var named responsesNamedTool
	if err := json.Unmarshal(raw, &named); err != nil || named.Type != "function" || named.Name == "" {
		return llm.ToolChoice{}, badField("tool_choice", "is neither a mode nor {type:function, name}")
	}
	return llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: named.Name}, nil
}

// decodeResponsesInput turns input (a string, or items) into messages.
func decodeResponsesInput(raw json.RawMessage) ([]llm.Message, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, badField("input", "is missing")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return []llm.Message{llm.UserText(s)}, nil
	}
	var items []serverInputItem
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, badField("input", "is neither a string nor a list of items")
	}
	var (
		out     []llm.Message
		turn    *llm.Message // the assistant turn being gathered
		pending = -1         // its thinking block waiting for the item that follows
	)
	flush := func() {
		if turn != nil {
			out = append(out, *turn)
			turn, pending = nil, -1
		}
	}
	assistant := func(follows string) *llm.Message {
		if turn == nil {
			turn = &llm.Message{Role: llm.RoleAssistant}
		}
		if pending >= 0 {
			turn.ThinkingBlocks[pending].Signature = follows
			pending = -1
		}
		return turn
	}
	for i := range items {
		it := &items[i]
		f := fmt.Sprintf("input[%d]", i)
		switch it.Type {
		case "", "message":
			switch it.Role {
			case "assistant":
				m := assistant(follower(followsMessage, it.ID))
				text, refusal, err := decodeOutputContent(it.Content, f+".content")
				if err != nil {
					return nil, err
				}
				m.Content += text
				m.Refusal += refusal
				continue
			case "user", "system", "developer":
				flush()
				role := llm.Role(it.Role)
				text, parts, err := decodeResponsesContent(it.Content, f+".content")
				if err != nil {
					return nil, err
				}
				out = append(out, llm.Message{Role: role, Content: text, Parts: parts})
			default:
				return nil, badField(f+".role", "%q is unknown", it.Role)
			}
		case "function_call":
			m := assistant(follower(followsFunctionCall, it.CallID))
			if it.CallID == "" {
				return nil, badField(f+".call_id", "is empty")
			}
			m.ToolCalls = append(m.ToolCalls, llm.ToolCall{ID: it.CallID, Name: it.Name, Arguments: it.Arguments})
		case "reasoning":
			m := assistant("")
			var text []string
			for _, st := range it.Summary {
				text = append(text, st.Text)
			}
			tb := llm.ThinkingBlock{Format: ResponsesFormat, ID: it.ID, Text: strings.Join(text, "\n\n")}
			if it.EncryptedContent != nil {
				tb.Data = *it.EncryptedContent
			}
			m.ThinkingBlocks = append(m.ThinkingBlocks, tb)
			pending = len(m.ThinkingBlocks) - 1
		case "function_call_output":
			flush()
			if it.CallID == "" {
				return nil, badField(f+".call_id", "is empty")
			}
			text, parts, err := decodeResponsesContent(it.Output, f+".output")
			if err != nil {
				return nil, err
			}
			out = append(out, llm.Message{Role: llm.RoleTool, ToolCallID: it.CallID, Content: text, Parts: parts})
		default:
			return nil, badField(f+".type", "%q is not served (stateless: messages, function_call, function_call_output and reasoning items)", it.Type)
		}
	}
	flush()
	return out, nil
}

// decodeResponsesContent reads user, system or tool content: a string or
// input parts. Parts that hold only text are folded into one string.
func decodeResponsesContent(raw json.RawMessage, field string) (string, []llm.Part, error) {
	return decodeParts(raw, field, "a list of parts", func(p *serverInputPart, f string) (llm.Part, error) {
		switch p.Type {
		case "input_text", "output_text", "text":
			return llm.TextPart(p.Text), nil
		case "input_image":
			if p.ImageURL == "" {
				return llm.Part{}, badField(f+".image_url", "is empty (file_id is not served)")
			}
			return imagePart(p.ImageURL), nil
		case "input_file":
			mime, data, ok := parseDataURL(p.FileData)
			if !ok {
				return llm.Part{}, badField(f+".file_data", "is not a base64 data: URL (file_id and file_url are not served)")
			}
			return llm.Part{Type: llm.PartDocument, MIMEType: mime, Data: data}, nil
		}
		return llm.Part{}, badField(f+".type", "%q is not served", p.Type)
	})
}

// decodeOutputContent reads an assistant message's content: a string or
// output_text and refusal parts.
func decodeOutputContent(raw json.RawMessage, field string) (text, refusal string, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, "", nil
	}
	var ps []serverInputPart
	if err := json.Unmarshal(raw, &ps); err != nil {
		return "", "", badField(field, "is neither a string nor a list of parts")
	}
	var t, r strings.Builder
	for i, p := range ps {
		switch p.Type {
		case "output_text", "input_text", "text":
			t.WriteString(p.Text)
		case "refusal":
			r.WriteString(p.Refusal)
		default:
			return "", "", badField(fmt.Sprintf("%s[%d].type", field, i), "%q is not served in an assistant message", p.Type)
		}
	}
	return t.String(), r.String(), nil
}

// Answer side.

type serverResponseObject struct {
	ID                 string              `json:"id"`
	Object             string              `json:"object"`
	CreatedAt          int64               `json:"created_at"`
	Status             string              `json:"status"`
	Error              *serverRespError    `json:"error"`
	IncompleteDetails  *serverIncomplete   `json:"incomplete_details"`
	Instructions       *string             `json:"instructions"`
	MaxOutputTokens    *int                `json:"max_output_tokens"`
	Model              string              `json:"model"`
	Output             []any               `json:"output"`
	ParallelToolCalls  bool                `json:"parallel_tool_calls"`
	PreviousResponseID *string             `json:"previous_response_id"`
	Reasoning          json.RawMessage     `json:"reasoning"`
	Store              bool                `json:"store"`
	Temperature        *float64            `json:"temperature"`
	Text               json.RawMessage     `json:"text"`
	ToolChoice         json.RawMessage     `json:"tool_choice"`
	Tools              json.RawMessage     `json:"tools"`
	TopP               *float64            `json:"top_p"`
	Truncation         string              `json:"truncation"`
	Usage              *serverResponsesUse `json:"usage"`
	User               *string             `json:"user"`
	Metadata           json.RawMessage     `json:"metadata"`
}

type serverRespError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type serverIncomplete struct {
	Reason string `json:"reason"`
}

type serverResponsesUse struct {
	InputTokens         int           `json:"input_tokens"`
	InputTokensDetails  cachedDetails `json:"input_tokens_details"`
	OutputTokens        int           `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

// serverMessageItem is a message output item.
type serverMessageItem struct {
	ID      string       `json:"id"`
	Type    string       `json:"type"`
	Status  string       `json:"status"`
	Role    string       `json:"role"`
	Content []outputPart `json:"content"`
}

type serverFunctionCallItem struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Status    string `json:"status"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type serverReasoningItem struct {
	ID               string        `json:"id"`
	Type             string        `json:"type"`
	Summary          []summaryText `json:"summary"`
	EncryptedContent *string       `json:"encrypted_content,omitempty"`
}

func responsesUsageOf(u llm.Usage) *serverResponsesUse {
	out := &serverResponsesUse{InputTokens: u.InputTokens(), OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens()}
	out.InputTokensDetails.CachedTokens = u.CacheReadTokens
	out.OutputTokensDetails.ReasoningTokens = u.ReasoningTokens
	return out
}

func rawOr(raw json.RawMessage, def string) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage(def)
	}
	return raw
}

// object is the response object around output, in the request's terms.
func (sr *ServerResponses) object(id, model string, created int64, status string, output []any) serverResponseObject {
	e := &sr.echo
	if output == nil {
		output = []any{}
	}
	return serverResponseObject{
		ID: id, Object: "response", CreatedAt: created, Status: status, Model: model, Output: output,
		Instructions: e.Instructions, MaxOutputTokens: e.MaxOutputTokens, ParallelToolCalls: e.ParallelToolCalls,
		Reasoning: rawOr(e.Reasoning, `{"effort":null,"summary":null}`), Temperature: e.Temperature,
		Text: rawOr(e.Text, `{"format":{"type":"text"}}`), ToolChoice: rawOr(e.ToolChoice, `"auto"`),
		Tools: rawOr(e.Tools, `[]`), TopP: e.TopP, Truncation: "disabled", User: e.User, Metadata: rawOr(e.Metadata, `{}`),
	}
}

// finishStatus is a response's status and incomplete reason for a finish.
func finishStatus(fin llm.FinishReason, refused bool) (string, *serverIncomplete) {
	switch {
	case fin == llm.FinishLength:
		return "incomplete", &serverIncomplete{Reason: "max_output_tokens"}
	case fin == llm.FinishContentFilter && !refused:
		return "incomplete", &serverIncomplete{Reason: "content_filter"}
	}
	return "completed", nil
}

// reasoningItemOf is a thinking block as a reasoning output item.
func reasoningItemOf(tb *llm.ThinkingBlock, id string) serverReasoningItem {
	it := serverReasoningItem{ID: id, Type: "reasoning", Summary: []summaryText{}}
	if tb.ID != "" {
		it.ID = tb.ID
	}
	if tb.Text != "" {
		it.Summary = []summaryText{{Type: "summary_text", Text: tb.Text}}
	}
	if tb.Format == ResponsesFormat && tb.Data != "" {
		d := tb.Data
		it.EncryptedContent = &d
	}
	return it
}

func responsesID(id string) string {
	if id == "" || !strings.HasPrefix(id, "resp_") {
		return "resp_chorus"
	}
	return id
}

// EncodeServerResponse encodes a buffered answer as a response object. id
// is the response id ("resp_…"), model the name the client asked for,
// created a Unix time. Output items: one reasoning item per thinking block
// (encrypted_content when it came from the Responses format; plain
// Reasoning text as one summary otherwise), then the message (output_text
// and refusal parts) and the function calls. A length finish is status
// incomplete (max_output_tokens), a content filter without a refusal
// incomplete (content_filter).
func (sr *ServerResponses) EncodeServerResponse(res *llm.ChatResult, id, model string, created int64) ([]byte, error) {
	suffix := strings.TrimPrefix(id, "resp_")
	var output []any
	for i := range res.ThinkingBlocks {
		output = append(output, reasoningItemOf(&res.ThinkingBlocks[i], "rs_"+suffix+"_"+strconv.Itoa(i)))
	}
	if len(res.ThinkingBlocks) == 0 && res.Reasoning != "" {
		output = append(output, reasoningItemOf(&llm.ThinkingBlock{Text: res.Reasoning}, "rs_"+suffix))
	}
	if res.Content != "" || res.Refusal != "" || len(res.ToolCalls) == 0 {
		m := serverMessageItem{ID: "msg_" + suffix, Type: "message", Status: "completed", Role: "assistant", Content: []outputPart{}}
		if res.Refusal != "" {
			m.Content = append(m.Content, outputPart{Type: "refusal", Refusal: res.Refusal})
		}
		if res.Content != "" || res.Refusal == "" {
			m.Content = append(m.Content, outputPart{Type: "output_text", Text: res.Content, Annotations: &[]bool{}})
		}
		output = append(output, m)
	}
	for _, tc := range res.ToolCalls {
		output = append(output, serverFunctionCallItem{ID: "fc_" + tc.ID, Type: "function_call", Status: "completed", CallID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
	}
	status, inc := finishStatus(res.FinishReason, res.Refusal != "")
	o := sr.object(id, model, created, status, output)
	o.IncompleteDetails, o.Usage = inc, responsesUsageOf(res.Usage)
	return json.Marshal(o)
}

// ServerResponsesStream encodes llm events as Responses stream events
// (event: <type> / data: {...,"sequence_number"}), in the order OpenAI
// sends them: response.created and response.in_progress, then per output
// item output_item.added, its part or summary part added, its deltas, its
// .done events and output_item.done, and last response.completed (or
// response.incomplete) with the whole response. Reasoning and message
// items close when another item opens; function calls stay open until the
// end, so that deltas of interleaved calls each reach their own item. Use
// one per streamed answer; it is not safe for concurrent use.
type ServerResponsesStream struct {
	sr            *ServerResponses
	id, model     string
	suffix        string
	created       int64
	seq           int
	started       bool
	output        []any // finished items by output index (nil: still open)
	cur           *rsItem
	calls         map[int]*rsItem // by ToolIndex
	callOrder     []*rsItem
	held          wire.HeldEnd
	refused       bool
	reasoningSeen int
}

// rsItem is one open output item.
type rsItem struct {
	kind   string // "message", "reasoning", "function_call"
	id     string
	index  int
	part   string // the open content part of a message: "output_text" or "refusal"
	parts  []outputPart
	text   strings.Builder
	callID string
	name   string
}

// NewServerResponsesStream returns the encoder of one streamed answer.
func (sr *ServerResponses) NewServerResponsesStream(id, model string, created int64) *ServerResponsesStream {
	id = responsesID(id)
	return &ServerResponsesStream{sr: sr, id: id, model: model, created: created, suffix: strings.TrimPrefix(id, "resp_"), calls: map[int]*rsItem{}}
}

type rsEvent struct {
	Type           string          `json:"type"`
	Response       any             `json:"response,omitempty"`
	OutputIndex    *int            `json:"output_index,omitempty"`
	ItemID         string          `json:"item_id,omitempty"`
	Item           any             `json:"item,omitempty"`
	ContentIndex   *int            `json:"content_index,omitempty"`
	SummaryIndex   *int            `json:"summary_index,omitempty"`
	Part           any             `json:"part,omitempty"`
	Delta          *string         `json:"delta,omitempty"`
	Text           *string         `json:"text,omitempty"`
	Refusal        *string         `json:"refusal,omitempty"`
	Arguments      *string         `json:"arguments,omitempty"`
	Name           string          `json:"name,omitempty"`
	Logprobs       *[]struct{}     `json:"logprobs,omitempty"`
	Code           *string         `json:"code,omitempty"`
	Message        string          `json:"message,omitempty"`
	Param          json.RawMessage `json:"param,omitempty"`
	Error          *rsError        `json:"error,omitempty"`
	SequenceNumber int             `json:"sequence_number"`
}

func (s *ServerResponsesStream) emit(dst []byte, ev *rsEvent) []byte {
	ev.SequenceNumber = s.seq
	s.seq++
	b, _ := json.Marshal(ev) // plain values: cannot fail
	dst = append(dst, "event: "...)
	dst = append(dst, ev.Type...)
	dst = append(dst, "\ndata: "...)
	dst = append(dst, b...)
	return append(dst, '\n', '\n')
}

func intp(i int) *int           { return &i }
func strp(s string) *string     { return &s }
func noLogprobs() *[]struct{}   { return &[]struct{}{} }
func emptyAnnotations() *[]bool { return &[]bool{} }

func (s *ServerResponsesStream) start(dst []byte) []byte {
	if s.started {
		return dst
	}
	s.started = true
	o := s.sr.object(s.id, s.model, s.created, "in_progress", nil)
	dst = s.emit(dst, &rsEvent{Type: "response.created", Response: o})
	return s.emit(dst, &rsEvent{Type: "response.in_progress", Response: o})
}

// open starts an output item.
func (s *ServerResponsesStream) open(dst []byte, it *rsItem, item any) []byte {
	it.index = len(s.output)
	s.output = append(s.output, nil)
	return s.emit(dst, &rsEvent{Type: "response.output_item.added", OutputIndex: intp(it.index), Item: item})
}

// closeCur closes the open reasoning or message item.
func (s *ServerResponsesStream) closeCur(dst []byte) []byte {
	it := s.cur
	if it == nil {
		return dst
	}
	s.cur = nil
	switch it.kind {
	case "reasoning":
		t := it.text.String()
		part := summaryText{Type: "summary_text", Text: t}
		dst = s.emit(dst, &rsEvent{Type: "response.reasoning_summary_text.done", ItemID: it.id, OutputIndex: intp(it.index), SummaryIndex: intp(0), Text: strp(t)})
		dst = s.emit(dst, &rsEvent{Type: "response.reasoning_summary_part.done", ItemID: it.id, OutputIndex: intp(it.index), SummaryIndex: intp(0), Part: part})
		done := serverReasoningItem{ID: it.id, Type: "reasoning", Summary: []summaryText{part}}
		s.output[it.index] = done
		return s.emit(dst, &rsEvent{Type: "response.output_item.done", OutputIndex: intp(it.index), Item: done})
	case "message":
		dst = s.closePart(dst, it)
		done := serverMessageItem{ID: it.id, Type: "message", Status: "completed", Role: "assistant", Content: it.parts}
		s.output[it.index] = done
		return s.emit(dst, &rsEvent{Type: "response.output_item.done", OutputIndex: intp(it.index), Item: done})
	}
	return dst
}

// closePart closes a message's open content part.
func (s *ServerResponsesStream) closePart(dst []byte, it *rsItem) []byte {
	if it.part == "" {
		return dst
	}
	ci := len(it.parts)
	t := it.text.String()
	var part outputPart
	if it.part == "refusal" {
		part = outputPart{Type: "refusal", Refusal: t}
		dst = s.emit(dst, &rsEvent{Type: "response.refusal.done", ItemID: it.id, OutputIndex: intp(it.index), ContentIndex: intp(ci), Refusal: strp(t)})
	} else {
		part = outputPart{Type: "output_text", Text: t, Annotations: emptyAnnotations()}
		dst = s.emit(dst, &rsEvent{Type: "response.output_text.done", ItemID: it.id, OutputIndex: intp(it.index), ContentIndex: intp(ci), Text: strp(t), Logprobs: noLogprobs()})
	}
	dst = s.emit(dst, &rsEvent{Type: "response.content_part.done", ItemID: it.id, OutputIndex: intp(it.index), ContentIndex: intp(ci), Part: part})
	it.parts = append(it.parts, part)
	it.part = ""
	it.text.Reset()
	return dst
}

// message returns the open message item with a part of kind open.
func (s *ServerResponsesStream) message(dst []byte, kind string) ([]byte, *rsItem) {
	if s.cur == nil || s.cur.kind != "message" {
		dst = s.closeCur(dst)
		it := &rsItem{kind: "message", id: "msg_" + s.suffix, parts: []outputPart{}}
		if len(s.output) > 0 {
			it.id += "_" + strconv.Itoa(len(s.output))
		}
		dst = s.open(dst, it, serverMessageItem{ID: it.id, Type: "message", Status: "in_progress", Role: "assistant", Content: []outputPart{}})
		s.cur = it
	}
	it := s.cur
	if it.part != kind {
		dst = s.closePart(dst, it)
		it.part = kind
		var part outputPart
		if kind == "refusal" {
			part = outputPart{Type: "refusal"}
		} else {
			part = outputPart{Type: "output_text", Annotations: emptyAnnotations()}
		}
		dst = s.emit(dst, &rsEvent{Type: "response.content_part.added", ItemID: it.id, OutputIndex: intp(it.index), ContentIndex: intp(len(it.parts)), Part: part})
	}
	return dst, it
}

// Event appends the events of one llm event to dst. Usage and finish are
// held for End.
func (s *ServerResponsesStream) Event(dst []byte, ev *llm.Event) []byte {
	dst = s.start(dst)
	switch ev.Type {
	case llm.EventText, llm.EventRefusal:
		kind, typ := "output_text", "response.output_text.delta"
		if ev.Type == llm.EventRefusal {
			kind, typ = "refusal", "response.refusal.delta"
			s.refused = true
		}
		var it *rsItem
		dst, it = s.message(dst, kind)
		it.text.WriteString(ev.Text)
		e := &rsEvent{Type: typ, ItemID: it.id, OutputIndex: intp(it.index), ContentIndex: intp(len(it.parts)), Delta: strp(ev.Text)}
		if kind == "output_text" {
			e.Logprobs = noLogprobs()
		}
		return s.emit(dst, e)
	case llm.EventReasoning:
		if ev.Text == "" {
			return dst // another format's block signature: not replayable here
		}
		if s.cur == nil || s.cur.kind != "reasoning" {
			dst = s.closeCur(dst)
			it := &rsItem{kind: "reasoning", id: "rs_" + s.suffix + "_" + strconv.Itoa(s.reasoningSeen)}
			s.reasoningSeen++
			dst = s.open(dst, it, serverReasoningItem{ID: it.id, Type: "reasoning", Summary: []summaryText{}})
			dst = s.emit(dst, &rsEvent{Type: "response.reasoning_summary_part.added", ItemID: it.id, OutputIndex: intp(it.index), SummaryIndex: intp(0), Part: summaryText{Type: "summary_text"}})
			s.cur = it
		}
		it := s.cur
		it.text.WriteString(ev.Text)
		return s.emit(dst, &rsEvent{Type: "response.reasoning_summary_text.delta", ItemID: it.id, OutputIndex: intp(it.index), SummaryIndex: intp(0), Delta: strp(ev.Text)})
	case llm.EventToolCallStart:
		dst = s.closeCur(dst)
		it := &rsItem{kind: "function_call", id: "fc_" + ev.ToolCallID, callID: ev.ToolCallID, name: ev.ToolName}
		s.calls[ev.ToolIndex] = it
		s.callOrder = append(s.callOrder, it)
		dst = s.open(dst, it, serverFunctionCallItem{ID: it.id, Type: "function_call", Status: "in_progress", CallID: it.callID, Name: it.name, Arguments: ""})
		if ev.Text != "" {
			it.text.WriteString(ev.Text)
			dst = s.emit(dst, &rsEvent{Type: "response.function_call_arguments.delta", ItemID: it.id, OutputIndex: intp(it.index), Delta: strp(ev.Text)})
		}
		return dst
	case llm.EventToolCallDelta:
		it := s.calls[ev.ToolIndex]
		if it == nil {
			return dst
		}
		it.text.WriteString(ev.Text)
		return s.emit(dst, &rsEvent{Type: "response.function_call_arguments.delta", ItemID: it.id, OutputIndex: intp(it.index), Delta: strp(ev.Text)})
	case llm.EventUsage, llm.EventFinish:
		s.held.Hold(ev)
	}
	return dst
}

// End closes every open item and appends response.completed (or
// response.incomplete) with the whole response. res, when not nil,
// supplies usage, finish reason and encrypted reasoning the events did not
// carry: a reasoning item of the final response has the upstream's id and
// encrypted_content (what a stateless replay needs), which its streamed
// events, sent before they were known, could not have.
func (s *ServerResponsesStream) End(dst []byte, res *llm.ChatResult) []byte {
	dst = s.start(dst)
	dst = s.closeCur(dst)
	for _, it := range s.callOrder {
		args := it.text.String()
		if strings.TrimSpace(args) == "" {
			args = emptyArguments
		}
		dst = s.emit(dst, &rsEvent{Type: "response.function_call_arguments.done", ItemID: it.id, OutputIndex: intp(it.index), Name: it.name, Arguments: strp(args)})
		done := serverFunctionCallItem{ID: it.id, Type: "function_call", Status: "completed", CallID: it.callID, Name: it.name, Arguments: args}
		s.output[it.index] = done
		dst = s.emit(dst, &rsEvent{Type: "response.output_item.done", OutputIndex: intp(it.index), Item: done})
	}
	fin, usage := s.held.Final(res)
	output := s.output
	if res != nil {
		output = s.finalOutput(res)
	}
	status, inc := finishStatus(fin, s.refused)
	o := s.sr.object(s.id, s.model, s.created, status, output)
	o.IncompleteDetails, o.Usage = inc, responsesUsageOf(usage)
	typ := "response.completed"
	if status == "incomplete" {
		typ = "response.incomplete"
	}
	return s.emit(dst, &rsEvent{Type: typ, Response: o})
}

// finalOutput is the output of the final response. Encrypted reasoning
// arrives whole with its item, after its summary streamed: the final
// response carries it on the reasoning items. When each thinking block
// streamed as a reasoning item of its own, the blocks fill those items in
// order. When they did not (a block without summary text streams nothing;
// consecutive blocks stream as one item, their texts joined by a blank
// line, as the client codec's Reasoning joins them; a cache's replay is
// the same events), the final output has one reasoning item per block, as
// the upstream had, each before the message or function call it preceded
// (ThinkingBlock.Signature of a Responses block), then the rest in order:
// what a client that replays the output statelessly needs, though the
// streamed events' output indices then differ from the final response's.
func (s *ServerResponsesStream) finalOutput(res *llm.ChatResult) []any {
	streamed, carried := 0, false
	for _, o := range s.output {
		if _, ok := o.(serverReasoningItem); ok {
			streamed++
		}
	}
	for i := range res.ThinkingBlocks {
		if tb := &res.ThinkingBlocks[i]; tb.Format == ResponsesFormat && (tb.Data != "" || tb.ID != "") {
			carried = true
		}
	}
	if streamed == len(res.ThinkingBlocks) || !carried {
		r := 0
		for i, o := range s.output {
			if ri, ok := o.(serverReasoningItem); ok && r < len(res.ThinkingBlocks) {
				tb := &res.ThinkingBlocks[r]
				if tb.Format == ResponsesFormat && tb.Data != "" {
					d := tb.Data
					ri.EncryptedContent = &d
					if tb.ID != "" {
						ri.ID = tb.ID
					}
					s.output[i] = ri
				}
				r++
			}
		}
		return s.output
	}
	// followed is the key a block's Signature names the item after it by.
	followed := func(o any) string {
		switch it := o.(type) {
		case serverMessageItem:
			return followsMessage
		case serverFunctionCallItem:
			return followsFunctionCall + ":" + it.CallID
		}
		return ""
	}
	var rest []any
	for _, o := range s.output {
		if _, ok := o.(serverReasoningItem); !ok {
			rest = append(rest, o)
		}
	}
	out := make([]any, 0, len(rest)+len(res.ThinkingBlocks))
	next, b := 0, 0 // rest[next:] and res.ThinkingBlocks[b:] are still to place
	for i := range res.ThinkingBlocks {
		tb := &res.ThinkingBlocks[i]
		if tb.Format != ResponsesFormat || tb.Signature == "" {
			continue // foreign, or followed by reasoning: placed with a later block
		}
		kind, _, _ := strings.Cut(tb.Signature, ":")
		at := -1
		for j := next; j < len(rest); j++ {
			if f := followed(rest[j]); f == tb.Signature || (kind == followsMessage && f == followsMessage) {
				at = j
				break
			}
		}
		if at < 0 {
			continue // the item it preceded is not in this answer
		}
		out = append(out, rest[next:at]...)
		for ; b <= i; b++ {
			out = append(out, reasoningItemOf(&res.ThinkingBlocks[b], "rs_"+s.suffix+"_"+strconv.Itoa(b)))
		}
		next = at
	}
	out = append(out, rest[next:]...)
	for ; b < len(res.ThinkingBlocks); b++ {
		out = append(out, reasoningItemOf(&res.ThinkingBlocks[b], "rs_"+s.suffix+"_"+strconv.Itoa(b)))
	}
	return out
}

// Error appends an in-band error event (event: error, data {type:"error",
// code, message, param, error:{type, code, message, param}}: the documented
// top-level fields and the nested object the API sends too), which the
// OpenAI SDKs raise as an API error from the stream. No response.completed
// follows.
func (s *ServerResponsesStream) Error(dst []byte, status int, message string) []byte {
	dst = s.start(dst)
	code := "server_error"
	switch {
	case status == 429:
		code = "rate_limit_exceeded"
	case status >= 400 && status < 500:
		code = "invalid_request_error"
	}
	typ := "server_error"
	if status >= 400 && status < 500 {
		typ = "invalid_request_error"
	}
	return s.emit(dst, &rsEvent{Type: "error", Code: strp(code), Message: message, Param: json.RawMessage("null"),
		Error: &rsError{Type: typ, Code: code, Message: message}})
}

// rsError is the error object OpenAI nests in a stream's error event (the
// documented event has code, message and param at its top level; the API
// sends them nested under "error" as well, and openai-go and openai-python
// raise only on the nested object).
type rsError struct {
	Type    string  `json:"type"`
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Param   *string `json:"param"`
}
