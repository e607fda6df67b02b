package runtime

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
)

// pacingCell is one cell of the pacing matrix: a limiter model, a wire
// format, a caller concurrency and a key layout.
type pacingCell struct {
	model       llmtest.LimiterModel
	format      providers.Format
	concurrency int
	// keys: "one"; "per-key" (two keys, a budget each); "org" (two keys
	// of one organisation, one budget, not declared); "org-shared" (the
	// same, declared: Limits.Shared).
	keys string
}

// pacingResult is what one cell measured.
type pacingResult struct {
	total        int
	failed       int
	limited      int // 429s in all
	limitedLater int // 429s after the first window
	elapsed      time.Duration
	minimum      time.Duration
}

const (
	pacingLimit  = 20
	pacingWindow = 500 * time.Millisecond
	// pacingTotal is the requests of a cell whose keys draw on one
	// limit. Two keys with limits of their own get 2*pacingTotal -
	// pacingLimit: the same number of windows (so what learning a limit
	// costs once weighs the same in every cell), with half a window to
	// spare per key in the last, since each key serves the callers
	// placed on it and a split of 101 and 99 is not the runtime's to
	// undo once they wait.
	pacingTotal = 100
)

// minimumTime is the least time the limit allows for total requests: a
// fixed or sliding window lets limit through per window; a bucket starts
// full and then refills limit per window.
func minimumTime(m llmtest.LimiterModel, limit, total int, w time.Duration) time.Duration {
	switch m {
	case llmtest.TokenBucket:
		return time.Duration(float64(max(total-limit, 0)) / float64(limit) * float64(w))
	default:
		return time.Duration(math.Ceil(float64(total)/float64(limit))-1) * w
	}
}

func runPacingCell(t *testing.T, c pacingCell) pacingResult {
	rl := llmtest.RateLimit{Requests: pacingLimit, Window: pacingWindow, Model: c.model}
	capacity := pacingLimit
	keys := []string{"k-one"}
	switch c.keys {
	case "per-key":
		rl.PerKey, keys, capacity = true, []string{"k-a", "k-b"}, 2*pacingLimit
	case "org", "org-shared":
		rl.Orgs, keys = map[string]string{"k-a": "acme", "k-b": "acme"}, []string{"k-a", "k-b"}
	}
	srv := llmtest.NewServer(llmtest.WithRateLimit(rl))
	defer srv.Close()
	var opts []Option
	var id string
	for _, k := range keys {
		cfg := providers.Config{Format: c.format, APIKey: providers.Secret(k)}
		switch c.format {
		case providers.FormatOpenAI:
			cfg.ID, cfg.BaseURL = "openai", srv.OpenAIBaseURL()
		case providers.FormatAnthropic:
			cfg.ID, cfg.BaseURL = "anthropic", srv.AnthropicBaseURL()
		case providers.FormatGemini:
			cfg.ID, cfg.BaseURL = "gemini", srv.GeminiBaseURL()
		}
		id = cfg.ID
		opts = append(opts, WithProvider(cfg))
	}
	if c.keys == "org-shared" {
		opts = append(opts, WithLimits(id, Limits{Shared: true}))
	}
	rt := newRT(t, opts...)
	total := pacingTotal
	if c.keys == "per-key" {
		total = 2*pacingTotal - pacingLimit
	}
	start := time.Now()
	errs := chatAllWithin(t, rt, id+"/m", total, c.concurrency, 60*time.Second)
	for _, err := range errs[:min(len(errs), 3)] {
		t.Errorf("%v", err)
	}
	failed := len(errs)
	r := pacingResult{total: total, failed: failed, elapsed: time.Since(start), minimum: minimumTime(c.model, capacity, total, pacingWindow)}
	first := srv.FirstRequestAt() // where its limiter's first window begins
	for _, at := range srv.RateLimitedAt() {
		r.limited++
		if at.Sub(first) > pacingWindow {
			r.limitedLater++
		}
	}
	return r
}

// TestPacingMatrix runs the limiter models providers really use (fixed
// windows, token buckets, sliding windows) against the OpenAI, Anthropic
// and Gemini formats at concurrency 1, 16 and 64, with one key, two keys
// with budgets of their own, and two keys sharing one organisation's
// budget, undeclared and declared (Limits.Shared: the two keys are paced as
// one budget). Every request must succeed. On the formats that report their
// limits no 429 may come after the first window, keys sharing a token
// bucket included. Gemini reports nothing and its per-minute 429 is
// pacing, not exhausted quota: once its limit is inferred from the first
// window's 429s, at most two 429s per window (usually none or one in the
// whole run) may follow, under fixed and sliding windows, for one key,
// keys of their own, keys declared to share one limit (one inference for
// both), and undeclared keys sharing one (each infers its share blind to
// the other: calls are placed where they wait least, a refused call is
// placed again once a key can serve it, and callers queued at a key
// without room move to one with room and nobody waiting). Gemini on
// a token bucket is not run: its refusals name no window. The time against
// the minimum the limit allows is logged, never asserted.
func TestPacingMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("pacing matrix: seconds per cell")
	}
	for _, m := range []llmtest.LimiterModel{llmtest.FixedWindow, llmtest.TokenBucket, llmtest.SlidingWindow} {
		for _, f := range []providers.Format{providers.FormatOpenAI, providers.FormatAnthropic, providers.FormatGemini} {
			if f == providers.FormatGemini && m == llmtest.TokenBucket {
				continue
			}
			for _, conc := range []int{1, 16, 64} {
				for _, keys := range []string{"one", "per-key", "org", "org-shared"} {
					c := pacingCell{model: m, format: f, concurrency: conc, keys: keys}
					t.Run(fmt.Sprintf("%s/%s/c%d/%s", m, f, conc, keys), func(t *testing.T) {
						r := runPacingCell(t, c)
						t.Logf("429s %d (after the first window %d), %v against a minimum of %v (%.2fx)",
							r.limited, r.limitedLater, r.elapsed.Round(time.Millisecond), r.minimum, float64(r.elapsed)/float64(max(r.minimum, time.Millisecond)))
						if r.failed > 0 {
							t.Errorf("%d of %d requests failed", r.failed, r.total)
						}
						if f != providers.FormatGemini && r.limitedLater > 0 {
							t.Errorf("%d 429s after the first window on a provider that reports its limits", r.limitedLater)
						}
						// Gemini: its limit is inferred from its 429s; after the
						// first window at most two per window, usually one (a
						// handful per minute on Gemini's per-minute windows).
						if windows := int(r.elapsed/pacingWindow) + 1; f == providers.FormatGemini && r.limitedLater > 2*windows {
							t.Errorf("%d 429s after the first window in %d windows on Gemini", r.limitedLater, windows)
						}
					})
				}
			}
		}
	}
}
