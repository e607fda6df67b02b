package genkit

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/firebase/genkit/go/ai"

	"github.com/chorusrt/chorus/llm"
)

// Config is the model config the plugin reads from a Genkit request
// (ai.WithConfig). Its JSON names are ai.GenerationCommonConfig's, so a
// *ai.GenerationCommonConfig, a Config, a *Config or the same fields as a
// map all work; a field it does not know is an error, not ignored.
type Config struct {
	MaxOutputTokens int      `json:"maxOutputTokens,omitempty"`
	StopSequences   []string `json:"stopSequences,omitempty"`
	Temperature     *float64 `json:"temperature,omitempty"`
	TopP            *float64 `json:"topP,omitempty"`
	// TopK and Version are ai.GenerationCommonConfig fields Chorus has no
	// equivalent for; a non-zero value is an error.
	TopK    int    `json:"topK,omitempty"`
	Version string `json:"version,omitempty"`

	// Chorus's own settings.
	Seed              *int64            `json:"seed,omitempty"`
	ParallelToolCalls *bool             `json:"parallelToolCalls,omitempty"`
	Reasoning         *llm.Reasoning    `json:"reasoning,omitempty"`
	Cache             *llm.PromptCache  `json:"cache,omitempty"`
	Headers           map[string]string `json:"headers,omitempty"`
}

// Metadata keys the plugin sets on the parts it returns and reads back
// from the history.
const (
	// MetaThinking, on a reasoning part, is one signed thinking block
	// (llm.ThinkingBlock as JSON text), replayed to the format that made it.
	MetaThinking = "chorusThinking"
	// MetaSignature, on a tool request part, is the call's signature
	// (Gemini's thought signature).
	MetaSignature = "chorusSignature"
)

// UnsupportedError reports a part of a Genkit request that Chorus cannot
// express. What names it.
type UnsupportedError struct {
	// Message is the message's position, or -1 for the request itself.
	Message int
	What    string
}

// Error names the message and what in it has no Chorus equivalent.
func (e *UnsupportedError) Error() string {
	if e.Message < 0 {
		return fmt.Sprintf("genkit: %s has no Chorus equivalent", e.What)
	}
	return fmt.Sprintf("genkit: message %d: %s has no Chorus equivalent", e.Message, e.What)
}

func config(raw any) (*Config, error) {
	var c Config
	if raw == nil {
		return &c, nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, fmt.Errorf("genkit: config: %w", err)
	}
	if string(b) == "null" {
		return &c, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, &UnsupportedError{Message: -1, What: fmt.Sprintf("config %s (%v)", b, err)}
	}
	if c.TopK != 0 {
		return nil, &UnsupportedError{Message: -1, What: "config topK"}
	}
	if c.Version != "" {
		return nil, &UnsupportedError{Message: -1, What: "config version (name the model instead)"}
	}
	return &c, nil
}

func request(model string, req *ai.ModelRequest) (*llm.ChatRequest, error) {
	c, err := config(req.Config)
	if err != nil {
		return nil, err
	}
	out := &llm.ChatRequest{
		Model: model, MaxTokens: c.MaxOutputTokens, Stop: c.StopSequences, Temperature: c.Temperature, TopP: c.TopP,
		Seed: c.Seed, ParallelToolCalls: c.ParallelToolCalls, Reasoning: c.Reasoning, Cache: c.Cache, Headers: c.Headers,
	}
	for _, t := range req.Tools {
		lt := llm.Tool{Name: t.Name, Description: t.Description}
		if len(t.InputSchema) > 0 {
			if lt.Parameters, err = json.Marshal(t.InputSchema); err != nil {
				return nil, fmt.Errorf("genkit: tool %s schema: %w", t.Name, err)
			}
		}
		out.Tools = append(out.Tools, lt)
	}
	switch req.ToolChoice {
	case "":
	case ai.ToolChoiceAuto:
		out.ToolChoice.Mode = llm.ToolChoiceAuto
	case ai.ToolChoiceNone:
		out.ToolChoice.Mode = llm.ToolChoiceNone
	case ai.ToolChoiceRequired:
		out.ToolChoice.Mode = llm.ToolChoiceRequired
	default:
		return nil, &UnsupportedError{Message: -1, What: fmt.Sprintf("tool choice %q", req.ToolChoice)}
	}
	if o := req.Output; o != nil && (o.Format == "json" || o.ContentType == "application/json") {
		if len(o.Schema) > 0 && o.Constrained {
			schema, err := json.Marshal(o.Schema)
			if err != nil {
				return nil, fmt.Errorf("genkit: output schema: %w", err)
			}
			out.ResponseFormat = &llm.ResponseFormat{Type: llm.ResponseJSONSchema, Name: "output", Schema: schema}
		} else {
			out.ResponseFormat = &llm.ResponseFormat{Type: llm.ResponseJSONObject}
		}
	}
	for i, m := range req.Messages {
		msgs, err := message(i, m)
		if err != nil {
			return nil, err
		}
		out.Messages = append(out.Messages, msgs...)
	}
	return out, nil
}

// message converts one Genkit message; a tool message with several
// responses becomes several Chorus tool messages.
func message(i int, m *ai.Message) ([]llm.Message, error) {
	if m == nil {
		return nil, &UnsupportedError{Message: i, What: "a nil message"}
	}
	switch m.Role {
	case ai.RoleTool:
		var out []llm.Message
		for _, p := range m.Content {
			if !p.IsToolResponse() {
				return nil, &UnsupportedError{Message: i, What: fmt.Sprintf("a %s part in a tool message", kind(p))}
			}
			content, err := toolOutput(i, p.ToolResponse)
			if err != nil {
				return nil, err
			}
			out = append(out, llm.Message{Role: llm.RoleTool, ToolCallID: p.ToolResponse.Ref, ToolName: p.ToolResponse.Name, Content: content})
		}
		return out, nil
	case ai.RoleSystem, ai.RoleUser, ai.RoleModel:
	default:
		return nil, &UnsupportedError{Message: i, What: fmt.Sprintf("role %q", m.Role)}
	}
	lm := llm.Message{Role: llm.RoleUser}
	switch m.Role {
	case ai.RoleSystem:
		lm.Role = llm.RoleSystem
	case ai.RoleModel:
		lm.Role = llm.RoleAssistant
	}
	var text []string
	media := false
	for _, p := range m.Content {
		switch {
		case p.IsText():
			text = append(text, p.Text)
			lm.Parts = append(lm.Parts, llm.TextPart(p.Text))
		case p.IsMedia():
			lp, err := mediaPart(i, p)
			if err != nil {
				return nil, err
			}
			lm.Parts = append(lm.Parts, lp)
			media = true
		case p.IsReasoning() && lm.Role == llm.RoleAssistant:
			lm.Reasoning += p.Text
			if s, ok := p.Metadata[MetaThinking].(string); ok && s != "" {
				var b llm.ThinkingBlock
				if err := json.Unmarshal([]byte(s), &b); err != nil {
					return nil, fmt.Errorf("genkit: message %d: reasoning metadata: %w", i, err)
				}
				lm.ThinkingBlocks = append(lm.ThinkingBlocks, b)
			}
		case p.IsToolRequest() && lm.Role == llm.RoleAssistant:
			args, err := json.Marshal(p.ToolRequest.Input)
			if err != nil {
				return nil, fmt.Errorf("genkit: message %d: tool request %s input: %w", i, p.ToolRequest.Name, err)
			}
			if p.ToolRequest.Input == nil {
				args = []byte("{}")
			}
			sig, _ := p.Metadata[MetaSignature].(string)
			lm.ToolCalls = append(lm.ToolCalls, llm.ToolCall{ID: p.ToolRequest.Ref, Name: p.ToolRequest.Name, Arguments: string(args), Signature: sig})
		default:
			return nil, &UnsupportedError{Message: i, What: fmt.Sprintf("a %s part in a %s message", kind(p), m.Role)}
		}
	}
	if !media {
		lm.Parts = nil
		lm.Content = strings.Join(text, "")
	}
	return []llm.Message{lm}, nil
}

func kind(p *ai.Part) string {
	switch {
	case p.IsText():
		return "text"
	case p.IsMedia():
		return "media"
	case p.IsData():
		return "data"
	case p.IsToolRequest():
		return "tool request"
	case p.IsToolResponse():
		return "tool response"
	case p.IsCustom():
		return "custom"
	case p.IsReasoning():
		return "reasoning"
	case p.IsResource():
		return "resource"
	}
	return fmt.Sprintf("kind-%d", p.Kind)
}

// toolOutput is a tool response as the text Chorus sends: a string output
// as is, anything else as JSON, followed by the text of its content parts.
func toolOutput(i int, r *ai.ToolResponse) (string, error) {
	var sb strings.Builder
	switch o := r.Output.(type) {
	case nil:
	case string:
		sb.WriteString(o)
	default:
		b, err := json.Marshal(o)
		if err != nil {
			return "", fmt.Errorf("genkit: message %d: tool %s output: %w", i, r.Name, err)
		}
		sb.Write(b)
	}
	for _, p := range r.Content {
		if !p.IsText() {
			return "", &UnsupportedError{Message: i, What: fmt.Sprintf("a %s part in tool %s's response", kind(p), r.Name)}
		}
		sb.WriteString(p.Text)
	}
	return sb.String(), nil
}

func mediaPart(i int, p *ai.Part) (llm.Part, error) {
	url, mime := p.Text, p.ContentType
	if strings.HasPrefix(url, "data:") {
		head, payload, ok := strings.Cut(strings.TrimPrefix(url, "data:"), ",")
		if !ok || !strings.HasSuffix(head, ";base64") {
			return llm.Part{}, fmt.Errorf("genkit: message %d: media data URL is not base64", i)
		}
		data, err := base64.StdEncoding.DecodeString(payload)
		if err != nil {
			return llm.Part{}, fmt.Errorf("genkit: message %d: media data URL: %w", i, err)
		}
		if m := strings.TrimSuffix(head, ";base64"); m != "" {
			mime = m
		}
		switch {
		case strings.HasPrefix(mime, "image/"):
			return llm.ImagePart(mime, data), nil
		case mime == "application/pdf":
			return llm.DocumentPart(data), nil
		}
		return llm.Part{}, &UnsupportedError{Message: i, What: fmt.Sprintf("media of type %q (Chorus takes images and PDF)", mime)}
	}
	if mime == "" || strings.HasPrefix(mime, "image/") {
		return llm.Part{Type: llm.PartImage, URL: url, MIMEType: mime}, nil
	}
	return llm.Part{}, &UnsupportedError{Message: i, What: fmt.Sprintf("media of type %q by URL (Chorus takes images by URL, PDF inline)", mime)}
}

// finish maps a Chorus finish reason onto Genkit's: a tool-call answer
// ends "stop" (Genkit reads the tool requests from the message).
func finish(r llm.FinishReason) ai.FinishReason {
	switch r {
	case llm.FinishStop, llm.FinishToolCalls:
		return ai.FinishReasonStop
	case llm.FinishLength:
		return ai.FinishReasonLength
	case llm.FinishContentFilter:
		return ai.FinishReasonBlocked
	}
	return ai.FinishReasonUnknown
}

func response(req *ai.ModelRequest, res *llm.ChatResult) *ai.ModelResponse {
	msg := &ai.Message{Role: ai.RoleModel}
	if len(res.ThinkingBlocks) > 0 {
		for _, b := range res.ThinkingBlocks {
			js, _ := json.Marshal(b)
			p := ai.NewReasoningPart(b.Text, []byte(b.Signature))
			p.Metadata[MetaThinking] = string(js)
			msg.Content = append(msg.Content, p)
		}
	} else if res.Reasoning != "" {
		msg.Content = append(msg.Content, ai.NewReasoningPart(res.Reasoning, nil))
	}
	if res.Content != "" {
		msg.Content = append(msg.Content, ai.NewTextPart(res.Content))
	}
	for _, img := range res.Images {
		if len(img.Data) > 0 {
			msg.Content = append(msg.Content, ai.NewMediaPart(img.MIMEType, "data:"+img.MIMEType+";base64,"+base64.StdEncoding.EncodeToString(img.Data)))
		} else {
			msg.Content = append(msg.Content, ai.NewMediaPart(img.MIMEType, img.URL))
		}
	}
	for _, tc := range res.ToolCalls {
		var input any
		if tc.Arguments != "" {
			if err := json.Unmarshal([]byte(tc.Arguments), &input); err != nil {
				input = tc.Arguments
			}
		}
		p := ai.NewToolRequestPart(&ai.ToolRequest{Name: tc.Name, Ref: tc.ID, Input: input})
		if tc.Signature != "" {
			p.Metadata = map[string]any{MetaSignature: tc.Signature}
		}
		msg.Content = append(msg.Content, p)
	}
	u := res.Usage
	out := &ai.ModelResponse{
		Message:      msg,
		Request:      req,
		FinishReason: finish(res.FinishReason),
		Usage: &ai.GenerationUsage{
			InputTokens:         u.InputTokens(),
			OutputTokens:        u.CompletionTokens,
			TotalTokens:         u.TotalTokens(),
			CachedContentTokens: u.CacheReadTokens,
			ThoughtsTokens:      u.ReasoningTokens,
			Custom: map[string]float64{
				"uncachedInputTokens": float64(u.PromptTokens),
				"cacheWriteTokens":    float64(u.CacheWriteTokens),
			},
		},
		Custom: map[string]any{"finishReason": string(res.FinishReason), "model": res.Model, "provider": res.Meta.Provider},
	}
	if res.Refusal != "" {
		out.FinishMessage = res.Refusal
	}
	return out
}
