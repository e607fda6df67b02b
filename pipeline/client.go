package pipeline

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/chorusrt/chorus/llm"
)

// Client is what stages call: the runtime (runtime.Runtime) satisfies it, and so does any
// providers.Client wrapper. Models are addressed as "provider/model" or an alias.
type Client interface {
	Chat(ctx context.Context, req *llm.ChatRequest) (*llm.ChatResult, error)
	Stream(ctx context.Context, req *llm.ChatRequest) (*llm.Stream, error)
	Embed(ctx context.Context, req *llm.EmbedRequest) (*llm.EmbedResult, error)
}

// ModelError is the failure of one model in a multi-model stage (FanOut,
// Race, Fallback). Index is the model's position in the stage's model list.
type ModelError struct {
	Model string
	Index int
	Err   error
}

func (e *ModelError) Error() string { return "pipeline: model " + e.Model + ": " + e.Err.Error() }

// Unwrap returns the model's error.
func (e *ModelError) Unwrap() error { return e.Err }

// PanicError is a panic recovered from caller code run by a stage (a Map
// function, a tool handler). Value is what was passed to panic and Stack the
// goroutine's stack at the panic.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("pipeline: panic: %v", e.Value) }

// Unwrap returns Value when it is an error.
func (e *PanicError) Unwrap() error {
	if err, ok := e.Value.(error); ok {
		return err
	}
	return nil
}

// recoverTo turns a panic into a *PanicError stored in *err. It must be
// deferred directly.
func recoverTo(err *error) {
	if v := recover(); v != nil {
		*err = &PanicError{Value: v, Stack: debug.Stack()}
	}
}

// errNoModels is the ConfigError of a multi-model stage given no model.
func errNoModels() error { return &llm.ConfigError{Field: "models", Msg: "is empty"} }

// withModel returns a shallow copy of req addressed to model. The copy shares
// messages and tools with req; stages never modify either.
func withModel(req *llm.ChatRequest, model string) *llm.ChatRequest {
	if req == nil {
		return nil
	}
	r := *req
	r.Model = model
	return &r
}

// joinModelErrors joins the non-nil errors of errs as *ModelError values.
func joinModelErrors(models []string, errs []error) error {
	var out []error
	for i, err := range errs {
		if err != nil {
			out = append(out, &ModelError{Model: models[i], Index: i, Err: err})
		}
	}
	return errors.Join(out...)
}
