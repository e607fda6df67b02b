package runtime

import (
	"context"
	"time"
)

// CallReport says how the runtime served one call: which model and
// credential answered, after how many placements and how long a wait for
// admission, and what it cost. Pass one with WithCallReport; the runtime
// fills it as the call runs, never per delta.
//
// For a stream, every field but Cost and Priced is final once the first
// event reached the caller (a stream never falls back after it); Cost and
// Priced are set before Result returns. For a buffered call every field is
// final when the call returns. Reading a field earlier is a data race.
type CallReport struct {
	// Model is the provider/model of the last placement: the one that
	// served, or, when the call failed, the last one tried.
	Model string
	// Provider is Model's provider id.
	Provider string
	// Credential is the fingerprint of the credential of the last placement
	// (a short hash, never the key).
	Credential string
	// Step is the fallback step of the last placement: its target's index
	// in the alias's list (0 for the first target or a plain model).
	Step int
	// Attempts counts placements: admissions on a credential, the one that
	// served included. HTTP retries within a placement are not counted
	// (llm.ResponseMeta.Attempts has them).
	Attempts int
	// QueueWait is the time spent waiting for admission, over every
	// placement.
	QueueWait time.Duration
	// Cost is the answer's cost in US dollars (WithPrices) when Priced.
	Cost   float64
	Priced bool
	// Dropped names the request's fields the last placement's format left
	// out (llm.ResponseMeta.Dropped; support.go).
	Dropped []string
	// Strategy is the routed alias's strategy (WithRoutedAlias; empty for
	// a plain alias or model), and Reason why it put its first target
	// first ("weight 3 of 4", "2 of 8 busy", "estimate 310ms", ...). Step
	// is then the position in the order the strategy gave.
	Strategy string
	Reason   string
	// Cache is "hit" when the answer came from the response cache
	// (WithCache; Cost is then zero and Priced true), "miss" when the
	// cache was asked and the provider answered, "" without a cache or in
	// mode off.
	Cache string
}

type reportKey struct{}

// WithCallReport returns a context whose call the runtime reports into r.
// Use one report per call.
func WithCallReport(ctx context.Context, r *CallReport) context.Context {
	return context.WithValue(ctx, reportKey{}, r)
}

// reportOf is the call's report, or nil.
func reportOf(ctx context.Context) *CallReport {
	r, _ := ctx.Value(reportKey{}).(*CallReport)
	return r
}

// placed records one admitted placement, before its call starts.
func (r *CallReport) placed(step int, t target, c *cred, wait time.Duration) {
	r.Model, r.Provider, r.Credential, r.Step = t.name, c.provider, c.fp, step
	r.Attempts++
	r.QueueWait += wait
}

// priced records the cost of a placement's usage, if its model has a price.
func (r *CallReport) priced(rt *Runtime, t target, o outcome) {
	if len(rt.opts.prices) == 0 || o.usage.IsZero() {
		return
	}
	if p, ok := rt.opts.prices.Lookup(t.name); ok {
		r.Cost, r.Priced = p.Cost(o.usage, false), true
	}
}
