package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/telemetry"
)

// DefaultMaxTurns is ToolLoop's model-call limit when ToolLoopOptions.MaxTurns is zero.
const DefaultMaxTurns = 10

// ErrMaxTurns is matched (errors.Is) by every *MaxTurnsError.
var ErrMaxTurns = errors.New("pipeline: tool loop reached its turn limit")

// MaxTurnsError is returned by ToolLoop when the model still asked for
// tools after MaxTurns model calls. Messages is the whole history so far,
// the last turn's tool results included, so a caller may continue it with
// another ToolLoop call.
type MaxTurnsError struct {
	Turns    int
	Messages []llm.Message
	// Last is the last model answer (the one that asked for more tools).
	Last *llm.ChatResult
}

func (e *MaxTurnsError) Error() string {
	return "pipeline: tool loop reached its limit of " + strconv.Itoa(e.Turns) + " turns"
}

// Is matches ErrMaxTurns.
func (e *MaxTurnsError) Is(target error) bool { return target == ErrMaxTurns }

// ToolFunc runs one tool call. args is the call's JSON arguments ("{}" when
// the model sent none). The returned text is the tool result the model
// sees; an error is sent to the model as an error result (IsError) with the
// error's text. A ToolFunc must honour ctx.
type ToolFunc func(ctx context.Context, args json.RawMessage) (string, error)

// ToolPartsFunc runs one tool call like a ToolFunc and may also return
// parts (images, documents) that go into the tool message's Parts beside
// the text.
type ToolPartsFunc func(ctx context.Context, args json.RawMessage) (string, []llm.Part, error)

// Tool is one tool of a ToolSet: the definition sent to the model and the
// Go function that runs it.
type Tool struct {
	// Definition is sent to the model. Its Name may be left empty: the
	// ToolSet key is the tool's name.
	Definition llm.Tool
	Func       ToolFunc
	// PartsFunc, when set, runs the calls instead of Func, for tools whose
	// results carry images or documents.
	PartsFunc ToolPartsFunc
}

// ToolSet maps tool names to tools.
type ToolSet map[string]Tool

// Definitions returns the tools' definitions sorted by name (a stable
// order keeps provider prompt caches warm), each named by its key.
func (s ToolSet) Definitions() []llm.Tool {
	names := make([]string, 0, len(s))
	for name := range s {
		names = append(names, name)
	}
	slices.Sort(names)
	defs := make([]llm.Tool, len(names))
	for i, name := range names {
		defs[i] = s[name].Definition
		defs[i].Name = name
	}
	return defs
}

func (s ToolSet) validate() error {
	for name, t := range s {
		switch {
		case name == "":
			return &llm.ConfigError{Field: "tools", Msg: "a tool has an empty name"}
		case t.Definition.Name != "" && t.Definition.Name != name:
			return &llm.ConfigError{Field: "tools." + name, Msg: fmt.Sprintf("definition is named %q", t.Definition.Name)}
		case t.Func == nil && t.PartsFunc == nil:
			return &llm.ConfigError{Field: "tools." + name, Msg: "has no Func"}
		}
	}
	return nil
}

// ToolLoopOptions configures ToolLoop.
type ToolLoopOptions struct {
	// MaxTurns bounds the number of model calls (DefaultMaxTurns when zero
	// or negative).
	MaxTurns int
	// Parallel runs the calls of one turn concurrently. Their results are
	// appended in call order either way.
	Parallel bool
	// Telemetry, when set, is where each call's execute_tool span goes;
	// nil: the global OpenTelemetry providers (see package telemetry).
	Telemetry *telemetry.Telemetry
}

// ToolLoopResult is the outcome of a tool loop.
type ToolLoopResult struct {
	// Result is the last model answer: the final one, when the loop ended
	// normally.
	Result *llm.ChatResult
	// Messages is the whole history: the request's messages, then each
	// assistant turn and its tool results, then the final answer.
	Messages []llm.Message
	// Turns is the number of model calls.
	Turns int
	// Usage sums the usage of every model call.
	Usage llm.Usage
}

// ToolLoop runs a conversation with tools: it calls the model, runs the
// tools it asks for with their Go handlers, appends the results and calls
// the model again, until the model answers without tool calls or MaxTurns
// model calls were made.
//
// When req.Tools is empty, tools.Definitions() is sent. A forced tool
// choice (ToolChoiceRequired or ToolChoiceTool) applies to the first model
// call only; later calls leave the choice to the model. Each call is
// answered in the history, in call order, whatever happens: a handler
// error or panic becomes an error result (IsError) carrying its text, as do
// unknown tools and arguments that are not JSON. When the model still asks
// for tools after MaxTurns calls, those calls are run and answered, then a
// *MaxTurnsError (ErrMaxTurns) is returned with the history.
//
// A failed model call or a cancelled ctx ends the loop with that error; the
// result returned beside any error holds the history and usage so far.
// Cancelling ctx cancels running handlers and ToolLoop waits for them to
// return.
func ToolLoop(ctx context.Context, c Client, req *llm.ChatRequest, tools ToolSet, opts ToolLoopOptions) (*ToolLoopResult, error) {
	if err := checkCall(c, req); err != nil {
		return nil, err
	}
	if err := tools.validate(); err != nil {
		return nil, err
	}
	maxTurns := opts.MaxTurns
	if maxTurns <= 0 {
		maxTurns = DefaultMaxTurns
	}
	r := *req
	if len(r.Tools) == 0 {
		r.Tools = tools.Definitions()
	}
	out := &ToolLoopResult{Messages: slices.Clone(req.Messages)}
	tel := opts.Telemetry.OrGlobal()
	for {
		r.Messages = slices.Clip(out.Messages)
		res, err := safeChat(ctx, c, &r)
		if err != nil {
			return out, err
		}
		out.Turns++
		out.Result = res
		out.Usage = out.Usage.Add(res.Usage)
		out.Messages = append(out.Messages, res.Message())
		if len(res.ToolCalls) == 0 {
			return out, nil
		}
		out.Messages = append(out.Messages, runTools(ctx, tel, tools, res.ToolCalls, opts.Parallel)...)
		if m := r.ToolChoice.Mode; m == llm.ToolChoiceRequired || m == llm.ToolChoiceTool {
			// A forced tool choice has been honoured: forcing it again would
			// loop until MaxTurns.
			r.ToolChoice = llm.ToolChoice{}
		}
		if err := ctx.Err(); err != nil {
			return out, err
		}
		if out.Turns >= maxTurns {
			return out, &MaxTurnsError{Turns: out.Turns, Messages: slices.Clone(out.Messages), Last: res}
		}
	}
}

// runTools answers every call, in call order.
func runTools(ctx context.Context, tel *telemetry.Telemetry, tools ToolSet, calls []llm.ToolCall, parallel bool) []llm.Message {
	msgs := make([]llm.Message, len(calls))
	if !parallel || len(calls) == 1 {
		for i, call := range calls {
			msgs[i] = runTool(ctx, tel, tools, call)
		}
		return msgs
	}
	var wg sync.WaitGroup
	for i, call := range calls {
		wg.Go(func() { msgs[i] = runTool(ctx, tel, tools, call) })
	}
	wg.Wait()
	return msgs
}

// runTool runs one call in its execute_tool span and returns its tool
// message.
func runTool(ctx context.Context, tel *telemetry.Telemetry, tools ToolSet, call llm.ToolCall) llm.Message {
	ctx, sp := tel.StartTool(ctx, call.Name, call.ID)
	sp.Arguments(call.Arguments)
	msg := runToolCall(ctx, tools, call)
	if msg.IsError {
		sp.End("failed", "tool_error", msg.Content)
	} else {
		sp.End("succeeded", "", msg.Content)
	}
	return msg
}

// runToolCall runs one call and returns its tool message.
func runToolCall(ctx context.Context, tools ToolSet, call llm.ToolCall) llm.Message {
	msg := llm.Message{Role: llm.RoleTool, ToolCallID: call.ID, ToolName: call.Name}
	t, ok := tools[call.Name]
	if !ok {
		msg.Content, msg.IsError = fmt.Sprintf("unknown tool %q", call.Name), true
		return msg
	}
	args := json.RawMessage(call.Arguments)
	if len(args) == 0 {
		args = json.RawMessage("{}")
	} else if !json.Valid(args) {
		msg.Content, msg.IsError = fmt.Sprintf("tool %q: arguments are not valid JSON", call.Name), true
		return msg
	}
	var (
		content string
		parts   []llm.Part
		err     error
	)
	if t.PartsFunc != nil {
		content, parts, err = callPartsTool(ctx, t.PartsFunc, args)
	} else {
		content, err = callTool(ctx, t.Func, args)
	}
	if err != nil {
		var pe *PanicError
		if errors.As(err, &pe) {
			msg.Content = fmt.Sprintf("tool %q panicked: %v", call.Name, pe.Value)
		} else {
			msg.Content = err.Error()
		}
		msg.IsError = true
		return msg
	}
	msg.Content, msg.Parts = content, parts
	return msg
}

func callTool(ctx context.Context, fn ToolFunc, args json.RawMessage) (s string, err error) {
	defer recoverTo(&err)
	return fn(ctx, args)
}

func callPartsTool(ctx context.Context, fn ToolPartsFunc, args json.RawMessage) (s string, parts []llm.Part, err error) {
	defer recoverTo(&err)
	return fn(ctx, args)
}
