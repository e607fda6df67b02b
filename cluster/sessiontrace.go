package cluster

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/chorusrt/chorus/telemetry"
)

// AttrSessionOp is the session operation a session call's spans carry
// (send, resolve, cancel, snapshot, wait, follow).
const AttrSessionOp = attribute.Key("chorus.session.op")

// A session call is traced on both nodes: the caller's CLIENT span
// "chorus.session {op}" (its context travels in SessionRequest's
// trace_context), and on the session's node a SERVER span of the same
// name, its child, under which the operation runs. gen_ai.conversation.id
// is the session id. The periodic lease touches are not traced. The turn a
// send starts (its invoke_agent span, package session) is the SERVER
// span's child: the send runs under it, and a turn joins the trace its
// first message was sent under.

// telemetry returns the node's Telemetry, made once.
func (n *Node) telemetry() *telemetry.Telemetry {
	n.telOnce.Do(func() {
		t := n.cfg.Telemetry
		if t == nil && n.cfg.Sessions != nil {
			t = n.cfg.Sessions.Telemetry
		}
		n.tel = t.OrGlobal()
	})
	return n.tel
}

// sessionSpanName is the spans' name per operation, made once.
var sessionSpanName = map[string]string{}

func init() {
	for _, op := range []string{"send", "resolve", "cancel", "snapshot", "wait", "follow", "touch"} {
		sessionSpanName[op] = "chorus.session " + op
	}
}

// startSessionSpan starts the span of one session call on this node:
// kind CLIENT on the caller (parent: ctx), SERVER on the session's node
// (parent: the caller's context extracted from the request).
func (n *Node) startSessionSpan(ctx context.Context, kind trace.SpanKind, id, op string) (context.Context, trace.Span) {
	name, ok := sessionSpanName[op]
	if !ok {
		name = "chorus.session"
	}
	return n.telemetry().Tracer().Start(ctx, name, trace.WithSpanKind(kind),
		trace.WithAttributes(semconv.GenAIConversationID(id), AttrSessionOp.String(op)))
}

// endSessionSpan ends a session call's span with its outcome.
func endSessionSpan(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.SetAttributes(semconv.ErrorTypeKey.String(telemetry.ErrorType(err)))
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
