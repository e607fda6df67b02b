package openai

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// This file is the server side of the Chat Completions format, for a
// gateway that answers OpenAI clients: it decodes what a client sends into
// llm values and encodes llm results, events and errors the way OpenAI
// answers. It reuses the wire types of request.go, so the format is
// described once.

// ServerChat is a client's decoded POST /chat/completions request.
type ServerChat struct {
	Chat *llm.ChatRequest
	// Stream asks for chat.completion.chunk events.
	Stream bool
	// IncludeUsage asks for the final usage chunk (stream_options.include_usage).
	IncludeUsage bool
}

// serverBody is chatBody with messages kept raw: a client sends content as a
// string, an array of parts or null.
type serverBody struct {
	Model               string          `json:"model"`
	Messages            []serverMessage `json:"messages"`
	Tools               []tool          `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls"`
	ResponseFormat      *responseFormat `json:"response_format"`
	MaxTokens           int             `json:"max_tokens"`
	MaxCompletionTokens int             `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	Seed                *int64          `json:"seed"`
	Stop                json.RawMessage `json:"stop"`
	Stream              bool            `json:"stream"`
	StreamOptions       *streamOptions  `json:"stream_options"`
	ReasoningEffort     string          `json:"reasoning_effort"`
	N                   int             `json:"n"`
	// Prompt caching and the optional fields (honours.go).
	PromptCacheKey       string            `json:"prompt_cache_key"`
	PromptCacheRetention string            `json:"prompt_cache_retention"`
	FrequencyPenalty     *float64          `json:"frequency_penalty"`
	PresencePenalty      *float64          `json:"presence_penalty"`
	LogitBias            map[string]int    `json:"logit_bias"`
	Logprobs             *bool             `json:"logprobs"`
	TopLogprobs          *int              `json:"top_logprobs"`
	ServiceTier          string            `json:"service_tier"`
	User                 string            `json:"user"`
	SafetyIdentifier     string            `json:"safety_identifier"`
	Metadata             map[string]string `json:"metadata"`
	Store                *bool             `json:"store"`
	Verbosity            string            `json:"verbosity"`
}

// ChatFields is every top-level field of a Chat Completions request, as
// the official SDKs define it, and what the gateway does with it. A field
// not named here is passed through (FieldPassthrough) like the ones marked
// so: sent unchanged to an upstream of this format, refused for any other
// (TestChatFieldsCoverTheSDK holds the table to openai-go's params).
var ChatFields = []llm.WireField{
	{Name: "model", Class: llm.FieldMapped, Note: "provider/model, an alias, or bare (the openai provider)"},
	{Name: "messages", Class: llm.FieldMapped, Note: "system, developer (developer to OpenAI, system elsewhere), user, assistant, tool; text, image_url, file parts"},
	{Name: "tools", Class: llm.FieldMapped, Note: "function tools (other types: 400)"},
	{Name: "tool_choice", Class: llm.FieldMapped, Note: ""},
	{Name: "parallel_tool_calls", Class: llm.FieldMapped, Note: "sent with tools (it means nothing without)"},
	{Name: "response_format", Class: llm.FieldMapped, Note: "text, json_object, json_schema"},
	{Name: "max_tokens", Class: llm.FieldMapped, Note: ""},
	{Name: "max_completion_tokens", Class: llm.FieldMapped, Note: ""},
	{Name: "temperature", Class: llm.FieldMapped, Note: ""},
	{Name: "top_p", Class: llm.FieldMapped, Note: ""},
	{Name: "seed", Class: llm.FieldMapped, Note: ""},
	{Name: "stop", Class: llm.FieldMapped, Note: "Anthropic stop_sequences, Gemini stopSequences"},
	{Name: "reasoning_effort", Class: llm.FieldMapped, Note: "Anthropic and Gemini thinking budgets"},
	{Name: "prompt_cache_key", Class: llm.FieldMapped, Note: "OpenAI only; dropped elsewhere (x-chorus-dropped)"},
	{Name: "prompt_cache_retention", Class: llm.FieldMapped, Note: "OpenAI only; dropped elsewhere"},
	{Name: "frequency_penalty", Class: llm.FieldMapped, Note: "Gemini frequencyPenalty; refused by Anthropic"},
	{Name: "presence_penalty", Class: llm.FieldMapped, Note: "Gemini presencePenalty; refused by Anthropic"},
	{Name: "logit_bias", Class: llm.FieldMapped, Note: "OpenAI format only"},
	{Name: "logprobs", Class: llm.FieldMapped, Note: "Gemini responseLogprobs, Responses include; refused by Anthropic"},
	{Name: "top_logprobs", Class: llm.FieldMapped, Note: "with logprobs"},
	{Name: "service_tier", Class: llm.FieldMapped, Note: "OpenAI's tiers; Anthropic auto; auto or default dropped where a format has no tiers, any other refused"},
	{Name: "user", Class: llm.FieldMapped, Note: "Anthropic metadata.user_id; dropped by Gemini"},
	{Name: "safety_identifier", Class: llm.FieldMapped, Note: "OpenAI only; dropped elsewhere"},
	{Name: "metadata", Class: llm.FieldMapped, Note: "OpenAI only; dropped elsewhere"},
	{Name: "store", Class: llm.FieldMapped, Note: "OpenAI only; store:true refused elsewhere"},
	{Name: "verbosity", Class: llm.FieldMapped, Note: "OpenAI only; refused elsewhere"},
	{Name: "n", Class: llm.FieldRefused, Note: "n > 1 (one choice per answer; a fan-out alias answers with several)"},
	{Name: "stream", Class: llm.FieldServed, Note: ""},
	{Name: "stream_options", Class: llm.FieldServed, Note: "include_usage; the upstream is always asked for usage"},
	{Name: "audio", Class: llm.FieldPassthrough, Note: ""},
	{Name: "modalities", Class: llm.FieldPassthrough, Note: ""},
	{Name: "prediction", Class: llm.FieldPassthrough, Note: ""},
	{Name: "web_search_options", Class: llm.FieldPassthrough, Note: ""},
	{Name: "functions", Class: llm.FieldPassthrough, Note: "the legacy functions API"},
	{Name: "function_call", Class: llm.FieldPassthrough, Note: "the legacy functions API"},
	{Name: "moderation", Class: llm.FieldPassthrough, Note: ""},
	{Name: "prompt_cache_options", Class: llm.FieldPassthrough, Note: ""},
}

var chatFields = wire.NewClassified(ChatFields)

// EmbedFields is every field of an embeddings request and its class.
var EmbedFields = []llm.WireField{
	{Name: "model", Class: llm.FieldMapped, Note: ""},
	{Name: "input", Class: llm.FieldMapped, Note: "a string or strings (token arrays: 400)"},
	{Name: "dimensions", Class: llm.FieldMapped, Note: ""},
	{Name: "encoding_format", Class: llm.FieldServed, Note: "float or base64"},
	{Name: "user", Class: llm.FieldServed, Note: "taken; changes no vector"},
}

var embedFields = wire.NewClassified(EmbedFields)

type serverMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	ReasoningContent string          `json:"reasoning_content"`
	Refusal          string          `json:"refusal"`
	ToolCalls        []toolCall      `json:"tool_calls"`
	ToolCallID       string          `json:"tool_call_id"`
	Name             string          `json:"name"`
}

func badField(field, format string, args ...any) error {
	return &llm.ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// DecodeServerChat decodes a client's Chat Completions request. "developer"
// messages are system messages; content may be a string or parts (text,
// image_url, file); n other than 1 is refused (one choice per answer). The
// result is validated: errors are *llm.ConfigError naming the field at
// fault in the client's terms.
func DecodeServerChat(body []byte) (*ServerChat, error) { return DecodeChatRequest(body, true) }

// DecodeChatRequest is DecodeServerChat; without requireModel a request
// that names no model is taken (a batch line whose job picks the model).
// It is the one decoder of OpenAI chat request bodies: the gateway, "chorus
// batch" and the gateway's batches read them through it.
func DecodeChatRequest(body []byte, requireModel bool) (*ServerChat, error) {
	if out, ok := decodeChatFast(body, requireModel); ok {
		return out, nil
	}
	return decodeChatSlow(body, requireModel)
}

// decodeChatSlow is DecodeChatRequest by encoding/json: every request
// decodeChatFast does not take.
func decodeChatSlow(body []byte, requireModel bool) (*ServerChat, error) {
	var b serverBody
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, jsonFieldError(err, "is not a chat completion request")
	}
	if b.N > 1 {
		return nil, badField("n", "only n=1 is served")
	}
	req := &llm.ChatRequest{
		Model:             b.Model,
		ParallelToolCalls: b.ParallelToolCalls,
		MaxTokens:         b.MaxCompletionTokens,
		Temperature:       b.Temperature,
		TopP:              b.TopP,
		Seed:              b.Seed,
	}
	if req.MaxTokens == 0 {
		req.MaxTokens = b.MaxTokens
	}
	if b.PromptCacheKey != "" || b.PromptCacheRetention != "" {
		req.Cache = &llm.PromptCache{Key: b.PromptCacheKey, Retention: b.PromptCacheRetention}
	}
	req.FrequencyPenalty, req.PresencePenalty, req.LogitBias = b.FrequencyPenalty, b.PresencePenalty, b.LogitBias
	switch {
	case b.Logprobs != nil && *b.Logprobs:
		req.Logprobs = &llm.Logprobs{}
		if b.TopLogprobs != nil {
			req.Logprobs.TopLogprobs = *b.TopLogprobs
		}
	case b.TopLogprobs != nil && *b.TopLogprobs > 0:
		return nil, badField("top_logprobs", "needs logprobs: true")
	}
	req.ServiceTier, req.User, req.SafetyIdentifier, req.Metadata, req.Store, req.Verbosity = b.ServiceTier, b.User, b.SafetyIdentifier, b.Metadata, b.Store, b.Verbosity
	req.Extra = wire.ExtraFields(body, chatFields, formatName)
	if len(b.Stop) > 0 && string(b.Stop) != "null" {
		var one string
		if err := json.Unmarshal(b.Stop, &one); err == nil {
			req.Stop = []string{one}
		} else if err := json.Unmarshal(b.Stop, &req.Stop); err != nil {
			return nil, badField("stop", "is neither a string nor an array of strings")
		}
	}
	for i := range b.Messages {
		m, err := decodeServerMessage(&b.Messages[i], fmt.Sprintf("messages[%d]", i))
		if err != nil {
			return nil, err
		}
		req.Messages = append(req.Messages, m)
	}
	for i, t := range b.Tools {
		if t.Type != "" && t.Type != "function" {
			return nil, badField(fmt.Sprintf("tools[%d].type", i), "%q is not served (function only)", t.Type)
		}
		mark, err := t.CacheControl.mark(fmt.Sprintf("tools[%d].cache_control", i))
		if err != nil {
			return nil, err
		}
		req.Tools = append(req.Tools, llm.Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters, Strict: t.Function.Strict, Cache: mark})
	}
	tc, err := decodeToolChoice(b.ToolChoice)
	if err != nil {
		return nil, err
	}
	req.ToolChoice = tc
	if rf := b.ResponseFormat; rf != nil {
		switch llm.ResponseFormatType(rf.Type) {
		case llm.ResponseText:
		case llm.ResponseJSONObject:
			req.ResponseFormat = &llm.ResponseFormat{Type: llm.ResponseJSONObject}
		case llm.ResponseJSONSchema:
			if rf.JSONSchema == nil {
				return nil, badField("response_format.json_schema", "is missing")
			}
			req.ResponseFormat = &llm.ResponseFormat{Type: llm.ResponseJSONSchema, Name: rf.JSONSchema.Name, Schema: rf.JSONSchema.Schema, Strict: rf.JSONSchema.Strict}
		default:
			return nil, badField("response_format.type", "%q is unknown", rf.Type)
		}
	}
	if b.ReasoningEffort != "" {
		var e llm.Effort
		switch b.ReasoningEffort {
		case "none":
			e = llm.EffortNone
		case "minimal", "low":
			e = llm.EffortLow
		case "medium":
			e = llm.EffortMedium
		case "high":
			e = llm.EffortHigh
		case "xhigh", "max":
			e = llm.EffortMax
		default:
			return nil, badField("reasoning_effort", "unknown effort %q (none, minimal, low, medium, high, xhigh)", b.ReasoningEffort)
		}
		req.Reasoning = &llm.Reasoning{Effort: e}
	}
	if req.Model == "" && !requireModel {
		req.Model = "-" // validated as if named: the caller names it
		defer func() { req.Model = "" }()
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	out := &ServerChat{Chat: req, Stream: b.Stream}
	if b.StreamOptions != nil {
		out.IncludeUsage = b.StreamOptions.IncludeUsage
	}
	return out, nil
}

func decodeToolChoice(raw json.RawMessage) (llm.ToolChoice, error) {
	if tc, done, err := decodeToolChoiceMode(raw); done {
		return tc, err
	}
	var named namedToolChoice
	if err := json.Unmarshal(raw, &named); err != nil || named.Function.Name == "" {
		return llm.ToolChoice{}, badField("tool_choice", "is neither a mode nor {type:function, function:{name}}")
	}
	return llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: named.Function.Name}, nil
}

// decodeToolChoiceMode reads the part of a tool_choice both formats share:
// absent or null (no choice) or a mode string. done is false when raw is
// something else, the format's object naming a tool.
func decodeToolChoiceMode(raw json.RawMessage) (tc llm.ToolChoice, done bool, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return llm.ToolChoice{}, true, nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return llm.ToolChoice{}, false, nil
	}
	switch llm.ToolChoiceMode(s) {
	case llm.ToolChoiceAuto, llm.ToolChoiceNone, llm.ToolChoiceRequired:
		return llm.ToolChoice{Mode: llm.ToolChoiceMode(s)}, true, nil
	}
	return llm.ToolChoice{}, true, badField("tool_choice", "%q is unknown", s)
}

func decodeServerMessage(sm *serverMessage, field string) (llm.Message, error) {
	m := llm.Message{Role: llm.Role(sm.Role)}
	text, parts, mark, err := decodeContent(sm.Content, field+".content")
	if err != nil {
		return m, err
	}
	m.Content, m.Parts, m.Cache = text, parts, mark
	switch m.Role {
	case llm.RoleAssistant:
		m.Reasoning, m.Refusal = sm.ReasoningContent, sm.Refusal
		for _, tc := range sm.ToolCalls {
			m.ToolCalls = append(m.ToolCalls, llm.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
	case llm.RoleTool:
		m.ToolCallID, m.ToolName = sm.ToolCallID, sm.Name
	}
	return m, nil
}

// decodeContent reads content: a string, null, or an array of parts. A
// parts array that holds only text is folded into one string. A part's
// cache_control marks the message as a cache breakpoint (mark).
func decodeContent(raw json.RawMessage, field string) (string, []llm.Part, *llm.CacheMark, error) {
	var mark *llm.CacheMark
	text, parts, err := decodeParts(raw, field, "an array of parts", func(cp *contentPart, f string) (llm.Part, error) {
		if m, err := cp.CacheControl.mark(f + ".cache_control"); err != nil {
			return llm.Part{}, err
		} else if m != nil {
			mark = m
		}
		switch cp.Type {
		case "text":
			return llm.TextPart(cp.Text), nil
		case "image_url":
			if cp.ImageURL == nil || cp.ImageURL.URL == "" {
				return llm.Part{}, badField(f+".image_url.url", "is empty")
			}
			return imagePart(cp.ImageURL.URL), nil
		case "file":
			if cp.File == nil {
				return llm.Part{}, badField(f+".file", "is missing")
			}
			mime, data, ok := parseDataURL(cp.File.FileData)
			if !ok {
				return llm.Part{}, badField(f+".file.file_data", "is not a base64 data: URL")
			}
			return llm.Part{Type: llm.PartDocument, MIMEType: mime, Data: data}, nil
		}
		return llm.Part{}, badField(f+".type", "%q is not served", cp.Type)
	})
	return text, parts, mark, err
}

// jsonFieldError names the field a body's JSON failed to decode at, in the
// client's terms ("messages.0.role" as messages[0].role), or the body.
func jsonFieldError(err error, what string) error {
	var ute *json.UnmarshalTypeError
	if errors.As(err, &ute) && ute.Field != "" {
		parts := strings.Split(ute.Field, ".")
		var b strings.Builder
		for i, p := range parts {
			if _, nerr := strconv.Atoi(p); nerr == nil && i > 0 {
				b.WriteString("[" + p + "]")
				continue
			}
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(p)
		}
		return badField(b.String(), "is a JSON %s, want %s", ute.Value, kindOf(ute.Type.Kind()))
	}
	return badField("body", "%s: %v", what, err)
}

func kindOf(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "an integer"
	case reflect.Float64, reflect.Float32:
		return "a number"
	case reflect.Slice:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "another type"
}

// decodeParts reads content that is null, a string, or a JSON array of
// wire parts P (Chat Completions' and Responses' content alike): part turns
// each into an llm.Part, f being its field for errors, and what names the
// array in the error for raw that is neither. Parts that hold only text are
// folded into one string.
func decodeParts[P any](raw json.RawMessage, field, what string, part func(p *P, f string) (llm.Part, error)) (string, []llm.Part, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil, nil
	}
	var ps []P
	if err := json.Unmarshal(raw, &ps); err != nil {
		return "", nil, badField(field, "is neither a string nor %s", what)
	}
	var parts []llm.Part
	textOnly := true
	for i := range ps {
		p, err := part(&ps[i], fmt.Sprintf("%s[%d]", field, i))
		if err != nil {
			return "", nil, err
		}
		parts = append(parts, p)
		textOnly = textOnly && p.Type == llm.PartText
	}
	if textOnly {
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		return b.String(), nil, nil
	}
	return "", parts, nil
}

func parseDataURL(u string) (mime string, data []byte, ok bool) {
	rest, found := strings.CutPrefix(u, "data:")
	if !found {
		return "", nil, false
	}
	meta, payload, found := strings.Cut(rest, ",")
	if !found || !strings.HasSuffix(meta, ";base64") {
		return "", nil, false
	}
	data, err := base64.StdEncoding.DecodeString(payload)
	if err != nil {
		return "", nil, false
	}
	return strings.TrimSuffix(meta, ";base64"), data, true
}

// Server answer types (encoding side of parse.go's types).

type serverCompletion struct {
	ID                string         `json:"id"`
	Object            string         `json:"object"`
	Created           int64          `json:"created"`
	Model             string         `json:"model"`
	Choices           []serverChoice `json:"choices"`
	Usage             *serverUsage   `json:"usage,omitempty"`
	SystemFingerprint *string        `json:"system_fingerprint"`
	ServiceTier       string         `json:"service_tier,omitempty"`
}

type serverChoice struct {
	Index        int                `json:"index"`
	Message      *serverRespMessage `json:"message,omitempty"`
	Delta        *serverDelta       `json:"delta,omitempty"`
	Logprobs     *wireLogprobs      `json:"logprobs"`
	FinishReason *string            `json:"finish_reason"`
}

type serverRespMessage struct {
	Role             string     `json:"role"`
	Content          *string    `json:"content"`
	Refusal          *string    `json:"refusal"`
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	ToolCalls        []toolCall `json:"tool_calls,omitempty"`
}

type serverDelta struct {
	Role             string            `json:"role,omitempty"`
	Content          *string           `json:"content,omitempty"`
	Refusal          *string           `json:"refusal,omitempty"`
	ReasoningContent *string           `json:"reasoning_content,omitempty"`
	ToolCalls        []serverToolDelta `json:"tool_calls,omitempty"`
}

type serverToolDelta struct {
	Index    int    `json:"index"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type serverUsage struct {
	PromptTokens            int `json:"prompt_tokens"`
	CompletionTokens        int `json:"completion_tokens"`
	TotalTokens             int `json:"total_tokens"`
	PromptTokensDetails     any `json:"prompt_tokens_details,omitempty"`
	CompletionTokensDetails any `json:"completion_tokens_details,omitempty"`
}

type cachedDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

type reasoningDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

// usageOf is the inverse of usage.go's normalise: OpenAI's prompt_tokens
// include cached input (invariant 9 is Chorus's meaning, not the wire's).
func usageOf(u llm.Usage) *serverUsage {
	return &serverUsage{
		PromptTokens:            u.InputTokens(),
		CompletionTokens:        u.CompletionTokens,
		TotalTokens:             u.TotalTokens(),
		PromptTokensDetails:     cachedDetails{CachedTokens: u.CacheReadTokens},
		CompletionTokensDetails: reasoningDetails{ReasoningTokens: u.ReasoningTokens},
	}
}

// finishString is the wire value of a canonical finish reason; "" (no
// canonical meaning) is sent as "stop", since OpenAI clients expect one of
// their values on the last choice.
func finishString(f llm.FinishReason) string {
	if f == llm.FinishUnknown {
		return string(llm.FinishStop)
	}
	return string(f)
}

// EncodeServerChat encodes a buffered answer as a chat.completion object.
// model is the name the client asked for; created is a Unix time.
func EncodeServerChat(res *llm.ChatResult, model string, created int64) ([]byte, error) {
	fin := finishString(res.FinishReason)
	c := serverCompletion{
		ID: serverID(res.ID), Object: "chat.completion", Created: created, Model: model,
		Choices: []serverChoice{{Message: serverMessageOf(res), FinishReason: &fin}},
		Usage:   usageOf(res.Usage), ServiceTier: res.Meta.ServiceTier,
	}
	if res.Meta.SystemFingerprint != "" {
		c.SystemFingerprint = &res.Meta.SystemFingerprint // res is on the heap already: no copy to allocate
	}
	if len(res.Logprobs) > 0 {
		c.Choices[0].Logprobs = &wireLogprobs{Content: wireLogprobsOf(res.Logprobs)}
	}
	return json.Marshal(c)
}

// EncodeServerChatChoices encodes several answers to one request as one
// chat.completion with a choice each (as OpenAI answers n > 1): results[i]
// is choice i, and a nil one has no choice; the usage is their sum. The id
// is the first answer's.
func EncodeServerChatChoices(results []*llm.ChatResult, model string, created int64) ([]byte, error) {
	c := serverCompletion{Object: "chat.completion", Created: created, Model: model, Choices: []serverChoice{}}
	var usage llm.Usage
	for i, res := range results {
		if res == nil {
			continue
		}
		if c.ID == "" {
			c.ID = serverID(res.ID)
		}
		fin := finishString(res.FinishReason)
		c.Choices = append(c.Choices, serverChoice{Index: i, Message: serverMessageOf(res), FinishReason: &fin})
		usage = usage.Add(res.Usage)
	}
	c.ID = serverID(c.ID)
	c.Usage = usageOf(usage)
	return json.Marshal(c)
}

func serverMessageOf(res *llm.ChatResult) *serverRespMessage {
	msg := &serverRespMessage{Role: "assistant", ReasoningContent: res.Reasoning}
	if res.Content != "" || len(res.ToolCalls) == 0 {
		c := res.Content
		msg.Content = &c
	}
	if res.Refusal != "" {
		r := res.Refusal
		msg.Refusal = &r
	}
	for _, tc := range res.ToolCalls {
		msg.ToolCalls = append(msg.ToolCalls, toolCall{ID: tc.ID, Type: "function", Function: functionCall{Name: tc.Name, Arguments: tc.Arguments}})
	}
	return msg
}

func serverID(id string) string {
	if id == "" {
		return "chatcmpl-chorus"
	}
	return id
}

// ServerStream encodes llm events as chat.completion.chunk SSE frames. Use
// one per streamed answer; it is not safe for concurrent use.
type ServerStream struct {
	id, model    string
	created      int64
	includeUsage bool
	started      bool
	held         wire.HeldEnd
	choice       int // the index of the choice its chunks carry (SetChoice)
	// fingerprint and tier, once known (End), go on the chunks after.
	fingerprint, tier string
}

// SetChoice makes the stream's chunks those of choice i (default 0): an
// answer of several choices is one ServerStream per choice, each closed by
// EndChoice, then Close on any of them.
func (s *ServerStream) SetChoice(i int) { s.choice = i }

// NewServerStream returns the encoder of one streamed answer. id is the
// completion id every chunk carries; includeUsage is the client's
// stream_options.include_usage.
func NewServerStream(id, model string, created int64, includeUsage bool) *ServerStream {
	return &ServerStream{id: serverID(id), model: model, created: created, includeUsage: includeUsage}
}

func (s *ServerStream) chunk(dst []byte, d *serverDelta, finish *string, usage *serverUsage, noChoices bool) []byte {
	c := serverCompletion{ID: s.id, Object: "chat.completion.chunk", Created: s.created, Model: s.model, Usage: usage, ServiceTier: s.tier}
	if s.fingerprint != "" {
		c.SystemFingerprint = &s.fingerprint
	}
	if noChoices {
		c.Choices = []serverChoice{}
	} else {
		c.Choices = []serverChoice{{Index: s.choice, Delta: d, FinishReason: finish}}
	}
	b, _ := json.Marshal(c) // plain structs: cannot fail
	dst = append(dst, "data: "...)
	dst = append(dst, b...)
	return append(dst, '\n', '\n')
}

func (s *ServerStream) delta() *serverDelta {
	d := &serverDelta{}
	if !s.started {
		s.started = true
		d.Role = "assistant"
	}
	return d
}

// Event appends the frames of one event to dst. Usage and finish events are
// held for End, where OpenAI sends them.
func (s *ServerStream) Event(dst []byte, ev *llm.Event) []byte {
	switch ev.Type {
	case llm.EventText:
		d := s.delta()
		t := ev.Text
		d.Content = &t
		return s.chunk(dst, d, nil, nil, false)
	case llm.EventReasoning:
		if ev.Text == "" {
			return dst // a thinking block's signature: Chat Completions has none
		}
		d := s.delta()
		t := ev.Text
		d.ReasoningContent = &t
		return s.chunk(dst, d, nil, nil, false)
	case llm.EventRefusal:
		d := s.delta()
		t := ev.Text
		d.Refusal = &t
		return s.chunk(dst, d, nil, nil, false)
	case llm.EventToolCallStart:
		d := s.delta()
		td := serverToolDelta{Index: ev.ToolIndex, ID: ev.ToolCallID, Type: "function"}
		td.Function.Name, td.Function.Arguments = ev.ToolName, ev.Text
		d.ToolCalls = []serverToolDelta{td}
		return s.chunk(dst, d, nil, nil, false)
	case llm.EventToolCallDelta:
		d := s.delta()
		td := serverToolDelta{Index: ev.ToolIndex}
		td.Function.Arguments = ev.Text
		d.ToolCalls = []serverToolDelta{td}
		return s.chunk(dst, d, nil, nil, false)
	case llm.EventLogprobs:
		if ev.Logprobs == nil || len(ev.Logprobs.Tokens) == 0 {
			return dst
		}
		c := serverCompletion{ID: s.id, Object: "chat.completion.chunk", Created: s.created, Model: s.model,
			Choices: []serverChoice{{Index: s.choice, Delta: s.delta(), Logprobs: &wireLogprobs{Content: wireLogprobsOf(ev.Logprobs.Tokens)}}}}
		b, _ := json.Marshal(c)
		dst = append(dst, "data: "...)
		dst = append(dst, b...)
		return append(dst, '\n', '\n')
	case llm.EventUsage, llm.EventFinish:
		s.held.Hold(ev)
	}
	return dst
}

// End appends the closing frames of a completed answer: the chunk with the
// finish reason, the usage chunk (choices: []) when the client asked for
// it, and data: [DONE]. res, when not nil, supplies usage and finish
// reason the events did not carry.
func (s *ServerStream) End(dst []byte, res *llm.ChatResult) []byte {
	fin, usage := s.held.Final(res)
	f := finishString(fin)
	if res != nil { // the last chunk says what served, as the provider's chunks do
		s.fingerprint, s.tier = res.Meta.SystemFingerprint, res.Meta.ServiceTier
	}
	dst = s.chunk(dst, s.delta(), &f, nil, false)
	if s.includeUsage {
		dst = s.chunk(dst, nil, nil, usageOf(usage), true)
	}
	return append(dst, "data: [DONE]\n\n"...)
}

// EndChoice appends the chunk that ends this stream's choice (its finish
// reason) and returns the usage to report; Close ends the answer.
func (s *ServerStream) EndChoice(dst []byte, res *llm.ChatResult) ([]byte, llm.Usage) {
	fin, usage := s.held.Final(res)
	f := finishString(fin)
	return s.chunk(dst, s.delta(), &f, nil, false), usage
}

// Close appends the end of an answer of several choices: the usage chunk
// (their sum) when the client asked for it, and data: [DONE].
func (s *ServerStream) Close(dst []byte, usage llm.Usage) []byte {
	if s.includeUsage {
		dst = s.chunk(dst, nil, nil, usageOf(usage), true)
	}
	return append(dst, "data: [DONE]\n\n"...)
}

// Error appends an in-band error frame, data: {"error":{...}}, which the
// OpenAI SDKs raise as an API error from the stream. The stream ends
// without [DONE], so a client that ignores the error still sees an
// unfinished stream, never a complete one.
func (s *ServerStream) Error(dst []byte, status int, message string) []byte {
	b := ServerError(status, message)
	dst = append(dst, "data: "...)
	dst = append(dst, b...)
	return append(dst, '\n', '\n')
}

type serverErrorBody struct {
	Error serverErrorObject `json:"error"`
}

type serverErrorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// ServerError encodes an error answer with OpenAI's type and code for the
// status: the OpenAI SDKs pick their exception class from the status
// (400 BadRequestError, 401 AuthenticationError, 403 PermissionDeniedError,
// 404 NotFoundError, 429 RateLimitError, 5xx InternalServerError).
func ServerError(status int, message string) []byte { return ServerErrorCode(status, "", message) }

// ServerErrorCode is ServerError with the error's code given (empty: the
// status's own); insufficient_quota is typed as OpenAI types it.
func ServerErrorCode(status int, code, message string) []byte {
	typ, dflt := "invalid_request_error", ""
	switch {
	case status == http.StatusUnauthorized:
		dflt = "invalid_api_key"
	case status == http.StatusForbidden:
		typ = "permission_error"
	case status == http.StatusNotFound:
		dflt = "model_not_found"
	case status == http.StatusTooManyRequests && code == "insufficient_quota":
		typ = "insufficient_quota"
	case status == http.StatusTooManyRequests:
		typ, dflt = "requests", "rate_limit_exceeded"
	case status >= 500:
		typ = "server_error"
	}
	if code == "" {
		code = dflt
	}
	o := serverErrorObject{Message: message, Type: typ}
	if code != "" {
		o.Code = &code
	}
	b, _ := json.Marshal(serverErrorBody{Error: o})
	return b
}

// DecodeServerEmbed decodes a client's POST /embeddings request. input may
// be a string or an array of strings; token arrays and encoding formats
// other than float and base64 are refused. base64 reports whether the
// client asked for base64 vectors.
func DecodeServerEmbed(body []byte) (req *llm.EmbedRequest, base64Vectors bool, err error) {
	return DecodeEmbedRequest(body, true)
}

// DecodeEmbedRequest is DecodeServerEmbed; without requireModel a request
// that names no model is taken (a batch line). The gateway and "chorus
// batch" read embedding request bodies through it. user is taken and sent
// nowhere (it names the end user to OpenAI only, and changes no vector);
// any other field is passed through to an OpenAI-format upstream
// (llm.EmbedRequest.Extra) and refused by any other.
func DecodeEmbedRequest(body []byte, requireModel bool) (req *llm.EmbedRequest, base64Vectors bool, err error) {
	var b struct {
		Model          string          `json:"model"`
		Input          json.RawMessage `json:"input"`
		EncodingFormat string          `json:"encoding_format"`
		Dimensions     int             `json:"dimensions"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, false, jsonFieldError(err, "is not an embeddings request")
	}
	req = &llm.EmbedRequest{Model: b.Model, Dimensions: b.Dimensions, Extra: wire.ExtraFields(body, embedFields, formatName)}
	var one string
	if len(b.Input) == 0 || string(b.Input) == "null" {
		return nil, false, badField("input", "is missing")
	}
	if err := json.Unmarshal(b.Input, &one); err == nil {
		req.Inputs = []string{one}
	} else if err := json.Unmarshal(b.Input, &req.Inputs); err != nil {
		return nil, false, badField("input", "is neither a string nor an array of strings (token arrays are not served)")
	}
	if len(req.Inputs) == 0 {
		return nil, false, badField("input", "is empty")
	}
	if req.Model == "" && !requireModel {
		req.Model = "-" // validated as if named: the caller names it
		defer func() { req.Model = "" }()
	}
	switch b.EncodingFormat {
	case "", "float":
	case "base64":
		base64Vectors = true
	default:
		return nil, false, badField("encoding_format", "%q is unknown", b.EncodingFormat)
	}
	if err := req.Validate(); err != nil {
		return nil, false, err
	}
	return req, base64Vectors, nil
}

// EncodeServerEmbed encodes an embeddings answer (object "list" of
// "embedding" entries), vectors as JSON floats or, with base64Vectors, as
// base64 of little-endian float32 (the inverse of DecodeFloat32Base64).
func EncodeServerEmbed(res *llm.EmbedResult, model string, base64Vectors bool) ([]byte, error) {
	type entry struct {
		Object    string `json:"object"`
		Index     int    `json:"index"`
		Embedding any    `json:"embedding"`
	}
	data := make([]entry, len(res.Vectors))
	for i, v := range res.Vectors {
		var e any = v
		if base64Vectors {
			e = encodeFloat32Base64(v)
		}
		data[i] = entry{Object: "embedding", Index: i, Embedding: e}
	}
	return json.Marshal(struct {
		Object string  `json:"object"`
		Data   []entry `json:"data"`
		Model  string  `json:"model"`
		Usage  struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		} `json:"usage"`
	}{Object: "list", Data: data, Model: model, Usage: struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	}{res.Usage.InputTokens(), res.Usage.InputTokens()}})
}

func encodeFloat32Base64(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		u := math.Float32bits(f)
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// ServerModel is one entry of a model list.
type ServerModel struct {
	ID      string
	OwnedBy string
	Created int64
}

// EncodeServerModel encodes GET /models/{model}: {id, object:"model",
// created, owned_by}.
func EncodeServerModel(m ServerModel) ([]byte, error) {
	return json.Marshal(struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}{m.ID, "model", m.Created, m.OwnedBy})
}

// EncodeServerModels encodes GET /models: {"object":"list","data":[{id,
// object:"model", created, owned_by}]}.
func EncodeServerModels(models []ServerModel) ([]byte, error) {
	type entry struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	data := make([]entry, len(models))
	for i, m := range models {
		data[i] = entry{ID: m.ID, Object: "model", Created: m.Created, OwnedBy: m.OwnedBy}
	}
	return json.Marshal(struct {
		Object string  `json:"object"`
		Data   []entry `json:"data"`
	}{"list", data})
}

// ServerRateLimitHeaders sets the x-ratelimit-* headers the OpenAI SDKs
// read, for limits of requests and tokens per minute; a zero limit is not
// sent.
func ServerRateLimitHeaders(h http.Header, limitReq, remainingReq, limitTok, remainingTok int, resetReq, resetTok string) {
	if limitReq > 0 {
		h.Set("x-ratelimit-limit-requests", strconv.Itoa(limitReq))
		h.Set("x-ratelimit-remaining-requests", strconv.Itoa(max(remainingReq, 0)))
		h.Set("x-ratelimit-reset-requests", resetReq)
	}
	if limitTok > 0 {
		h.Set("x-ratelimit-limit-tokens", strconv.Itoa(limitTok))
		h.Set("x-ratelimit-remaining-tokens", strconv.Itoa(max(remainingTok, 0)))
		h.Set("x-ratelimit-reset-tokens", resetTok)
	}
}
