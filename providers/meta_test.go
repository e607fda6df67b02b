package providers

import (
	"net/http"
	"testing"
	"time"
)

func TestParseRateLimit(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	rl := ParseRateLimit(h(
		"x-ratelimit-limit-requests", "5000", "x-ratelimit-remaining-requests", "4999", "x-ratelimit-reset-requests", "12ms",
		"x-ratelimit-limit-tokens", "4000000", "x-ratelimit-remaining-tokens", "3999990", "x-ratelimit-reset-tokens", "6m0s",
	), now)
	if !rl.HasRequests || !rl.HasTokens || rl.LimitRequests != 5000 || rl.RemainingRequests != 4999 || rl.ResetRequests != 12*time.Millisecond ||
		rl.LimitTokens != 4000000 || rl.RemainingTokens != 3999990 || rl.ResetTokens != 6*time.Minute {
		t.Errorf("openai: %+v", rl)
	}
	rl = ParseRateLimit(h(
		"anthropic-ratelimit-requests-limit", "50", "anthropic-ratelimit-requests-remaining", "49", "anthropic-ratelimit-requests-reset", "2026-11-29T12:00:30Z",
		"anthropic-ratelimit-tokens-limit", "100", "anthropic-ratelimit-tokens-remaining", "90", "anthropic-ratelimit-tokens-reset", "2026-11-29T12:01:00Z",
		"anthropic-ratelimit-input-tokens-limit", "80", "anthropic-ratelimit-input-tokens-remaining", "70",
		"anthropic-ratelimit-output-tokens-limit", "20", "anthropic-ratelimit-output-tokens-remaining", "19",
		"retry-after", "7",
	), now)
	if rl.LimitRequests != 50 || rl.RemainingRequests != 49 || rl.ResetRequests != 30*time.Second || rl.ResetTokens != time.Minute ||
		rl.LimitInputTokens != 80 || rl.RemainingOutputTokens != 19 || rl.RetryAfter != 7*time.Second {
		t.Errorf("anthropic: %+v", rl)
	}
	rl = ParseRateLimit(h("X-RateLimit-Limit", "20", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1796040060000"), now)
	if rl.LimitRequests != 20 || rl.RemainingRequests != 0 || !rl.HasRequests || rl.ResetRequests <= 0 {
		t.Errorf("openrouter: %+v", rl)
	}
	if rl := ParseRateLimit(http.Header{}, now); !rl.IsZero() {
		t.Errorf("no headers gave %+v (invariant 5: unknown stays zero)", rl)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		ra, raMS string
		want     time.Duration
	}{
		"seconds":      {"3", "", 3 * time.Second},
		"fraction":     {"0.5", "", 500 * time.Millisecond},
		"ms wins":      {"3", "250", 250 * time.Millisecond},
		"http date":    {now.Add(10 * time.Second).Format(http.TimeFormat), "", 10 * time.Second},
		"past date":    {now.Add(-time.Hour).Format(http.TimeFormat), "", 0},
		"negative":     {"-4", "", 0},
		"garbage":      {"soon", "", 0},
		"absent":       {"", "", 0},
		"bad ms falls": {"2", "x", 2 * time.Second},
	}
	for name, c := range cases {
		h := http.Header{}
		if c.ra != "" {
			h.Set("Retry-After", c.ra)
		}
		if c.raMS != "" {
			h.Set("Retry-After-Ms", c.raMS)
		}
		if got := parseRetryAfter(h, now); got != c.want {
			t.Errorf("%s: got %v want %v", name, got, c.want)
		}
	}
}

func TestBackoffBounds(t *testing.T) {
	p := RetryPolicy{BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second}.withDefaults()
	for n := 1; n <= 30; n++ {
		d := p.backoff(n)
		lo := time.Duration(float64(100*time.Millisecond) * float64(uint64(1)<<min(n-1, 20)) * 0.8)
		if d > time.Second || (lo < time.Second && d < lo) {
			t.Fatalf("backoff(%d) = %v", n, d)
		}
	}
}

func TestClassifyRejection(t *testing.T) {
	cases := []struct {
		msg    string
		stream bool
		want   LearnFlag
	}{
		{"Unrecognized request argument supplied: stream_options", true, LearnNoStreamOptions},
		{"Unsupported parameter: 'temperature' is not supported with this model.", false, LearnNoTemperature},
		{"Unsupported value: 'temperature' does not support 0.2 with this model. Only the default (1) value is supported.", false, LearnNoTemperature},
		{"parallel_tool_calls is not supported for this model", false, LearnNoParallelToolCalls},
		{"Unrecognized request argument supplied: reasoning_effort", false, LearnNoReasoningEffort},
		{"Streaming is not supported for this model", true, LearnBuffered},
		{"Streaming is not supported for this model", false, 0},
		{"Invalid value for messages[0].content", false, 0},
	}
	for _, c := range cases {
		if got := classifyRejection(c.msg, c.stream); got != c.want {
			t.Errorf("%q (stream=%v) = %v, want %v", c.msg, c.stream, got, c.want)
		}
	}
}

func TestLearnedMonotonic(t *testing.T) {
	var l Learned
	if !l.Set(LearnBuffered) || l.Set(LearnBuffered) {
		t.Fatal("Set must report only the first time")
	}
	l.Set(LearnNoSeed)
	if f := l.Flags(); len(f) != 2 || f[0] != LearnBuffered || f[1] != LearnNoSeed {
		t.Fatalf("Flags = %v", f)
	}
	if s := l.snapshot(); !s.NoSeed || s.NoTopP {
		t.Fatalf("snapshot = %+v", s)
	}
}
