package telemetry

import (
	"context"
	"errors"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/chorusrt/chorus/llm"
)

// ScopeName is the instrumentation scope of every span and metric.
const ScopeName = "github.com/chorusrt/chorus"

// Option configures a Telemetry.
type Option func(*Telemetry)

// WithTracerProvider sets the TracerProvider (default: the global one).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(t *Telemetry) { t.tp = tp }
}

// WithMeterProvider sets the MeterProvider (default: the global one).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(t *Telemetry) { t.mp = mp }
}

// WithContent records message content (gen_ai.input.messages,
// gen_ai.output.messages, tool arguments and results). Off by default.
func WithContent() Option { return func(t *Telemetry) { t.content = true } }

// Telemetry holds the tracer and the instruments of one runtime, manager
// or job. A nil *Telemetry is valid and uses the global providers.
type Telemetry struct {
	tp      trace.TracerProvider
	mp      metric.MeterProvider
	content bool
	tracer  trace.Tracer
	meter   metric.Meter
	inst    instruments
}

// New returns a Telemetry on the given providers.
func New(opts ...Option) *Telemetry {
	t := &Telemetry{}
	for _, o := range opts {
		o(t)
	}
	if t.tp == nil {
		t.tp = otel.GetTracerProvider()
	}
	if t.mp == nil {
		t.mp = otel.GetMeterProvider()
	}
	t.tracer = t.tp.Tracer(ScopeName)
	t.meter = t.mp.Meter(ScopeName)
	t.inst = newInstruments(t.meter)
	return t
}

// OrGlobal returns t, or when t is nil a new Telemetry on the providers
// that are global now (call it once per runtime, job or manager, not per
// call: it creates the instruments).
func (t *Telemetry) OrGlobal() *Telemetry {
	if t == nil {
		return New()
	}
	return t
}

// Tracer returns the tracer of Chorus's scope.
func (t *Telemetry) Tracer() trace.Tracer { return t.OrGlobal().tracer }

// Meter returns the meter of Chorus's scope.
func (t *Telemetry) Meter() metric.Meter { return t.OrGlobal().meter }

// Content reports whether message content is recorded.
func (t *Telemetry) Content() bool { return t != nil && t.content }

// ProviderName is gen_ai.provider.name for a Chorus provider id: the
// conventions' well-known value where there is one, the id otherwise (a
// compatible endpoint's own name).
func ProviderName(id string) attribute.KeyValue {
	switch strings.ToLower(id) {
	case "openai":
		return semconv.GenAIProviderNameOpenAI
	case "anthropic":
		return semconv.GenAIProviderNameAnthropic
	case "gemini", "google":
		return semconv.GenAIProviderNameGCPGemini
	case "vertex", "vertex_ai", "vertexai":
		return semconv.GenAIProviderNameGCPVertexAI
	case "deepseek":
		return semconv.GenAIProviderNameDeepseek
	case "mistral", "mistral_ai":
		return semconv.GenAIProviderNameMistralAI
	case "xai", "x_ai", "grok":
		return semconv.GenAIProviderNameXAI
	case "groq":
		return semconv.GenAIProviderNameGroq
	case "perplexity":
		return semconv.GenAIProviderNamePerplexity
	case "cohere":
		return semconv.GenAIProviderNameCohere
	}
	return semconv.GenAIProviderNameKey.String(id)
}

// ErrorType is error.type for err: a low-cardinality class (rate_limit,
// server, client, transport, decode, idle_timeout, premature_close,
// overloaded, timeout, canceled, config, unsupported, or _OTHER).
func ErrorType(err error) string {
	var rl *llm.RateLimitError
	var api *llm.APIError
	var te *llm.TransportError
	var de *llm.DecodeError
	var ce *llm.ConfigError
	var ue *llm.UnsupportedError
	switch {
	case err == nil:
		return ""
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, llm.ErrIdleTimeout):
		return "idle_timeout"
	case errors.Is(err, llm.ErrPrematureClose):
		return "premature_close"
	case errors.Is(err, llm.ErrOverloaded):
		return "overloaded"
	case errors.As(err, &rl):
		return "rate_limit"
	case errors.As(err, &api):
		if api.Status >= 500 || api.Status == 0 {
			return "server"
		}
		return "client"
	case errors.As(err, &te):
		return "transport"
	case errors.As(err, &de):
		return "decode"
	case errors.As(err, &ce):
		return "config"
	case errors.As(err, &ue):
		return "unsupported"
	}
	return semconv.ErrorTypeOther.Value.AsString()
}
