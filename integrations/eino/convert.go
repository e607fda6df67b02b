package eino

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/schema"

	"github.com/chorusrt/chorus/llm"
)

// ExtraReplay is the key, in an assistant message's Extra, of the data that
// replays the answer to the provider on the next turn: signed thinking
// blocks and per-call signatures (Gemini thought signatures), as JSON text.
// The adapter sets it on the answers it returns and reads it back from the
// history.
const ExtraReplay = "chorus_replay"

// ExtraRefusal is the key, in an assistant message's Extra, of a safety
// refusal's text. The text is also the message's Content, since eino has
// no refusal field.
const ExtraRefusal = "chorus_refusal"

// replay is the JSON carried under ExtraReplay.
type replay struct {
	Thinking []llm.ThinkingBlock `json:"thinking,omitempty"`
	// Signatures are the tool calls' signatures, by position in ToolCalls.
	Signatures []string `json:"tool_signatures,omitempty"`
}

// UnsupportedError reports a part of an eino message that Chorus cannot
// express. What names it: a role, a part type, a field.
type UnsupportedError struct {
	// Message is the position of the message in the input.
	Message int
	What    string
}

// Error names the message and what in it has no Chorus equivalent.
func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("eino: message %d: %s has no Chorus equivalent", e.Message, e.What)
}

// widen converts an eino float32 to the float64 it was written as (0.7,
// not 0.699999988).
func widen(f float32) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(float64(f), 'g', -1, 32), 64)
	return v
}

func convertTools(tools []*schema.ToolInfo) ([]llm.Tool, error) {
	if len(tools) == 0 {
		return nil, nil
	}
	out := make([]llm.Tool, 0, len(tools))
	for _, t := range tools {
		if t == nil || t.Name == "" {
			return nil, fmt.Errorf("eino: a tool without a name")
		}
		lt := llm.Tool{Name: t.Name, Description: t.Desc}
		if t.ParamsOneOf != nil {
			s, err := t.ParamsOneOf.ToJSONSchema()
			if err != nil {
				return nil, fmt.Errorf("eino: tool %s parameters: %w", t.Name, err)
			}
			if s != nil {
				b, err := json.Marshal(s)
				if err != nil {
					return nil, fmt.Errorf("eino: tool %s parameters: %w", t.Name, err)
				}
				lt.Parameters = b
			}
		}
		out = append(out, lt)
	}
	return out, nil
}

func convertMessages(in []*schema.Message) ([]llm.Message, error) {
	out := make([]llm.Message, 0, len(in))
	for i, m := range in {
		if m == nil {
			return nil, &UnsupportedError{Message: i, What: "a nil message"}
		}
		lm, err := convertMessage(i, m)
		if err != nil {
			return nil, err
		}
		out = append(out, lm)
	}
	return out, nil
}

func convertMessage(i int, m *schema.Message) (llm.Message, error) {
	lm := llm.Message{Content: m.Content}
	switch m.Role {
	case schema.System:
		lm.Role = llm.RoleSystem
	case schema.User:
		lm.Role = llm.RoleUser
	case schema.Assistant:
		lm.Role = llm.RoleAssistant
	case schema.Tool:
		lm.Role = llm.RoleTool
		lm.ToolCallID = m.ToolCallID
		lm.ToolName = m.ToolName
	default:
		return lm, &UnsupportedError{Message: i, What: fmt.Sprintf("role %q", string(m.Role))}
	}
	for _, p := range m.MultiContent {
		lp, err := chatPart(i, p)
		if err != nil {
			return lm, err
		}
		lm.Parts = append(lm.Parts, lp)
	}
	for _, p := range m.UserInputMultiContent {
		lp, err := inputPart(i, p)
		if err != nil {
			return lm, err
		}
		lm.Parts = append(lm.Parts, lp)
	}
	for _, p := range m.AssistantGenMultiContent {
		lp, err := outputPart(i, p)
		if err != nil {
			return lm, err
		}
		lm.Parts = append(lm.Parts, lp)
	}
	if lm.Role == llm.RoleTool && hasMedia(lm.Parts) {
		return lm, &UnsupportedError{Message: i, What: "a tool result with non-text parts"}
	}
	if lm.Role != llm.RoleAssistant {
		if len(m.ToolCalls) > 0 {
			return lm, &UnsupportedError{Message: i, What: "tool calls on a " + string(m.Role) + " message"}
		}
		if m.ReasoningContent != "" {
			return lm, &UnsupportedError{Message: i, What: "reasoning content on a " + string(m.Role) + " message"}
		}
		return lm, nil
	}
	lm.Reasoning = m.ReasoningContent
	for _, tc := range m.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			return lm, &UnsupportedError{Message: i, What: fmt.Sprintf("tool call type %q", tc.Type)}
		}
		lm.ToolCalls = append(lm.ToolCalls, llm.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	if r, ok := m.Extra[ExtraReplay].(string); ok && r != "" {
		var rp replay
		if err := json.Unmarshal([]byte(r), &rp); err != nil {
			return lm, fmt.Errorf("eino: message %d: Extra[%s]: %w", i, ExtraReplay, err)
		}
		lm.ThinkingBlocks = rp.Thinking
		for j := range lm.ToolCalls {
			if j < len(rp.Signatures) {
				lm.ToolCalls[j].Signature = rp.Signatures[j]
			}
		}
	}
	return lm, nil
}

func hasMedia(parts []llm.Part) bool {
	for _, p := range parts {
		if p.Type != llm.PartText {
			return true
		}
	}
	return false
}

// media builds an image or document part from a URL (a data: URL is
// decoded inline) or base64 data.
func media(i int, typ llm.PartType, url, b64 *string, mime string) (llm.Part, error) {
	switch {
	case b64 != nil && *b64 != "":
		data, err := base64.StdEncoding.DecodeString(*b64)
		if err != nil {
			return llm.Part{}, fmt.Errorf("eino: message %d: %s data: %w", i, typ, err)
		}
		return llm.Part{Type: typ, MIMEType: mime, Data: data}, nil
	case url != nil && strings.HasPrefix(*url, "data:"):
		head, payload, ok := strings.Cut(strings.TrimPrefix(*url, "data:"), ",")
		if !ok || !strings.HasSuffix(head, ";base64") {
			return llm.Part{}, fmt.Errorf("eino: message %d: %s data URL is not base64", i, typ)
		}
		data, err := base64.StdEncoding.DecodeString(payload)
		if err != nil {
			return llm.Part{}, fmt.Errorf("eino: message %d: %s data URL: %w", i, typ, err)
		}
		return llm.Part{Type: typ, MIMEType: strings.TrimSuffix(head, ";base64"), Data: data}, nil
	case url != nil && *url != "":
		if typ == llm.PartDocument {
			return llm.Part{}, &UnsupportedError{Message: i, What: "a file by URL (Chorus sends documents inline)"}
		}
		return llm.Part{Type: typ, URL: *url, MIMEType: mime}, nil
	}
	return llm.Part{}, fmt.Errorf("eino: message %d: %s part with neither URL nor data", i, typ)
}

func document(i int, url, b64 *string, mime string) (llm.Part, error) {
	if mime != "" && mime != "application/pdf" {
		return llm.Part{}, &UnsupportedError{Message: i, What: fmt.Sprintf("a file of type %q (Chorus documents are PDF)", mime)}
	}
	p, err := media(i, llm.PartDocument, url, b64, "application/pdf")
	if err == nil && p.MIMEType != "application/pdf" {
		return llm.Part{}, &UnsupportedError{Message: i, What: fmt.Sprintf("a file of type %q (Chorus documents are PDF)", p.MIMEType)}
	}
	return p, err
}

func inputPart(i int, p schema.MessageInputPart) (llm.Part, error) {
	switch p.Type {
	case schema.ChatMessagePartTypeText:
		return llm.TextPart(p.Text), nil
	case schema.ChatMessagePartTypeImageURL:
		if p.Image == nil {
			return llm.Part{}, fmt.Errorf("eino: message %d: image part without an image", i)
		}
		return media(i, llm.PartImage, p.Image.URL, p.Image.Base64Data, p.Image.MIMEType)
	case schema.ChatMessagePartTypeFileURL:
		if p.File == nil {
			return llm.Part{}, fmt.Errorf("eino: message %d: file part without a file", i)
		}
		return document(i, p.File.URL, p.File.Base64Data, p.File.MIMEType)
	}
	return llm.Part{}, &UnsupportedError{Message: i, What: fmt.Sprintf("part type %q", string(p.Type))}
}

func outputPart(i int, p schema.MessageOutputPart) (llm.Part, error) {
	switch p.Type {
	case schema.ChatMessagePartTypeText:
		return llm.TextPart(p.Text), nil
	case schema.ChatMessagePartTypeImageURL:
		if p.Image == nil {
			return llm.Part{}, fmt.Errorf("eino: message %d: image part without an image", i)
		}
		return media(i, llm.PartImage, p.Image.URL, p.Image.Base64Data, p.Image.MIMEType)
	}
	return llm.Part{}, &UnsupportedError{Message: i, What: fmt.Sprintf("assistant part type %q", string(p.Type))}
}

func chatPart(i int, p schema.ChatMessagePart) (llm.Part, error) {
	switch p.Type {
	case schema.ChatMessagePartTypeText:
		return llm.TextPart(p.Text), nil
	case schema.ChatMessagePartTypeImageURL:
		if p.ImageURL == nil {
			return llm.Part{}, fmt.Errorf("eino: message %d: image part without an image", i)
		}
		return media(i, llm.PartImage, &p.ImageURL.URL, nil, p.ImageURL.MIMEType)
	case schema.ChatMessagePartTypeFileURL:
		if p.FileURL == nil {
			return llm.Part{}, fmt.Errorf("eino: message %d: file part without a file", i)
		}
		return document(i, &p.FileURL.URL, nil, p.FileURL.MIMEType)
	}
	return llm.Part{}, &UnsupportedError{Message: i, What: fmt.Sprintf("part type %q", string(p.Type))}
}

// usage maps Chorus usage onto eino's OpenAI-shaped counts: eino's prompt
// tokens are all input, cached included.
func usage(u llm.Usage) *schema.TokenUsage {
	return &schema.TokenUsage{
		PromptTokens:            u.InputTokens(),
		PromptTokenDetails:      schema.PromptTokenDetails{CachedTokens: u.CacheReadTokens},
		CompletionTokens:        u.CompletionTokens,
		TotalTokens:             u.TotalTokens(),
		CompletionTokensDetails: schema.CompletionTokensDetails{ReasoningTokens: u.ReasoningTokens},
	}
}

func callbackUsage(u llm.Usage) *model.TokenUsage {
	return &model.TokenUsage{
		PromptTokens:            u.InputTokens(),
		PromptTokenDetails:      model.PromptTokenDetails{CachedTokens: u.CacheReadTokens},
		CompletionTokens:        u.CompletionTokens,
		TotalTokens:             u.TotalTokens(),
		CompletionTokensDetails: model.CompletionTokensDetails{ReasoningTokens: u.ReasoningTokens},
	}
}

// resultMessage is a buffered answer as one eino message.
func resultMessage(res *llm.ChatResult) *schema.Message {
	m := &schema.Message{
		Role:             schema.Assistant,
		Content:          res.Content + res.Refusal,
		ReasoningContent: res.Reasoning,
	}
	for i, tc := range res.ToolCalls {
		m.ToolCalls = append(m.ToolCalls, schema.ToolCall{Index: llm.Ptr(i), ID: tc.ID, Type: "function",
			Function: schema.FunctionCall{Name: tc.Name, Arguments: tc.Arguments}})
	}
	for _, img := range res.Images {
		m.AssistantGenMultiContent = append(m.AssistantGenMultiContent, imageOut(img))
	}
	setMeta(m, res)
	return m
}

func imageOut(p llm.Part) schema.MessageOutputPart {
	c := schema.MessagePartCommon{MIMEType: p.MIMEType}
	if len(p.Data) > 0 {
		c.Base64Data = llm.Ptr(base64.StdEncoding.EncodeToString(p.Data))
	} else {
		c.URL = llm.Ptr(p.URL)
	}
	return schema.MessageOutputPart{Type: schema.ChatMessagePartTypeImageURL, Image: &schema.MessageOutputImage{MessagePartCommon: c}}
}

// setMeta puts the finish reason, usage, refusal and replay data on m.
func setMeta(m *schema.Message, res *llm.ChatResult) {
	m.ResponseMeta = &schema.ResponseMeta{FinishReason: string(res.FinishReason), Usage: usage(res.Usage)}
	var rp replay
	rp.Thinking = res.ThinkingBlocks
	for i, tc := range res.ToolCalls {
		if tc.Signature != "" {
			if rp.Signatures == nil {
				rp.Signatures = make([]string, len(res.ToolCalls))
			}
			rp.Signatures[i] = tc.Signature
		}
	}
	if len(rp.Thinking) > 0 || rp.Signatures != nil {
		b, _ := json.Marshal(rp)
		m.Extra = map[string]any{ExtraReplay: string(b)}
	}
	if res.Refusal != "" {
		if m.Extra == nil {
			m.Extra = map[string]any{}
		}
		m.Extra[ExtraRefusal] = res.Refusal
	}
}

// eventChunk is one Chorus delta as an eino chunk; usage and finish events
// are left to the final chunk.
func eventChunk(ev llm.Event) *schema.Message {
	switch ev.Type {
	case llm.EventText, llm.EventRefusal:
		return &schema.Message{Role: schema.Assistant, Content: ev.Text}
	case llm.EventReasoning:
		return &schema.Message{Role: schema.Assistant, ReasoningContent: ev.Text}
	case llm.EventToolCallStart:
		return &schema.Message{Role: schema.Assistant, ToolCalls: []schema.ToolCall{{Index: llm.Ptr(ev.ToolIndex),
			ID: ev.ToolCallID, Type: "function", Function: schema.FunctionCall{Name: ev.ToolName, Arguments: ev.Text}}}}
	case llm.EventToolCallDelta:
		return &schema.Message{Role: schema.Assistant, ToolCalls: []schema.ToolCall{{Index: llm.Ptr(ev.ToolIndex),
			Function: schema.FunctionCall{Arguments: ev.Text}}}}
	}
	return nil
}

// finalChunk ends a stream: no content, the finish reason, the usage, the
// refusal marker and the replay data.
func finalChunk(res *llm.ChatResult) *schema.Message {
	m := &schema.Message{Role: schema.Assistant}
	for _, img := range res.Images {
		m.AssistantGenMultiContent = append(m.AssistantGenMultiContent, imageOut(img))
	}
	setMeta(m, res)
	return m
}
