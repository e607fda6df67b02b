package server

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/chorusrt/chorus/bench/internal/corpus"
)

// RateLimit is a fixed-window limit, the windows aligned on the first
// request: [t0, t0+Window), [t0+Window, t0+2*Window), ... Each admitted
// request costs one request and len(body)/4 + Completion tokens (the
// prompt estimate plus the max_tokens reservation, as providers count a
// request against a tokens-per-minute budget when it arrives). A request
// over either limit is refused with 429 and not charged.
//
// Answers carry each format's real headers: x-ratelimit-limit-*,
// -remaining-*, -reset-* (Go duration text) for OpenAI, with retry-after
// and retry-after-ms on a 429; anthropic-ratelimit-{requests,tokens,
// input-tokens,output-tokens}-{limit,remaining,reset} (RFC 3339) and
// retry-after (whole seconds) for Anthropic; no header for Gemini, whose
// 429 body carries a RetryInfo retryDelay.
type RateLimit struct {
	Requests   int
	Tokens     int
	Completion int
	Window     time.Duration
}

// RateStats is what the limiter saw in a run.
type RateStats struct {
	Admitted int
	Limited  int
	// LimitedAfterFirst counts the 429s sent after the first window.
	LimitedAfterFirst int
	// TokenCost is the mean cost of an admitted request.
	TokenCost float64
	// First is the first request; LastAdmitted the last admitted one.
	First, LastAdmitted time.Time
}

type limiter struct {
	mu       sync.Mutex
	cfg      RateLimit
	started  bool
	t0       time.Time
	winStart time.Time
	requests int
	tokens   int
	stats    RateStats
	costs    int
}

func (l *limiter) reset(cfg RateLimit) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cfg, l.started, l.requests, l.tokens, l.costs = cfg, false, 0, 0, 0
	l.stats = RateStats{}
}

// Stats returns the rate limiter's counts for the current mode.
func (s *Server) Stats() RateStats {
	s.rl.mu.Lock()
	defer s.rl.mu.Unlock()
	st := s.rl.stats
	if st.Admitted > 0 {
		st.TokenCost = float64(s.rl.costs) / float64(st.Admitted)
	}
	return st
}

// admit charges one request of bodyLen bytes, or refuses it; it sets the
// rate-limit headers of format f either way.
func (l *limiter) admit(h http.Header, f corpus.Format, bodyLen int) bool {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.started {
		l.started, l.t0, l.winStart = true, now, now
		l.stats.First = now
	}
	if el := now.Sub(l.winStart); el >= l.cfg.Window {
		l.winStart = l.winStart.Add(el / l.cfg.Window * l.cfg.Window)
		l.requests, l.tokens = 0, 0
	}
	cost := bodyLen/4 + l.cfg.Completion
	ok := (l.cfg.Requests <= 0 || l.requests+1 <= l.cfg.Requests) &&
		(l.cfg.Tokens <= 0 || l.tokens+cost <= l.cfg.Tokens)
	if ok {
		l.requests++
		l.tokens += cost
		l.costs += cost
		l.stats.Admitted++
		l.stats.LastAdmitted = now
	} else {
		l.stats.Limited++
		if now.Sub(l.t0) >= l.cfg.Window {
			l.stats.LimitedAfterFirst++
		}
	}
	end := l.winStart.Add(l.cfg.Window)
	until := end.Sub(now)
	switch f {
	case corpus.OpenAI:
		if l.cfg.Requests > 0 {
			h.Set("X-Ratelimit-Limit-Requests", strconv.Itoa(l.cfg.Requests))
			h.Set("X-Ratelimit-Remaining-Requests", strconv.Itoa(max(l.cfg.Requests-l.requests, 0)))
			h.Set("X-Ratelimit-Reset-Requests", goDuration(until))
		}
		if l.cfg.Tokens > 0 {
			h.Set("X-Ratelimit-Limit-Tokens", strconv.Itoa(l.cfg.Tokens))
			h.Set("X-Ratelimit-Remaining-Tokens", strconv.Itoa(max(l.cfg.Tokens-l.tokens, 0)))
			h.Set("X-Ratelimit-Reset-Tokens", goDuration(until))
		}
		if !ok {
			h.Set("Retry-After", strconv.Itoa(int(math.Ceil(until.Seconds()))))
			h.Set("Retry-After-Ms", strconv.FormatInt(ceilMs(until), 10))
		}
	case corpus.Anthropic:
		reset := end.UTC().Format("2006-01-02T15:04:05.999Z07:00")
		if l.cfg.Requests > 0 {
			h.Set("Anthropic-Ratelimit-Requests-Limit", strconv.Itoa(l.cfg.Requests))
			h.Set("Anthropic-Ratelimit-Requests-Remaining", strconv.Itoa(max(l.cfg.Requests-l.requests, 0)))
			h.Set("Anthropic-Ratelimit-Requests-Reset", reset)
		}
		if l.cfg.Tokens > 0 {
			for _, k := range []string{"Tokens", "Input-Tokens", "Output-Tokens"} {
				h.Set("Anthropic-Ratelimit-"+k+"-Limit", strconv.Itoa(l.cfg.Tokens))
				h.Set("Anthropic-Ratelimit-"+k+"-Remaining", strconv.Itoa(max(l.cfg.Tokens-l.tokens, 0)))
				h.Set("Anthropic-Ratelimit-"+k+"-Reset", reset)
			}
		}
		if !ok {
			h.Set("Retry-After", strconv.Itoa(int(math.Ceil(until.Seconds()))))
		}
	case corpus.Gemini:
		if !ok {
			// Carried in the body's RetryInfo; the header is only read back
			// by writeRateLimited.
			h.Set("Retry-After-Ms", strconv.FormatInt(ceilMs(until), 10))
		}
	}
	return ok
}

func ceilMs(d time.Duration) int64 { return int64((d + time.Millisecond - 1) / time.Millisecond) }

// goDuration renders d as OpenAI does ("850ms", "1.5s"), rounded up to
// the millisecond.
func goDuration(d time.Duration) string {
	return (time.Duration(ceilMs(max(d, 0))) * time.Millisecond).String()
}

func writeRateLimited(w http.ResponseWriter, f corpus.Format, retryMs string) {
	var body string
	switch f {
	case corpus.Anthropic:
		body = `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization of requests per window."},"request_id":"req_bench"}`
	case corpus.Gemini:
		w.Header().Del("Retry-After-Ms")
		ms, _ := strconv.Atoi(retryMs)
		delay := strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64) + "s"
		body = `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"` + delay + `"}]}}`
	default:
		body = `{"error":{"message":"Rate limit reached for requests per window. Please try again in ` + retryMs + `ms.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write([]byte(body))
}
