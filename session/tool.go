package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/chorusrt/chorus/llm"
)

// Effect says what calling a tool does to the world, and so how a call is
// retried, what a crash during the call means, and whether it waits for a
// person's approval by default. See the package documentation for the table.
type Effect string

// The four effects.
const (
	// EffectRead changes nothing: up to 3 attempts, then failed; a crash
	// runs it again; no approval.
	EffectRead Effect = "read"
	// EffectIdempotentWrite changes something, but repeating the call with
	// the same idempotency key changes it once: up to 3 attempts with the
	// key <session>/<turn>/<call>, then outcome_unknown; a crash runs it
	// again with the same key; no approval.
	EffectIdempotentWrite Effect = "idempotent_write"
	// EffectNonIdempotentWrite changes something each time it runs: one
	// attempt, then outcome_unknown; a crash during the call makes it
	// outcome_unknown; approval by default.
	EffectNonIdempotentWrite Effect = "non_idempotent_write"
	// EffectUnclassified is a tool nobody classified: treated as a
	// non-idempotent write.
	EffectUnclassified Effect = "unclassified"
)

// Valid reports whether e is one of the four effects.
func (e Effect) Valid() bool {
	switch e {
	case EffectRead, EffectIdempotentWrite, EffectNonIdempotentWrite, EffectUnclassified:
		return true
	}
	return false
}

// retryable reports whether a failed attempt of a call with this effect may
// run again.
func (e Effect) retryable() bool { return e == EffectRead || e == EffectIdempotentWrite }

// approvalByDefault reports whether a call with this effect waits for
// approval unless its policy says otherwise.
func (e Effect) approvalByDefault() bool {
	return e == EffectNonIdempotentWrite || e == EffectUnclassified
}

// exhausted is the status of a call whose attempts ran out (or whose single
// attempt failed, timed out or was interrupted): failed for a read, which
// changed nothing, outcome_unknown for every write.
func (e Effect) exhausted() ToolStatus {
	if e == EffectRead {
		return StatusFailed
	}
	return StatusOutcomeUnknown
}

// ToolStatus is how a tool record ended.
type ToolStatus string

// Tool record statuses. A record without a status has not ended yet.
const (
	// StatusSucceeded: the handler returned a result.
	StatusSucceeded ToolStatus = "succeeded"
	// StatusFailed: the call certainly had no effect the model must know
	// of (a read that failed, a *ToolError, a call that never ran).
	StatusFailed ToolStatus = "failed"
	// StatusRejected: a person (or an approval deadline) refused the call;
	// it never ran.
	StatusRejected ToolStatus = "rejected"
	// StatusOutcomeUnknown: a write may or may not have taken effect.
	StatusOutcomeUnknown ToolStatus = "outcome_unknown"
)

// Handler runs one attempt of a tool call. It returns the result the model
// sees, a *ToolError for a failure the model should see without a retry,
// or any other error (a panic and a timeout count as one) for a failure
// that follows the effect's retry rule. It must respect ctx, which ends at
// the tool's timeout.
type Handler func(ctx context.Context, call Call) (Result, error)

// Call is what a handler receives.
type Call struct {
	// Session is the session's id.
	Session string
	// Turn is the turn's number, from 1.
	Turn int
	// ID is the call's id, unique within the turn (the model's tool call
	// id, suffixed when the model reused one).
	ID string
	// Name is the tool's name and Arguments the JSON arguments the model
	// produced.
	Name      string
	Arguments json.RawMessage
	// Effect is the call's resolved effect.
	Effect Effect
	// Attempt counts attempts of this call from 1, across crashes.
	Attempt int
	// IdempotencyKey is "<session>/<turn>/<call>" for an idempotent write
	// and empty otherwise. It is the same on every attempt: pass it to the
	// system the tool writes to.
	IdempotencyKey string
}

// Result is a successful tool result.
type Result struct {
	// Content is what the model sees as the function response: JSON or
	// plain text.
	Content string
	// Images are images the tool returns (llm.ImagePart with inline data,
	// or parts already referencing the media store). The session stores
	// inline bytes in its media store; the journal keeps references.
	Images []llm.Part
}

// ToolError is a failure the model should see, without a retry. The call's
// record ends failed with Msg.
type ToolError struct{ Msg string }

func (e *ToolError) Error() string { return e.Msg }

// ToolErrorf returns a *ToolError with a formatted message.
func ToolErrorf(format string, args ...any) error {
	return &ToolError{Msg: fmt.Sprintf(format, args...)}
}

// Tool is a function the model may call, with its handler.
type Tool struct {
	// Def is the definition sent to the model (name, description, JSON
	// Schema of the arguments).
	Def llm.Tool
	// Effect is the tool's own declaration of its effect; empty when it
	// declares none. A ToolPolicy for the tool overrides it.
	Effect Effect
	// Handler runs the calls.
	Handler Handler
	// Timeout bounds one attempt; zero means Options.ToolTimeout.
	Timeout time.Duration
	// RequireApproval makes every call of the tool wait for a person's
	// approval, whatever its effect (Dex's require_confirmation). A
	// ToolPolicy cannot lower it: its RequireApproval only adds approvals.
	RequireApproval bool
}

// ToolPolicy is the caller's policy for one tool. Zero fields keep the
// tool's declaration or the defaults.
type ToolPolicy struct {
	// Effect, when set, overrides the tool's own declaration.
	Effect Effect
	// RequireApproval, when set, overrides the effect's default (approval
	// for non_idempotent_write and unclassified, none otherwise); it cannot
	// lower a tool's own Tool.RequireApproval.
	RequireApproval *bool
	// MaxAttempts caps the attempts of a read or idempotent write (default
	// 3); single-attempt effects always get one attempt.
	MaxAttempts int
	// Backoff is the delay before the second attempt, doubling after each
	// failure; zero means Options.RetryBackoff.
	Backoff time.Duration
	// Timeout bounds one attempt, overriding Tool.Timeout.
	Timeout time.Duration
}

// Bool returns a pointer to b, for ToolPolicy.RequireApproval.
func Bool(b bool) *bool { return &b }

// ToolRecord is the durable record of one tool call.
type ToolRecord struct {
	// Turn and ID identify the call; ModelCallID is the id the model gave
	// it (the function response answers that id).
	Turn        int
	ID          string
	ModelCallID string
	Name        string
	Arguments   string
	Effect      Effect
	// Agent is the agent that asked for the call, when a ModelStep names
	// one (a framework's agent tree).
	Agent string
	// Step is the call's CallTool step number within the turn, and
	// ApprovalStep its AwaitToolApproval step (zero without approval).
	Step         int
	ApprovalStep int
	// Approval is true when the call waits for (or waited for) approval;
	// Interrupt is then the approval's interrupt id.
	Approval  bool
	Interrupt string
	// Attempts is how many attempts started (across crashes); Key is the
	// idempotency key of an idempotent write.
	Attempts int
	Key      string
	// Status is empty while the call has not ended.
	Status ToolStatus
	// Result is the handler's content (succeeded); Error says why the call
	// did not succeed (failed, rejected, outcome_unknown).
	Result string
	Error  string
	// Skipped is true when the call never ran because an earlier write of
	// the same model response did not succeed (see Options.ParallelWrites):
	// Status is then failed and Error starts with "skipped: ".
	Skipped bool
	// Images are references into the media store.
	Images []MediaRef
	// AttemptErrors are the errors of failed attempts, in order.
	AttemptErrors []string
}

// Model is what a session calls for model steps and compaction summaries.
// *runtime.Runtime and *providers.Client satisfy it.
type Model interface {
	Stream(ctx context.Context, req *llm.ChatRequest) (*llm.Stream, error)
}

// errPanic wraps a handler panic.
type errPanic struct{ v any }

func (e errPanic) Error() string { return fmt.Sprintf("tool handler panicked: %v", e.v) }

// isToolError reports whether err is (or wraps) a *ToolError, and returns it.
func isToolError(err error) (*ToolError, bool) {
	var te *ToolError
	if errors.As(err, &te) {
		return te, true
	}
	return nil, false
}
