package store_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/chorusrt/chorus/internal/pgtest"
	"github.com/chorusrt/chorus/store"
)

// BenchmarkAppend measures durable appends: each op is one Append, committed
// (fsync'd WAL for SQLite, flushed WAL for PostgreSQL) before it returns,
// of one record or of a batch of ten.
func BenchmarkAppend(b *testing.B) {
	backends := []struct {
		name string
		open func(b *testing.B) store.Journal
	}{
		{"sqlite", func(b *testing.B) store.Journal {
			j, err := store.OpenSQLite(filepath.Join(b.TempDir(), "bench.db"))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { j.Close() })
			return j
		}},
		{"postgres", func(b *testing.B) store.Journal { return openPostgres(b, pgtest.SchemaDSN(b)) }},
	}
	data := []byte(`{"role":"assistant","content":"The tool returned 42 rows; summarising them now.","usage":{"prompt_tokens":812,"completion_tokens":64}}`)
	for _, be := range backends {
		for _, batch := range []int{1, 10} {
			b.Run(fmt.Sprintf("%s/batch=%d", be.name, batch), func(b *testing.B) {
				j := be.open(b)
				recs := make([]store.Record, batch)
				for i := range recs {
					recs[i] = store.Record{Kind: "model_result", Data: data}
				}
				ctx := b.Context()
				var last int64
				b.ReportAllocs()
				start := time.Now()
				for b.Loop() {
					n, err := j.Append(ctx, "bench", last, recs...)
					if err != nil {
						b.Fatal(err)
					}
					last = n
				}
				b.ReportMetric(float64(last)/time.Since(start).Seconds(), "records/s")
			})
		}
	}
}
