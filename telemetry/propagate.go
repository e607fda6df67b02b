package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
)

// The W3C trace context travels between cluster nodes whatever global
// propagator the application set: a trace that crosses nodes is one trace.
var w3c = propagation.TraceContext{}

// Inject returns ctx's trace context as a carrier map (traceparent,
// tracestate), nil when ctx carries no span.
func Inject(ctx context.Context) map[string]string {
	m := propagation.MapCarrier{}
	w3c.Inject(ctx, m)
	if len(m) == 0 {
		return nil
	}
	return m
}

// Extract returns parent carrying the remote span context in carrier, if
// any, so that spans started from it join the caller's trace.
func Extract(parent context.Context, carrier map[string]string) context.Context {
	if len(carrier) == 0 {
		return parent
	}
	return w3c.Extract(parent, propagation.MapCarrier(carrier))
}
