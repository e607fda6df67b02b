package session

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/store"
)

// Sessions lists the ids of the sessions the Manager's journal holds (at
// least one record each), sorted. It reads the journal only: no session is
// activated.
func (m *Manager) Sessions(ctx context.Context) ([]string, error) {
	return m.opt.Journal.Sessions(ctx)
}

// Timeline returns the session's journal as a timeline, oldest first (see
// ReadTimeline). It reads the journal only: the session is not activated.
func (m *Manager) Timeline(ctx context.Context, id string) ([]TimelineEntry, error) {
	return ReadTimeline(ctx, m.opt.Journal, id)
}

// TimelineEntry is one journal record of a session, decoded for people:
// a user message, a turn's start or end, a model call with its usage, a
// tool call's attempt or outcome, an approval's resolution, a compaction.
type TimelineEntry struct {
	Seq  int64
	At   time.Time
	Kind string // the record kind: user_message, turn_started, model_started, model_output, approval_resolved, tool_started, tool_attempt_failed, tool_finished, cancel_requested, turn_finished, compaction
	Turn int
	// Step and Attempt are set on model and tool records.
	Step    int
	Attempt int
	// Call is the session's call id on tool and approval records, Tool its
	// tool's name and Effect its effect class.
	Call   string
	Tool   string
	Effect Effect
	// Status is a tool record's or a turn's end status.
	Status string
	// Text is the record's content: a user or assistant message, a tool
	// result or error, an approval's reason, a compaction summary. It is
	// what a model or a tool produced: escape it before showing it.
	Text string
	// Usage is a model call's usage (model_output, compaction).
	Usage *llm.Usage
	// Calls are the tool calls a model_output plans.
	Calls []PlannedCall
	// Interrupt and Approved describe an approval's resolution; Expired
	// says its deadline resolved it.
	Interrupt string
	Approved  bool
	Expired   bool
}

// PlannedCall is a tool call a model output asked for.
type PlannedCall struct {
	ID        string
	Name      string
	Arguments string
	Effect    Effect
	Step      int
	// Agent is the agent that asked for the call (a ModelStep's agent
	// tree; empty for Chorus's own loop).
	Agent string
	// Approval says the call waits for approval; Deadline is its deadline
	// (zero: none).
	Approval bool
	Deadline time.Time
}

// ReadTimeline reads a session's journal, every record from the first,
// as a timeline (a snapshot does not shorten it). A session without
// records has an empty timeline.
func ReadTimeline(ctx context.Context, j store.Journal, id string) ([]TimelineEntry, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	recs, err := j.Read(ctx, id, 1)
	if err != nil {
		return nil, fmt.Errorf("session %q: reading journal: %w", id, err)
	}
	calls := map[string]plannedCall{}
	out := make([]TimelineEntry, 0, len(recs))
	for _, r := range recs {
		e := TimelineEntry{Seq: r.Seq, At: r.At, Kind: r.Kind}
		tool := func(call string) {
			e.Call = call
			if c, ok := calls[fmt.Sprint(e.Turn)+"/"+call]; ok {
				e.Tool, e.Effect = c.Name, c.Effect
				if e.Step == 0 {
					e.Step = c.Step
				}
			}
		}
		var derr error
		switch r.Kind {
		case recUserMessage:
			derr = decoded(r.Data, func(p recUser) { e.Text = messageText(p.Msg.message()) })
		case recTurnStarted:
			derr = decoded(r.Data, func(p recTurn) { e.Turn = p.Turn })
		case recCompaction:
			derr = decoded(r.Data, func(p recCompact) { e.Turn, e.Text, e.Usage = p.Through, p.Summary, &p.Usage })
		case recModelStarted:
			derr = decoded(r.Data, func(p recModelStart) { e.Turn, e.Step, e.Attempt = p.Turn, p.Step, p.Attempt })
		case recModelOutput:
			derr = decoded(r.Data, func(p recModelOut) {
				e.Turn, e.Step, e.Attempt, e.Usage = p.Turn, p.Step, p.Attempt, &p.Usage
				e.Text = messageText(p.Msg.message())
				for _, c := range p.Calls {
					calls[fmt.Sprint(p.Turn)+"/"+c.ID] = c
					e.Calls = append(e.Calls, PlannedCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments, Effect: c.Effect,
						Step: c.Step, Agent: c.Agent, Approval: c.Approval, Deadline: c.Deadline})
				}
			})
		case recApprovalResolved:
			derr = decoded(r.Data, func(p recResolve) {
				e.Turn = p.Turn
				tool(p.Call)
				if c, ok := calls[fmt.Sprint(p.Turn)+"/"+p.Call]; ok {
					e.Step = c.ApprovalStep
				}
				e.Interrupt, e.Approved, e.Expired, e.Text = p.Interrupt, p.Approved, p.Expired, p.Reason
			})
		case recToolStarted:
			derr = decoded(r.Data, func(p recToolStart) { e.Turn, e.Attempt = p.Turn, p.Attempt; tool(p.Call) })
		case recToolAttemptFail:
			derr = decoded(r.Data, func(p recToolFail) { e.Turn, e.Attempt, e.Text = p.Turn, p.Attempt, p.Error; tool(p.Call) })
		case recToolFinished:
			derr = decoded(r.Data, func(p recToolEnd) {
				e.Turn, e.Status = p.Turn, string(p.Status)
				tool(p.Call)
				e.Text = p.Result
				if p.Error != "" {
					e.Text = p.Error
				}
			})
		case recCancelRequested:
			derr = decoded(r.Data, func(p recCancel) { e.Turn, e.Text = p.Turn, p.Reason })
		case recTurnFinished:
			derr = decoded(r.Data, func(p recTurnEnd) { e.Turn, e.Status, e.Text = p.Turn, string(p.Status), p.Error })
		}
		if derr != nil {
			return nil, fmt.Errorf("session %q: record %d (%s): %w", id, r.Seq, r.Kind, derr)
		}
		out = append(out, e)
	}
	return out, nil
}

// messageText is a message's text: its content and text parts; other
// parts are named by their type.
func messageText(m llm.Message) string {
	var b strings.Builder
	b.WriteString(m.Content)
	for _, p := range m.Parts {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		if p.Type == llm.PartText {
			b.WriteString(p.Text)
		} else {
			b.WriteString("[" + string(p.Type) + "]")
		}
	}
	return b.String()
}
