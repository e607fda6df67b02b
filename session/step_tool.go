package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/chorusrt/chorus/llm"
)

// startAttempt records the start of an attempt, durably, and only then
// runs the handler (invariant 11).
func (a *sessionActor) startAttempt(t *turnState, c *callState) bool {
	r, ok := a.m.policyFor(c.Name)
	if !ok {
		b := a.newBatch()
		b.add(recToolFinished, recToolEnd{Turn: t.Turn, Call: c.ID, Status: StatusFailed, Error: fmt.Sprintf("not run: there is no tool named %q any more", c.Name)})
		return a.appendBatch(b)
	}
	attempt := c.Attempts + 1
	if attempt == 1 && t.Ordered && c.Effect != EffectRead && a.st.earlierWrite(c) {
		// Between two ordered writes: the earlier ones succeeded.
		a.m.hookAt("WRITE next " + a.id + " " + c.ID)
	}
	key := ""
	if c.Effect == EffectIdempotentWrite {
		key = idempotencyKey(a.id, t.Turn, c.ID)
	}
	b := a.newBatch()
	b.add(recToolStarted, recToolStart{Turn: t.Turn, Call: c.ID, Attempt: attempt, Key: key})
	if !a.appendBatch(b) {
		return false
	}
	a.publish(Event{Type: EventToolCallStarted, Turn: t.Turn, Step: c.Step, Attempt: attempt, StepKind: StepCallTool,
		CallID: c.ID, ToolName: c.Name, Effect: c.Effect})
	call := Call{Session: a.id, Turn: t.Turn, ID: c.ID, Name: c.Name, Arguments: json.RawMessage(c.Arguments),
		Effect: c.Effect, Attempt: attempt, IdempotencyKey: key}
	if len(call.Arguments) == 0 {
		call.Arguments = json.RawMessage("{}")
	}
	ctx, cancel := context.WithTimeout(a.trace.toolCtx(a.m.base, c.ID), r.timeout)
	a.tools[c.ID] = &flight{attempt: attempt, step: c.Step, cancel: cancel}
	self, sys, turn := a.self, a.m.sys, t.Turn
	a.m.work.Add(1)
	go func() {
		defer a.m.work.Done()
		defer cancel()
		res, err := a.m.runHandler(ctx, r, call)
		var refs []MediaRef
		if err == nil && len(res.Images) > 0 {
			mctx, mcancel := context.WithTimeout(context.WithoutCancel(ctx), journalTimeout)
			var parts []llm.Part
			parts, refs, err = storeParts(mctx, a.m.opt.Media, res.Images)
			mcancel()
			if err != nil {
				err = fmt.Errorf("storing the result's images: %w", err)
			}
			res.Images = parts
		}
		sys.Root.Send(self, msgToolDone{Turn: turn, Call: call.ID, Attempt: attempt, Res: res, Images: refs, Err: err})
	}()
	return true
}

// skipCall ends a write that an earlier write of its response (w) made
// skip: failed, without running.
func (a *sessionActor) skipCall(t *turnState, c, w *callState) bool {
	why := skipReason(w)
	b := a.newBatch()
	b.add(recToolFinished, recToolEnd{Turn: t.Turn, Call: c.ID, Status: StatusFailed, Error: why, Skipped: true})
	if !a.appendBatch(b) {
		return false
	}
	if tm := a.timers["expire/"+c.ID]; tm != nil {
		tm.Stop()
		delete(a.timers, "expire/"+c.ID)
	}
	a.publish(Event{Type: EventToolCallFinished, Turn: t.Turn, Step: c.Step, StepKind: StepCallTool,
		CallID: c.ID, ToolName: c.Name, Effect: c.Effect, ToolStatus: StatusFailed, Text: why})
	a.m.hookAt("STEP boundary " + a.id)
	return true
}

func idempotencyKey(session string, turn int, call string) string {
	return fmt.Sprintf("%s/%d/%s", session, turn, call)
}

// runHandler runs one attempt: a panic becomes an error, and the attempt
// ends at its timeout even when the handler ignores its context (the
// handler's goroutine then runs on until it returns; its result is
// dropped).
func (m *Manager) runHandler(ctx context.Context, r resolved, call Call) (Result, error) {
	type out struct {
		res Result
		err error
	}
	ch := make(chan out, 1)
	m.work.Add(1)
	go func() {
		defer m.work.Done()
		defer func() {
			if v := recover(); v != nil {
				ch <- out{err: errPanic{v}}
			}
		}()
		res, err := r.tool.Handler(ctx, call)
		ch <- out{res, err}
	}()
	select {
	case o := <-ch:
		if o.err == nil && ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			// Finished exactly at the deadline: the result stands.
			return o.res, nil
		}
		return o.res, o.err
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return Result{}, fmt.Errorf("timed out after %v", r.timeout)
		}
		return Result{}, ctx.Err()
	}
}

func (a *sessionActor) onToolDone(msg msgToolDone) {
	f := a.tools[msg.Call]
	if f == nil || f.attempt != msg.Attempt {
		return
	}
	delete(a.tools, msg.Call)
	f.cancel()
	t := a.st.Active
	if t == nil || t.Turn != msg.Turn || a.broken != nil {
		return
	}
	c := a.st.call(msg.Turn, msg.Call)
	if c == nil || c.Status != "" {
		return
	}
	b := a.newBatch()
	var ev Event
	switch te, isTE := isToolError(msg.Err); {
	case msg.Err == nil:
		b.add(recToolFinished, recToolEnd{Turn: t.Turn, Call: c.ID, Status: StatusSucceeded, Result: msg.Res.Content, Images: msg.Images})
		ev.ToolStatus = StatusSucceeded
	case isTE:
		b.add(recToolFinished, recToolEnd{Turn: t.Turn, Call: c.ID, Status: StatusFailed, Error: te.Msg})
		ev.ToolStatus, ev.Text = StatusFailed, te.Msg
	default:
		a.attemptFailed(t, c, msg.Attempt, msg.Err.Error(), false)
		return
	}
	if !a.appendBatch(b) {
		return
	}
	ev.Type, ev.Turn, ev.Step, ev.Attempt, ev.StepKind = EventToolCallFinished, t.Turn, c.Step, msg.Attempt, StepCallTool
	ev.CallID, ev.ToolName, ev.Effect = c.ID, c.Name, c.Effect
	a.publish(ev)
	a.m.hookAt("STEP boundary " + a.id)
}

// attemptFailed applies the effect's retry rule to a failed (or, after a
// crash, interrupted) attempt: a read or idempotent write with attempts
// left runs again after a backoff; otherwise the record ends failed (read)
// or outcome_unknown (writes).
func (a *sessionActor) attemptFailed(t *turnState, c *callState, attempt int, why string, interrupted bool) bool {
	b := a.newBatch()
	b.add(recToolAttemptFail, recToolFail{Turn: t.Turn, Call: c.ID, Attempt: attempt, Error: why})
	// A Manager that is closing records the failed attempt and leaves the
	// retry to the next process.
	retry := c.Effect.retryable() && attempt < c.MaxAttempts && !t.Cancel
	if retry && a.closing {
		return a.appendBatch(b)
	}
	var status ToolStatus
	var final string
	if !retry {
		status = c.Effect.exhausted()
		switch {
		case !c.Effect.retryable() && interrupted:
			final = fmt.Sprintf("a single-attempt call was interrupted: %s", why)
		case !c.Effect.retryable():
			final = fmt.Sprintf("a single-attempt call failed: %s", why)
		default:
			final = fmt.Sprintf("%d attempts failed; the last: %s", attempt, why)
		}
		b.add(recToolFinished, recToolEnd{Turn: t.Turn, Call: c.ID, Status: status, Error: final})
	}
	if !a.appendBatch(b) {
		return false
	}
	a.publish(Event{Type: EventToolCallFinished, Turn: t.Turn, Step: c.Step, Attempt: attempt, StepKind: StepCallTool,
		CallID: c.ID, ToolName: c.Name, Effect: c.Effect, ToolStatus: status, Text: why})
	if retry {
		r, _ := a.m.policyFor(c.Name)
		d := backoff(a.m.opt.RetryBackoff, attempt)
		if r.backoff > 0 {
			d = backoff(r.backoff, attempt)
		}
		a.retrying[c.ID] = true
		a.after("retry/"+c.ID, d, msgToolRetry{Turn: t.Turn, Call: c.ID})
	}
	a.m.hookAt("STEP boundary " + a.id)
	return true
}
