package console

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/chorusrt/chorus/requestlog"
)

// TestBrowserRequests drives the Requests and Usage pages in chromium over
// a log of 1,200 records of the last 20 hours (inside the Usage page's
// default day, whatever the hour): the first page, a filter by model
// and status, a record opened (with the request body content logging
// keeps), the next page, a bad filter named, and the Usage page's charts
// (a series per model) and totals read back; every page is captured.
func TestBrowserRequests(t *testing.T) {
	ctx := browser(t)
	dir := artifacts(t)
	plog := watchConsole(t, ctx)

	st, err := requestlog.OpenSQLite(filepath.Join(t.TempDir(), "requests.db"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	models := []string{"openai/gpt-4.1-mini", "anthropic/claude-haiku-4-5", "gemini/gemini-2.5-flash"}
	var recs []requestlog.Record
	errsOfMini := 0
	for i := range 1200 {
		r := requestlog.Record{
			Time: now.Add(-time.Duration(1200-i) * time.Minute), KeyName: []string{"team-a", "team-b"}[i%2], KeyFingerprint: fmt.Sprintf("%016x", i%2),
			Route: "POST /v1/chat/completions", Format: "openai", Requested: "fast", Model: models[i%3], Provider: strings.Split(models[i%3], "/")[0],
			Attempts: 1, Status: 200, Stream: i%2 == 0, Latency: time.Duration(200+(i%3)*150+i%40*5) * time.Millisecond,
			TTFT: time.Duration(50+i%20) * time.Millisecond, InputTokens: 1000 + i, CachedTokens: i % 100, OutputTokens: 200, Cost: 0.0005 * float64(1+i%3),
		}
		if i%17 == 0 {
			r.Status, r.ErrorType, r.Cost, r.OutputTokens = 429, "rate_limit", 0, 0
			if r.Model == models[0] {
				errsOfMini++
				// Content logging on for these: the body, no answer.
				r.RequestBody = `{"model":"fast","messages":[{"role":"user","content":"Summarise the ticket in one line."}]}`
			}
		}
		recs = append(recs, r)
	}
	if err := st.Insert(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	lg := requestlog.New(st, requestlog.Options{})
	defer lg.Close(context.Background())
	h, err := New(Options{RequestLog: lg, Loopback: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	// The first page: 50 records, newest first.
	within(t, ctx, 20*time.Second, "requests page",
		chromedp.Navigate(srv.URL+PagePrefix+"requests"),
		chromedp.WaitVisible(chromedp.CSS("#requests tbody tr[data-id]")),
	)
	if n := evalJS[int](t, ctx, `document.querySelectorAll('#requests tbody tr[data-id]').length`); n != 50 {
		t.Fatalf("first page: %d rows, want 50", n)
	}
	if id := evalJS[string](t, ctx, `document.querySelector('#requests tbody tr[data-id]').dataset.id`); id != "1200" {
		t.Fatalf("first row is record %s, want the newest (1200)", id)
	}
	shoot(t, ctx, dir, "requests")
	plog.clean(t, "requests")

	// Filter by model and status with the form.
	within(t, ctx, 20*time.Second, "filter",
		chromedp.SendKeys(chromedp.CSS(`#filters input[name=model]`), models[0]),
		chromedp.SendKeys(chromedp.CSS(`#filters input[name=status]`), "error"),
		chromedp.Click(chromedp.CSS("#filter-submit")),
		chromedp.WaitVisible(chromedp.CSS(`#filters input[name=model][value="`+models[0]+`"]`)),
	)
	rows := evalJS[[]string](t, ctx, `[...document.querySelectorAll('#requests tbody tr[data-id]')].map(r => r.children[4].textContent + ' ' + r.querySelector('.status').textContent)`)
	if len(rows) != errsOfMini {
		t.Fatalf("filtered: %d rows, want %d: %v", len(rows), errsOfMini, rows)
	}
	for _, r := range rows {
		if r != models[0]+" 429 rate_limit" {
			t.Fatalf("filtered row %q", r)
		}
	}
	// Open a record.
	within(t, ctx, 10*time.Second, "open a record",
		chromedp.Click(chromedp.CSS("#requests tbody tr[data-id] details.record summary")),
		chromedp.WaitVisible(chromedp.CSS("#requests tbody tr[data-id] details.record[open] dl")),
	)
	if dl := evalJS[string](t, ctx, `document.querySelector('details.record[open] dl').textContent`); !strings.Contains(dl, "key fingerprint") || !strings.Contains(dl, "rate_limit") ||
		!strings.Contains(dl, "request body") || !strings.Contains(dl, "Summarise the ticket in one line.") || strings.Contains(dl, "answer") {
		t.Fatalf("the opened record: %q", dl)
	}
	shoot(t, ctx, dir, "request")
	plog.clean(t, "requests, filtered")

	// The next page of everything.
	within(t, ctx, 20*time.Second, "next page",
		chromedp.Navigate(srv.URL+PagePrefix+"requests"),
		chromedp.WaitVisible(chromedp.CSS("#next")),
		chromedp.Click(chromedp.CSS("#next")),
		chromedp.WaitVisible(chromedp.CSS(`#requests tbody tr[data-id="1150"]`)),
	)
	plog.clean(t, "requests, paged")
	// A bad filter is named (the page answers 400, which the browser logs).
	within(t, ctx, 20*time.Second, "bad filter",
		chromedp.Navigate(srv.URL+PagePrefix+"requests?status=teapot!"),
		chromedp.WaitVisible(chromedp.CSS("#filter-error")),
	)
	if e := evalJS[string](t, ctx, `document.querySelector('#filter-error').textContent`); !strings.Contains(e, "status") {
		t.Fatalf("bad filter: %q", e)
	}
	time.Sleep(300 * time.Millisecond)
	plog.mu.Lock()
	if len(plog.errs) != 1 || !strings.Contains(plog.errs[0], "400") {
		t.Errorf("the bad filter's page logged %v, want its 400 only", plog.errs)
	}
	plog.errs = nil
	plog.mu.Unlock()

	// Usage: four charts, a series per model, totals that add up.
	within(t, ctx, 20*time.Second, "usage page",
		chromedp.Navigate(srv.URL+PagePrefix+"usage"),
		chromedp.WaitVisible(chromedp.CSS("#chart-spend polyline.series")),
	)
	for _, c := range []string{"chart-spend", "chart-requests", "chart-errors", "chart-latency"} {
		series := evalJS[[]string](t, ctx, `[...new Set([...document.querySelectorAll('#`+c+` polyline.series')].map(p => p.dataset.series))]`)
		want := 3
		if len(series) != want {
			t.Errorf("%s: series %v, want %d", c, series, want)
		}
	}
	total := evalJS[int](t, ctx, `[...document.querySelectorAll('#usage-totals tr[data-group] td.requests')].reduce((s, td) => s + Number(td.textContent), 0)`)
	if total != 1200 {
		t.Fatalf("usage totals: %d requests, want 1200", total)
	}
	shoot(t, ctx, dir, "usage")
	plog.clean(t, "usage")
}
