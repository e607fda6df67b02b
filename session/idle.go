package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"
)

// Idle passivation. A session with no work (see quiet) for
// Options.IdleTimeout is passivated: its actor stops, its state leaves
// memory, and the next call naming it activates a new actor, which
// recovers from the journal. The actor itself decides, since it alone
// knows exactly whether it has work, and the Manager takes it off its
// table only when no caller holds it (entry.calls), so that no call ever
// meets a passivating actor. A passivated session whose turn waits for
// approvals is parked: Resolve activates it like any call, and a timer
// activates it at its earliest approval deadline, which recovery then
// expires.

// msgIdle: the actor's idle timer fired.
type msgIdle struct{}

// quiet reports whether the session has no work here: no step runs or
// waits for a retry, nothing is queued, no caller waits in Wait, and a turn
// in progress waits only for approvals.
func (a *sessionActor) quiet() bool {
	return a.st != nil && a.broken == nil && !a.closing && !a.compacting && a.model == nil && !a.modelRetry &&
		len(a.tools) == 0 && len(a.retrying) == 0 && len(a.waiters) == 0 && !a.st.hasWork()
}

// armIdle starts the idle timer of a quiet session, for what remains of
// IdleTimeout since its last message.
func (a *sessionActor) armIdle() {
	d := a.m.opt.IdleTimeout
	if d < 0 || a.timers == nil || a.timers["idle"] != nil || !a.quiet() {
		return
	}
	a.after("idle", d-time.Since(a.lastActive), msgIdle{})
}

// onIdle passivates the session once it has been quiet for IdleTimeout.
func (a *sessionActor) onIdle() {
	delete(a.timers, "idle")
	if !a.quiet() || time.Since(a.lastActive) < a.m.opt.IdleTimeout {
		return // armIdle starts the timer again when the session is quiet
	}
	if !a.m.retire(a.id, a.e, a.st.Active != nil, a.st.nextDeadline()) {
		// A caller holds the actor: its message comes next.
		a.lastActive = time.Now()
		return
	}
	a.log.Debug("session passivated", slog.String("reason", "idle"), slog.Bool("awaiting_approval", a.st.Active != nil))
	a.closing = true
	a.ctx.Stop(a.self)
}

// retire takes an idle session's actor off the table, unless a caller
// holds it or the Manager is closing; a session whose turn waits for
// approvals is parked, with a wake-up at deadline when it is not zero.
func (m *Manager) retire(id string, e *entry, awaitingApproval bool, deadline time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.closing.Load() || m.actors[id] != e || e.calls > 0 {
		return false
	}
	delete(m.actors, id)
	m.leaving[e] = id
	if awaitingApproval {
		m.parkLocked(id, deadline)
	}
	return true
}

// forget drops a stopped actor's entry, and the session's event stream
// when no actor runs it any more and nobody reads it.
func (m *Manager) forget(id string, e *entry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.leaving, e)
	if m.actors[id] == e {
		delete(m.actors, id)
	}
	m.releaseLogLocked(id)
}

// releaseLogLocked drops the event stream of a session that no actor runs
// and nobody reads, keeping only its next event number. m.mu is held.
func (m *Manager) releaseLogLocked(id string) {
	l := m.logs[id]
	if _, active := m.actors[id]; active || l == nil || l.subs > 0 {
		return
	}
	if next := l.nextSeq(); next > l.origin {
		m.seqs[id] = numbering{l.origin, next}
	}
	delete(m.logs, id)
}

// parkLocked records a passivated session whose turn waits for approvals,
// waking it at deadline (when not zero). m.mu is held.
func (m *Manager) parkLocked(id string, deadline time.Time) {
	if m.closed || m.closing.Load() {
		return
	}
	m.unparkLocked(id)
	var t *time.Timer
	if !deadline.IsZero() {
		t = time.AfterFunc(time.Until(deadline), func() { m.wake(id) })
	}
	m.parked[id] = t
}

// unparkLocked forgets a parked session and reports whether it was
// parked. m.mu is held.
func (m *Manager) unparkLocked(id string) bool {
	t, ok := m.parked[id]
	if ok {
		if t != nil {
			t.Stop()
		}
		delete(m.parked, id)
	}
	return ok
}

// wake activates a parked session at its approval deadline: recovery
// expires the approval and the turn goes on.
func (m *Manager) wake(id string) {
	m.mu.Lock()
	_, ok := m.parked[id]
	m.mu.Unlock()
	if !ok {
		return
	}
	if e, err := m.actorFor(id); err == nil {
		m.done(e)
	}
}

// done releases an entry actorFor returned.
func (m *Manager) done(e *entry) {
	m.mu.Lock()
	e.calls--
	m.mu.Unlock()
}

// active returns the ids of the sessions whose actor runs (or is still
// stopping after an idle passivation), sorted.
func (m *Manager) active() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := make([]string, 0, len(m.actors)+len(m.leaving))
	for id := range m.actors {
		ids = append(ids, id)
	}
	for _, id := range m.leaving {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Passivate stops one session's actor, as Close does for every session:
// no new step starts, a running model call is cancelled, and running tool
// attempts end and are recorded (until ctx ends; an attempt still running
// then is left to the crash rules, as after a crash). The session stays in
// the journal: the next call naming it activates it again, and it
// recovers where it stopped. Passivate reports whether the session was
// idle (awaiting a user message, nothing queued, no approval pending). A
// session that is not active is idle, unless it was passivated for
// idleness while its turn waits for approvals: then it is not, and its
// approval deadline no longer activates it here. A cluster node
// passivates the sessions it hands to another node.
func (m *Manager) Passivate(ctx context.Context, id string) (idle bool, err error) {
	if err := checkID(id); err != nil {
		return false, err
	}
	m.mu.Lock()
	e, ok := m.actors[id]
	parked := m.unparkLocked(id)
	if ok {
		e.calls++ // no idle passivation meanwhile
	}
	m.mu.Unlock()
	if !ok {
		return !parked, nil
	}
	defer m.done(e)
	select {
	case <-e.stopped:
		return true, nil
	default:
	}
	idle = true
	if v, err := m.ask(ctx, e, msgSnapshot{}); err == nil {
		if s, _ := v.(*Snapshot); s != nil {
			idle = s.Step == StepAwaitUserMessage && len(s.Queued) == 0 && len(s.Pending) == 0
		}
	} else if !errors.Is(err, ErrUnknownSession) {
		idle = false
	}
	_, cerr := m.ask(ctx, e, msgClose{})
	_ = m.sys.Root.StopFuture(e.pid).Wait()
	if cerr != nil && !errors.Is(cerr, ErrClosed) && !errors.Is(cerr, errNotDelivered) {
		return idle, cerr
	}
	return idle, nil
}

// Recover resumes the sessions of the journal that a crash (or Close)
// interrupted with work pending: a turn with a step to run (a RunModel
// runs again, tool calls follow their effect's crash rule) or queued
// messages, which start turns. It activates those only, one at a time
// through the journal: a session awaiting a user message stays passive,
// and so does one whose turn waits only for approvals, until Resolve or
// its earliest approval deadline activates it (one whose deadline passed
// is activated at once, and expires it). It returns the ids of the
// sessions with a turn in progress or queued messages, those waiting for
// approvals included.
func (m *Manager) Recover(ctx context.Context) ([]string, error) {
	ids, err := m.opt.Journal.Sessions(ctx)
	if err != nil {
		return nil, fmt.Errorf("session: listing sessions: %w", err)
	}
	var busy []string
	for _, id := range ids {
		b, err := m.recoverOne(ctx, id)
		if err != nil {
			return busy, err
		}
		if b {
			busy = append(busy, id)
		}
	}
	return busy, nil
}

// recoverOne resumes one session when it has work pending, and reports
// whether it has a turn in progress or queued messages.
func (m *Manager) recoverOne(ctx context.Context, id string) (bool, error) {
	m.mu.Lock()
	_, active := m.actors[id]
	m.mu.Unlock()
	if !active {
		st, err := loadState(ctx, m.opt.Journal, id)
		if err != nil {
			return false, err
		}
		busy := st.Active != nil || len(st.Queue) > 0
		deadline := st.nextDeadline()
		if !st.hasWork() && (deadline.IsZero() || time.Until(deadline) > 0) {
			if st.Active != nil {
				m.mu.Lock()
				if _, now := m.actors[id]; !now {
					m.parkLocked(id, deadline)
				}
				m.mu.Unlock()
			}
			return busy, nil
		}
	}
	v, err := m.call(ctx, id, msgSnapshot{})
	if err != nil {
		return false, err
	}
	s, _ := v.(*Snapshot)
	return s != nil && (s.Step != StepAwaitUserMessage || len(s.Queued) > 0), nil
}
