package requestlog_test

import (
	"context"
	"fmt"
	"log"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/chorusrt/chorus/requestlog"
)

// ExampleLogger keeps a log, records a call, and reads it back: a page
// newest first and the usage per model.
func ExampleLogger() {
	dir, _ := os.MkdirTemp("", "requestlog-example-")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "requests.db")
	ctx := context.Background()

	st, err := requestlog.OpenSQLite(path) // or requestlog.OpenPostgres(ctx, dsn)
	if err != nil {
		log.Fatal(err)
	}
	lg := requestlog.New(st, requestlog.Options{Retain: 720 * time.Hour, MaxRows: 10_000_000})
	lg.Log(requestlog.Record{Time: time.Now(), KeyName: "team-a", Model: "openai/gpt-4.1-mini", Status: 200,
		InputTokens: 1200, OutputTokens: 300, Cost: 0.0048, Latency: 800 * time.Millisecond})
	if err := lg.Close(ctx); err != nil { // writes what is queued, then closes st
		log.Fatal(err)
	}
	fmt.Println("dropped:", lg.Stats().Dropped)

	st, _ = requestlog.OpenSQLite(path)
	defer st.Close()
	q, err := requestlog.ParseQuery(url.Values{"key": {"team-a"}, "limit": {"50"}}) // *requestlog.FilterError names a bad one
	if err != nil {
		log.Fatal(err)
	}
	page, _ := st.List(ctx, q) // newest first; page.Next is the cursor of the next page
	rows, _ := st.Usage(ctx, requestlog.UsageQuery{GroupBy: "model"})
	fmt.Println(len(page.Records), page.Records[0].Model, rows[0].Requests, rows[0].Cost)
	// Output:
	// dropped: 0
	// 1 openai/gpt-4.1-mini 1 0.0048
}
