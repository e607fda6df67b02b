package providers

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/trace"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// LearnFlag is one fact learned about a provider endpoint.
type LearnFlag uint32

// Learn-once flags. Each is set at most once and never cleared.
const (
	// LearnNoStreamOptions: the provider rejected stream_options.
	LearnNoStreamOptions LearnFlag = 1 << iota
	// LearnBuffered: the provider rejected streaming or answered a stream
	// request with a non-SSE body; streams are served from buffered calls.
	LearnBuffered
	// LearnNoParallelToolCalls: the provider rejected parallel_tool_calls.
	LearnNoParallelToolCalls
	// LearnNoReasoningEffort: the provider rejected reasoning_effort.
	LearnNoReasoningEffort
	// LearnNoTemperature: the provider rejected temperature for the model.
	LearnNoTemperature
	// LearnNoTopP: the provider rejected top_p.
	LearnNoTopP
	// LearnNoSeed: the provider rejected seed.
	LearnNoSeed
	// LearnResponsesAPI: the provider answered that a model is only served
	// by the Responses API (/v1/responses). It is learned per model (see
	// Learned.HasModel); Has reports whether any model learned it.
	LearnResponsesAPI
	// LearnNoEncryptedReasoning: a model on the Responses route rejected
	// include:["reasoning.encrypted_content"] (a non-reasoning model). It is
	// learned per model, like LearnResponsesAPI.
	LearnNoEncryptedReasoning
)

// lastFlag is the highest flag, for iteration.
const lastFlag = LearnNoEncryptedReasoning

var learnNames = map[LearnFlag]string{
	LearnNoStreamOptions:      "no_stream_options",
	LearnBuffered:             "buffered",
	LearnNoParallelToolCalls:  "no_parallel_tool_calls",
	LearnNoReasoningEffort:    "no_reasoning_effort",
	LearnNoTemperature:        "no_temperature",
	LearnNoTopP:               "no_top_p",
	LearnNoSeed:               "no_seed",
	LearnResponsesAPI:         "responses_api",
	LearnNoEncryptedReasoning: "no_encrypted_reasoning",
}

// String names the flag.
func (f LearnFlag) String() string {
	if n, ok := learnNames[f]; ok {
		return n
	}
	return "unknown"
}

// Learned is an endpoint's learn-once state (invariant 6: per provider id
// and base URL, per model where the lesson is): monotonic, safe for
// concurrent use, shared by every caller and every credential of the
// endpoint. It is a plain value outside any actor so that it survives a
// supervised restart; pass the same *Learned to every Client of the
// endpoint with WithLearned (the runtime does). A Client given none keeps
// its own.
type Learned struct {
	bits atomic.Uint32

	// models holds the per-model facts: an immutable map replaced on
	// every new fact, so reads (one per attempt) take no lock.
	models  atomic.Pointer[map[modelFact]struct{}]
	modelMu sync.Mutex // serialises writers of models
}

// modelFact is one fact learned about one model.
type modelFact struct {
	flag  LearnFlag
	model string
}

// HasModel reports whether f was learned for model.
func (l *Learned) HasModel(f LearnFlag, model string) bool {
	m := l.models.Load()
	if m == nil {
		return false
	}
	_, ok := (*m)[modelFact{f, model}]
	return ok
}

// SetModel records f for model and reports whether it was new. It also
// sets f itself, so that Has and Flags show that some model learned it.
func (l *Learned) SetModel(f LearnFlag, model string) bool {
	l.modelMu.Lock()
	defer l.modelMu.Unlock()
	old := l.models.Load()
	key := modelFact{f, model}
	if old != nil {
		if _, ok := (*old)[key]; ok {
			return false
		}
	}
	next := make(map[modelFact]struct{}, 1)
	if old != nil {
		for k := range *old {
			next[k] = struct{}{}
		}
	}
	next[key] = struct{}{}
	l.models.Store(&next)
	l.Set(f)
	return true
}

// Models returns the models f was learned for, sorted.
func (l *Learned) Models(f LearnFlag) []string {
	m := l.models.Load()
	if m == nil {
		return nil
	}
	var out []string
	for k := range *m {
		if k.flag == f {
			out = append(out, k.model)
		}
	}
	sort.Strings(out)
	return out
}

// Has reports whether f was learned.
func (l *Learned) Has(f LearnFlag) bool { return l.bits.Load()&uint32(f) != 0 }

// Set records f and reports whether it was new.
func (l *Learned) Set(f LearnFlag) bool {
	for {
		old := l.bits.Load()
		if old&uint32(f) != 0 {
			return false
		}
		if l.bits.CompareAndSwap(old, old|uint32(f)) {
			return true
		}
	}
}

// Flags returns every learned flag in a stable order.
func (l *Learned) Flags() []LearnFlag {
	var out []LearnFlag
	b := l.bits.Load()
	for f := LearnNoStreamOptions; f <= lastFlag; f <<= 1 {
		if b&uint32(f) != 0 {
			out = append(out, f)
		}
	}
	return out
}

func (l *Learned) snapshot() wire.Learned {
	b := l.bits.Load()
	has := func(f LearnFlag) bool { return b&uint32(f) != 0 }
	return wire.Learned{
		NoStreamOptions:     has(LearnNoStreamOptions),
		NoParallelToolCalls: has(LearnNoParallelToolCalls),
		NoReasoningEffort:   has(LearnNoReasoningEffort),
		NoTemperature:       has(LearnNoTemperature),
		NoTopP:              has(LearnNoTopP),
		NoSeed:              has(LearnNoSeed),
	}
}

// LearnEvent reports a newly learned flag to the learn observer.
type LearnEvent struct {
	Provider string
	Flag     LearnFlag
	// Model is the model a per-model fact (LearnResponsesAPI,
	// LearnNoEncryptedReasoning) is about; empty for endpoint-wide flags.
	Model string
	// Reason is the provider's message that taught it (key-redacted).
	Reason string
}

// classifyRejection reads a 400/422 message for a parameter the provider
// rejects. It returns 0 when the message teaches nothing. The classifiers
// are substring rules on provider messages; each one is only acted on when
// the rejected parameter was actually sent (see sentFlags).
func classifyRejection(msg string, stream bool) LearnFlag {
	m := strings.ToLower(msg)
	rejects := containsAny(m, "not support", "unsupported", "does not support", "not allowed", "disabled", "reject", "unrecognized", "unknown", "invalid", "not permitted", "only the default", "extra inputs")
	switch {
	case strings.Contains(m, "stream_options"):
		return LearnNoStreamOptions
	case strings.Contains(m, "parallel_tool_calls") && rejects:
		return LearnNoParallelToolCalls
	case strings.Contains(m, "reasoning_effort") && rejects:
		return LearnNoReasoningEffort
	case strings.Contains(m, "temperature") && rejects:
		return LearnNoTemperature
	case strings.Contains(m, "top_p") && rejects:
		return LearnNoTopP
	case strings.Contains(m, "seed") && rejects:
		return LearnNoSeed
	case stream && strings.Contains(m, "stream") && rejects:
		return LearnBuffered
	}
	return 0
}

func containsAny(s string, subs ...string) bool {
	for _, x := range subs {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}

// learnFrom reads a rejection for a parameter this request actually sent
// and records it. It reports whether the request should be sent again at
// once, rebuilt without the parameter. A rejection of the route (the model
// is only served by the Responses API) is read first, by learnRoute. What
// the attempt learned goes on ctx's span (learntrace.go).
func (c *Client) learnFrom(ctx context.Context, err error, req *llm.ChatRequest, sent wire.Learned, stream bool, attempt int) bool {
	if c.learnRoute(err, req) {
		if trace.SpanFromContext(ctx).IsRecording() {
			traceLearned(ctx, routeLesson(err), attempt)
		}
		return true
	}
	var api *llm.APIError
	if !errors.As(err, &api) || (api.Status != 400 && api.Status != 422) {
		return false
	}
	f := classifyRejection(api.Message+" "+api.Code, stream)
	var wasSent bool
	switch f {
	case LearnNoStreamOptions:
		wasSent = stream && c.cfg.Format == FormatOpenAI && !c.cfg.Quirks.NoStreamOptions && !sent.NoStreamOptions
	case LearnBuffered:
		wasSent = stream
	case LearnNoParallelToolCalls:
		wasSent = req.ParallelToolCalls != nil && len(req.Tools) > 0 && !sent.NoParallelToolCalls
	case LearnNoReasoningEffort:
		wasSent = req.Reasoning != nil && c.cfg.Format == FormatOpenAI && !sent.NoReasoningEffort
	case LearnNoTemperature:
		wasSent = req.Temperature != nil && !sent.NoTemperature
	case LearnNoTopP:
		wasSent = req.TopP != nil && !sent.NoTopP
	case LearnNoSeed:
		wasSent = req.Seed != nil && !sent.NoSeed
	}
	if !wasSent {
		return false
	}
	c.learn(f, api.Message)
	traceLearned(ctx, f, attempt)
	return true
}

func (c *Client) learn(f LearnFlag, reason string) bool {
	if !c.learned.Set(f) {
		return false
	}
	c.logger.Info("learned provider behaviour", slog.String("provider", c.cfg.ID), slog.String("flag", f.String()))
	if c.learnObs != nil {
		func() {
			defer func() { _ = recover() }()
			c.learnObs(LearnEvent{Provider: c.cfg.ID, Flag: f, Reason: c.redact(reason)})
		}()
	}
	return true
}

// learnModel records a per-model fact and reports it once to the log and
// the learn observer.
func (c *Client) learnModel(f LearnFlag, model, reason string) {
	if !c.learned.SetModel(f, model) {
		return
	}
	c.logger.Info("learned provider behaviour", slog.String("provider", c.cfg.ID), slog.String("flag", f.String()), slog.String("model", model))
	if c.learnObs != nil {
		func() {
			defer func() { _ = recover() }()
			c.learnObs(LearnEvent{Provider: c.cfg.ID, Flag: f, Model: model, Reason: c.redact(reason)})
		}()
	}
}
