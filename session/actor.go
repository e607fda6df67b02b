package session

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/trace"

	"github.com/chorusrt/chorus/llm"
)

// journalTimeout bounds one journal operation.
const journalTimeout = 30 * time.Second

// Requests to a session actor. Each is answered with a reply.
type (
	msgSend struct {
		Msg  wireMsg
		From trace.SpanContext // the sender's span (telemetry.go)
	}
	msgResolve struct {
		Interrupt string
		Approved  bool
		Reason    string
		From      trace.SpanContext // the resolver's span (telemetry.go)
	}
	msgCancel   struct{}
	msgSnapshot struct{}
	msgWait     struct{}
	msgClose    struct{}
)

// Reports from the actor's own goroutines and timers.
type (
	msgModelDone struct {
		Turn, Step, Attempt int
		Res                 *llm.ChatResult
		State               []byte            // a ModelStep's
		Agents              map[string]string // a ModelStep's
		Err                 error
	}
	msgModelRetry  struct{ Turn, Step, Attempt int }
	msgCompactDone struct {
		Turn, Through int
		Summary       string
		Usage         llm.Usage
		Err           error
	}
	msgToolDone struct {
		Turn    int
		Call    string
		Attempt int
		Res     Result
		Images  []MediaRef
		Err     error
	}
	msgToolRetry struct {
		Turn int
		Call string
	}
	msgExpire struct {
		Turn int
		Call string
	}
)

// flight is a model call or tool attempt in progress.
type flight struct {
	attempt int
	step    int
	cancel  context.CancelFunc
}

// sessionActor is one session: the single writer of its journal. Its
// durable state changes only through state.apply of records it appended.
type sessionActor struct {
	m    *Manager
	id   string
	e    *entry
	ev   *eventLog
	log  *slog.Logger
	self *actor.PID
	ctx  actor.Context

	st     *state
	broken error

	closing      bool
	closeWaiters []*actor.PID
	waiters      []*actor.PID

	model        *flight
	modelRetry   bool
	lastModelErr string
	compacting   bool
	compactStop  context.CancelFunc
	skipCompact  int // turn for which a failed compaction is not retried
	tools        map[string]*flight
	trace        *sessionTrace // telemetry.go
	retrying     map[string]bool
	timers       map[string]*time.Timer
	lastActive   time.Time // when the last message other than msgIdle came
}

func newSessionActor(m *Manager, id string, e *entry, l *eventLog) *sessionActor {
	return &sessionActor{m: m, id: id, e: e, ev: l, log: m.log.With(slog.String("session", id))}
}

// Receive handles one message, then advances the session as far as its
// state allows.
func (a *sessionActor) Receive(c actor.Context) {
	a.ctx = c
	defer func() { a.ctx = nil }()
	if _, idle := c.Message().(msgIdle); !idle {
		a.lastActive = time.Now()
	}
	switch msg := c.Message().(type) {
	case *actor.Started:
		a.self = c.Self()
		a.recover()
	case *actor.Restarting:
		// A panic restarts the actor, which recovers from the journal;
		// callers waiting here ask the new incarnation.
		a.trace.end()
		a.trace = nil
		a.stopFlights(true)
		a.dismiss(errRestarted, errRestarted)
		return
	case *actor.Stopping:
		a.trace.end()
		a.stopFlights(a.broken != nil)
		a.dismiss(ErrClosed, nil)
		return
	case *actor.Stopped:
		a.m.forget(a.id, a.e)
		close(a.e.stopped)
		return
	case msgSend:
		a.onSend(msg)
	case msgResolve:
		a.onResolve(msg)
	case msgCancel:
		a.onCancel()
	case msgSnapshot:
		if a.admit() {
			a.respond(a.snapshot(), nil)
		}
	case msgWait:
		if a.admit() {
			a.waiters = append(a.waiters, c.Sender())
		}
	case msgClose:
		a.onClose()
	case msgModelDone:
		a.onModelDone(msg)
	case msgModelRetry:
		if t := a.st.Active; t != nil && t.Turn == msg.Turn && t.ModelStep == msg.Step {
			a.modelRetry = false
		}
	case msgCompactDone:
		a.onCompactDone(msg)
	case msgToolDone:
		a.onToolDone(msg)
	case msgToolRetry:
		if a.st.Active != nil && a.st.Active.Turn == msg.Turn {
			delete(a.retrying, msg.Call)
			delete(a.timers, "retry/"+msg.Call)
		}
	case msgExpire:
		a.onExpire(msg)
	case msgIdle:
		a.onIdle()
	}
	a.advance()
	a.armIdle()
}

// admit answers a request that the session cannot take or that names a
// session the journal does not know, and reports whether to go on.
func (a *sessionActor) admit() bool {
	if a.refuse() {
		return false
	}
	if a.st.Seq == 0 {
		a.respond(nil, ErrUnknownSession)
		return false
	}
	return true
}

// refuse answers a request when the session cannot take it.
func (a *sessionActor) refuse() bool {
	switch {
	case a.broken != nil:
		a.respond(nil, a.broken)
	case a.closing:
		a.respond(nil, ErrClosed)
	default:
		return false
	}
	return true
}

func (a *sessionActor) respond(v any, err error) {
	if a.ctx.Sender() != nil {
		a.ctx.Respond(reply{v: v, err: err})
	}
}

func (a *sessionActor) send(to *actor.PID, v any, err error) {
	a.ctx.Send(to, reply{v: v, err: err})
}

// fail stops the session after a journal failure: nothing more can be
// recorded, so nothing more may run. The next call naming the session
// activates a new actor, which recovers from the journal.
func (a *sessionActor) fail(err error) {
	if a.broken != nil {
		return
	}
	a.broken = err
	a.e.setErr(err)
	if a.st == nil {
		a.st = newState(a.id)
	}
	a.log.Error("session stopped", slog.String("error", err.Error()))
	a.dismiss(err, nil)
	a.ctx.Stop(a.self)
}

// dismiss answers every caller in Wait with waitErr and every caller in
// Close with closeErr.
func (a *sessionActor) dismiss(waitErr, closeErr error) {
	for _, w := range a.waiters {
		a.send(w, nil, waitErr)
	}
	for _, w := range a.closeWaiters {
		a.send(w, nil, closeErr)
	}
	a.waiters, a.closeWaiters = nil, nil
}

// stopFlights stops timers and the model call; with cancelTools it also
// cancels running tool attempts.
func (a *sessionActor) stopFlights(cancelTools bool) {
	for k, t := range a.timers {
		t.Stop()
		delete(a.timers, k)
	}
	if a.model != nil {
		a.model.cancel()
	}
	if a.compactStop != nil {
		a.compactStop()
	}
	if cancelTools {
		for _, f := range a.tools {
			f.cancel()
		}
	}
}

func (a *sessionActor) idle() bool {
	return a.st.Active == nil && len(a.st.Queue) == 0 && !a.compacting
}

// advance runs every transition the state allows, then answers waiters.
func (a *sessionActor) advance() {
	for range 10_000 {
		if a.broken != nil || !a.next() {
			break
		}
	}
	if a.broken != nil {
		return
	}
	if a.idle() || a.closing {
		err := error(nil)
		if a.closing && !a.idle() {
			err = ErrClosed
		}
		for _, w := range a.waiters {
			a.send(w, a.st.Last, err)
		}
		a.waiters = nil
	}
	if a.closing && len(a.tools) == 0 {
		for _, w := range a.closeWaiters {
			a.send(w, nil, nil)
		}
		a.closeWaiters = nil
	}
}

// next performs at most one durable transition and reports whether it did.
func (a *sessionActor) next() bool {
	st := a.st
	if a.closing || st == nil {
		return false
	}
	t := st.Active
	if t == nil {
		if a.compacting || len(st.Queue) == 0 {
			return false
		}
		return a.startTurn()
	}
	if t.Cancel {
		return a.cancelStep(t)
	}
	if t.Phase == phaseModel {
		if a.model != nil || a.modelRetry {
			return false
		}
		return a.runModel(t)
	}
	calls := st.batch()
	gates := st.gates(calls)
	for i, c := range calls {
		if c.Status != "" || a.tools[c.ID] != nil || a.retrying[c.ID] {
			continue
		}
		if w := gates[i].skip; w != nil {
			return a.skipCall(t, c, w)
		}
		if c.Approval && !c.Resolved {
			a.armDeadline(c)
			continue
		}
		if gates[i].wait {
			continue
		}
		if c.Running {
			// Started, never ended, and not running here: the process
			// that ran it stopped.
			return a.attemptFailed(t, c, c.Attempts, fmt.Sprintf("interrupted: the process stopped during attempt %d", c.Attempts), true)
		}
		return a.startAttempt(t, c)
	}
	return false
}

// backoff is base doubled per earlier failure (attempt counts from 1),
// capped at 30 seconds.
func backoff(base time.Duration, attempt int) time.Duration {
	d := base
	for i := 1; i < attempt && d < 30*time.Second; i++ {
		d *= 2
	}
	return min(d, 30*time.Second)
}

// after sends msg to the actor after d, under a timer name (a newer timer
// of the same name replaces it).
func (a *sessionActor) after(name string, d time.Duration, msg any) {
	if old := a.timers[name]; old != nil {
		old.Stop()
	}
	self, sys := a.self, a.m.sys
	a.timers[name] = time.AfterFunc(d, func() { sys.Root.Send(self, msg) })
}

func (a *sessionActor) onClose() {
	a.closing = true
	a.stopFlights(false)
	a.model = nil
	a.modelRetry = false
	clear(a.retrying)
	if a.compacting {
		a.compacting = false
	}
	if len(a.tools) == 0 {
		a.respond(nil, nil)
		return
	}
	a.closeWaiters = append(a.closeWaiters, a.ctx.Sender())
}
