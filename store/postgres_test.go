package store_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chorusrt/chorus/internal/pgtest"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/store"
	"github.com/chorusrt/chorus/store/storetest"
)

// PostgreSQL tests use CHORUS_PG_DSN when it is set; otherwise they start a
// throwaway cluster (see pgcluster_test.go), and skip, saying why, when
// neither is possible (fail when CI is set). Each test works in a schema of
// its own.

// openPostgres opens a journal on dsn, closed when t ends.
func openPostgres(t testing.TB, dsn string) *store.Postgres {
	t.Helper()
	j, err := store.OpenPostgres(ctxTimeout(t, time.Minute), dsn)
	if err != nil {
		t.Fatalf("OpenPostgres: %v", err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

// postgresOpener returns a storetest opener: one schema per test, the same
// schema for every call with the same t.
func postgresOpener() func(t *testing.T) store.Journal {
	var mu sync.Mutex
	dsns := map[*testing.T]string{}
	return func(t *testing.T) store.Journal {
		mu.Lock()
		dsn, ok := dsns[t]
		if !ok {
			dsn = pgtest.SchemaDSN(t)
			dsns[t] = dsn
		}
		mu.Unlock()
		return openPostgres(t, dsn)
	}
}

func TestPostgresConformance(t *testing.T) {
	pgtest.Base(t)
	storetest.Run(t, postgresOpener())
}

// TestPostgresSynchronousCommit checks that a connection configured with
// synchronous_commit=off is switched back on: commits must be flushed
// before Append returns.
func TestPostgresSynchronousCommit(t *testing.T) {
	dsn := pgtest.WithParam(pgtest.SchemaDSN(t), "synchronous_commit", "off")
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	var raw string
	err = conn.QueryRow(t.Context(), "SHOW synchronous_commit").Scan(&raw)
	conn.Close(t.Context())
	if err != nil || raw != "off" {
		t.Fatalf("the DSN does not turn synchronous_commit off (%q, %v): the test proves nothing", raw, err)
	}
	j := openPostgres(t, dsn)
	if v, err := store.PostgresSetting(t.Context(), j, "synchronous_commit"); err != nil || v != "on" {
		t.Fatalf("synchronous_commit on the journal's connection = %q (%v), want on", v, err)
	}
}

// TestPostgresConcurrentOpen starts several journals on a fresh schema at
// once: creating the tables must not fail any of them.
func TestPostgresConcurrentOpen(t *testing.T) {
	for round := range 3 {
		dsn := pgtest.SchemaDSN(t)
		const n = 6
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				j, err := store.OpenPostgres(t.Context(), dsn)
				if err == nil {
					_, err = j.Append(t.Context(), fmt.Sprint("s", i), 0, store.Record{Kind: "k"})
					j.Close()
				}
				errs[i] = err
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: journal %d: %v", round, i, err)
			}
		}
		ids, err := openPostgres(t, dsn).Sessions(t.Context())
		if err != nil || len(ids) != n {
			t.Fatalf("round %d: Sessions = %q, %v", round, ids, err)
		}
	}
}

func TestOpenPostgresErrors(t *testing.T) {
	base := pgtest.Base(t)
	port, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 6)
	rand.Read(b)
	missing := "chorus_missing_" + hex.EncodeToString(b)
	for _, tc := range []struct {
		name, dsn string
		field     string // "" when not a ConfigError
		contains  string
	}{
		{"unparsable", "postgres://u:hunter2@[::1/db", "dsn", ""},
		{"bad pool_max_conns", pgtest.WithParam(base, "pool_max_conns", "zero"), "dsn", "pool_max_conns"},
		{"nobody listening", fmt.Sprintf("postgres://u:hunter2@127.0.0.1:%d/db?sslmode=disable&connect_timeout=5", port), "", ""},
		{"schema missing", pgtest.WithParam(base, "search_path", missing), "", "search_path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, err := store.OpenPostgres(ctxTimeout(t, time.Minute), tc.dsn)
			if err == nil {
				j.Close()
				t.Fatal("OpenPostgres succeeded")
			}
			var ce *llm.ConfigError
			if isCE := errors.As(err, &ce); isCE != (tc.field != "") || isCE && ce.Field != tc.field {
				t.Fatalf("err = %v (%T), want ConfigError field %q", err, err, tc.field)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("error leaks the password: %v", err)
			}
			if !strings.Contains(err.Error(), tc.contains) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.contains)
			}
		})
	}
}

// TestPostgresPoolMax bounds the server connections of one journal by the
// DSN's pool_max_conns, or by PostgresMaxConns without it (pgxpool's own
// default would be max(4, NumCPU)).
func TestPostgresPoolMax(t *testing.T) {
	for _, tc := range []struct {
		name     string
		param    string // pool_max_conns; "" for none
		min, max int    // the peak must fall in [min, max]
	}{
		{"pool_max_conns=2", "2", 1, 2},
		{"default", "", 5, store.PostgresMaxConns},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := make([]byte, 6)
			rand.Read(b)
			app := "chorus_pool_" + hex.EncodeToString(b)
			dsn := pgtest.WithParam(pgtest.SchemaDSN(t), "application_name", app)
			if tc.param != "" {
				dsn = pgtest.WithParam(dsn, "pool_max_conns", tc.param)
			}
			j := openPostgres(t, dsn)
			if _, err := j.Append(t.Context(), "s", 0, store.Record{Kind: "k"}); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			var wg sync.WaitGroup
			for range 3 * tc.max {
				wg.Go(func() {
					for ctx.Err() == nil {
						j.Read(ctx, "s", 0)
					}
				})
			}
			conn, err := pgx.Connect(t.Context(), pgtest.Base(t))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(t.Context())
			peak := 0
			for range 20 {
				var n int
				if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n); err != nil {
					t.Fatal(err)
				}
				peak = max(peak, n)
				time.Sleep(10 * time.Millisecond)
			}
			cancel()
			wg.Wait()
			if peak < tc.min || peak > tc.max {
				t.Fatalf("peak server connections = %d, want %d to %d", peak, tc.min, tc.max)
			}
		})
	}
}

// TestPostgresDroppedConnection has the server end the journal's idle
// connection: the next calls still succeed (an idempotent call that fails
// on a broken connection is retried once on a checked one; a broken
// connection is not reused).
func TestPostgresDroppedConnection(t *testing.T) {
	b := make([]byte, 6)
	rand.Read(b)
	app := "chorus_drop_" + hex.EncodeToString(b)
	dsn := pgtest.WithParam(pgtest.WithParam(pgtest.SchemaDSN(t), "pool_max_conns", "1"), "application_name", app)
	j := openPostgres(t, dsn)
	ctx := ctxTimeout(t, time.Minute)
	if _, err := j.Append(ctx, "s", 0, store.Record{Kind: "k"}); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, pgtest.Base(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var killed int
	if err := conn.QueryRow(ctx, "SELECT count(pg_terminate_backend(pid, 10000)) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("terminated %d backends (%v), want 1", killed, err)
	}
	if n, err := j.LastSeq(ctx, "s"); err != nil || n != 1 {
		t.Fatalf("LastSeq after the connection was dropped = %d, %v; want 1", n, err)
	}
	if n, err := j.Append(ctx, "s", 1, store.Record{Kind: "k"}); err != nil || n != 2 {
		t.Fatalf("Append after the connection was dropped = %d, %v; want 2", n, err)
	}
}

// TestPostgresCancelledConnection cancels an Append waiting on a row lock:
// the connection it ran on is closed, not returned to the pool (the server
// could otherwise still act on the cancellation during the next call).
func TestPostgresCancelledConnection(t *testing.T) {
	b := make([]byte, 6)
	rand.Read(b)
	app := "chorus_cancel_" + hex.EncodeToString(b)
	dsn := pgtest.SchemaDSN(t)
	j := openPostgres(t, pgtest.WithParam(pgtest.WithParam(dsn, "pool_max_conns", "1"), "application_name", app))
	ctx := ctxTimeout(t, time.Minute)
	if _, err := j.Append(ctx, "s", 0, store.Record{Kind: "k"}); err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	backends := func() []int {
		t.Helper()
		rows, err := admin.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name = $1", app)
		if err != nil {
			t.Fatal(err)
		}
		pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			t.Fatal(err)
		}
		return pids
	}
	before := backends()
	if len(before) != 1 {
		t.Fatalf("%d backends with pool_max_conns=1, want 1", len(before))
	}
	locker, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(ctx)
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT 1 FROM chorus_journal_sessions WHERE session = 's' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	appended := make(chan error, 1)
	go func() {
		_, err := j.Append(callCtx, "s", 1, store.Record{Kind: "k"})
		appended <- err
	}()
	for waiting := 0; waiting == 0; time.Sleep(5 * time.Millisecond) {
		if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'", app).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	if err := <-appended; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Append = %v, want an error matching context.Canceled", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := j.LastSeq(ctx, "s"); err != nil || n < 1 || n > 2 {
		t.Fatalf("LastSeq after the cancelled Append = %d, %v; want 1 or 2", n, err)
	}
	// The old backend ends once it finds its client gone; the journal works
	// on a new one.
	deadline := time.Now().Add(15 * time.Second)
	for {
		after := backends()
		if len(after) == 1 && after[0] != before[0] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("backends %v after the cancelled call, want one other than %d: the connection was reused", after, before[0])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPostgresCloseInFlight closes a journal while an Append waits on a
// row lock: Close waits for it, the Append commits on its connection, and
// later calls return ErrClosed.
func TestPostgresCloseInFlight(t *testing.T) {
	b := make([]byte, 6)
	rand.Read(b)
	app := "chorus_close_" + hex.EncodeToString(b)
	dsn := pgtest.SchemaDSN(t)
	j := openPostgres(t, pgtest.WithParam(dsn, "application_name", app))
	ctx := ctxTimeout(t, time.Minute)
	if _, err := j.Append(ctx, "s", 0, store.Record{Kind: "k"}); err != nil {
		t.Fatal(err)
	}
	locker, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(ctx)
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT 1 FROM chorus_journal_sessions WHERE session = 's' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	appended := make(chan error, 1)
	go func() {
		_, err := j.Append(ctx, "s", 1, store.Record{Kind: "k"})
		appended <- err
	}()
	// Wait until the Append is blocked on the lock.
	for {
		var waiting int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'", app).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the Append never waited on the lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
	closed := make(chan error, 1)
	go func() { closed <- j.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while an Append was in flight", err)
	case <-time.After(200 * time.Millisecond):
	}
	if _, err := j.Read(ctx, "s", 0); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Read during Close = %v, want ErrClosed", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-appended; err != nil {
		t.Fatalf("the Append in flight = %v, want it to commit", err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	j2 := openPostgres(t, dsn)
	if n, err := j2.LastSeq(ctx, "s"); err != nil || n != 2 {
		t.Fatalf("LastSeq after reopening = %d, %v; want 2", n, err)
	}
}

// TestPostgresCrash kills a writing process with SIGKILL, three times over:
// every acknowledged append is committed and the table holds whole batches
// only.
func TestPostgresCrash(t *testing.T) {
	runCrashTest(t, "postgres", pgtest.SchemaDSN(t))
}

// TestPostgresMultiProcess has processes contend for one session.
func TestPostgresMultiProcess(t *testing.T) {
	runContendTest(t, "postgres", pgtest.SchemaDSN(t), 3, 15)
}

// TestPostgresServerCrash crashes the server (immediate shutdown: no
// checkpoint, WAL recovery on restart) while a journal appends: every
// acknowledged append survives, batches are whole, and the same journal
// works again once the server is back.
func TestPostgresServerCrash(t *testing.T) {
	server := pgtest.Crashable(t)
	j := openPostgres(t, pgtest.SchemaDSNOn(t, server.DSN()))
	acks := make(chan int64, 1<<16)
	done := make(chan error, 1)
	go func() {
		defer close(acks)
		var last int64
		for b := 0; ; b++ {
			n, err := j.Append(context.Background(), crashSession, last, crashBatch(0, b)...)
			if err != nil {
				done <- err
				return
			}
			acks <- n
			last = n
		}
	}()
	var acked []int64
	for n := range acks {
		acked = append(acked, n)
		if len(acked) == 40 {
			if err := server.Crash(); err != nil {
				t.Fatalf("crash the server: %v", err)
			}
		}
	}
	err := <-done
	if len(acked) < 40 {
		t.Fatalf("only %d appends before the writer failed: %v", len(acked), err)
	}
	t.Logf("%d appends acknowledged; the writer then failed with: %v", len(acked), err)
	if err := server.Start(); err != nil {
		t.Fatalf("restart the server: %v", err)
	}
	last := checkCrashJournal(t, j, acked) // the journal opened before the crash reconnects
	t.Logf("after recovery the journal is at seq %d (%d committed but not acknowledged)", last, last-acked[len(acked)-1])
	recs := crashBatch(1, 0)
	if _, err := j.Append(t.Context(), crashSession, last, recs...); err != nil {
		t.Fatalf("append after the server came back: %v", err)
	}
	all, err := j.Read(t.Context(), crashSession, last+1)
	if err != nil || len(all) != len(recs) {
		t.Fatalf("read after recovery: %d records, %v", len(all), err)
	}
	var c crashRecord
	if err := json.Unmarshal(all[0].Data, &c); err != nil || c.R != 1 {
		t.Fatalf("record after recovery = %s, %v", all[0].Data, err)
	}
}
