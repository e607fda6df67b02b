package requestlog_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/gateway"
	"github.com/chorusrt/chorus/requestlog"
)

// benchRows is the size of the log the read benchmarks page through.
const benchRows = 1_000_000

// BenchmarkRead1M: the Requests page's reads on a SQLite log of 1,000,000
// records over 30 days (12 keys, 8 models): the first page, a filtered
// first page (one key and one model), a page 100 pages deep (by cursor),
// and a day's usage per model per hour. Reported, never asserted.
func BenchmarkRead1M(b *testing.B) {
	ctx := context.Background()
	st, err := requestlog.OpenSQLite(filepath.Join(b.TempDir(), "requests.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	start := time.Now()
	span := 30 * 24 * time.Hour
	step := span / benchRows
	chunk := make([]requestlog.Record, 0, 10000)
	for i := range benchRows {
		r := sample(i)
		r.Time = t0.Add(time.Duration(i) * step)
		r.KeyName, r.KeyFingerprint = fmt.Sprintf("key-%d", i%12), fmt.Sprintf("fp%02d", i%12)
		r.Model = fmt.Sprintf("openai/model-%d", i%8)
		chunk = append(chunk, r)
		if len(chunk) == cap(chunk) {
			if err := st.Insert(ctx, chunk); err != nil {
				b.Fatal(err)
			}
			chunk = chunk[:0]
		}
	}
	b.Logf("%d records inserted in %v", benchRows, time.Since(start).Round(time.Millisecond))
	b.Run("FirstPage", func(b *testing.B) {
		for b.Loop() {
			if p, err := st.List(ctx, requestlog.Query{Limit: 50}); err != nil || len(p.Records) != 50 {
				b.Fatal(len(p.Records), err)
			}
		}
	})
	b.Run("FilteredPage", func(b *testing.B) {
		q := requestlog.Query{Filter: requestlog.Filter{Key: "key-3", Model: "openai/model-3", Status: "ok"}, Limit: 50}
		for b.Loop() {
			if p, err := st.List(ctx, q); err != nil || len(p.Records) != 50 {
				b.Fatal(len(p.Records), err)
			}
		}
	})
	b.Run("Page100Deep", func(b *testing.B) {
		q := requestlog.Query{Limit: 50}
		for range 100 {
			p, err := st.List(ctx, q)
			if err != nil {
				b.Fatal(err)
			}
			q.Cursor = p.Next
		}
		for b.Loop() {
			if p, err := st.List(ctx, q); err != nil || len(p.Records) != 50 {
				b.Fatal(len(p.Records), err)
			}
		}
	})
	b.Run("UsageDayByModelHourly", func(b *testing.B) {
		day := t0.Add(15 * 24 * time.Hour)
		q := requestlog.UsageQuery{Filter: requestlog.Filter{From: day, To: day.Add(24 * time.Hour)}, GroupBy: "model", Bucket: requestlog.Hour}
		for b.Loop() {
			if rows, err := st.Usage(ctx, q); err != nil || len(rows) != 24*8 {
				b.Fatal(len(rows), err)
			}
		}
	})
}

// BenchmarkGatewayRequestLog: buffered chat completions through the
// gateway to llmtest, with the log off and on (SQLite). Compare ns/op
// (the client, the gateway and the upstream share the machine).
func BenchmarkGatewayRequestLog(b *testing.B) {
	const body = `{"model":"openai/gpt-4.1-mini","messages":[{"role":"user","content":"req-1-"}]}`
	run := func(b *testing.B, lg gateway.RequestLog) {
		gw, stop := newGateway(b, lg)
		defer stop()
		c := gw.Client()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				req, _ := http.NewRequest("POST", gw.URL+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer gk-a")
				resp, err := c.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Errorf("status %d", resp.StatusCode)
					return
				}
			}
		})
	}
	b.Run("off", func(b *testing.B) { run(b, nil) })
	b.Run("on", func(b *testing.B) {
		st, err := requestlog.OpenSQLite(filepath.Join(b.TempDir(), "requests.db"))
		if err != nil {
			b.Fatal(err)
		}
		lg := requestlog.New(st, requestlog.Options{})
		run(b, lg)
		if err := lg.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
		if s := lg.Stats(); s.Dropped != 0 || s.Written != s.Logged {
			b.Fatalf("stats %+v", s)
		}
	})
}

// BenchmarkInsert: what the Logger's writer spends per record, inserting
// batches of 200, 500 (Options.Batch's default) and 2000 into SQLite.
// Reported, never asserted.
func BenchmarkInsert(b *testing.B) {
	for _, size := range []int{200, 500, 2000} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			st, err := requestlog.OpenSQLite(filepath.Join(b.TempDir(), "requests.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			batch := make([]requestlog.Record, size)
			for i := range batch {
				batch[i] = sample(i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for n := 0; n < b.N; n += len(batch) {
				if err := st.Insert(context.Background(), batch[:min(len(batch), b.N-n)]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
