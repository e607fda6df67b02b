package mcptools

import (
	"errors"
	"fmt"
)

// ErrClosed is returned by calls on a closed Set.
var ErrClosed = errors.New("mcptools: the tool set is closed")

// CollisionError reports two servers offering a tool under the same name:
// a configuration error (give one of them a Prefix).
type CollisionError struct {
	// Tool is the name as the model would see it.
	Tool string
	// First and Second are the names of the two servers.
	First, Second string
}

func (e *CollisionError) Error() string {
	return fmt.Sprintf("mcptools: tool %q is offered by servers %q and %q: set a prefix on one of them", e.Tool, e.First, e.Second)
}

// StartError reports a server that could not be started, connected to or
// listed when the Set started.
type StartError struct {
	Server string
	Err    error
}

func (e *StartError) Error() string {
	return fmt.Sprintf("mcptools: server %q: %v", e.Server, e.Err)
}

func (e *StartError) Unwrap() error { return e.Err }

// CallError is a tool call that failed outside the tool: a JSON-RPC error
// (an unknown tool, invalid arguments), a lost or restarting server, a
// timeout. In a session it follows the tool's effect's retry rule; a
// result with isError is not a CallError but an error the model sees.
type CallError struct {
	Server, Tool string
	Err          error
}

func (e *CallError) Error() string {
	return fmt.Sprintf("mcptools: %s/%s: %v", e.Server, e.Tool, e.Err)
}

func (e *CallError) Unwrap() error { return e.Err }

// ToolResultError is a result the server marked isError: the tool ran and
// reports a failure for the model to see. In a session it becomes a
// *session.ToolError (the record ends failed, no retry).
type ToolResultError struct {
	Server, Tool string
	// Text is the result's text content.
	Text string
}

func (e *ToolResultError) Error() string { return e.Text }

// redactedError shows an error's text with the server's secrets replaced.
// It does not unwrap (the original's text holds the secrets), but it
// matches what the original matches (context.Canceled, ...).
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string        { return e.msg }
func (e *redactedError) Is(target error) bool { return errors.Is(e.err, target) }

func redactErr(err error, secrets []string) error {
	if err == nil || len(secrets) == 0 {
		return err
	}
	msg := err.Error()
	if r := redact(msg, secrets); r != msg {
		return &redactedError{msg: r, err: err}
	}
	return err
}
