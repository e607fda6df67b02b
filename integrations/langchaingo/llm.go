package langchaingo

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/tmc/langchaingo/llms"

	"github.com/chorusrt/chorus/llm"
)

// Client is what an LLM calls: *runtime.Runtime and *providers.Client both
// satisfy it.
type Client interface {
	Chat(ctx context.Context, req *llm.ChatRequest) (*llm.ChatResult, error)
	Stream(ctx context.Context, req *llm.ChatRequest) (*llm.Stream, error)
}

// Config is an LLM's defaults. Model is required; the call options
// override the other fields.
type Config struct {
	// Model is what the Client serves: "provider/model" or a runtime alias.
	Model       string
	MaxTokens   int
	Temperature *float64
	// Reasoning, when set, asks for model thinking on every call.
	Reasoning *llm.Reasoning
}

// LLM is a LangChainGo llms.Model whose calls go through a Chorus Client.
// It is safe for concurrent use.
type LLM struct {
	client Client
	cfg    Config
}

var (
	_ llms.Model          = (*LLM)(nil)
	_ llms.ReasoningModel = (*LLM)(nil)
)

// New returns an LLM calling c with cfg's defaults.
func New(c Client, cfg Config) (*LLM, error) {
	if c == nil {
		return nil, errors.New("langchaingo: nil Client")
	}
	if cfg.Model == "" {
		return nil, errors.New("langchaingo: Config.Model is empty")
	}
	return &LLM{client: c, cfg: cfg}, nil
}

// SupportsReasoning reports true: Chorus maps reasoning controls onto every
// wire format that has them (llms.ReasoningModel).
func (m *LLM) SupportsReasoning() bool { return true }

// Call sends one human prompt and returns the answer's text.
func (m *LLM) Call(ctx context.Context, prompt string, options ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, m, prompt, options...)
}

// GenerateContent sends messages and returns one choice. With a
// StreamingFunc or a StreamingReasoningFunc the call streams: text deltas
// go to StreamingFunc, reasoning and text deltas to StreamingReasoningFunc
// (as LangChainGo's own plugins do), and an error from either stops the
// call and is returned.
func (m *LLM) GenerateContent(ctx context.Context, messages []llms.MessageContent, options ...llms.CallOption) (*llms.ContentResponse, error) {
	opts := llms.CallOptions{}
	for _, o := range options {
		o(&opts)
	}
	req, err := m.request(messages, &opts)
	if err != nil {
		return nil, err
	}
	if opts.StreamingFunc == nil && opts.StreamingReasoningFunc == nil {
		res, err := m.client.Chat(ctx, req)
		if err != nil {
			return nil, err
		}
		return response(res), nil
	}
	s, err := m.client.Stream(ctx, req)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	for ev, err := range s.All() {
		if err != nil {
			return nil, err
		}
		if err := deliver(ctx, &opts, ev); err != nil {
			return nil, err
		}
	}
	res, err := s.Result()
	if err != nil {
		return nil, err
	}
	return response(res), nil
}

func deliver(ctx context.Context, o *llms.CallOptions, ev llm.Event) error {
	switch ev.Type {
	case llm.EventText, llm.EventRefusal:
		if o.StreamingFunc != nil {
			if err := o.StreamingFunc(ctx, []byte(ev.Text)); err != nil {
				return fmt.Errorf("langchaingo: streaming func: %w", err)
			}
		}
		if o.StreamingReasoningFunc != nil {
			if err := o.StreamingReasoningFunc(ctx, nil, []byte(ev.Text)); err != nil {
				return fmt.Errorf("langchaingo: streaming reasoning func: %w", err)
			}
		}
	case llm.EventReasoning:
		if o.StreamingReasoningFunc != nil {
			if err := o.StreamingReasoningFunc(ctx, []byte(ev.Text), nil); err != nil {
				return fmt.Errorf("langchaingo: streaming reasoning func: %w", err)
			}
		}
	}
	return nil
}

// UnsupportedError reports a message, part or option that Chorus cannot
// express. What names it.
type UnsupportedError struct {
	// Message is the position of the message in the input, or -1 for an
	// option.
	Message int
	What    string
}

// Error names the message and what in it has no Chorus equivalent.
func (e *UnsupportedError) Error() string {
	if e.Message < 0 {
		return fmt.Sprintf("langchaingo: option %s has no Chorus equivalent", e.What)
	}
	return fmt.Sprintf("langchaingo: message %d: %s has no Chorus equivalent", e.Message, e.What)
}

// metaRequest is the Metadata key under which WithRequest keeps its edits.
const metaRequest = "chorus.request"

// WithRequest edits the Chorus request last, after every other option, for
// what LangChainGo's options do not name (a response schema, prompt
// caching, a temperature of exactly 0, ...).
func WithRequest(f func(*llm.ChatRequest)) llms.CallOption {
	return func(o *llms.CallOptions) {
		if o.Metadata == nil {
			o.Metadata = map[string]any{}
		}
		edits, _ := o.Metadata[metaRequest].([]func(*llm.ChatRequest))
		o.Metadata[metaRequest] = append(edits, f)
	}
}

func (m *LLM) request(messages []llms.MessageContent, o *llms.CallOptions) (*llm.ChatRequest, error) {
	req := &llm.ChatRequest{Model: m.cfg.Model, MaxTokens: m.cfg.MaxTokens, Temperature: m.cfg.Temperature}
	if m.cfg.Reasoning != nil {
		r := *m.cfg.Reasoning
		req.Reasoning = &r
	}
	switch {
	case o.CandidateCount > 1 || o.N > 1:
		return nil, &UnsupportedError{Message: -1, What: "CandidateCount/N above 1 (Chorus returns one choice)"}
	case o.TopK != 0:
		return nil, &UnsupportedError{Message: -1, What: "TopK"}
	case o.MinLength != 0 || o.MaxLength != 0:
		return nil, &UnsupportedError{Message: -1, What: "MinLength/MaxLength"}
	case o.RepetitionPenalty != 0 || o.FrequencyPenalty != 0 || o.PresencePenalty != 0:
		return nil, &UnsupportedError{Message: -1, What: "a repetition, frequency or presence penalty"}
	}
	if o.Model != "" {
		req.Model = o.Model
	}
	if o.MaxTokens != 0 {
		req.MaxTokens = o.MaxTokens
	}
	if o.Temperature != 0 {
		req.Temperature = llm.Ptr(o.Temperature)
	}
	if o.TopP != 0 {
		req.TopP = llm.Ptr(o.TopP)
	}
	if o.Seed != 0 {
		req.Seed = llm.Ptr(int64(o.Seed))
	}
	req.Stop = append([]string(nil), o.StopWords...)
	if o.JSONMode || o.ResponseMIMEType == "application/json" {
		req.ResponseFormat = &llm.ResponseFormat{Type: llm.ResponseJSONObject}
	} else if o.ResponseMIMEType != "" && o.ResponseMIMEType != "text/plain" {
		return nil, &UnsupportedError{Message: -1, What: fmt.Sprintf("ResponseMIMEType %q", o.ResponseMIMEType)}
	}
	if tc := llms.GetThinkingConfig(o); tc != nil {
		r, err := reasoning(tc)
		if err != nil {
			return nil, err
		}
		if r != nil {
			req.Reasoning = r
		}
	}
	tools, err := convertTools(o)
	if err != nil {
		return nil, err
	}
	req.Tools = tools
	if req.ToolChoice, err = toolChoice(o); err != nil {
		return nil, err
	}
	if req.Messages, err = convertMessages(messages); err != nil {
		return nil, err
	}
	if edits, ok := o.Metadata[metaRequest].([]func(*llm.ChatRequest)); ok {
		for _, e := range edits {
			e(req)
		}
	}
	return req, nil
}

func reasoning(tc *llms.ThinkingConfig) (*llm.Reasoning, error) {
	r := &llm.Reasoning{BudgetTokens: tc.BudgetTokens, IncludeThoughts: tc.ReturnThinking || tc.StreamThinking}
	switch tc.Mode {
	case llms.ThinkingModeNone:
		r.Effort = llm.EffortNone
	case llms.ThinkingModeLow:
		r.Effort = llm.EffortLow
	case llms.ThinkingModeMedium:
		r.Effort = llm.EffortMedium
	case llms.ThinkingModeHigh:
		r.Effort = llm.EffortHigh
	case llms.ThinkingModeAuto, "":
		if r.BudgetTokens == 0 && !r.IncludeThoughts {
			return nil, nil
		}
	default:
		return nil, &UnsupportedError{Message: -1, What: fmt.Sprintf("thinking mode %q", tc.Mode)}
	}
	return r, nil
}

func convertTools(o *llms.CallOptions) ([]llm.Tool, error) {
	var out []llm.Tool
	add := func(f *llms.FunctionDefinition) error {
		if f == nil || f.Name == "" {
			return errors.New("langchaingo: a tool without a function name")
		}
		t := llm.Tool{Name: f.Name, Description: f.Description, Strict: f.Strict}
		if f.Parameters != nil {
			b, err := json.Marshal(f.Parameters)
			if err != nil {
				return fmt.Errorf("langchaingo: tool %s parameters: %w", f.Name, err)
			}
			t.Parameters = b
		}
		out = append(out, t)
		return nil
	}
	for _, t := range o.Tools {
		if t.Type != "" && t.Type != "function" {
			return nil, &UnsupportedError{Message: -1, What: fmt.Sprintf("tool type %q", t.Type)}
		}
		if err := add(t.Function); err != nil {
			return nil, err
		}
	}
	for i := range o.Functions {
		if err := add(&o.Functions[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func toolChoice(o *llms.CallOptions) (llm.ToolChoice, error) {
	mode := func(s string) (llm.ToolChoice, error) {
		switch s {
		case "":
			return llm.ToolChoice{}, nil
		case "auto":
			return llm.ToolChoice{Mode: llm.ToolChoiceAuto}, nil
		case "none":
			return llm.ToolChoice{Mode: llm.ToolChoiceNone}, nil
		case "required", "any":
			return llm.ToolChoice{Mode: llm.ToolChoiceRequired}, nil
		}
		return llm.ToolChoice{}, &UnsupportedError{Message: -1, What: fmt.Sprintf("tool choice %q", s)}
	}
	switch c := o.ToolChoice.(type) {
	case nil:
		return mode(string(o.FunctionCallBehavior))
	case string:
		return mode(c)
	case llms.ToolChoice:
		return namedChoice(&c)
	case *llms.ToolChoice:
		return namedChoice(c)
	}
	return llm.ToolChoice{}, &UnsupportedError{Message: -1, What: fmt.Sprintf("tool choice of type %T", o.ToolChoice)}
}

func namedChoice(c *llms.ToolChoice) (llm.ToolChoice, error) {
	if c == nil {
		return llm.ToolChoice{}, nil
	}
	if c.Function != nil && c.Function.Name != "" {
		return llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: c.Function.Name}, nil
	}
	switch c.Type {
	case "", "auto":
		return llm.ToolChoice{Mode: llm.ToolChoiceAuto}, nil
	case "none":
		return llm.ToolChoice{Mode: llm.ToolChoiceNone}, nil
	case "required", "any":
		return llm.ToolChoice{Mode: llm.ToolChoiceRequired}, nil
	}
	return llm.ToolChoice{}, &UnsupportedError{Message: -1, What: fmt.Sprintf("tool choice %q", c.Type)}
}

func convertMessages(in []llms.MessageContent) ([]llm.Message, error) {
	out := make([]llm.Message, 0, len(in))
	for i, mc := range in {
		var role llm.Role
		switch mc.Role {
		case llms.ChatMessageTypeSystem:
			role = llm.RoleSystem
		case llms.ChatMessageTypeHuman, llms.ChatMessageTypeGeneric:
			role = llm.RoleUser
		case llms.ChatMessageTypeAI:
			role = llm.RoleAssistant
		case llms.ChatMessageTypeTool, llms.ChatMessageTypeFunction:
			role = llm.RoleTool
		default:
			return nil, &UnsupportedError{Message: i, What: fmt.Sprintf("role %q", string(mc.Role))}
		}
		if role == llm.RoleTool {
			msgs, err := toolResults(i, mc.Parts)
			if err != nil {
				return nil, err
			}
			out = append(out, msgs...)
			continue
		}
		m := llm.Message{Role: role}
		var text, sigs []string
		media := false
		for _, p := range mc.Parts {
			switch p := p.(type) {
			case llms.TextContent:
				text = append(text, p.Text)
				m.Parts = append(m.Parts, llm.TextPart(p.Text))
			case llms.ImageURLContent:
				lp, err := imageURL(i, p.URL)
				if err != nil {
					return nil, err
				}
				m.Parts = append(m.Parts, lp)
				media = true
			case llms.BinaryContent:
				lp, err := binary(i, p)
				if err != nil {
					return nil, err
				}
				m.Parts = append(m.Parts, lp)
				media = true
			case llms.ToolCall:
				if role != llm.RoleAssistant {
					return nil, &UnsupportedError{Message: i, What: "a tool call in a " + string(mc.Role) + " message"}
				}
				if p.Type != "" && p.Type != "function" {
					return nil, &UnsupportedError{Message: i, What: fmt.Sprintf("tool call type %q", p.Type)}
				}
				tc := llm.ToolCall{ID: p.ID}
				if p.FunctionCall != nil {
					tc.Name, tc.Arguments = p.FunctionCall.Name, replayedArguments(p.FunctionCall.Arguments)
				}
				m.ToolCalls = append(m.ToolCalls, tc)
			case Replay:
				if role != llm.RoleAssistant {
					return nil, &UnsupportedError{Message: i, What: "replay data in a " + string(mc.Role) + " message"}
				}
				m.Reasoning, m.ThinkingBlocks = p.Reasoning, p.Thinking
				sigs = p.Signatures
			case llms.ToolCallResponse:
				return nil, &UnsupportedError{Message: i, What: "a tool result in a " + string(mc.Role) + " message"}
			default:
				return nil, &UnsupportedError{Message: i, What: fmt.Sprintf("part type %T", p)}
			}
		}
		for j, sig := range sigs {
			if j < len(m.ToolCalls) {
				m.ToolCalls[j].Signature = sig
			}
		}
		if !media {
			m.Parts = nil
			m.Content = strings.Join(text, "")
		}
		out = append(out, m)
	}
	return out, nil
}

func toolResults(i int, parts []llms.ContentPart) ([]llm.Message, error) {
	var out []llm.Message
	for _, p := range parts {
		r, ok := p.(llms.ToolCallResponse)
		if !ok {
			return nil, &UnsupportedError{Message: i, What: fmt.Sprintf("part type %T in a tool message", p)}
		}
		out = append(out, llm.Message{Role: llm.RoleTool, ToolCallID: r.ToolCallID, ToolName: r.Name, Content: r.Content})
	}
	if len(out) == 0 {
		return nil, &UnsupportedError{Message: i, What: "a tool message without a tool result"}
	}
	return out, nil
}

func imageURL(i int, url string) (llm.Part, error) {
	if !strings.HasPrefix(url, "data:") {
		return llm.ImageURLPart(url), nil
	}
	head, payload, ok := strings.Cut(strings.TrimPrefix(url, "data:"), ",")
	if !ok || !strings.HasSuffix(head, ";base64") {
		return llm.Part{}, fmt.Errorf("langchaingo: message %d: image data URL is not base64", i)
	}
	data, err := base64.StdEncoding.DecodeString(payload)
	if err != nil {
		return llm.Part{}, fmt.Errorf("langchaingo: message %d: image data URL: %w", i, err)
	}
	return llm.ImagePart(strings.TrimSuffix(head, ";base64"), data), nil
}

func binary(i int, b llms.BinaryContent) (llm.Part, error) {
	switch {
	case strings.HasPrefix(b.MIMEType, "image/"):
		return llm.ImagePart(b.MIMEType, b.Data), nil
	case b.MIMEType == "application/pdf":
		return llm.DocumentPart(b.Data), nil
	}
	return llm.Part{}, &UnsupportedError{Message: i, What: fmt.Sprintf("binary content of type %q (Chorus takes images and PDF)", b.MIMEType)}
}

// replayedArguments returns a replayed call's arguments as JSON. LangChainGo's
// functions agent declares one string argument, __arg1, unwraps it from
// the model's call and replays the bare string; arguments that are not a
// JSON object are wrapped back as {"__arg1": ...}, which is what the model
// sent (every Chorus format requires an object).
func replayedArguments(args string) string {
	var obj map[string]json.RawMessage
	if args == "" || json.Unmarshal([]byte(args), &obj) == nil {
		return args
	}
	b, _ := json.Marshal(map[string]string{"__arg1": args})
	return string(b)
}
