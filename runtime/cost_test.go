package runtime

import (
	"math"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

// TestStatsCosts: with WithPrices, Stats adds up each credential's priced
// answers per model, streamed and buffered, from the usage the provider
// reported (cache reads at their own price); a model without a price has
// no cost, never a guess.
func TestStatsCosts(t *testing.T) {
	u := &llm.Usage{PromptTokens: 1000, CacheReadTokens: 4000, CompletionTokens: 500}
	srv := llmtest.NewServer(llmtest.WithDefault(llmtest.Reply{Text: "ok", Usage: u}))
	defer srv.Close()
	rt := newRT(t, WithProvider(openaiCfg(srv, key)), WithPrices(llm.Prices{"openai/priced": {Input: 2, CachedInput: 0.5, Output: 8}}))
	for range 2 {
		if _, err := rt.Chat(ctxT(t, 5*time.Second), req("openai/priced")); err != nil {
			t.Fatal(err)
		}
	}
	s, err := rt.Stream(ctxT(t, 5*time.Second), req("openai/priced"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Result(); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Chat(ctxT(t, 5*time.Second), req("openai/unpriced")); err != nil {
		t.Fatal(err)
	}
	stats := rt.Stats()
	var costs []ModelCost
	for _, st := range stats {
		if st.Provider == "openai" {
			costs = st.Costs
		}
	}
	// (1000*2 + 4000*0.5 + 500*8) / 1e6 = 0.008 per call.
	if len(costs) != 1 || costs[0].Model != "openai/priced" || costs[0].Calls != 3 || math.Abs(costs[0].USD-3*0.008) > 1e-12 {
		t.Errorf("costs %+v, want openai/priced only: 3 calls, $0.024", costs)
	}
}
