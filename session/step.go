package session

import (
	"context"
	"errors"

	"github.com/chorusrt/chorus/llm"
)

// ModelStep runs the RunModel steps of a session in place of Options.Model:
// the way to run an agent that is not Chorus's own loop (a framework's
// agent tree, integrations/einosession) as a durable session. Everything
// else stays the session's: each tool call the step's result asks for is a
// CallTool step of Options.Tools with its effect's retry and crash rules,
// approvals, ordered writes, the journal, events, CancelTurn and notes.
//
// RunModel may be called again for the same step after a failure or a
// crash (StepInput.Attempt), with the same input; it must not have side
// effects of its own beyond model calls.
type ModelStep interface {
	RunModel(ctx context.Context, in StepInput) (*StepOutput, error)
}

// StepInput is what one RunModel attempt of a ModelStep gets.
type StepInput struct {
	// Session is the session's id; Turn, Step and Attempt number the step
	// as its events do.
	Session             string
	Turn, Step, Attempt int
	// Messages is what a native RunModel would send: Options.Instructions,
	// the compaction summary, and the history (the turn's user messages,
	// and the function responses of the calls so far). Media parts are
	// references into Media (URLs of MediaScheme), not bytes, so that a
	// step may keep them in its State: load them (Media.Get) where they go
	// to a model.
	Messages []llm.Message
	// Media is the session's media store (Options.Media).
	Media MediaStore
	// Results are the records of the calls the turn's previous step asked
	// for, in the model's order, every one ended (empty at a turn's first
	// step). FunctionResponse is what a model would see for each.
	Results []ToolRecord
	// State is what the turn's previous step returned as StepOutput.State,
	// from the journal (nil at a turn's first step).
	State []byte
	// Delta, when called, streams an event (text, reasoning) to the
	// session's event stream.
	Delta func(llm.Event)
}

// StepOutput is what a RunModel step produced.
type StepOutput struct {
	// Result is the step's assistant message and usage: its tool calls are
	// the calls to run, each a CallTool step (none: the turn ends with its
	// text as the answer).
	Result *llm.ChatResult
	// State is kept in the journal with the step's output and handed to
	// the turn's next step (a framework's checkpoint).
	State []byte
	// Agents names, by tool call id, the agent that asked for the call
	// (shown with the call's record and in the timeline).
	Agents map[string]string
}

// ErrStepFailed, wrapped in a ModelStep's error, fails the turn at once
// instead of retrying the step: the step cannot succeed with this input.
var ErrStepFailed = errors.New("the model step cannot run")

// FunctionResponse is the tool message a model sees for a call's record:
// the result; {"error":"The tool call failed: ..."}; {"error":"The tool
// call was rejected: ..."}; {"error":"<OutcomeUnknownText>"}.
func FunctionResponse(r ToolRecord) llm.Message { return functionResponse(&r) }
