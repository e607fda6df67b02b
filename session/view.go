package session

import (
	"context"
	"errors"
	"slices"

	"github.com/chorusrt/chorus/store"
)

// snapshot builds the public view of the state.
func (a *sessionActor) snapshot() *Snapshot { return snapshotOf(a.id, a.st, a.currentStep()) }

// snapshotOf builds the public view of a state at step.
func snapshotOf(id string, st *state, step StepKind) *Snapshot {
	s := &Snapshot{ID: id, Step: step, Turn: st.Turn, Usage: st.Usage, ModelCalls: st.ModelCalls,
		Summary: st.Summary, SummaryThrough: st.SummaryThrough, Last: st.Last, Seq: st.Seq}
	if st.Active != nil {
		s.StepNum = st.Active.Step
	}
	for _, h := range st.History {
		s.History = append(s.History, h.Msg.message())
	}
	for _, q := range st.Queue {
		s.Queued = append(s.Queued, q.Msg.message())
	}
	for _, c := range st.Calls {
		r := c.ToolRecord
		r.Images = slices.Clone(r.Images)
		r.AttemptErrors = slices.Clone(r.AttemptErrors)
		s.Tools = append(s.Tools, r)
		if c.Approval && !c.Resolved && c.Status == "" {
			s.Pending = append(s.Pending, Interrupt{ID: c.Interrupt, Turn: c.Turn, Call: r, Deadline: c.Deadline})
		}
	}
	return s
}

// restingStep is the step the journal shows when no actor runs the
// session: AwaitUserMessage between turns, AwaitToolApproval when the
// turn's calls wait for approvals only, else the step the turn resumes
// with once the session is activated (ResumeTurn in the model phase,
// CallTool in the tools phase).
func (s *state) restingStep() StepKind {
	t := s.Active
	switch {
	case t == nil:
		return StepAwaitUserMessage
	case !s.hasWork():
		return StepAwaitToolApproval
	case t.Phase == phaseModel:
		return StepResumeTurn
	}
	return StepCallTool
}

// ReadSnapshot returns a session's snapshot as its journal holds it,
// without activating the session anywhere: its latest snapshot record and
// every later record, replayed (what an activation recovers), with Step
// the journal's (see Snapshot.Passive). A cluster's console lists the
// sessions of the cluster's journal so. A session without records is
// ErrUnknownSession.
func ReadSnapshot(ctx context.Context, j store.Journal, id string) (*Snapshot, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	st, err := loadState(ctx, j, id)
	if err != nil {
		return nil, err
	}
	if st.Seq == 0 {
		return nil, ErrUnknownSession
	}
	s := snapshotOf(id, st, st.restingStep())
	s.Passive = true
	return s, nil
}

// Peek returns the session's snapshot without activating it: an active
// session's from its actor, as Snapshot does, and a passive one's from the
// journal (ReadSnapshot, Passive set). A console lists sessions with it,
// so that looking at a passivated session does not bring it back into
// memory.
func (m *Manager) Peek(ctx context.Context, id string) (*Snapshot, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	m.mu.Lock()
	if m.closed || m.closing.Load() {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	e, ok := m.actors[id]
	if ok {
		select {
		case <-e.stopped:
			ok = false
		default:
			ok = e.getErr() == nil
		}
	}
	if ok {
		e.calls++ // no idle passivation meanwhile
	}
	m.mu.Unlock()
	if ok {
		v, err := m.ask(ctx, e, msgSnapshot{})
		m.done(e)
		switch {
		case err == nil:
			s, _ := v.(*Snapshot)
			return s, nil
		case !errors.Is(err, errNotDelivered) && !errors.Is(err, errRestarted):
			return nil, err
		}
		// The actor stopped meanwhile: the journal has what it did.
	}
	return ReadSnapshot(ctx, m.opt.Journal, id)
}

func (a *sessionActor) currentStep() StepKind {
	t := a.st.Active
	switch {
	case t == nil && a.compacting:
		return StepCompact
	case t == nil:
		return StepAwaitUserMessage
	case t.Phase == phaseModel && (t.ModelRunning || t.ModelCalls == 0 || a.model != nil):
		return StepRunModel
	case t.Phase == phaseModel:
		return StepResumeTurn
	}
	pending := false
	calls := a.st.batch()
	gates := a.st.gates(calls)
	for i, c := range calls {
		if c.Status != "" || gates[i].wait && !c.Approval {
			continue
		}
		if c.Running || a.tools[c.ID] != nil || a.retrying[c.ID] || (c.Approval && c.Resolved) || !c.Approval {
			return StepCallTool
		}
		pending = true
	}
	if pending {
		return StepAwaitToolApproval
	}
	return StepCallTool
}

// Live returns the ids of the sessions this Manager holds, sorted: those
// its actors run (a turn in progress among them) and the passivated ones
// it parked with approvals pending (by idleness or Recover). Every session
// of the process waiting for an approval or running a turn is among them;
// a console looks at them whatever else it leaves out of a long list.
func (m *Manager) Live() []string {
	m.mu.Lock()
	ids := make([]string, 0, len(m.actors)+len(m.parked))
	for id := range m.actors {
		ids = append(ids, id)
	}
	for id := range m.parked {
		ids = append(ids, id)
	}
	m.mu.Unlock()
	slices.Sort(ids)
	return slices.Compact(ids)
}
