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
}

// startTrace starts the span of a call of op on model (as the caller named
// it) resolved to targets.
func (rt *Runtime) startTrace(ctx context.Context, op, model string, targets []target, stream bool) (context.Context, *callTrace) {
	alias := ""
	if !strings.Contains(model, "/") {
		alias = model
	}
	ctx, tc := rt.opts.tel.StartCall(ctx, op, targets[0].g.id, targets[0].model, alias, stream)
	return ctx, &callTrace{tc: tc, targets: targets, prev: time.Now()}
}

// wrap returns call, telling the span about each placement when it
// records: the target and fallback step, the admission wait and the
// credential's fingerprint, every attempt, a cooldown the call caused.
func (ct *callTrace) wrap(call func(ctx context.Context, c *cred, model string) outcome) func(ctx context.Context, c *cred, model string) outcome {
	if !ct.tc.Recording() {
		return call
	}
	return func(ctx context.Context, c *cred, model string) outcome {
		ct.tc.SetTarget(ct.step(c, model), c.provider, model, c.server, c.port)
		ct.tc.Admitted(time.Since(ct.prev), c.fp, c.index)
		ctx = providers.WithAttemptHook(ctx, func(ev providers.AttemptEvent) {
			ct.tc.Attempt(ev.Attempt, ev.Status, ev.ErrClass, ev.Duration, ev.Wait)
		})
		o := call(ctx, c, model)
		var rl *llm.RateLimitError
		if errors.As(o.err, &rl) && !rl.QuotaExhausted {
			ct.tc.Cooldown(rl.RetryAfter, c.fp, time.Now().Add(rl.RetryAfter))
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
