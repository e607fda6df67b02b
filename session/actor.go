package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/store"
)

// journalTimeout bounds one journal operation.
const journalTimeout = 30 * time.Second

// Requests to a session actor. Each is answered with a reply.
type (
	msgSend    struct{ Msg wireMsg }
	msgResolve struct {
		Interrupt string
		Approved  bool
		Reason    string
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
	retrying     map[string]bool
	timers       map[string]*time.Timer
}

func newSessionActor(m *Manager, id string, e *entry, l *eventLog) *sessionActor {
	return &sessionActor{m: m, id: id, e: e, ev: l, log: m.log.With(slog.String("session", id))}
}

// Receive handles one message, then advances the session as far as its
// state allows.
func (a *sessionActor) Receive(c actor.Context) {
	a.ctx = c
	defer func() { a.ctx = nil }()
	switch msg := c.Message().(type) {
	case *actor.Started:
		a.self = c.Self()
		a.recover()
	case *actor.Restarting:
		// A panic restarts the actor, which recovers from the journal;
		// callers waiting here ask the new incarnation.
		a.stopFlights(true)
		for _, w := range a.waiters {
			a.send(w, nil, errRestarted)
		}
		for _, w := range a.closeWaiters {
			a.send(w, nil, errRestarted)
		}
		a.waiters, a.closeWaiters = nil, nil
		return
	case *actor.Stopping:
		a.stopFlights(a.broken != nil)
		for _, w := range a.waiters {
			a.send(w, nil, ErrClosed)
		}
		for _, w := range a.closeWaiters {
			a.send(w, nil, nil)
		}
		a.waiters, a.closeWaiters = nil, nil
		return
	case *actor.Stopped:
		close(a.e.stopped)
		return
	case msgSend:
		a.onSend(msg)
	case msgResolve:
		a.onResolve(msg)
	case msgCancel:
		a.onCancel()
	case msgSnapshot:
		if a.refuse() {
			break
		}
		if a.st.Seq == 0 {
			a.respond(nil, ErrUnknownSession)
			break
		}
		a.respond(a.snapshot(), nil)
	case msgWait:
		if a.refuse() {
			break
		}
		if a.st.Seq == 0 {
			a.respond(nil, ErrUnknownSession)
			break
		}
		a.waiters = append(a.waiters, c.Sender())
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
	}
	a.advance()
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

// recover rebuilds the state from the journal: the latest snapshot, then
// every later record.
func (a *sessionActor) recover() {
	a.tools, a.retrying, a.timers = map[string]*flight{}, map[string]bool{}, map[string]*time.Timer{}
	ctx, cancel := context.WithTimeout(context.Background(), journalTimeout)
	defer cancel()
	st := newState(a.id)
	j := a.m.opt.Journal
	seq, data, err := j.LoadSnapshot(ctx, a.id)
	switch {
	case err == nil && len(data) > 0:
		if err := json.Unmarshal(data, st); err != nil {
			a.fail(fmt.Errorf("session %q: decoding snapshot %d: %w", a.id, seq, err))
			return
		}
		st.ID = a.id
		st.Seq = seq
	case err != nil && !errors.Is(err, store.ErrNotFound):
		a.fail(fmt.Errorf("session %q: loading snapshot: %w", a.id, err))
		return
	}
	recs, err := j.Read(ctx, a.id, st.Seq+1)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		a.fail(fmt.Errorf("session %q: reading journal: %w", a.id, err))
		return
	}
	for _, r := range recs {
		if r.Seq <= st.Seq {
			continue
		}
		if err := st.apply(r); err != nil {
			a.fail(err)
			return
		}
	}
	a.st = st
	if st.Seq > 0 {
		a.log.Debug("session recovered", slog.Int64("seq", st.Seq), slog.Int("turn", st.Turn), slog.Bool("active", st.Active != nil))
	}
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
	for _, w := range a.waiters {
		a.send(w, nil, err)
	}
	for _, w := range a.closeWaiters {
		a.send(w, nil, nil)
	}
	a.waiters, a.closeWaiters = nil, nil
	a.ctx.Stop(a.self)
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

// appendBatch appends b atomically and applies its records. It reports
// whether the records are durable; on failure the session stops.
func (a *sessionActor) appendBatch(b *batch) bool {
	if a.broken != nil {
		return false
	}
	if b.err != nil {
		a.fail(b.err)
		return false
	}
	if len(b.recs) == 0 {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), journalTimeout)
	defer cancel()
	last, err := a.m.opt.Journal.Append(ctx, a.id, a.st.Seq, b.recs...)
	if err != nil {
		a.fail(fmt.Errorf("session %q: journal append: %w", a.id, err))
		return false
	}
	first := last - int64(len(b.recs)) + 1
	for i := range b.recs {
		r := b.recs[i]
		r.Seq = first + int64(i)
		if err := a.st.apply(r); err != nil {
			a.fail(err)
			return false
		}
	}
	a.st.Seq = last
	return true
}

func (a *sessionActor) newBatch() *batch { return &batch{id: a.id} }

func (a *sessionActor) publish(ev Event) {
	ev.Session = a.id
	a.ev.publish(ev)
}

// saveSnapshot stores the state after a turn, so recovery reads only the
// records since. A failure costs only recovery time.
func (a *sessionActor) saveSnapshot() {
	data, err := json.Marshal(a.st)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), journalTimeout)
		err = a.m.opt.Journal.SaveSnapshot(ctx, a.id, a.st.Seq, data)
		cancel()
	}
	if err != nil {
		a.log.Warn("session snapshot not saved", slog.String("error", err.Error()))
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
	for _, c := range st.batch() {
		if c.Status != "" || a.tools[c.ID] != nil || a.retrying[c.ID] {
			continue
		}
		if c.Approval && !c.Resolved {
			a.armDeadline(c)
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

func (a *sessionActor) onSend(msg msgSend) {
	if a.refuse() {
		return
	}
	b := a.newBatch()
	b.add(recUserMessage, recUser{QID: a.st.NextQID, Msg: msg.Msg})
	if a.appendBatch(b) {
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
	ctx, cancel := context.WithTimeout(a.m.base, o.ModelTimeout)
	a.model = &flight{attempt: attempt, step: step, cancel: cancel}
	self, sys, turn := a.self, a.m.sys, t.Turn
	a.m.work.Add(1)
	go func() {
		defer a.m.work.Done()
		defer cancel()
		res, err := a.m.streamModel(ctx, req, func(ev llm.Event) {
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
		})
		sys.Root.Send(self, msgModelDone{Turn: turn, Step: step, Attempt: attempt, Res: res, Err: err})
	}()
	return true
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

func interruptID(turn int, call string) string { return fmt.Sprintf("approval/%d/%s", turn, call) }

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
	if msg.Err != nil {
		a.lastModelErr = msg.Err.Error()
		a.log.Warn("model call failed", slog.Int("turn", t.Turn), slog.Int("step", msg.Step), slog.Int("attempt", msg.Attempt), slog.String("error", a.lastModelErr))
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
		pc := plannedCall{ID: id, ModelCallID: tc.ID, Name: tc.Name, Arguments: tc.Arguments}
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
	b.add(recModelOutput, recModelOut{Turn: t.Turn, Step: msg.Step, Attempt: msg.Attempt, Msg: toWire(am), Usage: res.Usage, Calls: calls})
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

// turnFinished publishes the end of the turn and saves a snapshot.
func (a *sessionActor) turnFinished(status TurnStatus) {
	a.publish(Event{Type: EventTurnFinished, Turn: a.st.Last.Turn, TurnStatus: status, Text: a.st.Last.Error})
	a.saveSnapshot()
	a.m.hookAt("STEP boundary " + a.id)
}

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
	ctx, cancel := context.WithTimeout(a.m.base, r.timeout)
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
	if a.refuse() {
		return
	}
	if a.st.Seq == 0 {
		a.respond(nil, ErrUnknownSession)
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

func (a *sessionActor) onCancel() {
	if a.refuse() {
		return
	}
	if a.st.Seq == 0 {
		a.respond(nil, ErrUnknownSession)
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
