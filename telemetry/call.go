package telemetry

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/chorusrt/chorus/llm"
)

// Chorus's own attribute keys on an inference span.
const (
	AttrAlias         = attribute.Key("chorus.alias")
	AttrFallbackStep  = attribute.Key("chorus.fallback.step")
	AttrCredential    = attribute.Key("chorus.credential.fingerprint")
	AttrCredentialIdx = attribute.Key("chorus.credential.index")
	// AttrCredentialShared marks the per-credential gauges of keys that
	// share one limit: one series for their one budget.
	AttrCredentialShared = attribute.Key("chorus.credential.shared")
	AttrAdmissionWait    = attribute.Key("chorus.admission.wait")
	AttrCooldownWait     = attribute.Key("chorus.admission.cooldown_wait") // the part of the admission wait spent cooling down
	AttrQueueWait        = attribute.Key("chorus.admission.queue_wait")    // the part of the wait behind others in the credential's queue
	AttrPacingWait       = attribute.Key("chorus.admission.pacing_wait")   // the part of the wait at the queue's head, held by the pacer
	AttrQueuedAhead      = attribute.Key("chorus.admission.queued_ahead")  // requests ahead in the credential's queue when the call asked
	AttrCooldownRefused  = attribute.Key("chorus.cooldown.refused")        // the admission was refused (cooling down past the deadline)
	AttrAttempts         = attribute.Key("chorus.attempts")
	AttrAttempt          = attribute.Key("chorus.attempt")
	AttrStatus           = attribute.Key("http.response.status_code")
	AttrErrorClass       = attribute.Key("chorus.error.class")
	AttrRetryWait        = attribute.Key("chorus.retry.wait")
	AttrRetryAt          = attribute.Key("chorus.cooldown.until")
	AttrLearned          = attribute.Key("chorus.learned")
	AttrBuffered         = attribute.Key("chorus.buffered")
	AttrCustomID         = attribute.Key("chorus.batch.custom_id")
	AttrBatchID          = attribute.Key("chorus.batch.id") // a provider batch's id
	EventAttempt         = "chorus.attempt"
	EventAdmitted        = "chorus.admitted"
	EventCooldown        = "chorus.cooldown"
	EventFallback        = "chorus.fallback"
	EventLearnedFlag     = "chorus.learned"         // an attempt taught a flag (providers.EventLearned)
	EventLearnedUsed     = "chorus.learned.applied" // a learned flag shaped an attempt (providers.EventLearnedApplied)
	EventApprovalAsked   = "chorus.approval.requested"
	EventApprovalDone    = "chorus.approval.resolved"
)

// Operation names (gen_ai.operation.name values).
const (
	OpChat       = "chat"
	OpEmbeddings = "embeddings"
	OpSpeech     = "speech"
	OpTranscribe = "transcription"
	OpCount      = "count_tokens"
	OpListModels = "list_models"
)

var clientKind = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}

// Call is one inference span and its metrics. Its methods are safe on a
// call that records nothing; every method is per call or per attempt,
// never per delta (Emit wraps the writer only when something records).
type Call struct {
	t        *Telemetry
	ctx      context.Context
	span     trace.Span
	on       bool // the span records or the duration histogram is enabled
	op       string
	start    time.Time
	first    time.Time
	last     time.Time
	chunks   int
	provider string
	model    string
	server   string
	port     int
}

// StartCall starts the span of one call of operation op on model (the
// first target's model; SetTarget names the one that serves). alias is
// the name the caller asked for when it was an alias.
func (t *Telemetry) StartCall(ctx context.Context, op, provider, model, alias string, stream bool) (context.Context, *Call) {
	t = t.OrGlobal()
	// The name is op alone until the span proves to record: a call with no
	// SDK installed builds no string.
	ctx, span := t.tracer.Start(ctx, op, clientKind...)
	c := &Call{t: t, span: span, op: op, provider: provider, model: model}
	c.on = span.IsRecording() || t.inst.duration.Enabled(ctx)
	c.ctx = ctx
	if !c.on {
		return ctx, c
	}
	c.start = time.Now()
	if span.IsRecording() {
		span.SetName(op + " " + model)
		span.SetAttributes(
			semconv.GenAIOperationNameKey.String(op),
			ProviderName(provider),
			semconv.GenAIRequestModel(model),
		)
		if op == OpChat {
			span.SetAttributes(semconv.GenAIRequestStream(stream))
		}
		if alias != "" {
			span.SetAttributes(AttrAlias.String(alias))
		}
	}
	return ctx, c
}

// Recording reports whether the call records anything.
func (c *Call) Recording() bool { return c.on }

// Span returns the call's span.
func (c *Call) Span() trace.Span { return c.span }

// Request records a chat request's sampling attributes, and its messages
// when content is recorded.
func (c *Call) Request(req *llm.ChatRequest) {
	if !c.span.IsRecording() || req == nil {
		return
	}
	var kv []attribute.KeyValue
	if req.MaxTokens > 0 {
		kv = append(kv, semconv.GenAIRequestMaxTokens(req.MaxTokens))
	}
	if req.Temperature != nil {
		kv = append(kv, semconv.GenAIRequestTemperature(*req.Temperature))
	}
	if req.TopP != nil {
		kv = append(kv, semconv.GenAIRequestTopP(*req.TopP))
	}
	if req.Seed != nil {
		kv = append(kv, semconv.GenAIRequestSeed(int(*req.Seed)))
	}
	if len(req.Stop) > 0 {
		kv = append(kv, semconv.GenAIRequestStopSequences(req.Stop...))
	}
	if c.t.content {
		kv = append(kv, semconv.GenAIInputMessagesKey.String(inputMessages(req.Messages)))
	}
	c.span.SetAttributes(kv...)
}

// SetTarget names the target a placement tries: step is its position in
// the alias (0: the first), server and port the endpoint's.
func (c *Call) SetTarget(step int, provider, model, server string, port int) {
	if !c.on {
		return
	}
	if step > 0 && (provider != c.provider || model != c.model) {
		c.t.inst.fallbacks.Add(c.ctx, 1, metric.WithAttributes(ProviderName(provider), semconv.GenAIRequestModel(model)))
		c.span.AddEvent(EventFallback, trace.WithAttributes(AttrFallbackStep.Int(step), ProviderName(provider), semconv.GenAIRequestModel(model),
			attribute.String("chorus.fallback.from", c.provider+"/"+c.model)))
	}
	c.provider, c.model, c.server, c.port = provider, model, server, port
	if c.span.IsRecording() {
		c.span.SetName(c.op + " " + model)
		c.span.SetAttributes(ProviderName(provider), semconv.GenAIRequestModel(model), AttrFallbackStep.Int(step))
		if server != "" {
			c.span.SetAttributes(semconv.ServerAddress(server))
		}
		if port > 0 {
			c.span.SetAttributes(semconv.ServerPort(port))
		}
	}
}

// Admission is what one admission of a call waited for.
type Admission struct {
	// Wait runs from the placement's start to its grant; Cooldown is the
	// part of it spent while the credential cooled down (a cooldown under
	// way when the call asked).
	Wait, Cooldown time.Duration
	// Queue is how long it waited behind others in the credential's queue,
	// Pacing how long it then waited at its head for the pacer (budget,
	// concurrency, and any cooldown there); Timed says they are known (the
	// credential's actor is in this process).
	Queue, Pacing time.Duration
	Timed         bool
	// QueuedAhead is how many requests waited ahead of it when it asked;
	// negative when not known here.
	QueuedAhead int
}

// Admitted records an admission (see Admission) and the credential, by
// its fingerprint, never its key.
func (c *Call) Admitted(a Admission, fingerprint string, index int) {
	if !c.on {
		return
	}
	c.t.inst.admissionWait.Record(c.ctx, a.Wait.Seconds(), metric.WithAttributes(ProviderName(c.provider)))
	if c.span.IsRecording() {
		n := 4
		if a.Timed {
			n += 2
		}
		if a.QueuedAhead >= 0 {
			n++
		}
		kv := make([]attribute.KeyValue, 0, n)
		kv = append(kv, AttrCredentialIdx.Int(index), AttrCredential.String(fingerprint), AttrAdmissionWait.Float64(a.Wait.Seconds()),
			AttrCooldownWait.Float64(a.Cooldown.Seconds()))
		if a.Timed {
			kv = append(kv, AttrQueueWait.Float64(a.Queue.Seconds()), AttrPacingWait.Float64(a.Pacing.Seconds()))
		}
		if a.QueuedAhead >= 0 {
			kv = append(kv, AttrQueuedAhead.Int(a.QueuedAhead))
		}
		c.span.SetAttributes(kv...)
		c.span.AddEvent(EventAdmitted, trace.WithAttributes(kv[1:]...)) // the index is the span's
	}
}

// Cooldown records a cooldown the call met: a 429 that cooled the
// credential down (refused false), or an admission the credential refused
// because its cooldown outlasts the call's deadline (refused true); until
// is the cooldown's end, when known.
func (c *Call) Cooldown(refused bool, fingerprint string, until time.Time) {
	if !c.on {
		return
	}
	c.t.inst.cooldowns.Add(c.ctx, 1, metric.WithAttributes(ProviderName(c.provider), AttrCooldownRefused.Bool(refused)))
	if c.span.IsRecording() {
		kv := []attribute.KeyValue{AttrCredential.String(fingerprint), AttrCooldownRefused.Bool(refused)}
		if !until.IsZero() {
			kv = append(kv, AttrRetryAt.String(until.UTC().Format(time.RFC3339Nano)))
		}
		c.span.AddEvent(EventCooldown, trace.WithAttributes(kv...))
	}
}

// Attempt records one HTTP attempt: its number, status, error class and
// the wait before the next one (zero when it was the last).
func (c *Call) Attempt(n, status int, class string, d, wait time.Duration) {
	if !c.on {
		return
	}
	pa := metric.WithAttributes(ProviderName(c.provider))
	c.t.inst.attempts.Add(c.ctx, 1, pa)
	if n > 1 {
		c.t.inst.retries.Add(c.ctx, 1, pa)
	}
	if status == 429 || status == 529 {
		c.t.inst.rateLimited.Add(c.ctx, 1, pa)
	}
	if c.span.IsRecording() {
		kv := []attribute.KeyValue{AttrAttempt.Int(n), AttrStatus.Int(status), attribute.Float64("chorus.attempt.duration", d.Seconds())}
		if class != "" {
			kv = append(kv, AttrErrorClass.String(class))
		}
		if wait > 0 {
			kv = append(kv, AttrRetryWait.Float64(wait.Seconds()))
		}
		c.span.AddEvent(EventAttempt, trace.WithAttributes(kv...))
	}
}

// Learned records a learn-once flag the call learned and applied.
func (c *Call) Learned(flag string) {
	if c.span.IsRecording() {
		c.span.AddEvent(EventLearnedFlag, trace.WithAttributes(AttrLearned.String(flag)))
	}
}

// Emit wraps a stream's emit function so that the first chunk's time and
// the chunk count are known; with nothing recording it returns emit as is.
func (c *Call) Emit(emit func(llm.Event) bool) func(llm.Event) bool {
	if !c.on {
		return emit
	}
	return func(ev llm.Event) bool {
		now := time.Now()
		if c.chunks == 0 {
			c.first = now
		}
		c.last = now
		c.chunks++
		return emit(ev)
	}
}

// End ends the call: the response, usage and error, and the metrics.
func (c *Call) End(res *llm.ChatResult, meta llm.ResponseMeta, usage llm.Usage, err error) {
	defer c.span.End()
	if !c.on {
		return
	}
	elapsed := time.Since(c.start)
	respModel := meta.Model
	if res != nil && res.Model != "" {
		respModel = res.Model
	}
	et := ErrorType(err)
	base := []attribute.KeyValue{semconv.GenAIOperationNameKey.String(c.op), ProviderName(c.provider), semconv.GenAIRequestModel(c.model)}
	if respModel != "" {
		base = append(base, semconv.GenAIResponseModel(respModel))
	}
	if c.server != "" {
		base = append(base, semconv.ServerAddress(c.server))
	}
	if c.port > 0 {
		base = append(base, semconv.ServerPort(c.port))
	}
	mkv := base
	if et != "" {
		mkv = append(append([]attribute.KeyValue(nil), base...), semconv.ErrorTypeKey.String(et))
	}
	c.t.inst.duration.Record(c.ctx, elapsed.Seconds(), metric.WithAttributes(mkv...))
	if err == nil || !usage.IsZero() {
		if in := usage.InputTokens(); in > 0 || !usage.IsZero() {
			c.t.inst.tokens.Record(c.ctx, int64(in), metric.WithAttributes(append(append([]attribute.KeyValue(nil), base...), semconv.GenAITokenTypeInput)...))
			c.t.inst.tokens.Record(c.ctx, int64(usage.CompletionTokens), metric.WithAttributes(append(append([]attribute.KeyValue(nil), base...), semconv.GenAITokenTypeOutput)...))
		}
	}
	if c.chunks > 0 {
		c.t.inst.ttfc.Record(c.ctx, c.first.Sub(c.start).Seconds(), metric.WithAttributes(base...))
		if c.chunks > 1 {
			c.t.inst.tpoc.Record(c.ctx, c.last.Sub(c.first).Seconds()/float64(c.chunks-1), metric.WithAttributes(base...))
		}
	}
	if !c.span.IsRecording() {
		return
	}
	kv := []attribute.KeyValue{AttrAttempts.Int(meta.Attempts)}
	if respModel != "" {
		kv = append(kv, semconv.GenAIResponseModel(respModel))
	}
	if meta.Buffered {
		kv = append(kv, AttrBuffered.Bool(true))
	}
	if meta.Status > 0 {
		kv = append(kv, AttrStatus.Int(meta.Status))
	}
	if !usage.IsZero() {
		kv = append(kv,
			semconv.GenAIUsageInputTokens(usage.InputTokens()),
			semconv.GenAIUsageOutputTokens(usage.CompletionTokens),
			semconv.GenAIUsageCacheReadInputTokens(usage.CacheReadTokens),
			semconv.GenAIUsageCacheCreationInputTokens(usage.CacheWriteTokens),
			semconv.GenAIUsageReasoningOutputTokens(usage.ReasoningTokens),
		)
	}
	if c.chunks > 0 {
		kv = append(kv, semconv.GenAIResponseTimeToFirstChunk(c.first.Sub(c.start).Seconds()))
	}
	if res != nil {
		if res.ID != "" {
			kv = append(kv, semconv.GenAIResponseID(res.ID))
		}
		if res.FinishReason != "" {
			kv = append(kv, semconv.GenAIResponseFinishReasons(string(res.FinishReason)))
		}
		if c.t.content {
			kv = append(kv, semconv.GenAIOutputMessagesKey.String(outputMessages(res)))
		}
	}
	if err != nil {
		kv = append(kv, semconv.ErrorTypeKey.String(et))
		c.span.SetStatus(codes.Error, et)
	}
	c.span.SetAttributes(kv...)
}

// The conventions' message shapes, as JSON strings.
type msgPart struct {
	Type      string `json:"type"`
	Modality  string `json:"modality,omitempty"`
	MIMEType  string `json:"mime_type,omitempty"`
	URI       string `json:"uri,omitempty"`
	Content   string `json:"content,omitempty"`
	ID        string `json:"id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments any    `json:"arguments,omitempty"`
	Response  string `json:"response,omitempty"`
}

type msg struct {
	Role         string    `json:"role"`
	Parts        []msgPart `json:"parts"`
	FinishReason string    `json:"finish_reason,omitempty"`
}

func inputMessages(ms []llm.Message) string {
	out := make([]msg, 0, len(ms))
	for _, m := range ms {
		om := msg{Role: string(m.Role)}
		if m.Role == llm.RoleTool {
			om.Parts = append(om.Parts, msgPart{Type: "tool_call_response", ID: m.ToolCallID, Response: m.Content})
		} else {
			om.Parts = appendReasoning(om.Parts, m.Reasoning, m.ThinkingBlocks)
			if m.Content != "" {
				om.Parts = append(om.Parts, msgPart{Type: "text", Content: m.Content})
			}
			for _, p := range m.Parts {
				om.Parts = appendPart(om.Parts, p)
			}
			for _, tc := range m.ToolCalls {
				om.Parts = append(om.Parts, msgPart{Type: "tool_call", ID: tc.ID, Name: tc.Name, Arguments: json.RawMessage(orNull(tc.Arguments))})
			}
		}
		out = append(out, om)
	}
	b, _ := json.Marshal(out)
	return string(b)
}

func outputMessages(res *llm.ChatResult) string {
	om := msg{Role: "assistant", FinishReason: string(res.FinishReason)}
	om.Parts = appendReasoning(om.Parts, res.Reasoning, res.ThinkingBlocks)
	if res.Content != "" {
		om.Parts = append(om.Parts, msgPart{Type: "text", Content: res.Content})
	}
	for _, tc := range res.ToolCalls {
		om.Parts = append(om.Parts, msgPart{Type: "tool_call", ID: tc.ID, Name: tc.Name, Arguments: json.RawMessage(orNull(tc.Arguments))})
	}
	b, _ := json.Marshal([]msg{om})
	return string(b)
}

// appendPart appends a request part: text, or media as the conventions'
// "uri" part (by URL) or "blob" part (inline bytes, base64), with its
// modality (image, document) and MIME type.
func appendPart(ps []msgPart, p llm.Part) []msgPart {
	switch {
	case p.Type == llm.PartText || p.Type == "":
		if p.Text != "" {
			ps = append(ps, msgPart{Type: "text", Content: p.Text})
		}
	case p.URL != "":
		ps = append(ps, msgPart{Type: "uri", Modality: string(p.Type), MIMEType: p.MIMEType, URI: p.URL})
	case len(p.Data) > 0:
		ps = append(ps, msgPart{Type: "blob", Modality: string(p.Type), MIMEType: p.MIMEType, Content: base64.StdEncoding.EncodeToString(p.Data)})
	}
	return ps
}

// appendReasoning appends an assistant's reasoning as "reasoning" parts:
// its plain text, or else each thinking block's readable text (redacted
// and encrypted blocks carry none).
func appendReasoning(ps []msgPart, text string, blocks []llm.ThinkingBlock) []msgPart {
	if text != "" {
		return append(ps, msgPart{Type: "reasoning", Content: text})
	}
	for _, b := range blocks {
		if b.Text != "" && !b.Redacted {
			ps = append(ps, msgPart{Type: "reasoning", Content: b.Text})
		}
	}
	return ps
}

func orNull(s string) string {
	if s == "" || !json.Valid([]byte(s)) {
		b, _ := json.Marshal(s)
		return string(b)
	}
	return s
}

// Tool-span attribute keys beyond the conventions'.
const (
	AttrToolEffect     = attribute.Key("chorus.tool.effect")
	AttrToolAttempt    = attribute.Key("chorus.tool.attempt")
	AttrToolOutcome    = attribute.Key("chorus.tool.outcome")
	AttrIdempotencyKey = attribute.Key("chorus.tool.idempotency_key")
	attrToolArgs       = attribute.Key("gen_ai.tool.call.arguments")
	attrToolResult     = attribute.Key("gen_ai.tool.call.result")
)

// ToolSpan is one execute_tool span.
type ToolSpan struct {
	t    *Telemetry
	ctx  context.Context
	span trace.Span
	name string
}

// StartTool starts the span `execute_tool {name}` (INTERNAL) of one tool
// call; kv adds Chorus's own attributes (effect class, attempt,
// idempotency key).
func (t *Telemetry) StartTool(ctx context.Context, name, callID string, kv ...attribute.KeyValue) (context.Context, *ToolSpan) {
	t = t.OrGlobal()
	ctx, span := t.tracer.Start(ctx, "execute_tool "+name, trace.WithSpanKind(trace.SpanKindInternal))
	if span.IsRecording() {
		span.SetAttributes(semconv.GenAIOperationNameExecuteTool, semconv.GenAIToolName(name), semconv.GenAIToolType("function"))
		if callID != "" {
			span.SetAttributes(semconv.GenAIToolCallID(callID))
		}
		span.SetAttributes(kv...)
	}
	return ctx, &ToolSpan{t: t, ctx: ctx, span: span, name: name}
}

// Arguments records the call's arguments, when content is recorded.
func (s *ToolSpan) Arguments(args string) {
	if s.t.content && s.span.IsRecording() {
		s.span.SetAttributes(attrToolArgs.String(args))
	}
}

// End ends the span with the call's outcome (succeeded, failed, rejected,
// outcome_unknown), its error class when it failed, and its result when
// content is recorded.
func (s *ToolSpan) End(outcome, errType, result string) {
	defer s.span.End()
	s.t.ToolCall(s.ctx, s.name, outcome)
	if !s.span.IsRecording() {
		return
	}
	s.span.SetAttributes(AttrToolOutcome.String(outcome))
	if errType != "" {
		s.span.SetAttributes(semconv.ErrorTypeKey.String(errType))
		s.span.SetStatus(codes.Error, errType)
	}
	if s.t.content && result != "" {
		s.span.SetAttributes(attrToolResult.String(result))
	}
}

// Span returns the tool call's span.
func (s *ToolSpan) Span() trace.Span { return s.span }
