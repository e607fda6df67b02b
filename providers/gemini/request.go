package gemini

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"strings"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// Thinking budgets for the reasoning efforts.
const (
	budgetNone   = 0
	budgetLow    = 1024
	budgetMedium = 8192
	budgetHigh   = 24576
)

// objectSchema is sent for a tool that declares no parameters.
var objectSchema = json.RawMessage(`{"type":"object"}`)

type generateRequest struct {
	SystemInstruction *content          `json:"systemInstruction,omitempty"`
	Contents          []content         `json:"contents"`
	Tools             []toolGroup       `json:"tools,omitempty"`
	ToolConfig        *toolConfig       `json:"toolConfig,omitempty"`
	GenerationConfig  *generationConfig `json:"generationConfig,omitempty"`
	// CachedContent names the cached prefix the request reads (cache.go).
	CachedContent string `json:"cachedContent,omitempty"`
	// SafetySettings are the client's (honours.go).
	SafetySettings []safetySetting `json:"safetySettings,omitempty"`
}

type safetySetting struct {
	Category  string `json:"category"`
	Threshold string `json:"threshold"`
	Method    string `json:"method,omitempty"`
}

type content struct {
	Role  string `json:"role,omitempty"`
	Parts []part `json:"parts"`
}

// part is one request part; exactly one of Text, InlineData, FileData,
// FunctionCall and FunctionResponse is set.
type part struct {
	Text             *string           `json:"text,omitempty"`
	Thought          bool              `json:"thought,omitempty"`
	InlineData       *blob             `json:"inlineData,omitempty"`
	FileData         *fileData         `json:"fileData,omitempty"`
	FunctionCall     *functionCall     `json:"functionCall,omitempty"`
	FunctionResponse *functionResponse `json:"functionResponse,omitempty"`
	ThoughtSignature string            `json:"thoughtSignature,omitempty"`
}

type blob struct {
	MimeType string `json:"mimeType"`
	Data     []byte `json:"data"` // base64 in JSON
}

type fileData struct {
	MimeType string `json:"mimeType,omitempty"`
	FileURI  string `json:"fileUri"`
}

type functionCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

type functionResponse struct {
	ID       string          `json:"id,omitempty"`
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
}

type toolGroup struct {
	FunctionDeclarations []functionDeclaration `json:"functionDeclarations"`
}

type functionDeclaration struct {
	Name                 string          `json:"name"`
	Description          string          `json:"description,omitempty"`
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
}

type toolConfig struct {
	FunctionCallingConfig functionCallingConfig `json:"functionCallingConfig"`
}

type functionCallingConfig struct {
	Mode                 string   `json:"mode"`
	AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
}

type generationConfig struct {
	MaxOutputTokens    int             `json:"maxOutputTokens,omitempty"`
	Temperature        *float64        `json:"temperature,omitempty"`
	TopP               *float64        `json:"topP,omitempty"`
	StopSequences      []string        `json:"stopSequences,omitempty"`
	Seed               *int64          `json:"seed,omitempty"`
	ResponseMimeType   string          `json:"responseMimeType,omitempty"`
	ResponseJSONSchema json.RawMessage `json:"responseJsonSchema,omitempty"`
	ThinkingConfig     *thinkingConfig `json:"thinkingConfig,omitempty"`
	// The optional fields Gemini honours (honours.go).
	TopK             *int     `json:"topK,omitempty"`
	FrequencyPenalty *float64 `json:"frequencyPenalty,omitempty"`
	PresencePenalty  *float64 `json:"presencePenalty,omitempty"`
	ResponseLogprobs bool     `json:"responseLogprobs,omitempty"`
	Logprobs         *int     `json:"logprobs,omitempty"`
}

type thinkingConfig struct {
	ThinkingBudget  *int `json:"thinkingBudget,omitempty"`
	IncludeThoughts bool `json:"includeThoughts,omitempty"`
}

// ChatRequest builds a generateContent request (streamGenerateContent with
// alt=sse when o.Stream). Errors are *llm.ConfigError naming the field at
// fault.
func (Codec) ChatRequest(req *llm.ChatRequest, o wire.BuildOptions) (*wire.Request, error) {
	path, out, err := buildRequest(req, o)
	if err != nil {
		return nil, err
	}
	wreq, err := postRequest(path, out, o.Stream, req.Headers) // request_append.go
	if err != nil {
		return nil, err
	}
	wreq.Body = spliceExtra(wreq.Body, req.Extra)
	return wreq, nil
}

// buildRequest builds and checks the request body and its path.
func buildRequest(req *llm.ChatRequest, o wire.BuildOptions) (string, *generateRequest, error) {
	if req == nil {
		return "", nil, &llm.ConfigError{Field: "request", Msg: "is nil"}
	}
	model := strings.TrimPrefix(strings.TrimSpace(req.Model), "models/")
	if model == "" {
		return "", nil, &llm.ConfigError{Field: "model", Msg: "is empty"}
	}

	var out generateRequest
	sys, contents, err := buildContents(req.Messages)
	if err != nil {
		return "", nil, err
	}
	if len(sys) > 0 {
		out.SystemInstruction = &content{Parts: sys}
	}
	if len(contents) == 0 {
		return "", nil, &llm.ConfigError{Field: "messages", Msg: "no user, assistant or tool message to send"}
	}
	out.Contents = contents

	if len(req.Tools) > 0 {
		decls := make([]functionDeclaration, len(req.Tools))
		for i := range req.Tools {
			t := &req.Tools[i]
			if t.Name == "" {
				return "", nil, &llm.ConfigError{Field: fmt.Sprintf("tools[%d].name", i), Msg: "is empty"}
			}
			params := objectSchema
			if len(bytes.TrimSpace(t.Parameters)) > 0 {
				if !isJSONObject(t.Parameters) {
					return "", nil, &llm.ConfigError{Field: fmt.Sprintf("tools[%d].parameters", i), Msg: "is not a JSON object"}
				}
				params = t.Parameters
			}
			decls[i] = functionDeclaration{Name: t.Name, Description: t.Description, ParametersJSONSchema: params}
		}
		out.Tools = []toolGroup{{FunctionDeclarations: decls}}
	}

	switch tc := req.ToolChoice; tc.Mode {
	case "":
	case llm.ToolChoiceAuto:
		out.ToolConfig = &toolConfig{FunctionCallingConfig: functionCallingConfig{Mode: "AUTO"}}
	case llm.ToolChoiceNone:
		out.ToolConfig = &toolConfig{FunctionCallingConfig: functionCallingConfig{Mode: "NONE"}}
	case llm.ToolChoiceRequired:
		out.ToolConfig = &toolConfig{FunctionCallingConfig: functionCallingConfig{Mode: "ANY"}}
	case llm.ToolChoiceTool:
		if tc.Name == "" {
			return "", nil, &llm.ConfigError{Field: "tool_choice.name", Msg: "is empty"}
		}
		out.ToolConfig = &toolConfig{FunctionCallingConfig: functionCallingConfig{Mode: "ANY", AllowedFunctionNames: []string{tc.Name}}}
	default:
		return "", nil, &llm.ConfigError{Field: "tool_choice.mode", Msg: fmt.Sprintf("unknown mode %q", tc.Mode)}
	}

	gc, err := buildGenerationConfig(req, o.Learned)
	if err != nil {
		return "", nil, err
	}
	if !req.Plain() {
		gc = optionalFields(&out, gc, req)
	}
	out.GenerationConfig = gc
	out.CachedContent = cachedContent(req)

	path := "/v1beta/models/" + url.PathEscape(model)
	if o.Stream {
		path += ":streamGenerateContent?alt=sse"
	} else {
		path += ":generateContent"
	}
	return path, &out, nil
}

// buildGenerationConfig maps sampling, output and thinking controls; nil
// when nothing is set.
func buildGenerationConfig(req *llm.ChatRequest, learned wire.Learned) (*generationConfig, error) {
	var gc generationConfig
	set := false
	if req.MaxTokens < 0 {
		return nil, &llm.ConfigError{Field: "max_tokens", Msg: "is negative"}
	}
	if req.MaxTokens > 0 {
		gc.MaxOutputTokens, set = req.MaxTokens, true
	}
	if req.Temperature != nil && !learned.NoTemperature {
		gc.Temperature, set = req.Temperature, true
	}
	if req.TopP != nil && !learned.NoTopP {
		gc.TopP, set = req.TopP, true
	}
	if len(req.Stop) > 0 {
		gc.StopSequences, set = req.Stop, true
	}
	if req.Seed != nil && !learned.NoSeed {
		if *req.Seed < math.MinInt32 || *req.Seed > math.MaxInt32 {
			return nil, &llm.ConfigError{Field: "seed", Msg: fmt.Sprintf("%d does not fit Gemini's 32-bit seed", *req.Seed)}
		}
		gc.Seed, set = req.Seed, true
	}
	if rf := req.ResponseFormat; rf != nil {
		switch rf.Type {
		case llm.ResponseText, "":
		case llm.ResponseJSONObject:
			gc.ResponseMimeType, set = "application/json", true
		case llm.ResponseJSONSchema:
			if len(rf.Schema) == 0 || !json.Valid(rf.Schema) {
				return nil, &llm.ConfigError{Field: "response_format.schema", Msg: "json_schema needs a valid JSON Schema"}
			}
			gc.ResponseMimeType, gc.ResponseJSONSchema, set = "application/json", rf.Schema, true
		default:
			return nil, &llm.ConfigError{Field: "response_format.type", Msg: fmt.Sprintf("unknown type %q", rf.Type)}
		}
	}
	if rs := req.Reasoning; rs != nil {
		var tc thinkingConfig
		budget, hasBudget := 0, true
		switch {
		case rs.BudgetTokens < 0:
			return nil, &llm.ConfigError{Field: "reasoning.budget_tokens", Msg: "is negative"}
		case rs.BudgetTokens > 0:
			budget = rs.BudgetTokens
		default:
			switch rs.Effort {
			case llm.EffortNone:
				budget = budgetNone
			case llm.EffortLow:
				budget = budgetLow
			case llm.EffortMedium:
				budget = budgetMedium
			case llm.EffortHigh, llm.EffortMax:
				budget = budgetHigh
			case "":
				hasBudget = false // the model's own default (dynamic)
			default:
				return nil, &llm.ConfigError{Field: "reasoning.effort", Msg: fmt.Sprintf("unknown effort %q", rs.Effort)}
			}
		}
		if hasBudget {
			tc.ThinkingBudget = &budget
		}
		tc.IncludeThoughts = rs.IncludeThoughts
		if tc.ThinkingBudget != nil || tc.IncludeThoughts {
			gc.ThinkingConfig, set = &tc, true
		}
	}
	if !set {
		return nil, nil
	}
	return &gc, nil
}

// buildContents maps the conversation: system messages become
// systemInstruction parts (one per message, never concatenated), the rest
// become contents. Consecutive tool messages share one user turn.
func buildContents(msgs []llm.Message) (sys []part, out []content, err error) {
	callNames := make(map[string]string)
	for i := 0; i < len(msgs); i++ {
		m := &msgs[i]
		switch m.Role {
		case llm.RoleSystem, llm.RoleDeveloper:
			p, err := systemParts(m, i)
			if err != nil {
				return nil, nil, err
			}
			sys = append(sys, p...)
		case llm.RoleUser:
			parts, err := userParts(m, i)
			if err != nil {
				return nil, nil, err
			}
			if len(parts) == 0 {
				return nil, nil, &llm.ConfigError{Field: fmt.Sprintf("messages[%d].content", i), Msg: "is empty"}
			}
			out = append(out, content{Role: "user", Parts: parts})
		case llm.RoleAssistant:
			parts, err := assistantParts(m, i)
			if err != nil {
				return nil, nil, err
			}
			for _, tc := range m.ToolCalls {
				if tc.ID != "" {
					callNames[tc.ID] = tc.Name
				}
			}
			if len(parts) > 0 {
				out = append(out, content{Role: "model", Parts: parts})
			}
		case llm.RoleTool:
			var responses, media []part
			for ; i < len(msgs) && msgs[i].Role == llm.RoleTool; i++ {
				r, md, err := toolParts(&msgs[i], i, callNames)
				if err != nil {
					return nil, nil, err
				}
				responses = append(responses, r)
				media = append(media, md...)
			}
			i-- // the loop above stopped on the first non-tool message
			out = append(out, content{Role: "user", Parts: append(responses, media...)})
		default:
			return nil, nil, &llm.ConfigError{Field: fmt.Sprintf("messages[%d].role", i), Msg: fmt.Sprintf("unknown role %q", m.Role)}
		}
	}
	return sys, out, nil
}

func textPart(s string) part { return part{Text: &s} }

// systemParts maps a system message; Gemini's systemInstruction takes text
// only.
func systemParts(m *llm.Message, i int) ([]part, error) {
	var parts []part
	if m.Content != "" {
		parts = append(parts, textPart(m.Content))
	}
	for j, p := range m.Parts {
		if p.Type != llm.PartText {
			return nil, &llm.ConfigError{Field: fmt.Sprintf("messages[%d].parts[%d]", i, j), Msg: "system messages carry text only on Gemini"}
		}
		if p.Text != "" {
			parts = append(parts, textPart(p.Text))
		}
	}
	return parts, nil
}

// userParts maps Content (first, as text) and Parts.
func userParts(m *llm.Message, i int) ([]part, error) {
	var parts []part
	if m.Content != "" {
		parts = append(parts, textPart(m.Content))
	}
	for j := range m.Parts {
		p, err := mediaOrText(&m.Parts[j], fmt.Sprintf("messages[%d].parts[%d]", i, j))
		if err != nil {
			return nil, err
		}
		if p != nil {
			parts = append(parts, *p)
		}
	}
	return parts, nil
}

// mediaOrText maps one content part; nil for an empty text part.
func mediaOrText(p *llm.Part, field string) (*part, error) {
	switch p.Type {
	case llm.PartText:
		if p.Text == "" {
			return nil, nil
		}
		tp := textPart(p.Text)
		return &tp, nil
	case llm.PartImage:
		if len(p.Data) > 0 {
			if p.MIMEType == "" {
				return nil, &llm.ConfigError{Field: field + ".mime_type", Msg: "inline image needs a MIME type"}
			}
			return &part{InlineData: &blob{MimeType: wire.MIMEType(p.MIMEType), Data: p.Data}}, nil
		}
		if p.URL != "" {
			return &part{FileData: &fileData{MimeType: wire.MIMEType(p.MIMEType), FileURI: p.URL}}, nil
		}
		return nil, &llm.ConfigError{Field: field, Msg: "image needs data or a URL"}
	case llm.PartDocument:
		if len(p.Data) == 0 {
			return nil, &llm.ConfigError{Field: field, Msg: "document needs inline data"}
		}
		mime := wire.MIMEType(p.MIMEType)
		if mime == "" {
			mime = "application/pdf"
		}
		return &part{InlineData: &blob{MimeType: mime, Data: p.Data}}, nil
	}
	return nil, &llm.ConfigError{Field: field + ".type", Msg: fmt.Sprintf("unknown part type %q", p.Type)}
}

// assistantParts maps an assistant turn in the order Gemini produced it:
// thought parts (each ThinkingBlock of Format "gemini" with text, with its
// signature), the text and media parts, then one functionCall part per tool
// call with its signature. A gemini block with a signature and no text is
// the signature of a text part: the first one goes on the first text part,
// any other (or all, when there is no text) on an empty text part of its own.
func assistantParts(m *llm.Message, i int) ([]part, error) {
	var parts []part
	var textSigs []string
	for _, tb := range m.ThinkingBlocks {
		if tb.Format != formatName || tb.Redacted {
			continue
		}
		if tb.Text == "" {
			if tb.Signature != "" {
				textSigs = append(textSigs, tb.Signature)
			}
			continue
		}
		p := textPart(tb.Text)
		p.Thought = true
		p.ThoughtSignature = tb.Signature
		parts = append(parts, p)
	}

	firstText := -1
	text := m.Content
	if text == "" && len(m.ToolCalls) == 0 && len(m.Parts) == 0 {
		text = m.Refusal
	}
	if text != "" {
		firstText = len(parts)
		parts = append(parts, textPart(text))
	}
	for j := range m.Parts {
		p, err := mediaOrText(&m.Parts[j], fmt.Sprintf("messages[%d].parts[%d]", i, j))
		if err != nil {
			return nil, err
		}
		if p == nil {
			continue
		}
		if firstText < 0 && p.Text != nil {
			firstText = len(parts)
		}
		parts = append(parts, *p)
	}
	if len(textSigs) > 0 {
		if firstText >= 0 {
			parts[firstText].ThoughtSignature = textSigs[0]
			textSigs = textSigs[1:]
		}
		for _, s := range textSigs {
			p := textPart("")
			p.ThoughtSignature = s
			parts = append(parts, p)
		}
	}

	for j := range m.ToolCalls {
		tc := &m.ToolCalls[j]
		field := fmt.Sprintf("messages[%d].tool_calls[%d]", i, j)
		if tc.Name == "" {
			return nil, &llm.ConfigError{Field: field + ".name", Msg: "is empty"}
		}
		args := json.RawMessage("{}")
		if strings.TrimSpace(tc.Arguments) != "" {
			if !isJSONObject([]byte(tc.Arguments)) {
				return nil, &llm.ConfigError{Field: field + ".arguments", Msg: "must be a JSON object on Gemini"}
			}
			args = json.RawMessage(tc.Arguments)
		}
		parts = append(parts, part{
			FunctionCall:     &functionCall{ID: tc.ID, Name: tc.Name, Args: args},
			ThoughtSignature: tc.Signature,
		})
	}
	return parts, nil
}

// toolParts maps one tool message: its functionResponse part and the media
// it returned, which travel in the same user turn.
func toolParts(m *llm.Message, i int, callNames map[string]string) (part, []part, error) {
	name := m.ToolName
	if name == "" {
		name = callNames[m.ToolCallID]
	}
	if name == "" {
		return part{}, nil, &llm.ConfigError{
			Field: fmt.Sprintf("messages[%d].tool_call_id", i),
			Msg:   fmt.Sprintf("no earlier assistant tool call has id %q and the message names no tool; Gemini needs the function name", m.ToolCallID),
		}
	}
	var texts []string
	if m.Content != "" {
		texts = append(texts, m.Content)
	}
	var media []part
	for j := range m.Parts {
		p := &m.Parts[j]
		if p.Type == llm.PartText {
			if p.Text != "" {
				texts = append(texts, p.Text)
			}
			continue
		}
		mp, err := mediaOrText(p, fmt.Sprintf("messages[%d].parts[%d]", i, j))
		if err != nil {
			return part{}, nil, err
		}
		media = append(media, *mp)
	}
	resp := toolResponse(strings.Join(texts, "\n"), m.IsError)
	return part{FunctionResponse: &functionResponse{ID: m.ToolCallID, Name: name, Response: resp}}, media, nil
}

// toolResponse builds functionResponse.response, which must be an object: a
// JSON-object result is sent as is; any other JSON value is wrapped as
// {"result": value} and plain text as {"result": "text"}. An error result is
// always wrapped as {"error": ...}.
func toolResponse(s string, isError bool) json.RawMessage {
	trimmed := strings.TrimSpace(s)
	if !isError && isJSONObject([]byte(trimmed)) {
		return json.RawMessage(trimmed)
	}
	var val []byte
	if trimmed != "" && json.Valid([]byte(trimmed)) {
		val = []byte(trimmed)
	} else {
		val = appendJSONString(nil, s)
	}
	key := `{"result":`
	if isError {
		key = `{"error":`
	}
	out := make([]byte, 0, len(key)+len(val)+1)
	out = append(out, key...)
	out = append(out, val...)
	return append(out, '}')
}

// isJSONObject reports whether b is a well-formed JSON object.
func isJSONObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{' && json.Valid(b)
}
