package gemini

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// This file is the server side of the generateContent format, for a gateway
// that answers Gemini clients: it decodes what a client sends (request.go's
// types, read back) and encodes results, stream chunks and errors the way
// the Gemini API answers.

type serverRequest struct {
	SystemInstruction *content      `json:"systemInstruction"`
	Contents          []content     `json:"contents"`
	Tools             []serverTools `json:"tools"`
	ToolConfig        *toolConfig   `json:"toolConfig"`
	// GenerationConfig is kept raw and decoded on its own (serverGenConfig):
	// its own fields llm has no name for are read from the same bytes.
	GenerationConfig json.RawMessage `json:"generationConfig"`
	SafetySettings   []safetySetting `json:"safetySettings"`
	CachedContent    string          `json:"cachedContent"`
}

type serverGenConfig struct {
	generationConfig
	ResponseSchema json.RawMessage `json:"responseSchema"`
	CandidateCount int             `json:"candidateCount"`
}

// GenerateFields is every top-level field of a generateContent request,
// and of its generationConfig (named "generationConfig.<field>"), as the
// Gemini API defines them, and what the gateway does with each. A field
// not named here is passed through like the ones marked so: sent
// unchanged to a Gemini upstream, refused for any other format.
var GenerateFields = []llm.WireField{
	{Name: "contents", Class: llm.FieldMapped, Note: "user and model turns: text, inlineData, fileData, functionCall, functionResponse, thought signatures"},
	{Name: "systemInstruction", Class: llm.FieldMapped, Note: ""},
	{Name: "tools", Class: llm.FieldMapped, Note: "functionDeclarations (other tools: passed through)"},
	{Name: "toolConfig", Class: llm.FieldMapped, Note: "functionCallingConfig"},
	{Name: "safetySettings", Class: llm.FieldMapped, Note: "Gemini only; refused elsewhere"},
	{Name: "cachedContent", Class: llm.FieldMapped, Note: "Gemini only; refused elsewhere"},
	{Name: "generationConfig", Class: llm.FieldMapped, Note: "field by field below"},
	{Name: "generationConfig.maxOutputTokens", Class: llm.FieldMapped, Note: ""},
	{Name: "generationConfig.temperature", Class: llm.FieldMapped, Note: ""},
	{Name: "generationConfig.topP", Class: llm.FieldMapped, Note: ""},
	{Name: "generationConfig.topK", Class: llm.FieldMapped, Note: "Anthropic top_k; refused by OpenAI"},
	{Name: "generationConfig.stopSequences", Class: llm.FieldMapped, Note: ""},
	{Name: "generationConfig.seed", Class: llm.FieldMapped, Note: ""},
	{Name: "generationConfig.presencePenalty", Class: llm.FieldMapped, Note: ""},
	{Name: "generationConfig.frequencyPenalty", Class: llm.FieldMapped, Note: ""},
	{Name: "generationConfig.responseLogprobs", Class: llm.FieldMapped, Note: "OpenAI logprobs; refused by Anthropic"},
	{Name: "generationConfig.logprobs", Class: llm.FieldMapped, Note: "OpenAI top_logprobs"},
	{Name: "generationConfig.responseMimeType", Class: llm.FieldMapped, Note: "application/json (json_object, or json_schema with a schema), text/plain; other values passed through"},
	{Name: "generationConfig.responseSchema", Class: llm.FieldMapped, Note: "json_schema"},
	{Name: "generationConfig.responseJsonSchema", Class: llm.FieldMapped, Note: "json_schema"},
	{Name: "generationConfig.thinkingConfig", Class: llm.FieldMapped, Note: "thinkingBudget, includeThoughts"},
	{Name: "generationConfig.candidateCount", Class: llm.FieldRefused, Note: "more than 1 (one candidate per answer)"},
	{Name: "generationConfig.responseModalities", Class: llm.FieldPassthrough, Note: ""},
	{Name: "generationConfig.speechConfig", Class: llm.FieldPassthrough, Note: ""},
	{Name: "generationConfig.imageConfig", Class: llm.FieldPassthrough, Note: ""},
	{Name: "generationConfig.mediaResolution", Class: llm.FieldPassthrough, Note: ""},
	{Name: "generationConfig.enableEnhancedCivicAnswers", Class: llm.FieldPassthrough, Note: ""},
	{Name: "generationConfig.modelSelectionConfig", Class: llm.FieldPassthrough, Note: ""},
	{Name: "generationConfig.audioTimestamp", Class: llm.FieldPassthrough, Note: ""},
	{Name: "generationConfig.enableAffectiveDialog", Class: llm.FieldPassthrough, Note: ""},
	{Name: "generationConfig.routingConfig", Class: llm.FieldPassthrough, Note: ""},
	{Name: "generationConfig.responseFormat", Class: llm.FieldPassthrough, Note: ""},
	{Name: "generationConfig.translationConfig", Class: llm.FieldPassthrough, Note: ""},
	{Name: "generationConfig.audioTranscriptionConfig", Class: llm.FieldPassthrough, Note: ""},
	{Name: "labels", Class: llm.FieldPassthrough, Note: ""},
	{Name: "imageConfig", Class: llm.FieldPassthrough, Note: ""},
	{Name: "modelArmorConfig", Class: llm.FieldPassthrough, Note: ""},
	{Name: "serviceTier", Class: llm.FieldPassthrough, Note: ""},
	{Name: "continuationToken", Class: llm.FieldPassthrough, Note: ""},
	{Name: "automaticContinuation", Class: llm.FieldPassthrough, Note: ""},
	{Name: "generationOutputConfig", Class: llm.FieldPassthrough, Note: ""},
	{Name: "store", Class: llm.FieldPassthrough, Note: ""},
}

var (
	generateFields = wire.NewClassified(GenerateFields)
	// configFields is generationConfig's part of the table, by bare name.
	configFields = func() wire.Classified {
		c := wire.Classified{}
		for _, f := range GenerateFields {
			if n, ok := strings.CutPrefix(f.Name, "generationConfig."); ok {
				c[n] = f.Class
			}
		}
		return c
	}()
)

type serverTools struct {
	FunctionDeclarations []struct {
		Name                 string          `json:"name"`
		Description          string          `json:"description"`
		Parameters           json.RawMessage `json:"parameters"`
		ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
	} `json:"functionDeclarations"`
}

func badField(field, format string, args ...any) error {
	return &llm.ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// DecodeServerGenerate decodes a client's generateContent request for
// model (the name in the URL path, without "models/"). A functionCall
// without an id gets its name as id, and a functionResponse answers the
// call with its id, else its name. Errors are *llm.ConfigError.
func DecodeServerGenerate(model string, body []byte) (*llm.ChatRequest, error) {
	var b serverRequest
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, badField("body", "is not a generateContent request: %v", err)
	}
	req := &llm.ChatRequest{Model: model}
	for _, s := range b.SafetySettings {
		req.Safety = append(req.Safety, llm.SafetySetting{Category: s.Category, Threshold: s.Threshold, Method: s.Method})
	}
	if b.CachedContent != "" {
		req.Cache = &llm.PromptCache{CachedContent: b.CachedContent}
	}
	req.Extra = wire.ExtraFields(body, generateFields, formatName)
	if si := b.SystemInstruction; si != nil {
		var texts []string
		for _, p := range si.Parts {
			if p.Text != nil {
				texts = append(texts, *p.Text)
			}
		}
		req.Messages = append(req.Messages, llm.SystemText(strings.Join(texts, "\n")))
	}
	for i, c := range b.Contents {
		ms, err := decodeServerContent(&c, fmt.Sprintf("contents[%d]", i))
		if err != nil {
			return nil, err
		}
		req.Messages = append(req.Messages, ms...)
	}
	for _, tg := range b.Tools {
		for _, fd := range tg.FunctionDeclarations {
			params := fd.ParametersJSONSchema
			if len(params) == 0 {
				params = fd.Parameters
			}
			req.Tools = append(req.Tools, llm.Tool{Name: fd.Name, Description: fd.Description, Parameters: params})
		}
	}
	if tc := b.ToolConfig; tc != nil {
		fc := tc.FunctionCallingConfig
		switch fc.Mode {
		case "", "AUTO", "VALIDATED":
			req.ToolChoice.Mode = llm.ToolChoiceAuto
		case "NONE":
			req.ToolChoice.Mode = llm.ToolChoiceNone
		case "ANY":
			req.ToolChoice.Mode = llm.ToolChoiceRequired
			if len(fc.AllowedFunctionNames) == 1 {
				req.ToolChoice = llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: fc.AllowedFunctionNames[0]}
			}
		default:
			return nil, badField("toolConfig.functionCallingConfig.mode", "%q is unknown", fc.Mode)
		}
	}
	var gc *serverGenConfig
	if raw := b.GenerationConfig; len(raw) > 0 && string(raw) != "null" {
		gc = new(serverGenConfig)
		if err := json.Unmarshal(raw, gc); err != nil {
			return nil, badField("body", "is not a generateContent request: generationConfig: %v", err)
		}
	}
	if gc != nil {
		req.MaxTokens, req.Temperature, req.TopP, req.Stop, req.Seed = gc.MaxOutputTokens, gc.Temperature, gc.TopP, gc.StopSequences, gc.Seed
		req.TopK, req.FrequencyPenalty, req.PresencePenalty = gc.TopK, gc.FrequencyPenalty, gc.PresencePenalty
		if gc.CandidateCount > 1 {
			return nil, badField("generationConfig.candidateCount", "only 1 candidate is served")
		}
		if gc.ResponseLogprobs {
			req.Logprobs = &llm.Logprobs{}
			if gc.Logprobs != nil {
				req.Logprobs.TopLogprobs = *gc.Logprobs
			}
		}
		if raw := b.GenerationConfig; raw[0] == '{' {
			if e := wire.ExtraFields(raw, configFields, formatName); e != nil {
				if req.Extra == nil {
					req.Extra = &llm.Extra{Format: formatName}
				}
				for _, f := range e.Fields {
					req.Extra.Fields = append(req.Extra.Fields, llm.RawField{Name: "generationConfig." + f.Name, Value: f.Value})
				}
			}
		}
		switch gc.ResponseMimeType {
		case "", "text/plain", "application/json":
		default: // text/x.enum and the like: Gemini's own, for a Gemini upstream
			if req.Extra == nil {
				req.Extra = &llm.Extra{Format: formatName}
			}
			v, _ := json.Marshal(gc.ResponseMimeType)
			req.Extra.Fields = append(req.Extra.Fields, llm.RawField{Name: "generationConfig.responseMimeType", Value: v})
		}
		schema := gc.ResponseJSONSchema
		if len(schema) == 0 {
			schema = gc.ResponseSchema
		}
		switch {
		case len(schema) > 0:
			req.ResponseFormat = &llm.ResponseFormat{Type: llm.ResponseJSONSchema, Name: "response", Schema: schema}
		case gc.ResponseMimeType == "application/json":
			req.ResponseFormat = &llm.ResponseFormat{Type: llm.ResponseJSONObject}
		}
		if th := gc.ThinkingConfig; th != nil {
			r := &llm.Reasoning{IncludeThoughts: th.IncludeThoughts, Effort: llm.EffortMedium}
			if th.ThinkingBudget != nil {
				if *th.ThinkingBudget == 0 {
					r.Effort = llm.EffortNone
				} else if *th.ThinkingBudget > 0 {
					r.BudgetTokens = *th.ThinkingBudget
				}
			}
			req.Reasoning = r
		}
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	return req, nil
}

func decodeServerContent(c *content, field string) ([]llm.Message, error) {
	var role llm.Role
	switch c.Role {
	case "", "user":
		role = llm.RoleUser
	case "model":
		role = llm.RoleAssistant
	default:
		return nil, badField(field+".role", "unknown role %q", c.Role)
	}
	var out []llm.Message
	m := llm.Message{Role: role}
	var texts []string
	textOnly := true
	for i, p := range c.Parts {
		f := fmt.Sprintf("%s.parts[%d]", field, i)
		switch {
		case p.FunctionResponse != nil:
			fr := p.FunctionResponse
			id := fr.ID
			if id == "" {
				id = fr.Name
			}
			out = append(out, llm.Message{Role: llm.RoleTool, ToolCallID: id, ToolName: fr.Name, Content: string(fr.Response)})
		case p.FunctionCall != nil:
			fc := p.FunctionCall
			id := fc.ID
			if id == "" {
				id = fc.Name
			}
			args := string(fc.Args)
			if args == "" || args == "null" {
				args = "{}"
			}
			m.ToolCalls = append(m.ToolCalls, llm.ToolCall{ID: id, Name: fc.Name, Arguments: args, Signature: p.ThoughtSignature})
		case p.Thought && p.Text != nil:
			m.ThinkingBlocks = append(m.ThinkingBlocks, llm.ThinkingBlock{Format: formatName, Text: *p.Text, Signature: p.ThoughtSignature})
		case p.Text != nil:
			texts = append(texts, *p.Text)
			m.Parts = append(m.Parts, llm.TextPart(*p.Text))
		case p.InlineData != nil:
			typ := llm.PartImage
			if p.InlineData.MimeType == "application/pdf" {
				typ = llm.PartDocument
			}
			m.Parts = append(m.Parts, llm.Part{Type: typ, MIMEType: p.InlineData.MimeType, Data: p.InlineData.Data})
			textOnly = false
		case p.FileData != nil:
			m.Parts = append(m.Parts, llm.Part{Type: llm.PartImage, MIMEType: p.FileData.MimeType, URL: p.FileData.FileURI})
			textOnly = false
		default:
			return nil, badField(f, "holds no part this gateway serves")
		}
	}
	if textOnly {
		m.Content, m.Parts = strings.Join(texts, ""), nil
	}
	if m.Content != "" || len(m.Parts) > 0 || len(m.ToolCalls) > 0 || len(m.ThinkingBlocks) > 0 {
		out = append(out, m)
	}
	return out, nil
}

type serverUsage struct {
	PromptTokenCount        int `json:"promptTokenCount"`
	CandidatesTokenCount    int `json:"candidatesTokenCount"`
	TotalTokenCount         int `json:"totalTokenCount"`
	CachedContentTokenCount int `json:"cachedContentTokenCount,omitempty"`
	ThoughtsTokenCount      int `json:"thoughtsTokenCount,omitempty"`
}

// usageOf is the inverse of the usage reading described in doc.go.
func usageOf(u llm.Usage) *serverUsage {
	return &serverUsage{
		PromptTokenCount:        u.InputTokens(),
		CandidatesTokenCount:    u.CompletionTokens - u.ReasoningTokens,
		TotalTokenCount:         u.TotalTokens(),
		CachedContentTokenCount: u.CacheReadTokens,
		ThoughtsTokenCount:      u.ReasoningTokens,
	}
}

func finishName(f llm.FinishReason) string {
	switch f {
	case llm.FinishLength:
		return "MAX_TOKENS"
	case llm.FinishContentFilter:
		return "SAFETY"
	}
	return "STOP" // tool calls finish STOP on Gemini
}

type serverCandidate struct {
	Content      content `json:"content"`
	FinishReason string  `json:"finishReason,omitempty"`
	Index        int     `json:"index"`
}

type serverResponse struct {
	Candidates    []serverCandidate `json:"candidates"`
	UsageMetadata *serverUsage      `json:"usageMetadata,omitempty"`
	ModelVersion  string            `json:"modelVersion,omitempty"`
	ResponseID    string            `json:"responseId,omitempty"`
}

func callPart(tc llm.ToolCall) part {
	args := json.RawMessage(tc.Arguments)
	if strings.TrimSpace(tc.Arguments) == "" || !json.Valid(args) {
		args = json.RawMessage(`{}`)
	}
	return part{FunctionCall: &functionCall{ID: tc.ID, Name: tc.Name, Args: args}, ThoughtSignature: tc.Signature}
}

// EncodeServerGenerate encodes a buffered answer as a GenerateContentResponse.
func EncodeServerGenerate(res *llm.ChatResult, model string) ([]byte, error) {
	var parts []part
	for _, tb := range res.ThinkingBlocks {
		if tb.Format == formatName && !tb.Redacted {
			t := tb.Text
			parts = append(parts, part{Text: &t, Thought: true, ThoughtSignature: tb.Signature})
		}
	}
	if len(parts) == 0 && res.Reasoning != "" {
		t := res.Reasoning
		parts = append(parts, part{Text: &t, Thought: true})
	}
	if text := res.Content + res.Refusal; text != "" || len(res.ToolCalls) == 0 {
		parts = append(parts, textPart(text))
	}
	for _, tc := range res.ToolCalls {
		parts = append(parts, callPart(tc))
	}
	return json.Marshal(serverResponse{
		Candidates:    []serverCandidate{{Content: content{Role: "model", Parts: parts}, FinishReason: finishName(res.FinishReason)}},
		UsageMetadata: usageOf(res.Usage), ModelVersion: model, ResponseID: res.ID,
	})
}

// ServerStream encodes llm events as streamGenerateContent?alt=sse
// chunks: each text or thought delta is a chunk; a tool call is sent whole
// once its arguments are complete (Gemini never streams arguments); the
// last chunk carries finishReason and usageMetadata. Not safe for
// concurrent use.
type ServerStream struct {
	model, id string
	calls     []llm.ToolCall
	args      []strings.Builder
	held      wire.HeldEnd // usage and finish, sent at the end
}

// NewServerStream returns the encoder of one streamed answer.
func NewServerStream(id, model string) *ServerStream {
	return &ServerStream{id: id, model: model}
}

func (s *ServerStream) chunk(dst []byte, parts []part, finish string, u *serverUsage) []byte {
	if parts == nil {
		parts = []part{}
	}
	b, _ := json.Marshal(serverResponse{
		Candidates:    []serverCandidate{{Content: content{Role: "model", Parts: parts}, FinishReason: finish}},
		UsageMetadata: u, ModelVersion: s.model, ResponseID: s.id,
	})
	dst = append(dst, "data: "...)
	dst = append(dst, b...)
	return append(dst, "\r\n\r\n"...)
}

// Event appends the frames of one event to dst.
func (s *ServerStream) Event(dst []byte, ev *llm.Event) []byte {
	switch ev.Type {
	case llm.EventText, llm.EventRefusal:
		return s.chunk(dst, []part{textPart(ev.Text)}, "", nil)
	case llm.EventReasoning:
		if ev.Text == "" {
			return dst // another format's thinking-block signature
		}
		t := ev.Text
		return s.chunk(dst, []part{{Text: &t, Thought: true}}, "", nil)
	case llm.EventToolCallStart:
		for len(s.calls) <= ev.ToolIndex {
			s.calls = append(s.calls, llm.ToolCall{})
			s.args = append(s.args, strings.Builder{})
		}
		s.calls[ev.ToolIndex] = llm.ToolCall{ID: ev.ToolCallID, Name: ev.ToolName, Signature: ev.Signature}
		s.args[ev.ToolIndex].WriteString(ev.Text)
	case llm.EventToolCallDelta:
		if ev.ToolIndex < len(s.args) {
			s.args[ev.ToolIndex].WriteString(ev.Text)
		}
	case llm.EventUsage, llm.EventFinish:
		s.held.Hold(ev)
	}
	return dst
}

// End appends the last chunk: the tool calls, finishReason and usage.
func (s *ServerStream) End(dst []byte, res *llm.ChatResult) []byte {
	fin, u := s.held.Final(res)
	var parts []part
	for i, tc := range s.calls {
		tc.Arguments = s.args[i].String()
		parts = append(parts, callPart(tc))
	}
	return s.chunk(dst, parts, finishName(fin), usageOf(u))
}

// Error appends an in-band error chunk, {"error":{code, message, status}},
// which Google's SDKs raise from the stream; no finishReason follows.
func (s *ServerStream) Error(dst []byte, status int, message string) []byte {
	dst = append(dst, "data: "...)
	dst = append(dst, ServerError(status, message)...)
	return append(dst, "\r\n\r\n"...)
}

// ServerError encodes Google's error envelope {"error":{code, message,
// status}} with the canonical status name for the HTTP status.
func ServerError(status int, message string) []byte {
	name := "INTERNAL"
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		name = "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		name = "UNAUTHENTICATED"
	case http.StatusForbidden:
		name = "PERMISSION_DENIED"
	case http.StatusNotFound:
		name = "NOT_FOUND"
	case http.StatusTooManyRequests:
		name = "RESOURCE_EXHAUSTED"
	case http.StatusServiceUnavailable:
		name = "UNAVAILABLE"
	case http.StatusGatewayTimeout:
		name = "DEADLINE_EXCEEDED"
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": status, "message": message, "status": name}})
	return b
}

// DecodeServerEmbed decodes :embedContent (one content) or
// :batchEmbedContents (requests[].content) for model. Only text parts are
// embedded; each content's texts are joined with "\n".
func DecodeServerEmbed(model string, batch bool, body []byte) (*llm.EmbedRequest, error) {
	var one embedContentRequest
	var many struct {
		Requests []embedContentRequest `json:"requests"`
	}
	var reqs []embedContentRequest
	if batch {
		if err := json.Unmarshal(body, &many); err != nil {
			return nil, badField("body", "is not a batchEmbedContents request: %v", err)
		}
		reqs = many.Requests
	} else {
		if err := json.Unmarshal(body, &one); err != nil {
			return nil, badField("body", "is not an embedContent request: %v", err)
		}
		reqs = []embedContentRequest{one}
	}
	out := &llm.EmbedRequest{Model: model}
	// Each item's own fields (taskType, title): kept for a Gemini upstream;
	// the items of one batch must agree on them, as they travel as one.
	raws := [][]byte{body}
	if batch {
		var rawMany struct {
			Requests []json.RawMessage `json:"requests"`
		}
		_ = json.Unmarshal(body, &rawMany)
		raws = raws[:0]
		for _, r := range rawMany.Requests {
			raws = append(raws, r)
		}
	}
	for i, raw := range raws {
		e := wire.ExtraFields(raw, embedFields, formatName)
		if i == 0 {
			out.Extra = e
			continue
		}
		if a, b := mustJSON(out.Extra), mustJSON(e); a != b {
			return nil, badField(fmt.Sprintf("requests[%d]", i), "has other fields than requests[0] (%s, %s): the items of one batch are sent alike", b, a)
		}
	}
	for i, r := range reqs {
		var texts []string
		for _, p := range r.Content.Parts {
			if p.Text != nil {
				texts = append(texts, *p.Text)
			}
		}
		if len(texts) == 0 {
			return nil, badField(fmt.Sprintf("requests[%d].content", i), "has no text")
		}
		out.Inputs = append(out.Inputs, strings.Join(texts, "\n"))
		if r.OutputDimensionality > 0 {
			out.Dimensions = r.OutputDimensionality
		}
	}
	if err := out.Validate(); err != nil {
		return nil, err
	}
	return out, nil
}

// EncodeServerEmbed encodes {"embedding":{"values"}} (embedContent) or
// {"embeddings":[{"values"}]} (batchEmbedContents).
func EncodeServerEmbed(res *llm.EmbedResult, batch bool) ([]byte, error) {
	type values struct {
		Values []float32 `json:"values"`
	}
	if !batch {
		if len(res.Vectors) != 1 {
			return nil, fmt.Errorf("gemini: embedContent answer with %d vectors", len(res.Vectors))
		}
		return json.Marshal(map[string]values{"embedding": {res.Vectors[0]}})
	}
	vs := make([]values, len(res.Vectors))
	for i, v := range res.Vectors {
		vs[i] = values{v}
	}
	return json.Marshal(map[string][]values{"embeddings": vs})
}

// ServerModel is one entry of a model list (GET /v1beta/models).
type ServerModel struct {
	// ID is the model's name without "models/" (it may hold a slash:
	// "openai/gpt-4.1-mini").
	ID, DisplayName                   string
	InputTokenLimit, OutputTokenLimit int
	// Methods are its supportedGenerationMethods (generateContent,
	// streamGenerateContent, embedContent, ...).
	Methods []string
}

type serverModel struct {
	Name                       string   `json:"name"`
	DisplayName                string   `json:"displayName"`
	InputTokenLimit            int      `json:"inputTokenLimit,omitempty"`
	OutputTokenLimit           int      `json:"outputTokenLimit,omitempty"`
	SupportedGenerationMethods []string `json:"supportedGenerationMethods"`
}

func serverModelOf(m ServerModel) serverModel {
	name := m.DisplayName
	if name == "" {
		name = m.ID
	}
	methods := m.Methods
	if methods == nil {
		methods = []string{}
	}
	return serverModel{Name: "models/" + m.ID, DisplayName: name, InputTokenLimit: m.InputTokenLimit, OutputTokenLimit: m.OutputTokenLimit, SupportedGenerationMethods: methods}
}

// EncodeServerModels encodes a page of GET /v1beta/models as the Gemini
// API answers it: {"models":[{name:"models/...", displayName,
// inputTokenLimit, outputTokenLimit, supportedGenerationMethods}],
// "nextPageToken"} (no token on the last page).
func EncodeServerModels(page []ServerModel, nextPageToken string) ([]byte, error) {
	data := make([]serverModel, len(page))
	for i, m := range page {
		data[i] = serverModelOf(m)
	}
	return json.Marshal(struct {
		Models        []serverModel `json:"models"`
		NextPageToken string        `json:"nextPageToken,omitempty"`
	}{data, nextPageToken})
}

// EncodeServerModel encodes GET /v1beta/models/{model}.
func EncodeServerModel(m ServerModel) ([]byte, error) { return json.Marshal(serverModelOf(m)) }

// EmbedFields are the fields of an embedContent request (and of each item
// of batchEmbedContents): model and content are the request, a field not
// named here is passed through to a Gemini upstream (taskType, title).
var EmbedFields = []llm.WireField{
	{Name: "model", Class: llm.FieldServed, Note: "the path's"},
	{Name: "content", Class: llm.FieldMapped, Note: "text parts"},
	{Name: "outputDimensionality", Class: llm.FieldMapped, Note: "OpenAI dimensions"},
	{Name: "taskType", Class: llm.FieldPassthrough, Note: ""},
	{Name: "title", Class: llm.FieldPassthrough, Note: ""},
}

var embedFields = wire.NewClassified(EmbedFields)

func mustJSON(e *llm.Extra) string {
	if e == nil {
		return "none"
	}
	b, _ := json.Marshal(e.Fields)
	return string(b)
}
