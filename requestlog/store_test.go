package requestlog_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/chorusrt/chorus/internal/pgtest"
	"github.com/chorusrt/chorus/requestlog"
)

func openSQLite(t testing.TB) requestlog.Store {
	t.Helper()
	st, err := requestlog.OpenSQLite(filepath.Join(t.TempDir(), "requests.db"))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func openPostgres(t testing.TB) requestlog.Store {
	t.Helper()
	st, err := requestlog.OpenPostgres(context.Background(), pgtest.SchemaDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestConformance runs one suite on both stores.
func TestConformance(t *testing.T) {
	for _, b := range []struct {
		name string
		open func(testing.TB) requestlog.Store
	}{{"sqlite", openSQLite}, {"postgres", openPostgres}} {
		t.Run(b.name, func(t *testing.T) {
			t.Run("Pages", func(t *testing.T) { st := b.open(t); defer st.Close(); testPages(t, st) })
			t.Run("Usage", func(t *testing.T) { st := b.open(t); defer st.Close(); testUsage(t, st) })
			t.Run("Prune", func(t *testing.T) { st := b.open(t); defer st.Close(); testPrune(t, st) })
			t.Run("BadFilters", func(t *testing.T) { st := b.open(t); defer st.Close(); testBadFilters(t, st) })
			t.Run("Content", func(t *testing.T) { st := b.open(t); defer st.Close(); testContent(t, st) })
		})
	}
}

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// sample is record i of a log: keys a, b, c; models m0, m1; every 5th an
// error; two records share each time, so pages cross ties.
func sample(i int) requestlog.Record {
	r := requestlog.Record{
		Time: t0.Add(time.Duration(i/2) * time.Minute), KeyFingerprint: fmt.Sprintf("fp%d", i%3), KeyName: string(rune('a' + i%3)),
		Route: "POST /v1/chat/completions", Format: "openai", Requested: "fast",
		Model: fmt.Sprintf("openai/m%d", i%2), Provider: "openai", Attempts: 1, Status: 200,
		Latency: time.Duration(i+1) * time.Millisecond, InputTokens: 10 + i, CachedTokens: i % 4, OutputTokens: 5, Cost: float64(i) / 1000,
		Stream: i%2 == 1, TraceID: fmt.Sprintf("trace-%d", i),
	}
	if r.Stream {
		r.TTFT = time.Duration(i) * time.Microsecond
	}
	if i%5 == 0 {
		r.Status, r.ErrorType, r.OutputTokens, r.Cost = 429, "rate_limit", 0, 0
	}
	return r
}

func fill(t testing.TB, st requestlog.Store, n int) []requestlog.Record {
	t.Helper()
	recs := make([]requestlog.Record, n)
	for i := range recs {
		recs[i] = sample(i)
	}
	if err := st.Insert(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	return recs
}

// testPages pages through every filter newest first: each record once, in
// (time, id) descending order, and exactly the ones the filter selects.
func testPages(t *testing.T, st requestlog.Store) {
	recs := fill(t, st, 501)
	ctx := context.Background()
	for _, f := range []struct {
		name string
		flt  requestlog.Filter
		keep func(requestlog.Record) bool
	}{
		{"all", requestlog.Filter{}, func(requestlog.Record) bool { return true }},
		{"key by name", requestlog.Filter{Key: "b"}, func(r requestlog.Record) bool { return r.KeyName == "b" }},
		{"key by fingerprint", requestlog.Filter{Key: "fp2"}, func(r requestlog.Record) bool { return r.KeyFingerprint == "fp2" }},
		{"model", requestlog.Filter{Model: "openai/m1"}, func(r requestlog.Record) bool { return r.Model == "openai/m1" }},
		{"errors", requestlog.Filter{Status: "error"}, func(r requestlog.Record) bool { return r.ErrorType != "" }},
		{"ok", requestlog.Filter{Status: "ok"}, func(r requestlog.Record) bool { return r.ErrorType == "" }},
		{"429", requestlog.Filter{Status: "429"}, func(r requestlog.Record) bool { return r.Status == 429 }},
		{"kind", requestlog.Filter{Status: "rate_limit"}, func(r requestlog.Record) bool { return r.ErrorType == "rate_limit" }},
		{"range and model", requestlog.Filter{Model: "openai/m0", From: t0.Add(10 * time.Minute), To: t0.Add(100 * time.Minute)}, func(r requestlog.Record) bool {
			return r.Model == "openai/m0" && !r.Time.Before(t0.Add(10*time.Minute)) && r.Time.Before(t0.Add(100*time.Minute))
		}},
	} {
		t.Run(f.name, func(t *testing.T) {
			var want []string
			for i := len(recs) - 1; i >= 0; i-- { // newest first; ties: the later insert first
				if f.keep(recs[i]) {
					want = append(want, recs[i].TraceID)
				}
			}
			var got []string
			q := requestlog.Query{Filter: f.flt, Limit: 7}
			pages := 0
			for {
				p, err := st.List(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				pages++
				if len(p.Records) > q.Limit {
					t.Fatalf("page of %d records, limit %d", len(p.Records), q.Limit)
				}
				for _, r := range p.Records {
					got = append(got, r.TraceID)
				}
				if p.Next == "" {
					break
				}
				q.Cursor = p.Next
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("paged %d records in %d pages:\n got %v\nwant %v", len(got), pages, got, want)
			}
			if len(want) == 0 {
				t.Fatal("the filter selected nothing: the test proves nothing")
			}
		})
	}
	// A record reads back as written.
	p, err := st.List(ctx, requestlog.Query{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	got, want := p.Records[0], recs[len(recs)-1]
	if got.ID == 0 {
		t.Fatal("no id")
	}
	got.ID = 0
	if got != want {
		t.Fatalf("read back\n got %+v\nwant %+v", got, want)
	}
}

// testUsage checks the aggregates against sums computed here.
func testUsage(t *testing.T, st requestlog.Store) {
	recs := fill(t, st, 300) // 150 minutes: three hours
	ctx := context.Background()
	rows, err := st.Usage(ctx, requestlog.UsageQuery{Filter: requestlog.Filter{From: t0, To: t0.Add(3 * time.Hour)}, GroupBy: "model", Bucket: requestlog.Hour})
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		b time.Time
		g string
	}
	want := map[key]*requestlog.UsageRow{}
	lat := map[key][]time.Duration{}
	for _, r := range recs {
		k := key{r.Time.Truncate(time.Hour), r.Model}
		w := want[k]
		if w == nil {
			w = &requestlog.UsageRow{Bucket: k.b, Group: k.g}
			want[k] = w
		}
		w.Requests++
		if r.ErrorType != "" {
			w.Errors++
		}
		w.InputTokens += int64(r.InputTokens)
		w.CachedTokens += int64(r.CachedTokens)
		w.OutputTokens += int64(r.OutputTokens)
		w.Cost += r.Cost
		lat[k] = append(lat[k], r.Latency) // ascending already
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d: %+v", len(rows), len(want), rows)
	}
	for i, r := range rows {
		k := key{r.Bucket, r.Group}
		w := want[k]
		if w == nil {
			t.Fatalf("row %d: unexpected bucket %v group %q", i, r.Bucket, r.Group)
		}
		if i > 0 && (r.Bucket.Before(rows[i-1].Bucket) || r.Bucket.Equal(rows[i-1].Bucket) && r.Group < rows[i-1].Group) {
			t.Fatalf("rows out of order at %d", i)
		}
		if r.Requests != w.Requests || r.Errors != w.Errors || r.ErrorsByKind["rate_limit"] != w.Errors || r.InputTokens != w.InputTokens ||
			r.CachedTokens != w.CachedTokens || r.OutputTokens != w.OutputTokens || fmt.Sprintf("%.9f", r.Cost) != fmt.Sprintf("%.9f", w.Cost) {
			t.Fatalf("bucket %v %s:\n got %+v\nwant %+v", k.b, k.g, r, *w)
		}
		l := lat[k]
		n := len(l)
		if r.LatencyP50 != l[(50*n+99)/100-1] || r.LatencyP99 != l[(99*n+99)/100-1] {
			t.Fatalf("bucket %v %s: p50 %v p99 %v of %v", k.b, k.g, r.LatencyP50, r.LatencyP99, l)
		}
		if r.Group == "openai/m1" && r.TTFTP50 == 0 || r.Group == "openai/m0" && r.TTFTP50 != 0 {
			t.Fatalf("ttft of %s: %v (m1 streams, m0 does not)", r.Group, r.TTFTP50)
		}
	}
	// One bucket, grouped by key name.
	rows, err = st.Usage(ctx, requestlog.UsageQuery{GroupBy: "key"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || rows[0].Group != "a" || rows[0].Requests != 100 || !rows[0].Bucket.IsZero() {
		t.Fatalf("per key: %+v", rows)
	}
}

func testPrune(t *testing.T, st requestlog.Store) {
	fill(t, st, 100) // minutes 0..49
	ctx := context.Background()
	n, err := st.Prune(ctx, t0.Add(10*time.Minute), 0)
	if err != nil || n != 20 {
		t.Fatalf("by age: pruned %d, %v; want 20", n, err)
	}
	n, err = st.Prune(ctx, time.Time{}, 30)
	if err != nil || n != 50 {
		t.Fatalf("by rows: pruned %d, %v; want 50", n, err)
	}
	rows, err := st.Usage(ctx, requestlog.UsageQuery{})
	if err != nil || len(rows) != 1 || rows[0].Requests != 30 {
		t.Fatalf("left: %+v, %v; want 30", rows, err)
	}
	p, _ := st.List(ctx, requestlog.Query{Limit: 1000})
	if last := p.Records[len(p.Records)-1]; last.TraceID != "trace-70" {
		t.Fatalf("the oldest kept is %s, want trace-70", last.TraceID)
	}
}

func testBadFilters(t *testing.T, st requestlog.Store) {
	ctx := context.Background()
	for _, c := range []struct{ query, name string }{
		{"colour=red", "colour"},
		{"from=yesterday", "from"},
		{"to=2026-13-01T00:00:00Z", "to"},
		{"from=2026-12-02T00:00:00Z&to=2026-12-01T00:00:00Z", "from"},
		{"status=teapot!", "status"},
		{"status=700", "status"},
		{"limit=0", "limit"},
		{"limit=many", "limit"},
		{"cursor=zzz", "cursor"},
		{"model=a&model=b", "model"},
	} {
		v, _ := url.ParseQuery(c.query)
		_, err := requestlog.ParseQuery(v)
		var fe *requestlog.FilterError
		if !errors.As(err, &fe) || fe.Name != c.name {
			t.Errorf("ParseQuery(%s): %v, want a *FilterError naming %s", c.query, err, c.name)
		}
	}
	for _, c := range []struct{ query, name string }{
		{"group_by=colour", "group_by"},
		{"bucket=week", "bucket"},
		{"bucket=hour", "from"},
		{"bucket=hour&from=2020-01-01T00:00:00Z&to=2026-01-01T00:00:00Z", "from"},
		{"cursor=x", "cursor"},
	} {
		v, _ := url.ParseQuery(c.query)
		_, err := requestlog.ParseUsage(v)
		var fe *requestlog.FilterError
		if !errors.As(err, &fe) || fe.Name != c.name {
			t.Errorf("ParseUsage(%s): %v, want a *FilterError naming %s", c.query, err, c.name)
		}
	}
	// The store refuses the same filters built in Go.
	var fe *requestlog.FilterError
	if _, err := st.List(ctx, requestlog.Query{Filter: requestlog.Filter{Status: "Bad Status"}}); !errors.As(err, &fe) || fe.Name != "status" {
		t.Errorf("List with a bad status: %v", err)
	}
	if _, err := st.List(ctx, requestlog.Query{Cursor: "!!"}); !errors.As(err, &fe) || fe.Name != "cursor" {
		t.Errorf("List with a bad cursor: %v", err)
	}
	if _, err := st.Usage(ctx, requestlog.UsageQuery{GroupBy: "colour"}); !errors.As(err, &fe) || fe.Name != "group_by" {
		t.Errorf("Usage grouped by colour: %v", err)
	}
}

// testContent: a record's request body and answer are read back as they
// were written; a record without them reads back empty.
func testContent(t *testing.T, st requestlog.Store) {
	with, without := sample(3), sample(2)
	with.RequestBody, with.Answer = `{"messages":[{"role":"user","content":"héllo 'quoted' \u0000"}]}`, "an answer\nin two lines"
	bad := sample(4)                                           // a malformed body: a NUL and bytes that are not UTF-8, which PostgreSQL's TEXT refuses
	bad.RequestBody, bad.Requested = "{\x00\xff\xfe}", "m\x00" // a client's model name may hold a NUL too (JSON's \u0000)
	if err := st.Insert(context.Background(), []requestlog.Record{without, with, bad}); err != nil {
		t.Fatal(err)
	}
	p, err := st.List(context.Background(), requestlog.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Records) != 3 || p.Records[0].RequestBody != "{\uFFFD\uFFFD}" || p.Records[0].Requested != "m\uFFFD" {
		t.Fatalf("the malformed body: %+v", p.Records)
	}
	p.Records = p.Records[1:]
	if len(p.Records) != 2 || p.Records[0].RequestBody != with.RequestBody || p.Records[0].Answer != with.Answer ||
		p.Records[1].RequestBody != "" || p.Records[1].Answer != "" {
		t.Fatalf("records %+v", p.Records)
	}
}

// TestSQLiteAddsContentColumns: a log written before the content columns
// existed opens with them added, its records kept.
func TestSQLiteAddsContentColumns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`CREATE TABLE request_log (id INTEGER PRIMARY KEY,
			t BIGINT NOT NULL, key_fp TEXT NOT NULL, key_name TEXT NOT NULL,
			route TEXT NOT NULL, format TEXT NOT NULL, requested TEXT NOT NULL,
			model TEXT NOT NULL, provider TEXT NOT NULL, step INTEGER NOT NULL, attempts INTEGER NOT NULL,
			stream SMALLINT NOT NULL, status INTEGER NOT NULL, error_type TEXT NOT NULL,
			queue_ns BIGINT NOT NULL, ttft_ns BIGINT NOT NULL, latency_ns BIGINT NOT NULL,
			input_tokens BIGINT NOT NULL, cached_tokens BIGINT NOT NULL, output_tokens BIGINT NOT NULL,
			cost REAL NOT NULL, cache_hit SMALLINT NOT NULL,
			batch_id TEXT NOT NULL, line_id TEXT NOT NULL, trace_id TEXT NOT NULL)`,
		`INSERT INTO request_log VALUES (1, 1, 'fp', 'a', 'r', 'openai', 'm', 'm', 'p', 0, 1, 0, 200, '', 0, 0, 1, 1, 0, 1, 0, 0, '', '', 'old')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	for range 2 { // and again, once they exist
		st, err := requestlog.OpenSQLite(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Insert(context.Background(), []requestlog.Record{{Time: time.Unix(0, 2), Answer: "new", TraceID: "new"}}); err != nil {
			t.Fatal(err)
		}
		p, err := st.List(context.Background(), requestlog.Query{})
		st.Close()
		if err != nil || len(p.Records) < 2 || p.Records[0].Answer != "new" || p.Records[len(p.Records)-1].TraceID != "old" || p.Records[len(p.Records)-1].Answer != "" {
			t.Fatalf("%v %+v", err, p.Records)
		}
	}
}
