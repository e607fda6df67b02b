package session

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/chorusrt/chorus/telemetry"
)

// Attribute keys and event names of a session's spans.
const (
	AttrTurn          = attribute.Key("chorus.session.turn")
	AttrTurnStatus    = attribute.Key("chorus.session.turn.status")
	AttrApprovalWait  = attribute.Key("chorus.approval.wait")
	AttrApproved      = attribute.Key("chorus.approval.approved")
	AttrInterrupt     = attribute.Key("chorus.approval.interrupt")
	EventApprovalExp  = "chorus.approval.expired"
	approvalDeadlineW = "the approval deadline passed" // onExpire's reason
)

// sessionTrace is one session actor's telemetry, fed by its published
// events on the actor's goroutine: the running turn's invoke_agent span
// (INTERNAL, gen_ai.conversation.id = the session id), an execute_tool
// span per tool attempt under it, approvals as events on the turn span
// with their wait. Model steps run under the turn span, so the runtime's
// inference spans are its children. The turn span is the child of the
// span its first message was sent under (sent), so a caller's trace, or a
// cluster session call's, holds the turn. Spans live in memory: a turn that
// outlives its actor (a crash, a passivation while it waits for an
// approval) is not exported; its next actor starts a new span when the
// turn resumes.
type sessionTrace struct {
	m         *Manager
	tel       *telemetry.Telemetry
	id        string
	model     string
	turn      trace.Span
	turnCtx   context.Context
	tools     map[string]*telemetry.ToolSpan
	approvals map[string]time.Time
	// parent and links are the spans that the messages the next turn
	// will take were sent under (sent).
	parent trace.SpanContext
	links  []trace.Link
}

// observe hands a published event to the actor's telemetry.
func (a *sessionActor) observe(ev Event) {
	a.traceState().observe(ev)
}

// traceState returns the actor's telemetry, made on first use.
func (a *sessionActor) traceState() *sessionTrace {
	if a.trace == nil {
		a.trace = &sessionTrace{m: a.m, tel: a.m.tel, id: a.id, model: a.m.opt.ModelName, tools: map[string]*telemetry.ToolSpan{}, approvals: map[string]time.Time{}}
	}
	return a.trace
}

// takeCarried takes over, once the actor has recovered its state, the
// approvals its session's previous actor left pending when it was parked
// (carry): those still pending stay counted until they are resolved or
// expire here, with their wait since they were asked; the others were
// resolved meanwhile (on another node) and leave the count.
func (a *sessionActor) takeCarried() {
	a.m.mu.Lock()
	carried := a.m.carried[a.id]
	delete(a.m.carried, a.id)
	a.m.mu.Unlock()
	for call, at := range carried {
		if a.st != nil && a.st.approvalPending(call) {
			a.traceState().approvals[call] = at
		} else {
			a.m.tel.ApprovalsPending(context.Background(), -1)
		}
	}
}

// approvalPending reports whether call of the turn in progress waits for
// its approval.
func (s *state) approvalPending(call string) bool {
	for _, c := range s.batch() {
		if c.ID == call {
			return c.Status == "" && c.Approval && !c.Resolved
		}
	}
	return false
}

// carry keeps the pending approvals of a session parked while it waits
// for them: they stay in chorus.session.approvals.pending, and the actor
// that next runs the session takes them over (traceState). It reports
// false when the session is not parked (then they leave the count).
func (m *Manager) carry(id string, approvals map[string]time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, parked := m.parked[id]; !parked || m.closed || m.closing.Load() {
		return false
	}
	if m.carried == nil {
		m.carried = map[string]map[string]time.Time{}
	}
	m.carried[id] = approvals
	return true
}

// releaseCarried takes the approvals of the sessions still parked out of
// the count when the Manager closes.
func (m *Manager) releaseCarried() {
	m.mu.Lock()
	n := 0
	for _, c := range m.carried {
		n += len(c)
	}
	m.carried = nil
	m.mu.Unlock()
	if n > 0 {
		m.tel.ApprovalsPending(context.Background(), -int64(n))
	}
}

// sentFrom returns the span a Send or Resolve runs under (msgSend.From,
// msgResolve.From): the turn that takes its message, or goes on with its
// resolution, joins that trace.
func sentFrom(ctx context.Context) trace.SpanContext { return trace.SpanContextFromContext(ctx) }

// sent notes that a message sent, or an approval resolved, under sc is in
// the journal: the next turn span to start (a new turn, or one resumed by
// a new actor after a passivation) is sc's child (the first such
// request's, the others' are links on it), and a turn span already open,
// which takes the message at its next step or goes on with the resolved
// call, gets a link to sc. A request under no span changes nothing.
func (a *sessionActor) sent(sc trace.SpanContext) {
	if !sc.IsValid() {
		return
	}
	s := a.traceState()
	switch {
	case s.turn != nil:
		s.turn.AddLink(trace.Link{SpanContext: sc})
	case !s.parent.IsValid():
		s.parent = sc
	default:
		s.links = append(s.links, trace.Link{SpanContext: sc})
	}
}

// ctx returns parent carrying the running turn's span, if any.
func (s *sessionTrace) ctx(parent context.Context) context.Context {
	if s == nil || s.turn == nil {
		return parent
	}
	return trace.ContextWithSpan(parent, s.turn)
}

// toolCtx returns parent carrying call's execute_tool span, if any.
func (s *sessionTrace) toolCtx(parent context.Context, call string) context.Context {
	if s == nil {
		return parent
	}
	if ts := s.tools[call]; ts != nil {
		return trace.ContextWithSpan(parent, ts.Span())
	}
	return s.ctx(parent)
}

// observe turns one published event into span work.
func (s *sessionTrace) observe(ev Event) {
	switch ev.Type {
	case EventTurnStarted, EventStepStarted, EventToolCallStarted:
		if s.turn == nil {
			s.startTurn(ev.Turn)
		}
	}
	switch ev.Type {
	case EventToolCallStarted:
		if ts := s.tools[ev.CallID]; ts != nil {
			ts.End("retried", "attempt_failed", "")
		}
		kv := []attribute.KeyValue{telemetry.AttrToolEffect.String(string(ev.Effect)), telemetry.AttrToolAttempt.Int(ev.Attempt), AttrTurn.Int(ev.Turn)}
		if ev.Effect == EffectIdempotentWrite {
			kv = append(kv, telemetry.AttrIdempotencyKey.String(idempotencyKey(s.id, ev.Turn, ev.CallID)))
		}
		_, ts := s.tel.StartTool(s.turnCtx, ev.ToolName, ev.CallID, kv...)
		s.tools[ev.CallID] = ts
	case EventToolCallFinished:
		if _, ok := s.approvals[ev.CallID]; ok {
			// Ended while its approval waited (an ordered write skipped).
			delete(s.approvals, ev.CallID)
			s.tel.ApprovalsPending(context.Background(), -1)
		}
		ts := s.tools[ev.CallID]
		if ts == nil {
			if ev.ToolStatus != StatusRejected || s.turn == nil {
				return
			}
			_, ts = s.tel.StartTool(s.turnCtx, ev.ToolName, ev.CallID, telemetry.AttrToolEffect.String(string(ev.Effect)), AttrTurn.Int(ev.Turn))
		}
		delete(s.tools, ev.CallID)
		et := ""
		if ev.ToolStatus != StatusSucceeded {
			et = string(ev.ToolStatus)
		}
		ts.End(string(ev.ToolStatus), et, "")
	case EventApprovalRequested:
		if s.turn == nil {
			s.startTurn(ev.Turn)
		}
		s.approvals[ev.CallID] = time.Now()
		s.tel.ApprovalsPending(context.Background(), 1)
		s.turn.AddEvent(telemetry.EventApprovalAsked, trace.WithAttributes(semconv.GenAIToolCallID(ev.CallID), semconv.GenAIToolName(ev.ToolName),
			telemetry.AttrToolEffect.String(string(ev.Effect)), AttrInterrupt.String(ev.Interrupt)))
	case EventApprovalResolved:
		if s.turn == nil {
			s.startTurn(ev.Turn)
		}
		kv := []attribute.KeyValue{semconv.GenAIToolCallID(ev.CallID), semconv.GenAIToolName(ev.ToolName), AttrApproved.Bool(ev.Approved), AttrInterrupt.String(ev.Interrupt)}
		if at, ok := s.approvals[ev.CallID]; ok {
			kv = append(kv, AttrApprovalWait.Float64(time.Since(at).Seconds()))
			delete(s.approvals, ev.CallID)
			s.tel.ApprovalsPending(context.Background(), -1)
		}
		name := telemetry.EventApprovalDone
		if !ev.Approved && ev.Reason == approvalDeadlineW {
			name = EventApprovalExp
		}
		s.turn.AddEvent(name, trace.WithAttributes(kv...))
	case EventTurnFinished:
		s.endTurn(ev.TurnStatus)
	}
}

// startTurn starts the turn's span: the child of the span its first
// message was sent under, if any (a Send on this node, or the SERVER span
// of a cluster session call, itself the caller's child), so that the
// caller's trace holds the turn, its model calls and its tools.
func (s *sessionTrace) startTurn(turn int) {
	parent := context.Background()
	if s.parent.IsValid() {
		parent = trace.ContextWithSpanContext(parent, s.parent)
	}
	ctx, span := s.tel.Tracer().Start(parent, "invoke_agent", trace.WithSpanKind(trace.SpanKindInternal), trace.WithLinks(s.links...),
		trace.WithAttributes(semconv.GenAIOperationNameInvokeAgent, semconv.GenAIConversationID(s.id), semconv.GenAIRequestModel(s.model), AttrTurn.Int(turn)))
	s.turn, s.turnCtx = span, ctx
	s.parent, s.links = trace.SpanContext{}, nil
}

func (s *sessionTrace) endTurn(status TurnStatus) {
	for id, ts := range s.tools {
		ts.End("interrupted", "turn_ended", "")
		delete(s.tools, id)
	}
	for id := range s.approvals {
		delete(s.approvals, id)
		s.tel.ApprovalsPending(context.Background(), -1)
	}
	if s.turn == nil {
		return
	}
	s.turn.SetAttributes(AttrTurnStatus.String(string(status)))
	if status != TurnCompleted {
		s.turn.SetAttributes(semconv.ErrorTypeKey.String(string(status)))
		s.turn.SetStatus(codes.Error, string(status))
	}
	s.turn.End()
	s.turn, s.turnCtx = nil, nil
}

// end ends whatever is open when the actor stops: nothing more of it
// will be seen by this actor.
func (s *sessionTrace) end() {
	if s == nil {
		return
	}
	for id, ts := range s.tools {
		ts.End("interrupted", "actor_stopped", "")
		delete(s.tools, id)
	}
	if len(s.approvals) > 0 && s.m.carry(s.id, s.approvals) {
		s.approvals = map[string]time.Time{} // still pending, while the session is parked
	}
	for id := range s.approvals {
		delete(s.approvals, id)
		s.tel.ApprovalsPending(context.Background(), -1)
	}
	if s.turn != nil {
		s.turn.SetAttributes(AttrTurnStatus.String("suspended"))
		s.turn.End()
		s.turn = nil
	}
}
