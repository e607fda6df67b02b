package batch

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/chorusrt/chorus/internal/testkit/fixture"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers"
)

// rawUsage is a recorded usage block in the Chorus split: uncached input,
// cache reads, cache writes, output (reasoning included), read straight
// from the format's own field names.
type rawUsage struct{ uncached, read, write, output int }

func recordedUsage(format string, body []byte) (rawUsage, bool) {
	var u rawUsage
	switch format {
	case "openai":
		var b struct {
			Object string `json:"object"`
			Usage  *struct {
				PromptTokens        int `json:"prompt_tokens"`
				CompletionTokens    int `json:"completion_tokens"`
				PromptTokensDetails struct {
					CachedTokens     int `json:"cached_tokens"`
					CacheWriteTokens int `json:"cache_write_tokens"` // OpenRouter and gateways
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
		}
		if json.Unmarshal(body, &b) != nil || b.Usage == nil || b.Object != "chat.completion" {
			return u, false
		}
		d := b.Usage.PromptTokensDetails
		return rawUsage{uncached: b.Usage.PromptTokens - d.CachedTokens - d.CacheWriteTokens, read: d.CachedTokens, write: d.CacheWriteTokens, output: b.Usage.CompletionTokens}, true
	case "anthropic":
		var b struct {
			Type  string `json:"type"`
			Usage *struct {
				InputTokens              int `json:"input_tokens"`
				CacheReadInputTokens     int `json:"cache_read_input_tokens"`
				CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
				OutputTokens             int `json:"output_tokens"`
			} `json:"usage"`
		}
		if json.Unmarshal(body, &b) != nil || b.Usage == nil || b.Type != "message" {
			return u, false
		}
		return rawUsage{uncached: b.Usage.InputTokens, read: b.Usage.CacheReadInputTokens, write: b.Usage.CacheCreationInputTokens, output: b.Usage.OutputTokens}, true
	case "gemini":
		var b struct {
			Candidates    []json.RawMessage `json:"candidates"`
			UsageMetadata *struct {
				PromptTokenCount        int `json:"promptTokenCount"`
				CachedContentTokenCount int `json:"cachedContentTokenCount"`
				CandidatesTokenCount    int `json:"candidatesTokenCount"`
				ThoughtsTokenCount      int `json:"thoughtsTokenCount"`
			} `json:"usageMetadata"`
		}
		if json.Unmarshal(body, &b) != nil || b.UsageMetadata == nil || len(b.Candidates) == 0 {
			return u, false
		}
		m := b.UsageMetadata
		return rawUsage{uncached: m.PromptTokenCount - m.CachedContentTokenCount, read: m.CachedContentTokenCount, output: m.CandidatesTokenCount + m.ThoughtsTokenCount}, true
	}
	return u, false
}

// TestUsageAndCostFromFixtures: for every recorded buffered answer of the
// three formats in the recorded corpus (CHORUS_FIXTURES), the usage the codec reports (the
// same decode a native batch result goes through) splits input the Chorus
// way (uncached, cache reads, cache writes apart) and agrees with the
// recorded block, and the cost is each part at its own price, live and
// at the batch discount. Answers with cache reads must be among them.
func TestUsageAndCostFromFixtures(t *testing.T) {
	dir := fixture.Require(t)
	entries, err := fixture.LoadIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	clients := map[string]*providers.Client{}
	for _, id := range []string{"openai", "anthropic", "gemini"} {
		cfg, _ := providers.Builtin(id)
		cfg.APIKey = "k"
		c, err := providers.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		clients[id] = c
	}
	price := llm.Price{Input: 3, CachedInput: 0.3, CacheWrite: 3.75, Output: 15, BatchDiscount: 0.5}
	checked, cached := map[string]int{}, map[string]int{}
	for _, e := range entries {
		c := clients[e.Provider]
		if c == nil || e.Synthetic() {
			continue
		}
		exs, err := fixture.Load(dir, e)
		if err != nil {
			continue
		}
		for i, ex := range exs {
			if ex.Response.Stream || ex.Response.Status != 200 {
				continue
			}
			raw, ok := recordedUsage(e.Provider, ex.Response.Body)
			if !ok {
				continue
			}
			res, err := c.DecodeChat(ex.Response.Body)
			if err != nil {
				continue // answers the codec refuses are the conformance tests' business
			}
			u := res.Usage
			got := rawUsage{uncached: u.PromptTokens, read: u.CacheReadTokens, write: u.CacheWriteTokens, output: u.CompletionTokens}
			if got != raw {
				t.Errorf("%s #%d: usage %+v, recorded %+v", e.File, i, got, raw)
				continue
			}
			want := (float64(raw.uncached)*3 + float64(raw.read)*0.3 + float64(raw.write)*3.75 + float64(raw.output)*15) / 1e6
			if live, batch := price.Cost(u, false), price.Cost(u, true); math.Abs(live-want) > 1e-12 || math.Abs(batch-want/2) > 1e-12 {
				t.Errorf("%s #%d: cost %v live, %v batch; want %v and %v", e.File, i, live, batch, want, want/2)
			}
			checked[e.Provider]++
			if raw.read+raw.write > 0 {
				cached[e.Provider]++
			}
		}
	}
	t.Logf("answers checked %v, with cache reads or writes %v", checked, cached)
	for _, f := range []string{"openai", "anthropic", "gemini"} {
		if checked[f] == 0 {
			t.Errorf("no recorded %s answer was checked", f)
		}
	}
	if cached["openai"]+cached["anthropic"]+cached["gemini"] == 0 {
		t.Error("no recorded answer with cache reads or writes was checked")
	}
}
