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
//     and every fallback step; the call's own story (admission wait, the
//     part of it spent in a cooldown, and where this process holds the
//     credential's queue the time behind others in it, the time at its
//     head held by the pacer and the requests queued ahead; cooldowns met
//     and admissions refused
//     for one, each attempt with its status, error class and wait
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
// tool calls, mcptools.Set.Call), invoke_agent (a session turn, approvals
// as events), a batch job's span with each line a trace of its own,
// linked to it by a span link and named by custom_id, and each provider
// batch of a native job as a CLIENT span (batch/nativetrace.go); MCP's
// tools/call CLIENT spans (mcptools/telemetry.go); a cluster session
// call's CLIENT and SERVER spans (cluster/sessiontrace.go). The provider
// layer puts learned fallbacks on the inference span as events
// (EventLearnedFlag, EventLearnedUsed) through trace.SpanFromContext,
// without importing this package. Metrics: the four gen_ai.client.*
// histograms with the conventions' buckets, and Chorus's own under
// chorus.* (attempts, retries, 429s, cooldowns, fallbacks, admission
// wait, tool calls, approvals pending, batch lines, native batches'
// request counts, and per credential the queue, in-flight count,
// reported limits and remaining budget).
//
// Across nodes, Inject and Extract carry the W3C trace context in the
// cluster's protobuf messages (StreamOpen, CallRequest, SessionRequest)
// whatever global propagator is set. LogHandler adds trace_id and span_id
// to slog records logged with a span's context. The chorus command exports
// over OTLP and, for chorus node --metrics-addr and chorus serve
// --metrics, through OpenTelemetry's Prometheus exporter.
//
// Decisions: a public package (not internal) because session, batch,
// pipeline and runtime all take a *Telemetry and users build one; one
// *Telemetry per runtime, manager or job (its instruments are created
// once); a nil one means the providers that are global at that moment.
//
// Guide: docs/observability.md in the repository, which starts from the task
// and ends with how it is tested; this comment stays the reference.
package telemetry
