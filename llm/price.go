package llm

// Price is what one model costs, as the user states it: US dollars per
// million tokens. Chorus ships no price table (invariant 5: unknown
// provider data stays zero); a model without a Price has no cost.
type Price struct {
	// Input is the price of uncached prompt tokens.
	Input float64
	// CachedInput is the price of prompt tokens read from the cache.
	CachedInput float64
	// CacheWrite is the price of prompt tokens written to the cache.
	CacheWrite float64
	// Output is the price of completion tokens, reasoning included.
	Output float64
	// BatchDiscount is the fraction a provider's batch API takes off every
	// token price (0.5: half price); 0 means none.
	BatchDiscount float64
}

// Cost is the price of u in US dollars; batch applies BatchDiscount. Each
// usage field is priced once (Usage keeps uncached input, cache reads and
// cache writes apart, so nothing is counted twice).
func (p Price) Cost(u Usage, batch bool) float64 {
	c := (float64(u.PromptTokens)*p.Input +
		float64(u.CacheReadTokens)*p.CachedInput +
		float64(u.CacheWriteTokens)*p.CacheWrite +
		float64(u.CompletionTokens)*p.Output) / 1e6
	if batch && p.BatchDiscount > 0 {
		c *= 1 - p.BatchDiscount
	}
	return c
}

// Prices maps "provider/model" to its Price.
type Prices map[string]Price

// Lookup is the price of model ("provider/model"); ok is false when the
// user gave none.
func (ps Prices) Lookup(model string) (p Price, ok bool) {
	p, ok = ps[model]
	return p, ok
}
