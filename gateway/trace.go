package gateway

import (
	"net"
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// traceContext reads an incoming W3C traceparent and tracestate, whatever
// global propagator the application set: a client's trace continues in
// the gateway's spans.
var traceContext = propagation.TraceContext{}

// statusWriter records the status a handler answered with. Unwrap lets
// http.ResponseController reach the connection's Flush and deadlines.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// serveTraced serves r inside an HTTP server span (OpenTelemetry HTTP
// semantic conventions, semconv v1.41.0): "METHOD route", the parent of
// the runtime's spans for the call, itself a child of the client's span
// when the request carries a traceparent. With no TracerProvider set the
// span is a no-op.
func (h *Handler) serveTraced(w http.ResponseWriter, r *http.Request) {
	ctx := traceContext.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	// Room for every attribute set below: appending never grows it.
	attrs := make([]attribute.KeyValue, 0, 9)
	attrs = append(attrs,
		semconv.HTTPRequestMethodKey.String(r.Method),
		semconv.URLPath(r.URL.Path),
		semconv.URLScheme(scheme(r)),
		semconv.NetworkProtocolVersion(protoVersion(r)),
	)
	if host, port, err := net.SplitHostPort(r.Host); err == nil {
		attrs = append(attrs, semconv.ServerAddress(host))
		if p, err := strconv.Atoi(port); err == nil {
			attrs = append(attrs, semconv.ServerPort(p))
		}
	} else if r.Host != "" {
		attrs = append(attrs, semconv.ServerAddress(r.Host))
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		attrs = append(attrs, semconv.ClientAddress(host))
	}
	if ua := r.UserAgent(); ua != "" {
		attrs = append(attrs, semconv.UserAgentOriginal(ua))
	}
	ctx, span := h.tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	defer span.End()
	r = r.WithContext(ctx)
	if !span.IsRecording() {
		// Nothing told to this span is kept (no TracerProvider, or not
		// sampled): serve without recording the status, and skip the name
		// and attributes, which would cost allocations for nothing.
		h.mux.ServeHTTP(w, r)
		return
	}
	sw := &statusWriter{ResponseWriter: w}
	h.mux.ServeHTTP(sw, r)
	if route, ok := strings.CutPrefix(r.Pattern, r.Method+" "); ok {
		span.SetName(r.Method + " " + route)
		span.SetAttributes(semconv.HTTPRoute(route))
	}
	status := sw.status
	if status == 0 {
		status = http.StatusOK
	}
	span.SetAttributes(semconv.HTTPResponseStatusCode(status))
	if status >= 500 {
		// A server span's error: 5xx only (4xx are the client's).
		span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(status)))
		span.SetStatus(codes.Error, "")
	}
}

func scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

func protoVersion(r *http.Request) string {
	switch {
	case r.ProtoMajor == 2:
		return "2"
	case r.ProtoMajor == 3:
		return "3"
	case r.ProtoMinor == 0:
		return "1.0"
	}
	return "1.1"
}
