package gateway

import (
	"github.com/chorusrt/chorus/keystore"
	"github.com/chorusrt/chorus/llm"
)

// estimate is the most a call may cost (NanoUSD), which a key's budget
// reserves before it runs on a fleet (fleet.go): its input as if every
// byte of the request were a token (a tokenizer's token is never shorter
// than a byte) at the dearest input price (uncached, cache read or cache
// write), and maxOut output tokens (its max_tokens; defaultReserveTokens
// when it names none; none when negative) at the output price, of the
// served model or, for an alias, of its dearest target. A call costs
// nothing to reserve when the key has no budget, there is no key store,
// or the model has no price.
func (h *Handler) estimate(ks *keyState, served string, size int64, maxOut int) keystore.NanoUSD {
	if ks == nil || h.fleet == nil || ks.key.BudgetUSD <= 0 {
		return 0
	}
	p, ok := h.rt.Price(served)
	if !ok {
		return 0
	}
	if size < 0 {
		size = 0
	}
	out := maxOut
	switch {
	case out == 0:
		out = defaultReserveTokens
	case out < 0:
		out = 0
	}
	in := max(p.Input, p.CachedInput, p.CacheWrite)
	return keystore.ToNano((float64(size)*in + float64(out)*p.Output) / 1e6)
}

// estimateFanOut is estimate for a fan-out: one call per target.
func (h *Handler) estimateFanOut(ks *keyState, targets []string, size int64, maxOut int) (n keystore.NanoUSD) {
	for _, t := range targets {
		served, err := h.rt.Resolve(t, "")
		if err != nil {
			served = t
		}
		n += h.estimate(ks, served, size, maxOut)
	}
	return n
}

// chatBytes is the size of what a chat request sends as input, near
// enough to its body's (a batch line's request is decoded already).
func chatBytes(req *llm.ChatRequest) (n int) {
	for i := range req.Messages {
		m := &req.Messages[i]
		n += len(m.Content) + len(m.Reasoning) + 16
		for _, p := range m.Parts {
			n += len(p.Text) + len(p.Data) + len(p.URL)
		}
		for _, c := range m.ToolCalls {
			n += len(c.Name) + len(c.Arguments)
		}
	}
	for _, t := range req.Tools {
		n += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	return n
}

// embedBytes is the size of an embedding request's inputs.
func embedBytes(req *llm.EmbedRequest) (n int) {
	for _, in := range req.Inputs {
		n += len(in)
	}
	return n
}
