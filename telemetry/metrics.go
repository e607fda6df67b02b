package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/semconv/v1.41.0/genaiconv"
)

// The conventions' bucket boundaries (the Go helpers leave them to us).
var (
	tokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	durationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
)

// Chorus's own metric names.
const (
	MetricAdmissionWait    = "chorus.admission.wait"
	MetricAttempts         = "chorus.attempts"
	MetricRetries          = "chorus.retries"
	MetricRateLimited      = "chorus.rate_limited"
	MetricCooldowns        = "chorus.cooldowns"
	MetricFallbacks        = "chorus.fallbacks"
	MetricQueueLength      = "chorus.admission.queue.length"
	MetricInFlight         = "chorus.in_flight"
	MetricRemainingReqs    = "chorus.ratelimit.remaining.requests"
	MetricRemainingTokens  = "chorus.ratelimit.remaining.tokens"
	MetricLimitRequests    = "chorus.ratelimit.limit.requests"
	MetricLimitTokens      = "chorus.ratelimit.limit.tokens"
	MetricToolCalls        = "chorus.tool.calls"
	MetricApprovalsPending = "chorus.session.approvals.pending"
	MetricBatchLines       = "chorus.batch.lines"
	MetricNativeRequests   = "chorus.batch.native.requests"
)

type instruments struct {
	duration, ttfc, tpoc metric.Float64Histogram
	tokens               metric.Int64Histogram
	admissionWait        metric.Float64Histogram
	attempts, retries    metric.Int64Counter
	rateLimited          metric.Int64Counter
	cooldowns, fallbacks metric.Int64Counter
	toolCalls            metric.Int64Counter
	approvalsPending     metric.Int64UpDownCounter
	batchLines           metric.Int64Counter
	nativeRequests       metric.Int64Gauge
}

// newInstruments creates every instrument; an error leaves a no-op one in
// its place (the API's instruments are never nil).
func newInstruments(m metric.Meter) instruments {
	var in instruments
	d, _ := genaiconv.NewClientOperationDuration(m, metric.WithExplicitBucketBoundaries(durationBuckets...))
	in.duration = d.Inst()
	f, _ := genaiconv.NewClientOperationTimeToFirstChunk(m, metric.WithExplicitBucketBoundaries(durationBuckets...))
	in.ttfc = f.Inst()
	p, _ := genaiconv.NewClientOperationTimePerOutputChunk(m, metric.WithExplicitBucketBoundaries(durationBuckets...))
	in.tpoc = p.Inst()
	tk, _ := genaiconv.NewClientTokenUsage(m, metric.WithExplicitBucketBoundaries(tokenBuckets...))
	in.tokens = tk.Inst()
	in.admissionWait, _ = m.Float64Histogram(MetricAdmissionWait, metric.WithUnit("s"),
		metric.WithDescription("Time a call waited for admission by its credential (queue, pacing, cooldown)."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	in.attempts, _ = m.Int64Counter(MetricAttempts, metric.WithUnit("{attempt}"), metric.WithDescription("HTTP attempts to a provider."))
	in.retries, _ = m.Int64Counter(MetricRetries, metric.WithUnit("{attempt}"), metric.WithDescription("Attempts after a call's first."))
	in.rateLimited, _ = m.Int64Counter(MetricRateLimited, metric.WithUnit("{response}"), metric.WithDescription("429 and 529 answers."))
	in.cooldowns, _ = m.Int64Counter(MetricCooldowns, metric.WithUnit("{refusal}"), metric.WithDescription("Cooldowns calls met: a 429 that cooled a credential down, or (chorus.cooldown.refused) an admission refused because the credential cools down past the call's deadline."))
	in.fallbacks, _ = m.Int64Counter(MetricFallbacks, metric.WithUnit("{step}"), metric.WithDescription("Calls moved to the next model of an alias."))
	in.toolCalls, _ = m.Int64Counter(MetricToolCalls, metric.WithUnit("{call}"), metric.WithDescription("Tool calls by outcome."))
	in.approvalsPending, _ = m.Int64UpDownCounter(MetricApprovalsPending, metric.WithUnit("{approval}"), metric.WithDescription("Session tool calls waiting for approval."))
	in.batchLines, _ = m.Int64Counter(MetricBatchLines, metric.WithUnit("{line}"), metric.WithDescription("Batch lines done, by outcome."))
	in.nativeRequests, _ = m.Int64Gauge(MetricNativeRequests, metric.WithUnit("{request}"),
		metric.WithDescription("A provider batch's requests as its last poll counted them, by state (total, succeeded, failed)."))
	return in
}

// BatchLine counts one finished batch line by outcome (succeeded, failed).
func (t *Telemetry) BatchLine(ctx context.Context, outcome string) {
	t = t.OrGlobal()
	t.inst.batchLines.Add(ctx, 1, metric.WithAttributes(attribute.String("chorus.outcome", outcome)))
}

// NativeBatchProgress records a provider batch's counts as a poll saw
// them: chorus.batch.native.requests by chorus.batch.state (total,
// succeeded, failed), gen_ai.provider.name and chorus.batch.id (a job has
// few batches).
func (t *Telemetry) NativeBatchProgress(ctx context.Context, provider, batchID string, total, succeeded, failed int) {
	t = t.OrGlobal()
	p, id := ProviderName(provider), AttrBatchID.String(batchID)
	for _, c := range [...]struct {
		state string
		n     int
	}{{"total", total}, {"succeeded", succeeded}, {"failed", failed}} {
		t.inst.nativeRequests.Record(ctx, int64(c.n), metric.WithAttributes(p, id, attribute.String("chorus.batch.state", c.state)))
	}
}

// ToolCall counts one finished tool call by tool and outcome.
func (t *Telemetry) ToolCall(ctx context.Context, tool, outcome string) {
	t = t.OrGlobal()
	t.inst.toolCalls.Add(ctx, 1, metric.WithAttributes(semconv.GenAIToolName(tool), attribute.String("chorus.outcome", outcome)))
}

// ApprovalsPending moves the count of tool calls waiting for approval.
func (t *Telemetry) ApprovalsPending(ctx context.Context, delta int64) {
	t = t.OrGlobal()
	t.inst.approvalsPending.Add(ctx, delta)
}
