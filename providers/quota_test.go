package providers

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chorusrt/chorus/internal/testkit/fixture"
	"github.com/chorusrt/chorus/llm"
)

// TestQuotaFromStructuredFields: whether a 429 is pacing (wait and retry)
// or an exhausted quota (final) is read from the error's structured fields
// first and its message last. Gemini's per-minute 429 says "You exceeded
// your current quota" like an exhausted one; its details tell them apart.
func TestQuotaFromStructuredFields(t *testing.T) {
	dir := fixture.Require(t)
	recorded, err := os.ReadFile(filepath.Join(dir, "gemini/vercel-ai/packages/google/src/__fixtures__/google-429-retry-info.json"))
	if err != nil {
		t.Fatal(err)
	}
	const quotaMsg = "You exceeded your current quota, please check your plan and billing details."
	cases := []struct {
		name      string
		format    Format
		body      string
		exhausted bool
		retry     time.Duration
	}{
		{"gemini recorded per-minute with RetryInfo", FormatGemini, string(recorded), false, 34400 * time.Millisecond},
		{"gemini per-minute quota id, no RetryInfo", FormatGemini, `{"error":{"code":429,"message":"` + quotaMsg + `","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"GenerateRequestsPerMinutePerProjectPerModel"}]}]}}`, false, 0},
		{"gemini per-day quota id, no RetryInfo", FormatGemini, `{"error":{"code":429,"message":"` + quotaMsg + `","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]}]}}`, true, 0},
		{"gemini per-day quota id with RetryInfo", FormatGemini, `{"error":{"code":429,"message":"` + quotaMsg + `","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"GenerateRequestsPerDayPerProjectPerModel"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"2s"}]}}`, false, 2 * time.Second},
		{"gemini no details: the message decides", FormatGemini, `{"error":{"code":429,"message":"` + quotaMsg + `","status":"RESOURCE_EXHAUSTED"}}`, true, 0},
		{"gemini no details, plain message", FormatGemini, `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}`, false, 0},
		{"openai rate_limit_exceeded whatever the message", FormatOpenAI, `{"error":{"message":"` + quotaMsg + `","type":"requests","code":"rate_limit_exceeded"}}`, false, 0},
		{"openai insufficient_quota", FormatOpenAI, `{"error":{"message":"` + quotaMsg + `","type":"insufficient_quota","code":"insufficient_quota"}}`, true, 0},
		{"anthropic rate_limit_error", FormatAnthropic, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`, false, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusTooManyRequests)
				_, _ = w.Write([]byte(c.body))
			}))
			defer srv.Close()
			base := srv.URL
			if c.format == FormatOpenAI {
				base += "/v1"
			}
			cl, err := New(Config{ID: "p", Format: c.format, BaseURL: base, APIKey: "k"}, WithoutRateLimitRetry())
			if err != nil {
				t.Fatal(err)
			}
			_, err = cl.Chat(context.Background(), &llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("hi")}})
			var rl *llm.RateLimitError
			if !errors.As(err, &rl) {
				t.Fatalf("want *llm.RateLimitError, got %T %v", err, err)
			}
			if rl.QuotaExhausted != c.exhausted || rl.Retryable == c.exhausted {
				t.Errorf("QuotaExhausted %v Retryable %v, want exhausted %v", rl.QuotaExhausted, rl.Retryable, c.exhausted)
			}
			if c.retry > 0 && rl.RetryAfter != c.retry {
				t.Errorf("RetryAfter %v, want %v", rl.RetryAfter, c.retry)
			}
		})
	}
}
