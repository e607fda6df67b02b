package session

import (
	"fmt"
	"slices"
	"time"
)

func interruptID(turn int, call string) string { return fmt.Sprintf("approval/%d/%s", turn, call) }

func (a *sessionActor) armDeadline(c *callState) {
	name := "expire/" + c.ID
	if c.Deadline.IsZero() || a.timers[name] != nil {
		return
	}
	a.after(name, max(time.Until(c.Deadline), 0), msgExpire{Turn: c.Turn, Call: c.ID})
}

func (a *sessionActor) onExpire(msg msgExpire) {
	delete(a.timers, "expire/"+msg.Call)
	t := a.st.Active
	if t == nil || t.Turn != msg.Turn || a.closing || a.broken != nil {
		return
	}
	c := a.st.call(msg.Turn, msg.Call)
	if c == nil || c.Resolved || c.Status != "" {
		return
	}
	if d := time.Until(c.Deadline); d > 0 {
		a.after("expire/"+c.ID, d, msg)
		return
	}
	const why = "the approval deadline passed"
	b := a.newBatch()
	b.add(recApprovalResolved, recResolve{Turn: t.Turn, Interrupt: c.Interrupt, Call: c.ID, Approved: false, Reason: why, Expired: true})
	b.add(recToolFinished, recToolEnd{Turn: t.Turn, Call: c.ID, Status: StatusRejected, Error: why})
	if !a.appendBatch(b) {
		return
	}
	a.publish(Event{Type: EventApprovalResolved, Turn: t.Turn, Step: c.ApprovalStep, Attempt: 1, StepKind: StepAwaitToolApproval,
		CallID: c.ID, ToolName: c.Name, Effect: c.Effect, Interrupt: c.Interrupt, Reason: why})
	a.publish(Event{Type: EventToolCallFinished, Turn: t.Turn, Step: c.Step, StepKind: StepCallTool,
		CallID: c.ID, ToolName: c.Name, Effect: c.Effect, ToolStatus: StatusRejected, Text: why})
	a.m.hookAt("STEP boundary " + a.id)
}

func (a *sessionActor) onResolve(msg msgResolve) {
	if !a.admit() {
		return
	}
	var c *callState
	for _, x := range slices.Backward(a.st.Calls) {
		if x.Interrupt == msg.Interrupt {
			c = x
			break
		}
	}
	refusal := func(err error) *ResolveError {
		return &ResolveError{Session: a.id, Interrupt: msg.Interrupt, Err: err}
	}
	t := a.st.Active
	switch {
	case c == nil || msg.Interrupt == "":
		a.respond(nil, refusal(ErrUnknownInterrupt))
		return
	case c.Resolved && c.Expired:
		e := refusal(ErrStaleInterrupt)
		e.Expired, e.Reason = true, c.Reason
		a.respond(nil, e)
		return
	case c.Resolved:
		e := refusal(ErrAlreadyResolved)
		e.Approved, e.Reason = c.Approved, c.Reason
		a.respond(nil, e)
		return
	case c.Status != "" || t == nil || t.Turn != c.Turn || t.Cancel:
		e := refusal(ErrStaleInterrupt)
		e.Reason = "its turn ended"
		if t != nil && t.Turn == c.Turn && t.Cancel {
			e.Reason = "its turn is being cancelled"
		}
		a.respond(nil, e)
		return
	}
	b := a.newBatch()
	b.add(recApprovalResolved, recResolve{Turn: t.Turn, Interrupt: c.Interrupt, Call: c.ID, Approved: msg.Approved, Reason: msg.Reason})
	why := msg.Reason
	if !msg.Approved {
		if why == "" {
			why = "a person rejected the call"
		}
		b.add(recToolFinished, recToolEnd{Turn: t.Turn, Call: c.ID, Status: StatusRejected, Error: why})
	}
	if !a.appendBatch(b) {
		a.respond(nil, a.broken)
		return
	}
	a.respond(nil, nil)
	a.sent(msg.From) // telemetry.go: the turn links the resolver's span, or resumes under it
	if tm := a.timers["expire/"+c.ID]; tm != nil {
		tm.Stop()
		delete(a.timers, "expire/"+c.ID)
	}
	a.publish(Event{Type: EventApprovalResolved, Turn: t.Turn, Step: c.ApprovalStep, Attempt: 1, StepKind: StepAwaitToolApproval,
		CallID: c.ID, ToolName: c.Name, Effect: c.Effect, Interrupt: c.Interrupt, Approved: msg.Approved, Reason: msg.Reason})
	if !msg.Approved {
		a.publish(Event{Type: EventToolCallFinished, Turn: t.Turn, Step: c.Step, StepKind: StepCallTool,
			CallID: c.ID, ToolName: c.Name, Effect: c.Effect, ToolStatus: StatusRejected, Text: why})
	}
	a.m.hookAt("STEP boundary " + a.id)
}
