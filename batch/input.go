package batch

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/chorusrt/chorus/llm"
)

// The endpoints a batch line may name.
const (
	URLChat       = "/v1/chat/completions"
	URLEmbeddings = "/v1/embeddings"
)

// inputLine is one line of an OpenAI Batch input file.
type inputLine struct {
	CustomID string          `json:"custom_id"`
	Method   string          `json:"method"`
	URL      string          `json:"url"`
	Body     json.RawMessage `json:"body"`
}

// fieldError is a problem with one field of an input line; Field is its
// JSON path ("body.messages[2].role").
type fieldError struct {
	Field string
	Msg   string
}

func (e *fieldError) Error() string { return e.Field + ": " + e.Msg }

func fieldErr(field, format string, args ...any) error {
	return &fieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// decodeStrict unmarshals raw into v, naming field in the error.
func decodeStrict(raw json.RawMessage, v any, field, want string) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return fieldErr(field, "want %s", want)
	}
	return nil
}

// ignoredChatFields are accepted and ignored: they change nothing in the
// answer a batch writes.
var ignoredChatFields = []string{"user", "metadata", "store", "service_tier", "stream", "stream_options", "safety_identifier"}

// chatFromOpenAI converts an OpenAI chat completion request body.
func chatFromOpenAI(body json.RawMessage) (*llm.ChatRequest, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return nil, fieldErr("body", "want a JSON object")
	}
	req := &llm.ChatRequest{}
	for _, name := range sortedKeys(fields) {
		raw := fields[name]
		f := "body." + name
		var err error
		switch name {
		case "model":
			err = decodeStrict(raw, &req.Model, f, "a string")
		case "messages":
			req.Messages, err = messagesFromOpenAI(raw)
		case "tools":
			req.Tools, err = toolsFromOpenAI(raw)
		case "tool_choice":
			req.ToolChoice, err = toolChoiceFromOpenAI(raw)
		case "parallel_tool_calls":
			var b bool
			err = decodeStrict(raw, &b, f, "true or false")
			req.ParallelToolCalls = &b
		case "response_format":
			req.ResponseFormat, err = responseFormatFromOpenAI(raw)
		case "max_tokens", "max_completion_tokens":
			var n int
			if err = decodeStrict(raw, &n, f, "an integer"); err == nil && n < 0 {
				err = fieldErr(f, "is negative")
			}
			req.MaxTokens = max(req.MaxTokens, n)
		case "temperature":
			var t float64
			err = decodeStrict(raw, &t, f, "a number")
			req.Temperature = &t
		case "top_p":
			var t float64
			err = decodeStrict(raw, &t, f, "a number")
			req.TopP = &t
		case "seed":
			var s int64
			err = decodeStrict(raw, &s, f, "an integer")
			req.Seed = &s
		case "stop":
			var one string
			if json.Unmarshal(raw, &one) == nil {
				req.Stop = []string{one}
			} else {
				err = decodeStrict(raw, &req.Stop, f, "a string or a list of strings")
			}
		case "reasoning_effort":
			var s string
			if err = decodeStrict(raw, &s, f, "a string"); err == nil {
				var e llm.Effort
				switch s {
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
					err = fieldErr(f, "unknown effort %q (none, minimal, low, medium, high, xhigh)", s)
				}
				req.Reasoning = &llm.Reasoning{Effort: e}
			}
		case "prompt_cache_key", "prompt_cache_retention":
			var v string
			if err = decodeStrict(raw, &v, f, "a string"); err == nil {
				if req.Cache == nil {
					req.Cache = &llm.PromptCache{}
				}
				if name == "prompt_cache_key" {
					req.Cache.Key = v
				} else {
					req.Cache.Retention = v
				}
			}
		case "n":
			var n int
			if err = decodeStrict(raw, &n, f, "an integer"); err == nil && n != 1 {
				err = fieldErr(f, "only n=1 is supported")
			}
		default:
			if !slices.Contains(ignoredChatFields, name) {
				err = fieldErr(f, "is not supported by chorus batch")
			}
		}
		if err != nil {
			return nil, err
		}
	}
	if len(req.Messages) == 0 {
		return nil, fieldErr("body.messages", "is missing or empty")
	}
	return req, nil
}

func messagesFromOpenAI(raw json.RawMessage) ([]llm.Message, error) {
	var msgs []struct {
		Role             string          `json:"role"`
		Content          json.RawMessage `json:"content"`
		Name             string          `json:"name"`
		ToolCallID       string          `json:"tool_call_id"`
		ReasoningContent string          `json:"reasoning_content"`
		Refusal          string          `json:"refusal"`
		ToolCalls        []struct {
			ID       string `json:"id"`
			Type     string `json:"type"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	}
	if err := decodeStrict(raw, &msgs, "body.messages", "a list of messages"); err != nil {
		return nil, err
	}
	out := make([]llm.Message, 0, len(msgs))
	for i, m := range msgs {
		f := fmt.Sprintf("body.messages[%d]", i)
		msg := llm.Message{Reasoning: m.ReasoningContent, Refusal: m.Refusal, ToolCallID: m.ToolCallID}
		switch m.Role {
		case "system", "developer":
			msg.Role = llm.RoleSystem
		case "user":
			msg.Role = llm.RoleUser
		case "assistant":
			msg.Role = llm.RoleAssistant
		case "tool":
			msg.Role = llm.RoleTool
			msg.ToolName = m.Name
			if m.ToolCallID == "" {
				return nil, fieldErr(f+".tool_call_id", "is missing")
			}
		case "":
			return nil, fieldErr(f+".role", "is missing")
		default:
			return nil, fieldErr(f+".role", "unknown role %q (system, developer, user, assistant, tool)", m.Role)
		}
		text, parts, mark, err := contentFromOpenAI(m.Content, f+".content")
		if err != nil {
			return nil, err
		}
		msg.Content, msg.Parts, msg.Cache = text, parts, mark
		for j, tc := range m.ToolCalls {
			if m.Role != "assistant" {
				return nil, fieldErr(f+".tool_calls", "only assistant messages carry tool calls")
			}
			if tc.Function.Name == "" {
				return nil, fieldErr(fmt.Sprintf("%s.tool_calls[%d].function.name", f, j), "is missing")
			}
			msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		out = append(out, msg)
	}
	return out, nil
}

// cacheControl is a prompt-cache breakpoint as gateways accept it in the
// OpenAI format (on a content part or a tool): {"type": "ephemeral",
// "ttl": "5m" | "1h"}.
type cacheControl struct {
	Type string `json:"type"`
	TTL  string `json:"ttl"`
}

func (c *cacheControl) mark(field string) (*llm.CacheMark, error) {
	if c == nil {
		return nil, nil
	}
	if c.Type != "ephemeral" {
		return nil, fieldErr(field+".type", "want \"ephemeral\", got %q", c.Type)
	}
	switch llm.CacheTTL(c.TTL) {
	case llm.CacheTTLDefault, llm.CacheTTL5m, llm.CacheTTL1h:
		return &llm.CacheMark{TTL: llm.CacheTTL(c.TTL)}, nil
	}
	return nil, fieldErr(field+".ttl", "unknown TTL %q (5m, 1h)", c.TTL)
}

// contentFromOpenAI reads a string, null, or a list of text, image_url and
// file parts; a part's cache_control marks the message as a cache
// breakpoint (Anthropic takes it; the other formats ignore it).
func contentFromOpenAI(raw json.RawMessage, field string) (string, []llm.Part, *llm.CacheMark, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil, nil, nil
	}
	if raw[0] == '"' {
		var s string
		err := decodeStrict(raw, &s, field, "a string or a list of parts")
		return s, nil, nil, err
	}
	var parts []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		ImageURL *struct {
			URL string `json:"url"`
		} `json:"image_url"`
		File *struct {
			FileData string `json:"file_data"`
		} `json:"file"`
		CacheControl *cacheControl `json:"cache_control"`
	}
	if err := decodeStrict(raw, &parts, field, "a string or a list of parts"); err != nil {
		return "", nil, nil, err
	}
	var out []llm.Part
	var mark *llm.CacheMark
	for i, p := range parts {
		f := fmt.Sprintf("%s[%d]", field, i)
		if m, err := p.CacheControl.mark(f + ".cache_control"); err != nil {
			return "", nil, nil, err
		} else if m != nil {
			mark = m
		}
		switch p.Type {
		case "text":
			out = append(out, llm.TextPart(p.Text))
		case "image_url":
			if p.ImageURL == nil || p.ImageURL.URL == "" {
				return "", nil, nil, fieldErr(f+".image_url.url", "is missing")
			}
			if strings.HasPrefix(p.ImageURL.URL, "data:") {
				mime, data, err := dataURL(p.ImageURL.URL, f+".image_url.url")
				if err != nil {
					return "", nil, nil, err
				}
				out = append(out, llm.ImagePart(mime, data))
			} else {
				out = append(out, llm.ImageURLPart(p.ImageURL.URL))
			}
		case "file":
			if p.File == nil || p.File.FileData == "" {
				return "", nil, nil, fieldErr(f+".file.file_data", "is missing (file ids are not supported)")
			}
			_, data, err := dataURL(p.File.FileData, f+".file.file_data")
			if err != nil {
				return "", nil, nil, err
			}
			out = append(out, llm.DocumentPart(data))
		default:
			return "", nil, nil, fieldErr(f+".type", "unsupported part type %q (text, image_url, file)", p.Type)
		}
	}
	// A content made only of text parts is plain text.
	if !slices.ContainsFunc(out, func(p llm.Part) bool { return p.Type != llm.PartText }) {
		texts := make([]string, len(out))
		for i, p := range out {
			texts[i] = p.Text
		}
		return strings.Join(texts, "\n"), nil, mark, nil
	}
	return "", out, mark, nil
}

// dataURL decodes "data:<mime>;base64,<data>".
func dataURL(u, field string) (string, []byte, error) {
	meta, payload, ok := strings.Cut(strings.TrimPrefix(u, "data:"), ",")
	mime, isB64 := strings.CutSuffix(meta, ";base64")
	if !strings.HasPrefix(u, "data:") || !ok || !isB64 || mime == "" {
		return "", nil, fieldErr(field, "want a data:<mime>;base64,... URL")
	}
	data, err := base64.StdEncoding.DecodeString(payload)
	if err != nil {
		return "", nil, fieldErr(field, "base64 payload does not decode")
	}
	return mime, data, nil
}

func toolsFromOpenAI(raw json.RawMessage) ([]llm.Tool, error) {
	var tools []struct {
		Type     string `json:"type"`
		Function *struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
			Strict      bool            `json:"strict"`
		} `json:"function"`
		CacheControl *cacheControl `json:"cache_control"`
	}
	if err := decodeStrict(raw, &tools, "body.tools", "a list of tools"); err != nil {
		return nil, err
	}
	out := make([]llm.Tool, 0, len(tools))
	for i, t := range tools {
		f := fmt.Sprintf("body.tools[%d]", i)
		if t.Type != "function" {
			return nil, fieldErr(f+".type", "only function tools are supported, got %q", t.Type)
		}
		if t.Function == nil || t.Function.Name == "" {
			return nil, fieldErr(f+".function.name", "is missing")
		}
		mark, err := t.CacheControl.mark(f + ".cache_control")
		if err != nil {
			return nil, err
		}
		out = append(out, llm.Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters, Strict: t.Function.Strict, Cache: mark})
	}
	return out, nil
}

func toolChoiceFromOpenAI(raw json.RawMessage) (llm.ToolChoice, error) {
	const f = "body.tool_choice"
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "auto":
			return llm.ToolChoice{Mode: llm.ToolChoiceAuto}, nil
		case "none":
			return llm.ToolChoice{Mode: llm.ToolChoiceNone}, nil
		case "required":
			return llm.ToolChoice{Mode: llm.ToolChoiceRequired}, nil
		}
		return llm.ToolChoice{}, fieldErr(f, "unknown tool choice %q (auto, none, required, or a function)", s)
	}
	var o struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := decodeStrict(raw, &o, f, `"auto", "none", "required" or {"type":"function","function":{"name":...}}`); err != nil {
		return llm.ToolChoice{}, err
	}
	if o.Type != "function" || o.Function.Name == "" {
		return llm.ToolChoice{}, fieldErr(f, `want {"type":"function","function":{"name":...}}`)
	}
	return llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: o.Function.Name}, nil
}

func responseFormatFromOpenAI(raw json.RawMessage) (*llm.ResponseFormat, error) {
	const f = "body.response_format"
	var o struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict bool            `json:"strict"`
		} `json:"json_schema"`
	}
	if err := decodeStrict(raw, &o, f, "an object"); err != nil {
		return nil, err
	}
	switch o.Type {
	case "text":
		return &llm.ResponseFormat{Type: llm.ResponseText}, nil
	case "json_object":
		return &llm.ResponseFormat{Type: llm.ResponseJSONObject}, nil
	case "json_schema":
		if o.JSONSchema == nil || len(o.JSONSchema.Schema) == 0 {
			return nil, fieldErr(f+".json_schema.schema", "is missing")
		}
		return &llm.ResponseFormat{Type: llm.ResponseJSONSchema, Name: o.JSONSchema.Name, Schema: o.JSONSchema.Schema, Strict: o.JSONSchema.Strict}, nil
	}
	return nil, fieldErr(f+".type", "unknown type %q (text, json_object, json_schema)", o.Type)
}

// embedFromOpenAI converts an OpenAI embeddings request body; b64 reports
// encoding_format "base64".
func embedFromOpenAI(body json.RawMessage) (req *llm.EmbedRequest, b64 bool, err error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return nil, false, fieldErr("body", "want a JSON object")
	}
	req = &llm.EmbedRequest{}
	for _, name := range sortedKeys(fields) {
		raw := fields[name]
		f := "body." + name
		switch name {
		case "model":
			err = decodeStrict(raw, &req.Model, f, "a string")
		case "input":
			var one string
			if json.Unmarshal(raw, &one) == nil {
				req.Inputs = []string{one}
			} else {
				err = decodeStrict(raw, &req.Inputs, f, "a string or a list of strings (token arrays are not supported)")
			}
			if err == nil && len(req.Inputs) == 0 {
				err = fieldErr(f, "is empty")
			}
			for i, in := range req.Inputs {
				if err == nil && in == "" {
					err = fieldErr(fmt.Sprintf("%s[%d]", f, i), "is empty")
				}
			}
		case "dimensions":
			if err = decodeStrict(raw, &req.Dimensions, f, "an integer"); err == nil && req.Dimensions < 0 {
				err = fieldErr(f, "is negative")
			}
		case "encoding_format":
			var s string
			if err = decodeStrict(raw, &s, f, "a string"); err == nil {
				switch s {
				case "float":
				case "base64":
					b64 = true
				default:
					err = fieldErr(f, "unknown format %q (float, base64)", s)
				}
			}
		case "user":
		default:
			err = fieldErr(f, "is not supported by chorus batch")
		}
		if err != nil {
			return nil, false, err
		}
	}
	if len(req.Inputs) == 0 {
		return nil, false, fieldErr("body.input", "is missing")
	}
	return req, b64, nil
}

// sortedKeys returns m's keys in order, so that the first error reported
// for a line is always the same one.
func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
