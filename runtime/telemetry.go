package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"github.com/chorusrt/chorus/actors"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/telemetry"
)

// WithTelemetry sets the tracer and meter providers of the runtime's spans
// and metrics (see package telemetry). Without it the runtime uses the
// global providers, which record nothing until the application installs
// an OpenTelemetry SDK.
func WithTelemetry(t *telemetry.Telemetry) Option { return func(o *options) { o.tel = t } }

// fingerprint names a key without revealing it: the first 16 hex digits of
// its SHA-256 (the KeyID a SharedBudget sees).
func fingerprint(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}

// serverOf is server.address and server.port of a base URL.
func serverOf(base string) (string, int) {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return "", 0
	}
	port, _ := strconv.Atoi(u.Port())
	if port == 0 {
		switch u.Scheme {
		case "https":
			port = 443
		case "http":
			port = 80
		}
	}
	return u.Hostname(), port
}

// callTrace is one call's span and what its placements told it.
type callTrace struct {
	tc      *telemetry.Call
	targets []target
	prev    time.Time
	last    outcome
	adm     *admission // nil unless the call records: a call with telemetry off keeps its size
}

// admission is what a recording call knows of its running placement's
// admission: when it asked its credential, the end of the cooldown the
// credential was in then (zero: none), and the credential a 429 of this
// call cooled down, until cooledBy (its actor may not have heard of it yet
// when the next placement asks it).
type admission struct {
	askedAt, cooledTo time.Time
	ahead             int           // requests queued at the credential when it asked; -1: not known here
	queued, paced     time.Duration // what the credential's actor says the grant waited for (AdmitWaited)
	timed             bool
	cooled            *cred
	cooledBy          time.Time
}

// startTrace starts the span of a call of op on model (as the caller named
// it) resolved to targets.
func (rt *Runtime) startTrace(ctx context.Context, op, model string, targets []target, stream bool) (context.Context, *callTrace) {
	alias := ""
	if !strings.Contains(model, "/") {
		alias = model
	}
	ctx, tc := rt.opts.tel.StartCall(ctx, op, targets[0].g.id, targets[0].model, alias, stream)
	ct := &callTrace{tc: tc, targets: targets, prev: time.Now()}
	if tc.Recording() {
		ct.adm = &admission{}
		ctx = actors.WithAdmitWatcher(ctx, ct.adm)
	}
	return ctx, ct
}

// AdmitWaited hears from a credential's actor how long a grant waited in
// its queue and then for its pacer (actors.WithAdmitWatcher).
func (a *admission) AdmitWaited(queued, paced time.Duration) {
	a.queued, a.paced, a.timed = queued, paced, true
}

// queueKnown reports whether ref's Load counts its queue: a credential's
// own actor does; another admitter (a cluster's budget owner on another
// node, a SharedBudget's own type) may queue where this process does not
// see, and its zero would be a guess (invariant 5).
func queueKnown(ref actors.Admitter) bool {
	_, own := ref.(*actors.Ref)
	return own
}

// asking notes that a placement asks c for admission at now (place): the
// cooldown c is in, if any, is the part of the wait wrap reports as
// cooling down, and the requests queued at c wait ahead of it. Nothing
// when the call records nothing.
func (ct *callTrace) asking(c *cred, now time.Time) {
	a := ct.adm
	if a == nil {
		return
	}
	q, _, cd := c.admitter().Load()
	if !queueKnown(c.ref) {
		q = -1
	}
	a.askedAt, a.cooledTo, a.ahead = now, time.Time{}, q
	a.queued, a.paced, a.timed = 0, 0, false
	if cd.After(now) {
		a.cooledTo = cd
	}
	if c == a.cooled && a.cooledBy.After(a.cooledTo) {
		a.cooledTo = a.cooledBy
	}
}

// refused records an admission c refused because it cools down past the
// call's deadline (place): the call moves on to another credential or
// target, or fails.
func (ct *callTrace) refused(c *cred, err error) {
	if ct.adm == nil {
		return
	}
	var re *actors.RefusedError
	var until time.Time
	if errors.As(err, &re) {
		until = re.RetryAt
	}
	ct.tc.Cooldown(true, c.fp, until)
	ct.prev = time.Now()
}

// wrap returns call, telling the span about each placement when it
// records: the target and fallback step, the admission wait (and the part
// of it spent in a cooldown) and the credential's fingerprint, every
// attempt, a cooldown the call caused.
func (ct *callTrace) wrap(call func(ctx context.Context, c *cred, model string) outcome) func(ctx context.Context, c *cred, model string) outcome {
	if !ct.tc.Recording() {
		return call
	}
	return func(ctx context.Context, c *cred, model string) outcome {
		now, a := time.Now(), ct.adm
		var cool time.Duration
		if a.cooledTo.After(a.askedAt) {
			end := now
			if a.cooledTo.Before(now) {
				end = a.cooledTo
			}
			cool = end.Sub(a.askedAt)
		}
		ct.tc.SetTarget(ct.step(c, model), c.provider, model, c.server, c.port)
		// A grant on arrival from the credential's own actor waited for
		// nothing (the actor tells only of grants it made wait).
		ct.tc.Admitted(telemetry.Admission{Wait: now.Sub(ct.prev), Cooldown: cool, Queue: a.queued, Pacing: a.paced,
			Timed: a.timed || queueKnown(c.ref), QueuedAhead: a.ahead}, c.fp, c.index)
		ctx = providers.WithAttemptHook(ctx, func(ev providers.AttemptEvent) {
			ct.tc.Attempt(ev.Attempt, ev.Status, ev.ErrClass, ev.Duration, ev.Wait)
		})
		o := call(ctx, c, model)
		var rl *llm.RateLimitError
		if errors.As(o.err, &rl) && !rl.QuotaExhausted {
			a.cooled, a.cooledBy = c, time.Now().Add(rl.RetryAfter)
			ct.tc.Cooldown(false, c.fp, a.cooledBy)
		}
		ct.last = o
		ct.prev = time.Now()
		return o
	}
}

// step is the position in the alias of the target c and model serve.
func (ct *callTrace) step(c *cred, model string) int {
	for i, t := range ct.targets {
		if t.model == model && t.g.id == c.provider {
			return i
		}
	}
	return 0
}

// end ends the span with the call's result (res may be nil) and error.
func (ct *callTrace) end(res *llm.ChatResult, err error) {
	meta, usage := ct.last.meta, ct.last.usage
	if res != nil {
		meta, usage = res.Meta, res.Usage
	}
	ct.tc.End(res, meta, usage, err)
}

// registerGauges reports, at each metric collection, every credential's
// admission queue and requests in flight, and where known its learned
// limits and remaining budget (the runtime's own count since the last
// headers), named by provider and fingerprint. Keys that share one limit
// (Limits.Shared, or joined: joint.go) have one budget: it is one series, named by provider,
// server.address and server.port with chorus.credential.shared=true (a
// copy per key would count its queue and requests twice in a sum). Unknown
// values are not reported (invariant 5: no guessed limits).
func (rt *Runtime) registerGauges() {
	m := rt.opts.tel.Meter()
	gauge := func(name, unit, desc string) metric.Int64ObservableGauge {
		g, _ := m.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		return g
	}
	queue := gauge(telemetry.MetricQueueLength, "{request}", "Calls waiting for admission by a credential.")
	inFlight := gauge(telemetry.MetricInFlight, "{request}", "Admitted calls not yet finished, per credential.")
	remReq := gauge(telemetry.MetricRemainingReqs, "{request}", "Requests left in the credential's current window, as the runtime counts them.")
	remTok := gauge(telemetry.MetricRemainingTokens, "{token}", "Tokens left in the credential's current window, as the runtime counts them.")
	limReq := gauge(telemetry.MetricLimitRequests, "{request}", "The credential's request limit per window, as the provider reported it.")
	limTok := gauge(telemetry.MetricLimitTokens, "{token}", "The credential's token limit per window, as the provider reported it.")
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		seen := map[actors.Admitter]bool{}
		for _, id := range rt.order {
			for _, c := range rt.groups[id].creds {
				ref := c.admitter()
				if seen[ref] {
					continue
				}
				seen[ref] = true
				at := metric.WithAttributes(telemetry.ProviderName(c.provider), telemetry.AttrCredential.String(c.fp), telemetry.AttrCredentialIdx.Int(c.index))
				if c.shared || c.joined() {
					at = metric.WithAttributes(telemetry.ProviderName(c.provider), semconv.ServerAddress(c.server), semconv.ServerPort(c.port), telemetry.AttrCredentialShared.Bool(true))
				}
				q, f, _ := ref.Load()
				if queueKnown(ref) {
					o.ObserveInt64(queue, int64(q), at)
				}
				o.ObserveInt64(inFlight, int64(f), at)
				s, err := ref.Stats(250 * time.Millisecond)
				if err != nil {
					continue
				}
				if s.RemainingRequests >= 0 {
					o.ObserveInt64(remReq, int64(s.RemainingRequests), at)
				}
				if s.RemainingTokens >= 0 {
					o.ObserveInt64(remTok, int64(s.RemainingTokens), at)
				}
				if s.RateLimit.HasRequests && s.RateLimit.LimitRequests > 0 {
					o.ObserveInt64(limReq, int64(s.RateLimit.LimitRequests), at)
				}
				if s.RateLimit.HasTokens && s.RateLimit.LimitTokens > 0 {
					o.ObserveInt64(limTok, int64(s.RateLimit.LimitTokens), at)
				}
			}
		}
		return nil
	}, queue, inFlight, remReq, remTok, limReq, limTok)
	if err == nil {
		rt.gauges = reg
	}
}

// unregisterGauges stops the gauges' callback (Close).
func (rt *Runtime) unregisterGauges() {
	if rt.gauges != nil {
		_ = rt.gauges.Unregister()
	}
}
