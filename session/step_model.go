package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/chorusrt/chorus/llm"
)

// runModel starts a RunModel attempt: a new step, or the next attempt of
// the current one (after a failure or a crash).
func (a *sessionActor) runModel(t *turnState) bool {
	o := &a.m.opt
	step, attempt := t.ModelStep, t.ModelAttempt+1
	var taken []int
	if !t.ModelRunning {
		if t.ModelCalls >= o.MaxModelCalls {
			return a.endTurn(t, TurnFailed, fmt.Sprintf("the turn reached its limit of %d model calls", o.MaxModelCalls))
		}
		step, attempt = t.Step+1, 1
		// Steering: queued user messages join the history at this step
		// boundary, after the function responses.
		for _, q := range a.st.Queue {
			taken = append(taken, q.QID)
		}
	}
	if attempt > o.ModelAttempts {
		why := a.lastModelErr
		if why == "" {
			why = "interrupted: the process stopped during the call"
		}
		return a.endTurn(t, TurnFailed, fmt.Sprintf("the model call failed after %d attempts: %s", o.ModelAttempts, why))
	}
	b := a.newBatch()
	b.add(recModelStarted, recModelStart{Turn: t.Turn, Step: step, Attempt: attempt, Taken: taken})
	if !a.appendBatch(b) {
		return false
	}
	a.publish(Event{Type: EventStepStarted, Turn: t.Turn, Step: step, Attempt: attempt, StepKind: StepRunModel})
	a.m.hookAt("STEP RunModel " + a.id)
	req := &llm.ChatRequest{Model: o.ModelName, Messages: a.modelMessages(), Tools: a.m.defs}
	ctx, cancel := context.WithTimeout(a.trace.ctx(a.m.base), o.ModelTimeout)
	a.model = &flight{attempt: attempt, step: step, cancel: cancel}
	self, sys, turn := a.self, a.m.sys, t.Turn
	delta := func(ev llm.Event) {
		var typ EventType
		switch ev.Type {
		case llm.EventText:
			typ = EventTextDelta
		case llm.EventReasoning:
			typ = EventReasoningDelta
		default:
			return
		}
		a.publish(Event{Type: typ, Turn: turn, Step: step, Attempt: attempt, StepKind: StepRunModel, Text: ev.Text})
	}
	var in *StepInput
	if o.ModelStep != nil {
		in = &StepInput{Session: a.id, Turn: turn, Step: step, Attempt: attempt, Messages: req.Messages,
			State: t.State, Delta: delta}
		for _, id := range t.LastBatch {
			if c := a.st.call(turn, id); c != nil {
				r := c.ToolRecord
				r.Images, r.AttemptErrors = slices.Clone(r.Images), slices.Clone(r.AttemptErrors)
				in.Results = append(in.Results, r)
			}
		}
	}
	a.m.work.Add(1)
	go func() {
		defer a.m.work.Done()
		defer cancel()
		if in != nil {
			out, err := a.m.runStep(ctx, in)
			done := msgModelDone{Turn: turn, Step: step, Attempt: attempt, Err: err}
			if err == nil {
				done.Res, done.State, done.Agents = out.Result, out.State, out.Agents
			}
			sys.Root.Send(self, done)
			return
		}
		res, err := a.m.streamModel(ctx, req, delta)
		sys.Root.Send(self, msgModelDone{Turn: turn, Step: step, Attempt: attempt, Res: res, Err: err})
	}()
	return true
}

// runStep runs one attempt of a ModelStep (media stay references); a
// panic is an error of the attempt.
func (m *Manager) runStep(ctx context.Context, in *StepInput) (out *StepOutput, err error) {
	defer func() {
		if v := recover(); v != nil {
			out, err = nil, fmt.Errorf("the model step panicked: %v", v)
		}
	}()
	in.Media = m.opt.Media
	out, err = m.opt.ModelStep.RunModel(ctx, *in)
	if err == nil && (out == nil || out.Result == nil) {
		err = errors.New("the model step returned no result")
	}
	return out, err
}

// streamModel runs one model call, with media references swapped for
// their bytes, and calls delta for every streamed event.
func (m *Manager) streamModel(ctx context.Context, req *llm.ChatRequest, delta func(llm.Event)) (*llm.ChatResult, error) {
	for i := range req.Messages {
		parts, err := loadParts(ctx, m.opt.Media, req.Messages[i].Parts)
		if err != nil {
			return nil, fmt.Errorf("loading media: %w", err)
		}
		req.Messages[i].Parts = parts
	}
	s, err := m.opt.Model.Stream(ctx, req)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	for ev := range s.Events() {
		if delta != nil {
			delta(ev)
		}
	}
	return s.Result()
}

// modelMessages is the model input: instructions, the compaction summary,
// and the history after it.
func (a *sessionActor) modelMessages() []llm.Message {
	st := a.st
	var msgs []llm.Message
	if a.m.opt.Instructions != "" {
		msgs = append(msgs, llm.SystemText(a.m.opt.Instructions))
	}
	if st.Summary != "" {
		msgs = append(msgs, llm.UserText(summaryPreamble(st.SummaryThrough)+st.Summary))
	}
	for _, h := range st.History {
		if h.Turn <= st.SummaryThrough {
			continue
		}
		msgs = append(msgs, h.Msg.message())
	}
	return msgs
}

func summaryPreamble(through int) string {
	return fmt.Sprintf("[chorus] Summary of the conversation so far (turns 1 to %d):\n", through)
}

func (a *sessionActor) onModelDone(msg msgModelDone) {
	if a.model == nil || a.model.attempt != msg.Attempt || a.model.step != msg.Step {
		return
	}
	a.model = nil
	t := a.st.Active
	if t == nil || t.Turn != msg.Turn || t.Cancel || a.closing || a.broken != nil {
		return
	}
	o := &a.m.opt
	if msg.Err != nil && errors.Is(msg.Err, ErrStepFailed) {
		a.endTurn(t, TurnFailed, msg.Err.Error())
		return
	}
	if msg.Err != nil {
		a.lastModelErr = msg.Err.Error()
		a.log.WarnContext(a.trace.ctx(context.Background()), "model call failed", slog.Int("turn", t.Turn), slog.Int("step", msg.Step), slog.Int("attempt", msg.Attempt), slog.String("error", a.lastModelErr))
		if msg.Attempt >= o.ModelAttempts {
			a.endTurn(t, TurnFailed, fmt.Sprintf("the model call failed after %d attempts: %s", msg.Attempt, a.lastModelErr))
			return
		}
		a.modelRetry = true
		a.after("model", backoff(o.RetryBackoff, msg.Attempt), msgModelRetry{Turn: t.Turn, Step: msg.Step, Attempt: msg.Attempt})
		return
	}
	a.lastModelErr = ""
	a.modelOutput(t, msg)
}

// modelOutput records the assistant message and plans its tool calls:
// effect, approval, step numbers and ids are fixed here, durably.
func (a *sessionActor) modelOutput(t *turnState, msg msgModelDone) {
	o := &a.m.opt
	res := msg.Res
	am := res.Message()
	used := map[string]bool{}
	for _, c := range a.st.turnCalls(t.Turn) {
		used[c.ID] = true
	}
	step := msg.Step
	var calls []plannedCall
	var unknown []recToolEnd
	for i, tc := range am.ToolCalls {
		if tc.ID == "" {
			tc.ID = fmt.Sprintf("call_%d_%d", msg.Step, i)
			am.ToolCalls[i].ID = tc.ID
		}
		id := tc.ID
		for n := 2; used[id]; n++ {
			id = fmt.Sprintf("%s~%d", tc.ID, n)
		}
		used[id] = true
		pc := plannedCall{ID: id, ModelCallID: tc.ID, Name: tc.Name, Arguments: tc.Arguments, Agent: msg.Agents[tc.ID]}
		r, ok := a.m.policyFor(tc.Name)
		if !ok {
			step++
			pc.Step, pc.Unknown, pc.Effect, pc.MaxAttempts = step, true, o.DefaultEffect, 1
			unknown = append(unknown, recToolEnd{Turn: t.Turn, Call: id, Status: StatusFailed, Error: fmt.Sprintf("not run: there is no tool named %q", tc.Name)})
			calls = append(calls, pc)
			continue
		}
		pc.Effect, pc.MaxAttempts = r.effect, r.maxAttempts
		if r.approval {
			step++
			pc.Approval, pc.ApprovalStep, pc.Interrupt = true, step, interruptID(t.Turn, id)
			if o.ApprovalTimeout > 0 {
				pc.Deadline = time.Now().Add(o.ApprovalTimeout).UTC()
			}
		}
		step++
		pc.Step = step
		calls = append(calls, pc)
	}
	b := a.newBatch()
	b.add(recModelOutput, recModelOut{Turn: t.Turn, Step: msg.Step, Attempt: msg.Attempt, Msg: toWire(am), Usage: res.Usage, Calls: calls, Ordered: len(calls) > 0 && !o.ParallelWrites, State: msg.State})
	for _, u := range unknown {
		b.add(recToolFinished, u)
	}
	done := len(calls) == 0
	if done {
		b.add(recTurnFinished, recTurnEnd{Turn: t.Turn, Status: TurnCompleted})
	}
	if !a.appendBatch(b) {
		return
	}
	for _, u := range unknown {
		a.publish(Event{Type: EventToolCallFinished, Turn: t.Turn, Step: a.st.call(t.Turn, u.Call).Step, StepKind: StepCallTool,
			CallID: u.Call, ToolName: a.st.call(t.Turn, u.Call).Name, ToolStatus: StatusFailed, Text: u.Error})
	}
	for _, pc := range calls {
		if pc.Approval {
			a.publish(Event{Type: EventApprovalRequested, Turn: t.Turn, Step: pc.ApprovalStep, Attempt: 1, StepKind: StepAwaitToolApproval,
				CallID: pc.ID, ToolName: pc.Name, Effect: pc.Effect, Interrupt: pc.Interrupt})
			a.m.hookAt("APPROVAL pending " + a.id + " " + pc.Interrupt)
		}
	}
	if done {
		a.turnFinished(TurnCompleted)
		return
	}
	a.m.hookAt("STEP boundary " + a.id)
}
