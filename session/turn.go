package session

import (
	"fmt"
	"strings"
)

func (a *sessionActor) onSend(msg msgSend) {
	if a.refuse() {
		return
	}
	b := a.newBatch()
	b.add(recUserMessage, recUser{QID: a.st.NextQID, Msg: msg.Msg})
	if a.appendBatch(b) {
		a.sent(msg.From) // telemetry.go
		a.respond(nil, nil)
	} else {
		a.respond(nil, a.broken)
	}
}

// startTurn compacts when the policy says so, then starts a turn with
// every queued message.
func (a *sessionActor) startTurn() bool {
	st := a.st
	if a.needCompaction() {
		a.startCompaction()
		return false
	}
	turn := st.Turn + 1
	qids := make([]int, 0, len(st.Queue))
	for _, q := range st.Queue {
		qids = append(qids, q.QID)
	}
	b := a.newBatch()
	b.add(recTurnStarted, recTurn{Turn: turn, Taken: qids})
	if !a.appendBatch(b) {
		return false
	}
	a.publish(Event{Type: EventTurnStarted, Turn: turn})
	return true
}

// turnFinished publishes the end of the turn and saves a snapshot.
func (a *sessionActor) turnFinished(status TurnStatus) {
	a.publish(Event{Type: EventTurnFinished, Turn: a.st.Last.Turn, TurnStatus: status, Text: a.st.Last.Error})
	a.saveSnapshot()
	a.m.hookAt("STEP boundary " + a.id)
}

func (a *sessionActor) onCancel() {
	if !a.admit() {
		return
	}
	t := a.st.Active
	if t == nil {
		a.respond(nil, ErrNoActiveTurn)
		return
	}
	if t.Cancel {
		a.respond(nil, nil)
		return
	}
	b := a.newBatch()
	b.add(recCancelRequested, recCancel{Turn: t.Turn, Reason: "cancelled by the caller"})
	if !a.appendBatch(b) {
		a.respond(nil, a.broken)
		return
	}
	a.respond(nil, nil)
	if a.model != nil {
		a.model.cancel()
	}
}

// cancelStep ends a cancelled turn once nothing runs: the model call is
// cancelled, running tool attempts end on their own and are recorded.
func (a *sessionActor) cancelStep(t *turnState) bool {
	if a.model != nil {
		a.model.cancel()
		return false
	}
	if len(a.tools) > 0 {
		return false
	}
	return a.endTurn(t, TurnCancelled, t.CancelReason)
}

// endTurn ends a turn that failed or was cancelled: every call that has
// not ended gets its final record, and the turn a note listing each call
// and its outcome for the next turn's model.
func (a *sessionActor) endTurn(t *turnState, status TurnStatus, reason string) bool {
	for name, tm := range a.timers {
		if strings.HasPrefix(name, "retry/") || strings.HasPrefix(name, "expire/") || name == "model" {
			tm.Stop()
			delete(a.timers, name)
		}
	}
	clear(a.retrying)
	a.modelRetry = false
	ends := map[string]recToolEnd{}
	var order []string
	for _, c := range a.st.batch() {
		if c.Status != "" {
			continue
		}
		e := recToolEnd{Turn: t.Turn, Call: c.ID}
		switch {
		case c.Approval && !c.Resolved:
			e.Status, e.Error = StatusRejected, "not approved before the turn was "+string(status)
		case c.Running:
			e.Status, e.Error = c.Effect.exhausted(), fmt.Sprintf("interrupted during attempt %d, and the turn was %s", c.Attempts, status)
		case c.Attempts > 0:
			e.Status = c.Effect.exhausted()
			e.Error = fmt.Sprintf("the turn was %s before attempt %d", status, c.Attempts+1)
			if n := len(c.AttemptErrors); n > 0 {
				e.Error += "; the last error: " + c.AttemptErrors[n-1]
			}
		default:
			e.Status, e.Error = StatusFailed, "not run: the turn was "+string(status)
		}
		ends[c.ID] = e
		order = append(order, c.ID)
	}
	note := turnNote(t.Turn, status, reason, a.st.turnCalls(t.Turn), ends)
	b := a.newBatch()
	for _, id := range order {
		b.add(recToolFinished, ends[id])
	}
	b.add(recTurnFinished, recTurnEnd{Turn: t.Turn, Status: status, Error: reason, Note: note})
	if !a.appendBatch(b) {
		return false
	}
	for _, id := range order {
		c := a.st.call(t.Turn, id)
		a.publish(Event{Type: EventToolCallFinished, Turn: t.Turn, Step: c.Step, StepKind: StepCallTool,
			CallID: c.ID, ToolName: c.Name, Effect: c.Effect, ToolStatus: c.Status, Text: c.Error})
	}
	a.turnFinished(status)
	return true
}
