// Package session runs durable agent sessions: agents that refund orders or
// send emails must not repeat a write when the process dies, and must wait
// for a person where a call needs approval. It brings the agent-session
// model of Dex to Chorus, on actors.
//
// A session is one Proto.Actor actor, the single writer of its journal
// (store.Journal: SQLite or PostgreSQL). Its id is chosen by the caller.
// The actor's state is what replaying its journal yields: it changes only
// by applying records it appended, so a session recovered after a crash is
// the session that was running.
//
//	m, err := session.New(session.Options{
//		Journal: journal, Model: rt, ModelName: "openai/gpt-4.1-mini",
//		Tools:   []session.Tool{lookupOrder, refund},
//		Policy:  map[string]session.ToolPolicy{"refund": {Effect: session.EffectNonIdempotentWrite}},
//	})
//	if err != nil { return err }
//	defer m.Close(ctx)
//	m.Recover(ctx)                                  // resume sessions a crash interrupted
//	m.Send(ctx, "support-42", llm.UserText("refund order 7"))
//	snap, _ := m.Snapshot(ctx, "support-42")        // snap.Pending: approvals waiting
//	m.Resolve(ctx, "support-42", snap.Pending[0].ID, true, "ok")
//	res, _ := m.Wait(ctx, "support-42")             // the turn's answer
//
// # Steps
//
// A turn runs as steps:
//
//	AwaitUserMessage -> RunModel -> CallTool (one per call) -> ResumeTurn -> RunModel ... -> AwaitUserMessage
//	                                 \-> AwaitToolApproval first where a call needs approval
//
// RunModel is one model call (Options.ModelAttempts attempts, default 3;
// then the turn fails). Each tool call of a model response is its own
// CallTool step with its own attempts, timeout and backoff. ResumeTurn
// gives the model every function response, in the model's order, plus any
// user message queued meanwhile.
//
// The reads of one response run in parallel, beside everything else; its
// writes (idempotent_write, non_idempotent_write, unclassified) run one at
// a time in the model's order: a write starts once every earlier write of
// the response succeeded. A write that ends failed, rejected or
// outcome_unknown makes the later writes of the response end failed
// without running (ToolRecord.Skipped; the error, which the model sees,
// starts with "skipped: "). A write waiting for its approval holds the
// later writes until it is resolved. Options.ParallelWrites runs the
// writes of a response at once instead and skips nothing; the model
// output records which rule its calls follow, so a restart keeps it.
// Steps are numbered within the turn; every event carries turn, step and
// attempt.
//
// Options.ModelStep replaces the model call of every RunModel step with a
// step of the caller's (a framework's agent tree: integrations/einosession
// runs eino's adk agents so). It gets what a model call would (the
// messages, media as references into Options.Media), the records of the calls the previous step asked for, and the
// state it returned then, which the journal keeps with the step's output;
// it returns the assistant message whose tool calls are the next CallTool
// steps, each under this package's rules, and the agent that asked for
// each call. An error wrapping ErrStepFailed fails the turn without a
// retry; any other follows RunModel's attempts.
//
// # Effects
//
// A tool's effect comes from the caller's ToolPolicy for it, else the
// tool's own declaration (Tool.Effect), else Options.DefaultEffect
// (unclassified unless set). Whether a call waits for approval comes from
// the policy's RequireApproval, else the effect's default (the table); a
// tool that declares Tool.RequireApproval (Dex's require_confirmation)
// always waits, whatever its effect and policy say.
//
//	| Effect               | Retry                                                                  | Crash mid-call               | Default approval |
//	|----------------------|------------------------------------------------------------------------|------------------------------|------------------|
//	| read                 | up to 3 attempts, then failed                                          | runs again                   | no               |
//	| idempotent_write     | up to 3 attempts with key <session>/<turn>/<call>, then outcome_unknown | runs again with the same key | no               |
//	| non_idempotent_write | one attempt, then outcome_unknown                                      | outcome_unknown              | yes              |
//	| unclassified         | one attempt, then outcome_unknown                                      | outcome_unknown              | yes              |
//
// A handler returns a Result, a *ToolError (the record ends failed with its
// message, without a retry, whatever the effect), or any other error; a
// panic and a timeout (Tool.Timeout, ToolPolicy.Timeout, Options.ToolTimeout)
// count as such an error and follow the effect's retry rule. A crash during
// an attempt counts as that attempt. Tool records end succeeded, failed,
// rejected or outcome_unknown, and the model sees each as its function
// response: the result; {"error":"The tool call failed: ..."};
// {"error":"The tool call was rejected: <reason>"};
// {"error":"<OutcomeUnknownText>"}.
//
// # Guarantees
//
// These are the guarantees the tests check, the crash suite
// (TestCrashSuite) by killing a child process running three sessions with
// SIGKILL at randomized crash points (in RunModel before the request and
// with it in flight, in CallTool of each effect before and after the side
// effect, while an approval is pending, after a steering message was
// queued, between steps, between two ordered writes), restarting it until
// every session finishes, and
// checking the journal and a ledger the tools append to:
//
//   - A journal write is durable before the step it records starts its side
//     effect: tool_started{call, attempt, key} is appended before the
//     handler runs. Every side effect in the ledger belongs to an attempt
//     the journal recorded as started.
//   - A read or idempotent write interrupted by a crash runs again after
//     the restart while attempts remain; an idempotent write gets the same
//     key <session>/<turn>/<call> on every attempt, crash or not.
//   - A non_idempotent_write or unclassified call never runs twice: one
//     started attempt at most; interrupted by a crash, before or after its
//     side effect, it ends outcome_unknown.
//   - Every call ends with exactly one outcome record; attempts are
//     numbered 1..n without gaps and never exceed the effect's limit.
//   - A RunModel interrupted by a crash runs again (attempts numbered
//     without gaps) until it produces its output, or the turn fails.
//   - The writes of one response run in the model's order: a write's
//     first tool_started follows the tool_finished (succeeded) of every
//     earlier write of the response; a write after one that did not
//     succeed never starts and ends failed (skipped). A crash between two
//     writes resumes at the next one, and a single-attempt write that
//     ended is never repeated.
//   - A pending approval survives a crash with its id and deadline, and is
//     resolved exactly once; a queued user message survives a crash, is
//     stored once, and the model sees it.
//   - Every session finishes.
//
// Approvals are durable interrupts with ids and an optional deadline
// (Options.ApprovalTimeout). Resolve is accepted once; a second resolution
// gets a *ResolveError wrapping ErrAlreadyResolved, one after the deadline
// or after the turn ended ErrStaleInterrupt, an unknown id
// ErrUnknownInterrupt. A call whose deadline passes ends rejected, also
// when the deadline passed while no process ran.
//
// Steering: a user message sent during a turn is durable when Send returns
// (queued), and is taken at the next step boundary, the next RunModel of
// the same turn, after the function responses. A message that arrives once
// the last model step has begun starts the next turn.
//
// CancelTurn stops the turn between steps: a running model call is
// cancelled, a running tool attempt ends on its own and is recorded, no new
// attempt or approval starts; calls that did not end are recorded (not run:
// failed; waiting for approval: rejected; interrupted or waiting for a
// retry: the effect's exhausted status), and the turn ends cancelled.
//
// A failed or cancelled turn stores a note listing each call and its
// outcome. The next turn's model sees the turn's user messages and the
// note instead of its partial messages, so writes are not repeated.
//
// Events: each session has a bounded event stream (Options.EventBuffer
// events, default 1024, and Options.EventBufferBytes bytes of them,
// default 10 MiB; past either bound the oldest go first): turn started, step started, text and reasoning deltas, tool call
// started and finished, approval requested and resolved, compaction, turn
// finished. A slow or absent reader never blocks the session; a reader that
// falls behind gets an EventGap counting what it missed. Events(id, after)
// resumes after any seq still held. Only completed messages and tool
// records are durable; events are not. Each process numbers a session's
// events from its clock in microseconds, on by one: a reader resuming
// with a number from an earlier process or another cluster node (below
// this numbering), or one this process never gave, gets an EventGap first
// and every event held, never skipping one. Peek and ReadSnapshot read a
// session's state without activating it (a console's lists use them).
//
// Snapshot returns the history, queued messages, pending interrupts, tool
// records, usage and the current step.
//
// Compaction (Options.Compaction: context window tokens, trigger ratio,
// turns kept): before a turn's first model call, when the estimated input
// (three bytes per token) reaches the trigger, a summary of the turns
// before the kept ones is written to the journal, and only then do those
// turns stop being sent to the model, which gets the summary instead. It
// runs between turns only; the summarized messages stay in the journal and
// in Snapshot's history.
//
// Images: user messages and tool results may carry images (and documents)
// with inline bytes; the session stores the bytes in Options.Media (a
// LocalMedia directory store by default) and the journal holds references
// (MediaScheme URIs), never bytes. Each model request gets the bytes back
// from the store.
//
// # Which file owns what
//
//	| File          | Owns                                                                                          |
//	|---------------|-----------------------------------------------------------------------------------------------|
//	| session.go    | Options, Manager, activation; Send, Resolve, CancelTurn, Snapshot, Wait, Events, Close        |
//	| actor.go      | the session actor: its fields, requests and reports, Receive, advance/next, timers, close     |
//	| journal.go    | the actor's journal I/O: recovery (snapshot, then records), atomic appends, snapshots         |
//	| state.go      | the durable state and apply, the only place it changes; function responses, turn notes        |
//	| records.go    | journal record kinds and their payloads                                                       |
//	| turn.go       | AwaitUserMessage and turns: user messages, turn start, cancel, the end of a failed turn       |
//	| step_model.go | RunModel and ResumeTurn: the model input, the call, its retries, its output and planned calls |
//	| step.go       | ModelStep: a RunModel step run by the caller (a framework's agent tree), its input and output |
//	| step_tool.go  | CallTool: attempts, the handler, timeouts, the effect's retry rule                            |
//	| approvals.go  | AwaitToolApproval: resolutions and deadlines                                                  |
//	| compact.go    | Compact: the summary step                                                                     |
//	| view.go       | Snapshot's view of the state and the current step; Peek, ReadSnapshot, Live (no activation)   |
//	| timeline.go   | Sessions (the journal's list) and Timeline/ReadTimeline: the journal decoded for people (the console) |
//	| idle.go       | idle passivation and reactivation, parked approvals, Passivate, Recover                       |
//	| events.go     | the bounded event stream                                                                      |
//	| tool.go       | Tool, Effect, ToolPolicy, ToolRecord, Model                                                   |
//	| media.go      | the media store                                                                               |
//	| errors.go     | sentinel and typed errors                                                                     |
//
// Decisions:
//   - Model calls go through the Model interface (*runtime.Runtime and
//     *providers.Client satisfy it). The session retries a failed model call
//     itself, so give a bare client few retries of its own.
//   - Proto.Actor types never appear in the API; its log lines go to
//     Options.Logger (discarded by default).
//   - A journal append that fails stops the session's actor (its outcome is
//     unknown, so nothing more may run unrecorded); the next call naming the
//     session activates a new actor, which recovers from the journal.
//   - A session with no work is passivated after Options.IdleTimeout
//     (default 5 minutes; negative: never) and activated again, from the
//     journal, by the next call naming it. No work: no step running or
//     waiting for a retry, no queued message, no caller in Wait. A turn
//     that waits only for approvals holds no goroutine, so its session is
//     passivated too; Resolve activates it, and so does its earliest
//     approval deadline (a timer of the Manager's), which it then expires.
//     A reader of its events does not keep it active: the stream stays
//     while someone reads it, and is dropped otherwise, keeping only its
//     next event number. The actor decides, since it alone knows it has no
//     work, and the Manager takes it off only when no call holds it, so a
//     call never meets a passivating actor.
//   - Recover activates only the sessions with work pending (a step to
//     run, tool attempts to settle under the crash rules, queued
//     messages), reading the others' journals without keeping them; a
//     turn waiting only for approvals waits passivated.
//
// Guide: docs/sessions.md in the repository, which starts from the task and
// ends with how it is tested; this comment stays the reference.
package session
