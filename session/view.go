package session

import (
	"slices"
)

// snapshot builds the public view of the state.
func (a *sessionActor) snapshot() *Snapshot {
	st := a.st
	s := &Snapshot{ID: a.id, Step: a.currentStep(), Turn: st.Turn, Usage: st.Usage, ModelCalls: st.ModelCalls,
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
	for _, c := range a.st.batch() {
		if c.Status != "" {
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
