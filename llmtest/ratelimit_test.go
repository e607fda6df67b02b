package llmtest_test

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

const window = 200 * time.Millisecond

// testClock is the rate-limit emulation's clock in these tests: it moves
// only when the test advances it, so a loaded machine cannot let a window
// pass between two requests (the checks never depend on the machine's speed).
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock() *testClock { return &testClock{t: time.Now()} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestRateLimitRequestsOpenAI(t *testing.T) {
	clk := newTestClock()
	srv := llmtest.NewServer(llmtest.WithRateLimit(llmtest.RateLimit{Requests: 3, Window: window}), llmtest.WithClock(clk.Now))
	defer srv.Close()
	srv.Push(llmtest.Text("one"), llmtest.Text("two"), llmtest.Text("three"), llmtest.Text("four"))
	c := newClient(t)
	url, body := openaiEP.url(srv, false), openaiEP.body(false)

	for i, wantRemaining := range []string{"2", "1", "0"} {
		r := post(t, c, url, body)
		h := r.resp.Header
		if r.resp.StatusCode != 200 || h.Get("x-ratelimit-limit-requests") != "3" || h.Get("x-ratelimit-remaining-requests") != wantRemaining {
			t.Fatalf("request %d: status %d limit %q remaining %q", i, r.resp.StatusCode,
				h.Get("x-ratelimit-limit-requests"), h.Get("x-ratelimit-remaining-requests"))
		}
		reset, err := time.ParseDuration(h.Get("x-ratelimit-reset-requests"))
		if err != nil || reset <= 0 || reset > window {
			t.Errorf("x-ratelimit-reset-requests %q (%v), want a Go duration in (0, %v]", h.Get("x-ratelimit-reset-requests"), err, window)
		}
		if h.Get("x-ratelimit-limit-tokens") != "" {
			t.Error("token headers sent without a token limit")
		}
	}
	// Over the limit until the window ends.
	clk.Advance(window / 2)
	r := post(t, c, url, body)
	if r.resp.StatusCode != 429 {
		t.Fatalf("4th request: status %d, want 429", r.resp.StatusCode)
	}
	if r.resp.Header.Get("retry-after") != "1" {
		t.Errorf("retry-after %q, want 1 (seconds, rounded up)", r.resp.Header.Get("retry-after"))
	}
	ms, err := strconv.Atoi(r.resp.Header.Get("retry-after-ms"))
	if err != nil || ms != int(window/2/time.Millisecond) {
		t.Errorf("retry-after-ms %q, want 100 (the rest of the window)", r.resp.Header.Get("retry-after-ms"))
	}
	if r.resp.Header.Get("x-ratelimit-remaining-requests") != "0" {
		t.Errorf("429 remaining %q", r.resp.Header.Get("x-ratelimit-remaining-requests"))
	}
	m := obj(t, string(r.body))
	if str(get(m, "error", "code")) != "rate_limit_exceeded" || str(get(m, "error", "type")) != "requests" {
		t.Errorf("429 body %v", m)
	}
	if srv.RateLimited() != 1 || srv.Pending() != 1 {
		t.Errorf("RateLimited %d Pending %d, want 1 and 1 (the 429 consumed no step)", srv.RateLimited(), srv.Pending())
	}
	clk.Advance(time.Duration(ms)*time.Millisecond + time.Millisecond)
	r = post(t, c, url, body)
	if r.resp.StatusCode != 200 || r.resp.Header.Get("x-ratelimit-remaining-requests") != "2" {
		t.Fatalf("after the window: status %d remaining %q", r.resp.StatusCode, r.resp.Header.Get("x-ratelimit-remaining-requests"))
	}
	if !strings.Contains(string(r.body), `"content":"four"`) {
		t.Errorf("the step held back by the 429 was not served next: %s", r.body)
	}
	if srv.Count() != 5 {
		t.Errorf("Count %d, want 5", srv.Count())
	}
}

func TestRateLimitTokens(t *testing.T) {
	body := openaiEP.body(false)
	prompt := len(body) / 4
	// "simulated reply" is 4 completion tokens; allow exactly two requests.
	limit := 2 * (prompt + 4)
	srv := llmtest.NewServer(llmtest.WithRateLimit(llmtest.RateLimit{Tokens: limit, Window: time.Minute}))
	defer srv.Close()
	c := newClient(t)
	url := openaiEP.url(srv, false)
	for i, want := range []int{limit - (prompt + 4), 0} {
		r := post(t, c, url, body)
		h := r.resp.Header
		if r.resp.StatusCode != 200 || h.Get("x-ratelimit-limit-tokens") != strconv.Itoa(limit) ||
			h.Get("x-ratelimit-remaining-tokens") != strconv.Itoa(want) {
			t.Fatalf("request %d: status %d tokens %q/%q, want remaining %d", i, r.resp.StatusCode,
				h.Get("x-ratelimit-remaining-tokens"), h.Get("x-ratelimit-limit-tokens"), want)
		}
		if h.Get("x-ratelimit-limit-requests") != "" {
			t.Error("request headers sent without a request limit")
		}
	}
	r := post(t, c, url, body)
	if r.resp.StatusCode != 429 || str(get(obj(t, string(r.body)), "error", "type")) != "tokens" {
		t.Errorf("3rd request: status %d body %s", r.resp.StatusCode, r.body)
	}
	if ra, _ := strconv.Atoi(r.resp.Header.Get("retry-after")); ra < 50 || ra > 60 {
		t.Errorf("retry-after %q, want about a minute", r.resp.Header.Get("retry-after"))
	}
}

func TestRateLimitAnthropicHeaders(t *testing.T) {
	clk := newTestClock()
	srv := llmtest.NewServer(llmtest.WithRateLimit(llmtest.RateLimit{Requests: 2, Tokens: 10000, Window: window}), llmtest.WithClock(clk.Now))
	defer srv.Close()
	srv.Push(llmtest.Respond(llmtest.Reply{Text: "x", Usage: &llm.Usage{CompletionTokens: 50}}))
	c := newClient(t)
	body := anthropicEP.body(true)
	start := clk.Now()
	r := post(t, c, anthropicEP.url(srv, true), body)
	h := r.resp.Header
	input := len(body) / 4
	want := map[string]string{
		"anthropic-ratelimit-requests-limit":          "2",
		"anthropic-ratelimit-requests-remaining":      "1",
		"anthropic-ratelimit-tokens-limit":            "10000",
		"anthropic-ratelimit-tokens-remaining":        strconv.Itoa(10000 - input - 50),
		"anthropic-ratelimit-input-tokens-limit":      "10000",
		"anthropic-ratelimit-input-tokens-remaining":  strconv.Itoa(10000 - input),
		"anthropic-ratelimit-output-tokens-limit":     "10000",
		"anthropic-ratelimit-output-tokens-remaining": strconv.Itoa(10000 - 50),
	}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	for _, k := range []string{"requests", "tokens", "input-tokens", "output-tokens"} {
		v := h.Get("anthropic-ratelimit-" + k + "-reset")
		reset, err := time.Parse(time.RFC3339, v)
		if err != nil || reset.Before(start.Add(-time.Second)) || reset.After(start.Add(window+time.Second)) {
			t.Errorf("%s-reset = %q (%v), want an RFC 3339 time within the window", k, v, err)
		}
	}
	if h.Get("x-ratelimit-limit-requests") != "" {
		t.Error("OpenAI headers on an Anthropic answer")
	}
	post(t, c, anthropicEP.url(srv, false), anthropicEP.body(false))
	r = post(t, c, anthropicEP.url(srv, false), anthropicEP.body(false))
	m := obj(t, string(r.body))
	if r.resp.StatusCode != 429 || str(get(m, "error", "type")) != "rate_limit_error" || r.resp.Header.Get("retry-after-ms") == "" {
		t.Errorf("status %d body %v retry-after-ms %q", r.resp.StatusCode, m, r.resp.Header.Get("retry-after-ms"))
	}
}

func TestRateLimitGemini(t *testing.T) {
	clk := newTestClock()
	srv := llmtest.NewServer(llmtest.WithRateLimit(llmtest.RateLimit{Requests: 1, Window: window}), llmtest.WithClock(clk.Now))
	defer srv.Close()
	c := newClient(t)
	r := post(t, c, geminiEP.url(srv, false), geminiEP.body(false))
	for k := range r.resp.Header {
		if strings.Contains(strings.ToLower(k), "ratelimit") {
			t.Errorf("Gemini sent rate-limit header %s", k)
		}
	}
	r = post(t, c, geminiEP.url(srv, true), geminiEP.body(true))
	m := obj(t, string(r.body))
	// Gemini's own order: the QuotaFailure (a per-minute quota id), then
	// the RetryInfo.
	if str(get(m, "error", "details", 0, "@type")) != "type.googleapis.com/google.rpc.QuotaFailure" ||
		!strings.Contains(str(get(m, "error", "details", 0, "violations", 0, "quotaId")), "PerMinute") {
		t.Errorf("no per-minute QuotaFailure first: %v", m)
	}
	delay := str(get(m, "error", "details", 1, "retryDelay"))
	d, err := time.ParseDuration(delay)
	if r.resp.StatusCode != 429 || str(get(m, "error", "status")) != "RESOURCE_EXHAUSTED" || err != nil || d <= 0 || d > window {
		t.Errorf("status %d body %v (retryDelay %q)", r.resp.StatusCode, m, delay)
	}
	if r.resp.Header.Get("retry-after") != "" {
		t.Error("Gemini sent a retry-after header")
	}
	clk.Advance(d + time.Millisecond)
	if r = post(t, c, geminiEP.url(srv, false), geminiEP.body(false)); r.resp.StatusCode != 200 {
		t.Errorf("after the window: status %d", r.resp.StatusCode)
	}
	if srv.RateLimited() != 1 {
		t.Errorf("RateLimited %d", srv.RateLimited())
	}
}
