package runtime

import (
	"sort"
	"sync"

	"github.com/chorusrt/chorus/llm"
)

// WithPrices sets the prices the runtime adds up in Stats: US dollars per
// million tokens, by "provider/model" as the call named it. Chorus ships
// no price (invariant 5): a model without one has no cost.
func WithPrices(p llm.Prices) Option {
	return func(o *options) {
		o.prices = make(llm.Prices, len(p))
		for k, v := range p {
			o.prices[k] = v
		}
	}
}

// ModelCost is what one credential's answers of one model cost.
type ModelCost struct {
	// Model is "provider/model".
	Model string
	USD   float64
	// Calls counts the priced answers.
	Calls int64
}

// costBook adds up one credential's costs.
type costBook struct {
	mu sync.Mutex
	m  map[string]*ModelCost
}

// account prices one finished placement with usage.
func (rt *Runtime) account(c *cred, t target, o outcome) {
	if len(rt.opts.prices) == 0 || o.usage.IsZero() {
		return
	}
	price, ok := rt.opts.prices.Lookup(t.name)
	if !ok {
		return
	}
	c.costs.mu.Lock()
	defer c.costs.mu.Unlock()
	if c.costs.m == nil {
		c.costs.m = map[string]*ModelCost{}
	}
	mc := c.costs.m[t.name]
	if mc == nil {
		mc = &ModelCost{Model: t.name}
		c.costs.m[t.name] = mc
	}
	mc.USD += price.Cost(o.usage, false)
	mc.Calls++
}

func (b *costBook) snapshot() []ModelCost {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]ModelCost, 0, len(b.m))
	for _, mc := range b.m {
		out = append(out, *mc)
	}
	sort.Slice(out, func(i, k int) bool { return out[i].Model < out[k].Model })
	return out
}

// Price is the price of model ("provider/model", or an alias: then the
// highest of its targets' prices, field by field, so that what it gives is
// never less than what any target costs). ok is false when no target of it
// has a price.
func (rt *Runtime) Price(model string) (p llm.Price, ok bool) {
	if len(rt.opts.prices) == 0 {
		return p, false
	}
	if p, ok := rt.opts.prices.Lookup(model); ok {
		return p, true
	}
	targets, alias := rt.aliases[model]
	if !alias {
		return p, false
	}
	for _, t := range targets {
		tp, found := rt.opts.prices.Lookup(t)
		if !found {
			continue
		}
		ok = true
		p.Input, p.CachedInput = max(p.Input, tp.Input), max(p.CachedInput, tp.CachedInput)
		p.CacheWrite, p.Output = max(p.CacheWrite, tp.CacheWrite), max(p.Output, tp.Output)
	}
	return p, ok
}
