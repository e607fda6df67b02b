// Package telemetry is Chorus's OpenTelemetry instrumentation: the spans,
// metrics and log correlation that runtime, pipeline, session and batch
// emit, named by the GenAI semantic conventions of semconv/v1.41.0 (the
// last Go release that carries the gen_ai.* names).
//
// It depends on the OpenTelemetry API only. A library package takes a
// TracerProvider and a MeterProvider through its own options (default: the
// global providers, which are no-ops until the application installs an
// SDK), the way otelhttp and pgx's tracers do; the chorus command installs
// the SDK and the OTLP exporters from the standard OTEL_* variables.
//
//	tel := telemetry.New(telemetry.WithTracerProvider(tp), telemetry.WithMeterProvider(mp))
//	rt, err := runtime.New(runtime.FromEnv(), runtime.WithTelemetry(tel))
//
// What is guaranteed:
//   - One span per model call, never per delta: `{gen_ai.operation.name}
//     {gen_ai.request.model}`, kind CLIENT, across admission, every attempt
//     and every fallback step; the call's own story (admission wait,
//     cooldown refusals, each attempt with its status, error class and wait
//     before the next, the credential's fingerprint, the alias and the
//     fallback step that served) as attributes and events on it.
//   - No API key ever: a credential is named by its fingerprint (the first
//     16 hex digits of the SHA-256 of its key, the same KeyID a cluster uses).
//   - No message content unless WithContent: then gen_ai.input.messages and
//     gen_ai.output.messages carry it, shaped as the conventions say.
//   - With no SDK installed the cost is a non-recording span per call: no
//     attribute is built, no work is done per delta.
//
// Spans: inference (runtime), execute_tool (pipeline.ToolLoop, session
// tool calls), invoke_agent (a session turn, approvals as events), and a
// batch job's span with each line a trace of its own, linked to it by a
// span link and named by custom_id. Metrics: the four gen_ai.client.*
// histograms with the conventions' buckets, and Chorus's own under
// chorus.* (attempts, retries, 429s, cooldowns, fallbacks, admission
// wait, tool calls, approvals pending, batch lines, and per credential
// the queue, in-flight count, reported limits and remaining budget).
//
// Across nodes, Inject and Extract carry the W3C trace context in the
// cluster's protobuf messages whatever global propagator is set. LogHandler
// adds trace_id and span_id to slog records logged with a span's context.
//
// Decisions: a public package (not internal) because session, batch,
// pipeline and runtime all take a *Telemetry and users build one; one
// *Telemetry per runtime, manager or job (its instruments are created
// once); a nil one means the providers that are global at that moment.
package telemetry
