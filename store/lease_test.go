package store_test

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chorusrt/chorus/internal/pgtest"
	"github.com/chorusrt/chorus/store"
)

// The lease behaviour both backends share is tested by the conformance
// suite (storetest); these tests cover the error type, databases created
// before leases existed, and PostgreSQL's locking.

func TestLeaseHeldError(t *testing.T) {
	exp := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)
	var err error = fmt.Errorf("wrapped: %w", &store.LeaseHeldError{Session: "s-1", Holder: "10.0.0.7:4000/ab12", Expires: exp})
	if !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("errors.Is(%v, ErrLeaseHeld) = false", err)
	}
	if errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrConflict) {
		t.Fatalf("%v matches ErrLeaseLost or ErrConflict", err)
	}
	var held *store.LeaseHeldError
	if !errors.As(err, &held) || held.Holder != "10.0.0.7:4000/ab12" || !held.Expires.Equal(exp) {
		t.Fatalf("errors.As = %+v", held)
	}
	for _, want := range []string{`"s-1"`, `"10.0.0.7:4000/ab12"`, "2030-01-02T03:04:05.000006Z"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not mention %s", err.Error(), want)
		}
	}
}

// TestSQLiteLeasesOnOldFile opens a file written before leases existed
// (same schema version, no lease table): the table is added on open, and
// the version stays 1, so that older binaries still open the file.
func TestSQLiteLeasesOnOldFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "old.db")
	j, err := store.OpenSQLite(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(t.Context(), "s", 0, store.Record{Kind: "k"}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	db, err := sql.Open("sqlite", p)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("DROP TABLE chorus_journal_leases"); err != nil {
		t.Fatal(err)
	}
	j, err = store.OpenSQLite(p)
	if err != nil {
		t.Fatalf("OpenSQLite of a file without the lease table: %v", err)
	}
	defer j.Close()
	checkLeasesWork(t, j)
	var version int
	if err := db.QueryRow("PRAGMA user_version").Scan(&version); err != nil || version != 1 {
		t.Fatalf("user_version = %d, %v; want 1", version, err)
	}
}

// TestPostgresLeasesOnOldSchema is TestSQLiteLeasesOnOldFile for
// PostgreSQL.
func TestPostgresLeasesOnOldSchema(t *testing.T) {
	dsn := pgtest.SchemaDSN(t)
	j := openPostgres(t, dsn)
	if _, err := j.Append(t.Context(), "s", 0, store.Record{Kind: "k"}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	pgtest.Exec(t, dsn, "DROP TABLE chorus_journal_leases")
	j = openPostgres(t, dsn)
	checkLeasesWork(t, j)
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var version int
	if err := conn.QueryRow(t.Context(), "SELECT version FROM chorus_journal_meta").Scan(&version); err != nil || version != 1 {
		t.Fatalf("journal version = %d, %v; want 1", version, err)
	}
}

// checkLeasesWork acquires the lease of session s, which holds one record,
// and appends under it.
func checkLeasesWork(t *testing.T, j store.LeasingJournal) {
	t.Helper()
	l, err := j.Acquire(t.Context(), "s", "h", time.Hour)
	if err != nil || l.Epoch != 1 {
		t.Fatalf("Acquire = %+v, %v", l, err)
	}
	if n, err := j.AppendLeased(t.Context(), l, 1, store.Record{Kind: "k"}); err != nil || n != 2 {
		t.Fatalf("AppendLeased = %d, %v", n, err)
	}
}

// TestPostgresAppendLeasedFencesAcquire holds an AppendLeased under an
// expired lease on the session row's lock while another holder acquires
// the lease. Either the append commits before the grant (the Acquire waits
// for it) or it writes nothing: an append must never commit after the
// lease was handed over.
func TestPostgresAppendLeasedFencesAcquire(t *testing.T) {
	b := make([]byte, 6)
	rand.Read(b)
	app := "chorus_fence_" + hex.EncodeToString(b)
	dsn := pgtest.SchemaDSN(t)
	j := openPostgres(t, pgtest.WithParam(dsn, "application_name", app))
	ctx := ctxTimeout(t, time.Minute)
	a, err := j.Acquire(ctx, "s", "A", 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.AppendLeased(ctx, a, 0, store.Record{Kind: "k", Data: []byte(`"a1"`)}); err != nil {
		t.Fatal(err)
	}
	for {
		exp, err := j.Expired(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(exp) == 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	waiting := func() int {
		t.Helper()
		var n int
		if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'", app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
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
		_, err := j.AppendLeased(ctx, a, 1, store.Record{Kind: "k", Data: []byte(`"a2"`)})
		appended <- err
	}()
	for waiting() < 1 {
		if ctx.Err() != nil {
			t.Fatal("the AppendLeased never waited on the lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
	type grant struct {
		l   store.Lease
		err error
	}
	acquired := make(chan grant, 1)
	go func() {
		l, err := j.Acquire(ctx, "s", "B", time.Hour)
		acquired <- grant{l, err}
	}()
	var early *grant // the Acquire returned while the append was still blocked
	for early == nil && waiting() < 2 {
		select {
		case g := <-acquired:
			early = &g
		case <-time.After(5 * time.Millisecond):
		}
		if ctx.Err() != nil {
			t.Fatal("the Acquire neither returned nor waited")
		}
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	errA := <-appended
	g := grant{}
	if early != nil {
		g = *early
	} else {
		g = <-acquired
	}
	if g.err != nil || g.l.Epoch != a.Epoch+1 {
		t.Fatalf("B's Acquire = %+v, %v; want epoch %d", g.l, g.err, a.Epoch+1)
	}
	n, err := j.LastSeq(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if early != nil {
		t.Logf("the Acquire went first; the append must write nothing")
		if !errors.Is(errA, store.ErrLeaseLost) || n != 1 {
			t.Fatalf("the append blocked across the hand-over = %v (LastSeq %d); want ErrLeaseLost and nothing written", errA, n)
		}
	} else {
		t.Logf("the Acquire waited for the append")
		if errA != nil || n != 2 {
			t.Fatalf("the append the Acquire waited for = %v (LastSeq %d); want it committed", errA, n)
		}
	}
	if _, err := j.AppendLeased(ctx, a, n, store.Record{Kind: "k"}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("A's AppendLeased after the hand-over = %v, want ErrLeaseLost", err)
	}
	if m, err := j.AppendLeased(ctx, g.l, n, store.Record{Kind: "k", Data: []byte(`"b"`)}); err != nil || m != n+1 {
		t.Fatalf("B's AppendLeased = %d, %v", m, err)
	}
}

// TestLeasedConcurrent uses one Leased from several goroutines at once (the
// race detector checks its bookkeeping): each writer acquires its session,
// appends under it and releases it, while another renews.
func TestLeasedConcurrent(t *testing.T) {
	j, err := store.OpenSQLite(filepath.Join(t.TempDir(), "j.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	l := store.NewLeased(j, "node/1", time.Minute)
	ctx := t.Context()
	done := make(chan struct{})
	renewed := make(chan error, 1)
	go func() {
		for {
			select {
			case <-done:
				renewed <- nil
				return
			default:
			}
			if lost, err := l.Renew(ctx); err != nil || len(lost) != 0 {
				renewed <- fmt.Errorf("Renew = %q, %v", lost, err)
				return
			}
		}
	}()
	const writers, each = 4, 5
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			s := fmt.Sprint("s", w)
			if _, err := l.Acquire(ctx, s); err != nil {
				errs <- err
				return
			}
			for i := range each {
				if _, err := l.Append(ctx, s, int64(i), store.Record{Kind: "k"}); err != nil {
					errs <- err
					return
				}
			}
			if err := l.Release(ctx, s); err != nil || l.Holds(s) {
				errs <- fmt.Errorf("Release(%s) = %v, holds %v", s, err, l.Holds(s))
			}
		})
	}
	wg.Wait()
	close(done)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := <-renewed; err != nil {
		t.Fatal(err)
	}
	for w := range writers {
		if n, err := j.LastSeq(ctx, fmt.Sprint("s", w)); err != nil || n != each {
			t.Fatalf("LastSeq(s%d) = %d, %v", w, n, err)
		}
	}
}
