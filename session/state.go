package session

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/store"
)

// TurnStatus is how a turn ended.
type TurnStatus string

// Turn statuses.
const (
	TurnCompleted TurnStatus = "completed"
	TurnFailed    TurnStatus = "failed"
	TurnCancelled TurnStatus = "cancelled"
)

// StepKind names a step of a turn.
type StepKind string

// Step kinds.
const (
	StepAwaitUserMessage  StepKind = "AwaitUserMessage"
	StepCompact           StepKind = "Compact"
	StepRunModel          StepKind = "RunModel"
	StepAwaitToolApproval StepKind = "AwaitToolApproval"
	StepCallTool          StepKind = "CallTool"
	StepResumeTurn        StepKind = "ResumeTurn"
)

const (
	phaseModel = "model"
	phaseTools = "tools"
)

// histEntry is one message of the history, with the turn it belongs to.
type histEntry struct {
	Turn int     `json:"turn"`
	Msg  wireMsg `json:"msg"`
}

type queuedMsg struct {
	QID int     `json:"qid"`
	Msg wireMsg `json:"msg"`
}

// callState is a tool record with what the session needs to run it.
type callState struct {
	ToolRecord
	MaxAttempts int       `json:"max_attempts"`
	Deadline    time.Time `json:"deadline,omitzero"`
	Resolved    bool      `json:"resolved,omitempty"`
	Approved    bool      `json:"approved,omitempty"`
	Expired     bool      `json:"expired,omitempty"`
	Reason      string    `json:"reason,omitempty"`
	// Running: an attempt started and has not ended, as far as the journal
	// knows. After a crash such a call was interrupted.
	Running bool `json:"running,omitempty"`
	Unknown bool `json:"unknown,omitempty"`
}

// turnState is the durable state of the turn in progress.
type turnState struct {
	Turn      int    `json:"turn"`
	Step      int    `json:"step"`       // last step number used
	HistStart int    `json:"hist_start"` // index of the turn's first message in History
	Phase     string `json:"phase"`
	// ModelStep and ModelAttempt are the current RunModel step and its
	// attempts so far; ModelRunning says an attempt started without output.
	ModelStep    int      `json:"model_step"`
	ModelAttempt int      `json:"model_attempt"`
	ModelRunning bool     `json:"model_running,omitempty"`
	ModelCalls   int      `json:"model_calls"`
	Batch        []string `json:"batch,omitempty"` // ids of the current calls, in the model's order
	// Ordered: the writes of the current batch run one at a time, in the
	// model's order (recorded with the model output, so a restart under
	// other Options keeps the order the batch began with).
	Ordered bool `json:"ordered,omitempty"`
	// State is the ModelStep state of the turn's last model output, and
	// LastBatch the calls of the batch that ended last, in order.
	State        []byte   `json:"state,omitempty"`
	LastBatch    []string `json:"last_batch,omitempty"`
	Cancel       bool     `json:"cancel,omitempty"`
	CancelReason string   `json:"cancel_reason,omitempty"`
}

// TurnResult is how the last turn ended.
type TurnResult struct {
	// Turn is the turn's number (0: no turn has finished).
	Turn   int
	Status TurnStatus
	// Answer is the text of the turn's last assistant message.
	Answer string
	// Error says why a turn failed or was cancelled.
	Error string
	// Note is the turn-failure note stored for the next turn's model.
	Note string
}

// state is a session's durable state: what replaying its journal yields.
type state struct {
	ID             string         `json:"id"`
	Seq            int64          `json:"seq"`
	Turn           int            `json:"turn"`
	Active         *turnState     `json:"active,omitempty"`
	History        []histEntry    `json:"history"`
	Queue          []queuedMsg    `json:"queue,omitempty"`
	NextQID        int            `json:"next_qid"`
	Calls          []*callState   `json:"calls,omitempty"`
	Usage          llm.Usage      `json:"usage"`
	ModelCalls     int            `json:"model_calls"`
	Summary        string         `json:"summary,omitempty"`
	SummaryThrough int            `json:"summary_through,omitempty"`
	Last           TurnResult     `json:"last"`
	Turns          map[int]string `json:"turns,omitempty"` // status of every finished turn
}

func newState(id string) *state { return &state{ID: id, Turns: map[int]string{}} }

// call finds a call by turn and id (calls of recent turns are at the end).
func (s *state) call(turn int, id string) *callState {
	for i := len(s.Calls) - 1; i >= 0; i-- {
		c := s.Calls[i]
		if c.Turn == turn && c.ID == id {
			return c
		}
		if c.Turn < turn {
			break
		}
	}
	return nil
}

// batch returns the calls of the active turn's current batch.
func (s *state) batch() []*callState {
	if s.Active == nil {
		return nil
	}
	out := make([]*callState, 0, len(s.Active.Batch))
	for _, id := range s.Active.Batch {
		if c := s.call(s.Active.Turn, id); c != nil {
			out = append(out, c)
		}
	}
	return out
}

// turnCalls returns every call of a turn.
func (s *state) turnCalls(turn int) []*callState {
	var out []*callState
	for _, c := range s.Calls {
		if c.Turn == turn {
			out = append(out, c)
		}
	}
	return out
}

func (s *state) take(qids []int, turn int) {
	for _, q := range qids {
		i := slices.IndexFunc(s.Queue, func(m queuedMsg) bool { return m.QID == q })
		if i < 0 {
			continue
		}
		s.History = append(s.History, histEntry{Turn: turn, Msg: s.Queue[i].Msg})
		s.Queue = slices.Delete(s.Queue, i, i+1)
	}
}

// apply folds one journal record into the state. It is the only place the
// durable state changes, so a live session and one recovered from its
// journal are the same.
func (s *state) apply(r store.Record) error {
	if r.Seq > s.Seq {
		s.Seq = r.Seq
	}
	if err := s.fold(r); err != nil {
		return fmt.Errorf("session %q: record %d (%s): %w", s.ID, r.Seq, r.Kind, err)
	}
	return nil
}

// fold applies one record's payload.
func (s *state) fold(r store.Record) error {
	switch r.Kind {
	case recUserMessage:
		return decoded(r.Data, func(p recUser) {
			s.Queue = append(s.Queue, queuedMsg(p))
			s.NextQID = max(s.NextQID, p.QID+1)
		})
	case recTurnStarted:
		return decoded(r.Data, func(p recTurn) {
			s.Turn = p.Turn
			s.Active = &turnState{Turn: p.Turn, HistStart: len(s.History), Phase: phaseModel}
			s.take(p.Taken, p.Turn)
		})
	case recCompaction:
		return decoded(r.Data, func(p recCompact) {
			s.Summary, s.SummaryThrough = p.Summary, p.Through
			s.Usage = s.Usage.Add(p.Usage)
		})
	case recModelStarted:
		return onTurn(s, r.Data, func(p recModelStart, t *turnState) {
			s.take(p.Taken, p.Turn)
			t.Step = max(t.Step, p.Step)
			t.ModelStep, t.ModelAttempt, t.ModelRunning = p.Step, p.Attempt, true
			t.Phase = phaseModel
		})
	case recModelOutput:
		return onTurn(s, r.Data, s.modelOutput)
	case recApprovalResolved:
		return onCall(s, r.Data, func(p recResolve, c *callState) {
			c.Resolved, c.Approved, c.Expired, c.Reason = true, p.Approved, p.Expired, p.Reason
		})
	case recToolStarted:
		return onCall(s, r.Data, func(p recToolStart, c *callState) {
			c.Attempts, c.Key, c.Running = p.Attempt, p.Key, true
		})
	case recToolAttemptFail:
		return onCall(s, r.Data, func(p recToolFail, c *callState) {
			c.Running = false
			c.AttemptErrors = append(c.AttemptErrors, p.Error)
		})
	case recToolFinished:
		return onCall(s, r.Data, func(p recToolEnd, c *callState) {
			c.Running = false
			c.Status, c.Result, c.Error, c.Images, c.Skipped = p.Status, p.Result, p.Error, p.Images, p.Skipped
			s.maybeResume()
		})
	case recCancelRequested:
		return decoded(r.Data, func(p recCancel) {
			if s.Active != nil && s.Active.Turn == p.Turn {
				s.Active.Cancel, s.Active.CancelReason = true, p.Reason
			}
		})
	case recTurnFinished:
		return decoded(r.Data, s.finishTurn)
	}
	// A newer version's record: ignored, so old code can still read the
	// journal (unknown data stays zero).
	return nil
}

// decoded decodes a record's payload and hands it to f.
func decoded[P any](data []byte, f func(P)) error {
	var p P
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	f(p)
	return nil
}

// inTurn is a payload of the active turn; ofCall one naming a call.
type (
	inTurn interface{ turnNum() int }
	ofCall interface {
		callKey() (turn int, call string)
	}
)

func (p recModelStart) turnNum() int          { return p.Turn }
func (p recModelOut) turnNum() int            { return p.Turn }
func (p recResolve) callKey() (int, string)   { return p.Turn, p.Call }
func (p recToolStart) callKey() (int, string) { return p.Turn, p.Call }
func (p recToolFail) callKey() (int, string)  { return p.Turn, p.Call }
func (p recToolEnd) callKey() (int, string)   { return p.Turn, p.Call }

// onTurn decodes a payload of the active turn and hands it to f with the
// turn; there must be one.
func onTurn[P inTurn](s *state, data []byte, f func(P, *turnState)) error {
	var p P
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	t := s.Active
	if t == nil || t.Turn != p.turnNum() {
		return fmt.Errorf("no active turn %d", p.turnNum())
	}
	f(p, t)
	return nil
}

// onCall decodes a payload naming a call and hands it to f with the call,
// which must exist.
func onCall[P ofCall](s *state, data []byte, f func(P, *callState)) error {
	var p P
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	c := s.call(p.callKey())
	if c == nil {
		_, id := p.callKey()
		return fmt.Errorf("unknown call %q", id)
	}
	f(p, c)
	return nil
}

// modelOutput records a model step's message and the calls it plans.
func (s *state) modelOutput(p recModelOut, t *turnState) {
	t.ModelRunning = false
	t.ModelCalls++
	s.ModelCalls++
	s.Usage = s.Usage.Add(p.Usage)
	s.History = append(s.History, histEntry{Turn: p.Turn, Msg: p.Msg})
	t.Batch, t.Ordered, t.State = nil, p.Ordered, p.State
	for _, pc := range p.Calls {
		c := &callState{ToolRecord: ToolRecord{Turn: p.Turn, ID: pc.ID, ModelCallID: pc.ModelCallID, Name: pc.Name,
			Arguments: pc.Arguments, Effect: pc.Effect, Step: pc.Step, ApprovalStep: pc.ApprovalStep, Approval: pc.Approval, Interrupt: pc.Interrupt, Agent: pc.Agent},
			MaxAttempts: pc.MaxAttempts, Deadline: pc.Deadline, Unknown: pc.Unknown}
		s.Calls = append(s.Calls, c)
		t.Batch = append(t.Batch, pc.ID)
		t.Step = max(t.Step, pc.Step)
	}
	if len(p.Calls) > 0 {
		t.Phase = phaseTools
	}
}

// hasWork reports whether the session has a step to run: a queued
// message, or a turn in progress that waits for more than approvals.
func (s *state) hasWork() bool {
	if len(s.Queue) > 0 {
		return true
	}
	t := s.Active
	if t == nil {
		return false
	}
	if t.Cancel || t.Phase != phaseTools {
		return true
	}
	calls := s.batch()
	gates := s.gates(calls)
	for i, c := range calls {
		if c.Status == "" && (gates[i].skip != nil || !gates[i].wait && (!c.Approval || c.Resolved)) {
			return true
		}
	}
	return false
}

// writeGate is what the order of writes allows an unfinished call of the
// current batch: to wait for an earlier write of the response, or to end
// skipped because an earlier write did not succeed (skip names it).
type writeGate struct {
	wait bool
	skip *callState
}

// gates returns the gate of each call of calls (the current batch, in the
// model's order). In an ordered batch a write may start only once every
// earlier write of the response succeeded; once one ended otherwise
// (failed, rejected, outcome_unknown), the later writes end failed,
// skipped. Reads are never gated, and a call that already started an
// attempt is not either: it follows the crash rules of its effect.
func (s *state) gates(calls []*callState) []writeGate {
	out := make([]writeGate, len(calls))
	if s.Active == nil || !s.Active.Ordered {
		return out
	}
	var first *callState // the earliest write that has not succeeded
	for i, c := range calls {
		if c.Effect == EffectRead {
			continue
		}
		if first != nil && c.Status == "" && c.Attempts == 0 && !c.Running {
			if first.Status == "" {
				out[i].wait = true
			} else {
				out[i].skip = first
			}
		}
		if first == nil && c.Status != StatusSucceeded {
			first = c
		}
	}
	return out
}

// earlierWrite reports whether a write precedes c in the current batch.
func (s *state) earlierWrite(c *callState) bool {
	for _, x := range s.batch() {
		if x == c {
			return false
		}
		if x.Effect != EffectRead {
			return true
		}
	}
	return false
}

// skipReason is the error of a write skipped because w did not succeed.
func skipReason(w *callState) string {
	return fmt.Sprintf("skipped: an earlier write of this response, %s (call %s), ended %s, so this call did not run", w.Name, w.ID, w.Status)
}

// nextDeadline is the earliest deadline of the pending approvals (zero
// when none has one).
func (s *state) nextDeadline() time.Time {
	var d time.Time
	for _, c := range s.batch() {
		if c.Status == "" && c.Approval && !c.Resolved && !c.Deadline.IsZero() && (d.IsZero() || c.Deadline.Before(d)) {
			d = c.Deadline
		}
	}
	return d
}

// maybeResume appends the function responses of a finished batch to the
// history, in the model's order, and returns the turn to the model phase.
func (s *state) maybeResume() {
	t := s.Active
	if t == nil || t.Phase != phaseTools {
		return
	}
	calls := s.batch()
	for _, c := range calls {
		if c.Status == "" {
			return
		}
	}
	for _, c := range calls {
		s.History = append(s.History, histEntry{Turn: t.Turn, Msg: toWire(functionResponse(&c.ToolRecord))})
	}
	t.LastBatch, t.Batch = t.Batch, nil
	t.Phase = phaseModel
}

func (s *state) finishTurn(p recTurnEnd) {
	t := s.Active
	if t == nil || t.Turn != p.Turn {
		return
	}
	answer := ""
	for i := len(s.History) - 1; i >= t.HistStart; i-- {
		if m := s.History[i].Msg; m.Role == llm.RoleAssistant {
			answer = m.Content
			break
		}
	}
	if p.Status != TurnCompleted {
		// The turn's assistant messages and function responses may be
		// incomplete (calls without responses): the model sees the user
		// messages of the turn and the note instead.
		kept := s.History[:t.HistStart]
		for _, h := range s.History[t.HistStart:] {
			if h.Msg.Role == llm.RoleUser {
				kept = append(kept, h)
			}
		}
		s.History = append(kept, histEntry{Turn: t.Turn, Msg: wireMsg{Role: llm.RoleUser, Content: p.Note}})
		answer = ""
	}
	s.Last = TurnResult{Turn: p.Turn, Status: p.Status, Answer: answer, Error: p.Error, Note: p.Note}
	if s.Turns == nil {
		s.Turns = map[int]string{}
	}
	s.Turns[p.Turn] = string(p.Status)
	s.Active = nil
}

// Function responses the model sees for calls that did not succeed.
const (
	failedPrefix   = "The tool call failed: "
	rejectedPrefix = "The tool call was rejected: "
	// OutcomeUnknownText is the function response of an outcome_unknown
	// call.
	OutcomeUnknownText = "The outcome of this tool call is unknown: it may or may not have taken effect. Check before calling it again."
)

// functionResponse is the tool message the model sees for a record.
func functionResponse(r *ToolRecord) llm.Message {
	m := llm.Message{Role: llm.RoleTool, ToolCallID: r.ModelCallID, ToolName: r.Name}
	switch r.Status {
	case StatusSucceeded:
		m.Content = r.Result
		if m.Content == "" {
			m.Content = `{"result":""}`
		}
		for _, ref := range r.Images {
			m.Parts = append(m.Parts, ref.Part())
		}
	case StatusFailed:
		m.Content, m.IsError = errorJSON(failedPrefix+r.Error), true
	case StatusRejected:
		m.Content, m.IsError = errorJSON(rejectedPrefix+r.Error), true
	default:
		m.Content, m.IsError = errorJSON(OutcomeUnknownText), true
	}
	return m
}

func errorJSON(msg string) string {
	b, _ := json.Marshal(map[string]string{"error": msg})
	return string(b)
}

// turnNote is the note a failed or cancelled turn leaves for the next
// turn's model: what happened and every call with its outcome.
func turnNote(turn int, status TurnStatus, reason string, calls []*callState, ends map[string]recToolEnd) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[chorus] Turn %d %s", turn, status)
	if reason != "" {
		fmt.Fprintf(&b, ": %s", reason)
	}
	b.WriteString(".")
	if len(calls) == 0 {
		b.WriteString(" It made no tool calls.")
		return b.String()
	}
	b.WriteString(" Its tool calls and their outcomes:")
	for _, c := range calls {
		st, res, er := c.Status, c.Result, c.Error
		if e, ok := ends[c.ID]; ok {
			st, res, er = e.Status, e.Result, e.Error
		}
		fmt.Fprintf(&b, "\n- %s (call %s) %s: %s", c.Name, c.ID, compactArgs(c.Arguments), st)
		switch {
		case st == StatusSucceeded && res != "":
			fmt.Fprintf(&b, ": %s", clip(res, 300))
		case st == StatusOutcomeUnknown:
			b.WriteString(": it may or may not have taken effect")
		case er != "":
			fmt.Fprintf(&b, ": %s", clip(er, 300))
		}
	}
	b.WriteString("\nDo not repeat a call that succeeded or whose outcome is unknown without checking first.")
	return b.String()
}

func compactArgs(s string) string {
	if s == "" {
		return "{}"
	}
	return clip(s, 200)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8Start(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
