package providers

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/chorusrt/chorus/llm"
)

// hget is h.Get for a key already in canonical form (every key this file
// reads): one map lookup, without canonicalizing the key again on every
// response (about a tenth of a small buffered call's header handling).
func hget(h http.Header, canonicalKey string) string {
	if v := h[canonicalKey]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// requestIDHeaders are consulted in order for the provider's request id.
var requestIDHeaders = []string{"X-Request-Id", "Request-Id", "X-Goog-Request-Id", "Openai-Request-Id", "Cf-Ray"}

func requestID(h http.Header) string {
	for _, k := range requestIDHeaders {
		if v := hget(h, k); v != "" {
			return v
		}
	}
	return ""
}

// ParseRateLimit reads the rate-limit state from response headers:
// OpenAI-format x-ratelimit-*, OpenRouter-style X-RateLimit-Limit /
// -Remaining / -Reset, Anthropic anthropic-ratelimit-*, and retry-after /
// retry-after-ms. now anchors absolute reset times. Absent values stay zero.
func ParseRateLimit(h http.Header, now time.Time) llm.RateLimit {
	var rl llm.RateLimit
	// OpenAI format.
	if v := hget(h, "X-Ratelimit-Limit-Requests"); v != "" {
		rl.HasRequests = true
		rl.LimitRequests = atoi(v)
		rl.RemainingRequests = atoi(hget(h, "X-Ratelimit-Remaining-Requests"))
		rl.ResetRequests = parseReset(hget(h, "X-Ratelimit-Reset-Requests"), now)
	}
	if v := hget(h, "X-Ratelimit-Limit-Tokens"); v != "" {
		rl.HasTokens = true
		rl.LimitTokens = atoi(v)
		rl.RemainingTokens = atoi(hget(h, "X-Ratelimit-Remaining-Tokens"))
		rl.ResetTokens = parseReset(hget(h, "X-Ratelimit-Reset-Tokens"), now)
	}
	// OpenRouter and other gateways: one request window.
	if !rl.HasRequests {
		if v := hget(h, "X-Ratelimit-Limit"); v != "" {
			rl.HasRequests = true
			rl.LimitRequests = atoi(v)
			rl.RemainingRequests = atoi(hget(h, "X-Ratelimit-Remaining"))
			rl.ResetRequests = parseReset(hget(h, "X-Ratelimit-Reset"), now)
		}
	}
	// Anthropic.
	if v := hget(h, "Anthropic-Ratelimit-Requests-Limit"); v != "" {
		rl.HasRequests = true
		rl.LimitRequests = atoi(v)
		rl.RemainingRequests = atoi(hget(h, "Anthropic-Ratelimit-Requests-Remaining"))
		rl.ResetRequests = parseReset(hget(h, "Anthropic-Ratelimit-Requests-Reset"), now)
	}
	if v := hget(h, "Anthropic-Ratelimit-Tokens-Limit"); v != "" {
		rl.HasTokens = true
		rl.LimitTokens = atoi(v)
		rl.RemainingTokens = atoi(hget(h, "Anthropic-Ratelimit-Tokens-Remaining"))
		rl.ResetTokens = parseReset(hget(h, "Anthropic-Ratelimit-Tokens-Reset"), now)
	}
	if v := hget(h, "Anthropic-Ratelimit-Input-Tokens-Limit"); v != "" {
		rl.LimitInputTokens = atoi(v)
		rl.RemainingInputTokens = atoi(hget(h, "Anthropic-Ratelimit-Input-Tokens-Remaining"))
	}
	if v := hget(h, "Anthropic-Ratelimit-Output-Tokens-Limit"); v != "" {
		rl.LimitOutputTokens = atoi(v)
		rl.RemainingOutputTokens = atoi(hget(h, "Anthropic-Ratelimit-Output-Tokens-Remaining"))
	}
	rl.RetryAfter = parseRetryAfter(h, now)
	return rl
}

func atoi(s string) int {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0
	}
	return n
}

// parseReset reads a reset value in any form providers send: a Go-style
// duration ("6m0s", "20ms", "1.5s"), plain seconds ("12"), an RFC 3339 time
// (Anthropic), or a Unix time in seconds or milliseconds (gateways).
func parseReset(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if d, err := time.ParseDuration(v); err == nil {
		return max(d, 0)
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return max(t.Sub(now), 0)
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil && f >= 0 && !math.IsInf(f, 0) {
		switch {
		case f > 1e12: // Unix milliseconds
			return max(time.UnixMilli(int64(f)).Sub(now), 0)
		case f > 1e9: // Unix seconds
			return max(time.Unix(int64(f), 0).Sub(now), 0)
		default:
			return time.Duration(f * float64(time.Second))
		}
	}
	return 0
}

// parseRetryAfter reads retry-after-ms, then retry-after (seconds or an
// HTTP date). Unparseable, negative or past values are zero.
func parseRetryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(hget(h, "Retry-After-Ms")); v != "" {
		if f, err := strconv.ParseFloat(v, 64); err == nil && f > 0 && f < 1e12 {
			return time.Duration(f * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(hget(h, "Retry-After"))
	if v == "" {
		return 0
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		if f <= 0 || f > 1e9 {
			return 0
		}
		return time.Duration(f * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}

func responseMeta(provider string, resp *http.Response, attempts int, now time.Time) llm.ResponseMeta {
	return llm.ResponseMeta{
		Provider:  provider,
		RequestID: requestID(resp.Header),
		Status:    resp.StatusCode,
		RateLimit: ParseRateLimit(resp.Header, now),
		Attempts:  attempts,
	}
}

// withWireMeta is the transport's meta with what the codec read from the
// answer's body (system fingerprint, service tier).
func withWireMeta(m, body llm.ResponseMeta) llm.ResponseMeta {
	m.SystemFingerprint, m.ServiceTier = body.SystemFingerprint, body.ServiceTier
	return m
}
