package llmtest_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llmtest"
)

// postKey posts body to url with an OpenAI-style bearer key.
func postKey(t *testing.T, c *http.Client, url, body, key string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, resp.Header, b.String()
}

// TestTokenBucketOpenAI: a bucket of 40 requests refilling at 20 per
// second (40 per 2 s), with OpenAI's headers: it starts full, a reset is
// the time until the bucket is full again, and a refused request's
// retry-after is the time until one request fits.
func TestTokenBucketOpenAI(t *testing.T) {
	clk := newTestClock()
	srv := llmtest.NewServer(llmtest.WithClock(clk.Now),
		llmtest.WithRateLimit(llmtest.RateLimit{Requests: 40, Window: 2 * time.Second, Model: llmtest.TokenBucket}))
	defer srv.Close()
	c := newClient(t)
	url, body := openaiEP.url(srv, false), openaiEP.body(false)
	for i := range 40 {
		code, h, _ := postKey(t, c, url, body, "k")
		wantReset := time.Duration(i+1) * 50 * time.Millisecond // (i+1) requests to refill at 20/s
		if code != 200 || h.Get("x-ratelimit-remaining-requests") != strconv.Itoa(39-i) || h.Get("x-ratelimit-reset-requests") != wantReset.String() {
			t.Fatalf("request %d: status %d remaining %q reset %q, want 200, %d, %v", i, code,
				h.Get("x-ratelimit-remaining-requests"), h.Get("x-ratelimit-reset-requests"), 39-i, wantReset)
		}
	}
	code, h, _ := postKey(t, c, url, body, "k")
	if code != 429 || h.Get("retry-after-ms") != "50" {
		t.Fatalf("41st: status %d retry-after-ms %q, want 429 and 50 (one request refills in 50ms)", code, h.Get("retry-after-ms"))
	}
	clk.Advance(50 * time.Millisecond)
	if code, h, _ = postKey(t, c, url, body, "k"); code != 200 || h.Get("x-ratelimit-remaining-requests") != "0" {
		t.Fatalf("after 50ms: status %d remaining %q", code, h.Get("x-ratelimit-remaining-requests"))
	}
	clk.Advance(time.Second) // 20 more
	if code, h, _ = postKey(t, c, url, body, "k"); code != 200 || h.Get("x-ratelimit-remaining-requests") != "19" {
		t.Fatalf("after 1s: status %d remaining %q, want 19", code, h.Get("x-ratelimit-remaining-requests"))
	}
	clk.Advance(time.Hour) // never above the capacity
	if code, h, _ = postKey(t, c, url, body, "k"); code != 200 || h.Get("x-ratelimit-remaining-requests") != "39" {
		t.Fatalf("after an hour: status %d remaining %q, want 39", code, h.Get("x-ratelimit-remaining-requests"))
	}
}

// TestTokenBucketAnthropic: Anthropic's headers over a bucket: the reset is
// an RFC 3339 time at which the bucket is full again.
func TestTokenBucketAnthropic(t *testing.T) {
	clk := newTestClock()
	srv := llmtest.NewServer(llmtest.WithClock(clk.Now),
		llmtest.WithRateLimit(llmtest.RateLimit{Requests: 10, Window: 10 * time.Second, Model: llmtest.TokenBucket}))
	defer srv.Close()
	c := newClient(t)
	var h http.Header
	for range 4 {
		_, h, _ = postKey(t, c, anthropicEP.url(srv, false), anthropicEP.body(false), "")
	}
	reset, err := time.Parse(time.RFC3339, h.Get("anthropic-ratelimit-requests-reset"))
	if err != nil || h.Get("anthropic-ratelimit-requests-remaining") != "6" || !reset.Equal(clk.Now().Add(4*time.Second).Truncate(time.Millisecond)) {
		t.Errorf("remaining %q reset %q (%v), want 6 and now+4s", h.Get("anthropic-ratelimit-requests-remaining"), h.Get("anthropic-ratelimit-requests-reset"), err)
	}
}

// TestSlidingWindow: at most 3 requests in any trailing second: a refused
// request waits for the oldest to leave the window, not for a window's end.
func TestSlidingWindow(t *testing.T) {
	clk := newTestClock()
	srv := llmtest.NewServer(llmtest.WithClock(clk.Now),
		llmtest.WithRateLimit(llmtest.RateLimit{Requests: 3, Window: time.Second, Model: llmtest.SlidingWindow}))
	defer srv.Close()
	c := newClient(t)
	url, body := openaiEP.url(srv, false), openaiEP.body(false)
	for i := range 3 {
		if code, _, _ := postKey(t, c, url, body, "k"); code != 200 {
			t.Fatalf("request %d: %d", i, code)
		}
		clk.Advance(400 * time.Millisecond)
	}
	// At 1.2s: the first (at 0) has left; the ones at 0.4 and 0.8 remain.
	code, h, _ := postKey(t, c, url, body, "k")
	if code != 200 || h.Get("x-ratelimit-remaining-requests") != "0" || h.Get("x-ratelimit-reset-requests") != "1s" {
		t.Fatalf("at 1.2s: status %d remaining %q reset %q, want 200, 0, 1s", code, h.Get("x-ratelimit-remaining-requests"), h.Get("x-ratelimit-reset-requests"))
	}
	clk.Advance(100 * time.Millisecond)
	code, h, _ = postKey(t, c, url, body, "k")
	if code != 429 || h.Get("retry-after-ms") != "100" {
		t.Fatalf("at 1.3s: status %d retry-after-ms %q, want 429 and 100 (the request of 0.4s leaves at 1.4s)", code, h.Get("retry-after-ms"))
	}
}

// TestLimitsPerKeyAndOrganisation: keys of one organisation share a budget;
// with PerKey, every other key has its own.
func TestLimitsPerKeyAndOrganisation(t *testing.T) {
	srv := llmtest.NewServer(llmtest.WithRateLimit(llmtest.RateLimit{Requests: 1, Window: time.Hour, PerKey: true,
		Orgs: map[string]string{"a1": "acme", "a2": "acme"}}))
	defer srv.Close()
	c := newClient(t)
	url, body := openaiEP.url(srv, false), openaiEP.body(false)
	for _, step := range []struct {
		key  string
		want int
	}{{"a1", 200}, {"a2", 429}, {"solo", 200}, {"solo", 429}, {"other", 200}} {
		if code, _, _ := postKey(t, c, url, body, step.key); code != step.want {
			t.Errorf("key %s: status %d, want %d", step.key, code, step.want)
		}
	}
}

// TestGeminiDailyQuota: a per-day quota's 429 names a per-day quota id and
// carries no RetryInfo: it is exhausted, not a pacing signal.
func TestGeminiDailyQuota(t *testing.T) {
	srv := llmtest.NewServer(llmtest.WithRateLimit(llmtest.RateLimit{Requests: 1, Window: 24 * time.Hour}))
	defer srv.Close()
	c := newClient(t)
	post(t, c, geminiEP.url(srv, false), geminiEP.body(false))
	r := post(t, c, geminiEP.url(srv, false), geminiEP.body(false))
	m := obj(t, string(r.body))
	if r.resp.StatusCode != 429 || !strings.Contains(str(get(m, "error", "details", 0, "violations", 0, "quotaId")), "PerDay") {
		t.Fatalf("status %d body %s", r.resp.StatusCode, r.body)
	}
	if strings.Contains(string(r.body), "RetryInfo") || r.resp.Header.Get("retry-after") != "" {
		t.Errorf("a per-day quota sent a retry hint: %s", r.body)
	}
}
