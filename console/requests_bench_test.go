package console

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/chorusrt/chorus/requestlog"
)

// BenchmarkPages1M: the Requests page (first and filtered) and the Usage
// page (a day by hour per model, with its charts and totals) rendered
// whole over a SQLite log of 1,000,000 records over 30 days ending now.
// Reported, never asserted.
func BenchmarkPages1M(b *testing.B) {
	ctx := context.Background()
	st, err := requestlog.OpenSQLite(filepath.Join(b.TempDir(), "requests.db"))
	if err != nil {
		b.Fatal(err)
	}
	const n = 1_000_000
	now := time.Now().UTC()
	step := 30 * 24 * time.Hour / n
	chunk := make([]requestlog.Record, 0, 10000)
	for i := range n {
		r := requestlog.Record{Time: now.Add(-time.Duration(n-i) * step), KeyName: fmt.Sprintf("key-%d", i%12), KeyFingerprint: fmt.Sprintf("fp%02d", i%12),
			Route: "POST /v1/chat/completions", Format: "openai", Requested: "fast", Model: fmt.Sprintf("openai/model-%d", i%8), Provider: "openai",
			Attempts: 1, Status: 200, Latency: time.Duration(100+i%500) * time.Millisecond, InputTokens: 1000, OutputTokens: 100, Cost: 0.001}
		if i%23 == 0 {
			r.Status, r.ErrorType = 429, "rate_limit"
		}
		chunk = append(chunk, r)
		if len(chunk) == cap(chunk) {
			if err := st.Insert(ctx, chunk); err != nil {
				b.Fatal(err)
			}
			chunk = chunk[:0]
		}
	}
	lg := requestlog.New(st, requestlog.Options{})
	defer lg.Close(ctx)
	h, err := New(Options{RequestLog: lg, Loopback: true})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	page := func(b *testing.B, path string) {
		for b.Loop() {
			resp, err := srv.Client().Get(srv.URL + path)
			if err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("%s: %d", path, resp.StatusCode)
			}
		}
	}
	b.Run("RequestsFirstPage", func(b *testing.B) { page(b, PagePrefix+"requests") })
	b.Run("RequestsFiltered", func(b *testing.B) { page(b, PagePrefix+"requests?key=key-3&model=openai/model-3&status=ok") })
	b.Run("UsageDay", func(b *testing.B) { page(b, PagePrefix+"usage") })
}
