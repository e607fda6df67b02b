package eino

import (
	"context"
	"errors"
	"fmt"

	"github.com/cloudwego/eino/callbacks"
	"github.com/cloudwego/eino/components"
	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/schema"

	"github.com/chorusrt/chorus/llm"
)

// Client is what a ChatModel calls: *runtime.Runtime and *providers.Client
// both satisfy it, as does any pipeline stage with the same two methods.
type Client interface {
	Chat(ctx context.Context, req *llm.ChatRequest) (*llm.ChatResult, error)
	Stream(ctx context.Context, req *llm.ChatRequest) (*llm.Stream, error)
}

// Config is a ChatModel's defaults. Model is required; the other fields
// are sent on every call unless an eino option overrides them.
type Config struct {
	// Model is what the Client serves: "provider/model" or a runtime alias.
	Model       string
	MaxTokens   int
	Temperature *float64
	TopP        *float64
	Stop        []string
	// Reasoning, when set, asks for model thinking on every call.
	Reasoning *llm.Reasoning
}

// ChatModel is an eino model.ToolCallingChatModel whose calls go through a
// Chorus Client. It is safe for concurrent use; WithTools returns a new
// ChatModel and never changes the one it is called on.
type ChatModel struct {
	client Client
	cfg    Config
	tools  []*schema.ToolInfo
	llmT   []llm.Tool
}

// Type is the component type a ChatModel reports to eino's callbacks.
const Type = "Chorus"

var (
	_ model.ToolCallingChatModel = (*ChatModel)(nil)
	_ components.Typer           = (*ChatModel)(nil)
	_ components.Checker         = (*ChatModel)(nil)
)

// New returns a ChatModel calling c with cfg's defaults.
func New(c Client, cfg Config) (*ChatModel, error) {
	if c == nil {
		return nil, errors.New("eino: nil Client")
	}
	if cfg.Model == "" {
		return nil, errors.New("eino: Config.Model is empty")
	}
	cfg.Stop = append([]string(nil), cfg.Stop...)
	return &ChatModel{client: c, cfg: cfg}, nil
}

// GetType reports "Chorus" as the component type (components.Typer).
func (m *ChatModel) GetType() string { return Type }

// IsCallbacksEnabled reports true: the ChatModel runs eino's callbacks
// itself, with model.CallbackInput and model.CallbackOutput
// (components.Checker).
func (m *ChatModel) IsCallbacksEnabled() bool { return true }

// WithTools returns a copy of m that offers tools to the model. m itself is
// not changed. A tool whose parameters cannot be rendered as JSON Schema is
// an error.
func (m *ChatModel) WithTools(tools []*schema.ToolInfo) (model.ToolCallingChatModel, error) {
	lt, err := convertTools(tools)
	if err != nil {
		return nil, err
	}
	c := *m
	c.tools = append([]*schema.ToolInfo(nil), tools...)
	c.llmT = lt
	return &c, nil
}

// Generate sends input in one buffered call and returns the assistant
// message.
func (m *ChatModel) Generate(ctx context.Context, input []*schema.Message, opts ...model.Option) (out *schema.Message, err error) {
	ctx = callbacks.EnsureRunInfo(ctx, m.GetType(), components.ComponentOfChatModel)
	req, cbIn, err := m.request(input, opts)
	ctx = callbacks.OnStart(ctx, cbIn)
	defer func() {
		if err != nil {
			callbacks.OnError(ctx, err)
		}
	}()
	if err != nil {
		return nil, err
	}
	res, err := m.client.Chat(ctx, req)
	if err != nil {
		return nil, err
	}
	out = resultMessage(res)
	callbacks.OnEnd(ctx, &model.CallbackOutput{Message: out, Config: cbIn.Config, TokenUsage: callbackUsage(res.Usage)})
	return out, nil
}

// Stream sends input as a streaming call. Each chunk of the returned reader
// is one Chorus delta (text, reasoning, or a tool call's start or argument
// fragment, indexed by the call's position); the last chunk carries the
// finish reason, the usage and the replay data (see the package doc). A
// failure after the first chunk arrives as the reader's error. The caller
// must Close the reader; closing it early cancels the call.
func (m *ChatModel) Stream(ctx context.Context, input []*schema.Message, opts ...model.Option) (_ *schema.StreamReader[*schema.Message], err error) {
	ctx = callbacks.EnsureRunInfo(ctx, m.GetType(), components.ComponentOfChatModel)
	req, cbIn, err := m.request(input, opts)
	ctx = callbacks.OnStart(ctx, cbIn)
	defer func() {
		if err != nil {
			callbacks.OnError(ctx, err)
		}
	}()
	if err != nil {
		return nil, err
	}
	s, err := m.client.Stream(ctx, req)
	if err != nil {
		return nil, err
	}
	sr, sw := schema.Pipe[*model.CallbackOutput](streamBuffer)
	go pump(s, sw, cbIn.Config)
	_, sr = callbacks.OnEndWithStreamOutput(ctx, sr)
	return schema.StreamReaderWithConvert(sr, func(o *model.CallbackOutput) (*schema.Message, error) {
		if o == nil || o.Message == nil {
			return nil, schema.ErrNoValue
		}
		return o.Message, nil
	}), nil
}

// streamBuffer is how many chunks the stream holds ahead of its reader.
var streamBuffer = 16

// pump copies a Chorus stream into eino chunks until it ends or the reader
// closes, then releases the Chorus stream.
func pump(s *llm.Stream, sw *schema.StreamWriter[*model.CallbackOutput], cfg *model.Config) {
	defer sw.Close()
	defer s.Close()
	for ev := range s.Events() {
		msg := eventChunk(ev)
		if msg == nil {
			continue
		}
		if sw.Send(&model.CallbackOutput{Message: msg, Config: cfg}, nil) {
			return
		}
	}
	res, err := s.Result()
	if err != nil {
		sw.Send(nil, err)
		return
	}
	sw.Send(&model.CallbackOutput{Message: finalChunk(res), Config: cfg, TokenUsage: callbackUsage(res.Usage)}, nil)
}

// request turns eino input and options into a Chorus request and the
// callback input that describes it. The callback input is returned even
// when the request cannot be built, so that OnStart/OnError pair up.
func (m *ChatModel) request(input []*schema.Message, opts []model.Option) (*llm.ChatRequest, *model.CallbackInput, error) {
	common := model.GetCommonOptions(&model.Options{Tools: m.tools}, opts...)
	specific := model.GetImplSpecificOptions(&options{}, opts...)

	req := &llm.ChatRequest{
		Model:       m.cfg.Model,
		MaxTokens:   m.cfg.MaxTokens,
		Temperature: m.cfg.Temperature,
		TopP:        m.cfg.TopP,
		Stop:        append([]string(nil), m.cfg.Stop...),
	}
	if m.cfg.Reasoning != nil {
		r := *m.cfg.Reasoning
		req.Reasoning = &r
	}
	if common.Model != nil && *common.Model != "" {
		req.Model = *common.Model
	}
	if common.MaxTokens != nil {
		req.MaxTokens = *common.MaxTokens
	}
	if common.Temperature != nil {
		req.Temperature = llm.Ptr(widen(*common.Temperature))
	}
	if common.TopP != nil {
		req.TopP = llm.Ptr(widen(*common.TopP))
	}
	if common.Stop != nil {
		req.Stop = append([]string(nil), common.Stop...)
	}
	cbIn := &model.CallbackInput{
		Messages:   input,
		Tools:      common.Tools,
		ToolChoice: common.ToolChoice,
		Config:     callbackConfig(req),
	}

	msgs, err := convertMessages(input)
	if err != nil {
		return nil, cbIn, err
	}
	req.Messages = msgs
	tools := m.llmT
	if !sameTools(common.Tools, m.tools) {
		if tools, err = convertTools(common.Tools); err != nil {
			return nil, cbIn, err
		}
	}
	if tools, req.ToolChoice, err = toolChoice(tools, common.ToolChoice, common.AllowedToolNames); err != nil {
		return nil, cbIn, err
	}
	req.Tools = tools
	for _, edit := range specific.edits {
		edit(req)
	}
	return req, cbIn, nil
}

// sameTools reports whether the per-call tools are the model's own (the
// default), so their conversion can be reused.
func sameTools(a, b []*schema.ToolInfo) bool {
	if len(a) != len(b) || (a == nil) != (b == nil) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func callbackConfig(req *llm.ChatRequest) *model.Config {
	c := &model.Config{Model: req.Model, MaxTokens: req.MaxTokens, Stop: req.Stop}
	if req.Temperature != nil {
		c.Temperature = float32(*req.Temperature)
	}
	if req.TopP != nil {
		c.TopP = float32(*req.TopP)
	}
	return c
}

// toolChoice maps eino's tool choice onto Chorus's. Allowed tool names
// restrict the tools sent; forcing with exactly one allowed name forces
// that tool.
func toolChoice(tools []llm.Tool, tc *schema.ToolChoice, allowed []string) ([]llm.Tool, llm.ToolChoice, error) {
	if len(allowed) > 0 {
		byName := make(map[string]llm.Tool, len(tools))
		for _, t := range tools {
			byName[t.Name] = t
		}
		kept := make([]llm.Tool, 0, len(allowed))
		for _, name := range allowed {
			t, ok := byName[name]
			if !ok {
				return nil, llm.ToolChoice{}, fmt.Errorf("eino: allowed tool %q is not among the model's tools", name)
			}
			kept = append(kept, t)
		}
		tools = kept
	}
	if tc == nil {
		return tools, llm.ToolChoice{}, nil
	}
	switch *tc {
	case schema.ToolChoiceForbidden:
		return tools, llm.ToolChoice{Mode: llm.ToolChoiceNone}, nil
	case schema.ToolChoiceAllowed:
		return tools, llm.ToolChoice{Mode: llm.ToolChoiceAuto}, nil
	case schema.ToolChoiceForced:
		if len(allowed) == 1 {
			return tools, llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: allowed[0]}, nil
		}
		return tools, llm.ToolChoice{Mode: llm.ToolChoiceRequired}, nil
	}
	return nil, llm.ToolChoice{}, fmt.Errorf("eino: unknown tool choice %q", string(*tc))
}
