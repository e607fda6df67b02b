package store_test

import (
	"testing"
	"time"

	"github.com/chorusrt/chorus/internal/pgtest"
	"github.com/chorusrt/chorus/store"
)

// checkLeases: Leases lists the held leases by session with their holder
// and epoch, leaves released ones out, and keeps to its limit.
func checkLeases(t *testing.T, j store.Journal) {
	t.Helper()
	ctx := t.Context()
	lj := j.(store.LeasingJournal)
	ll := j.(store.LeaseLister)
	if got, err := ll.Leases(ctx, 10); err != nil || len(got) != 0 {
		t.Fatalf("no leases: %v %v", got, err)
	}
	b, err := lj.Acquire(ctx, "s-b", "node-2/x", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lj.Acquire(ctx, "s-a", "node-1/y", time.Hour); err != nil {
		t.Fatal(err)
	}
	c, err := lj.Acquire(ctx, "s-c", "node-1/z", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := lj.Release(ctx, c); err != nil {
		t.Fatal(err)
	}
	got, err := ll.Leases(ctx, 10)
	if err != nil || len(got) != 2 || got[0].Session != "s-a" || got[0].Holder != "node-1/y" || got[1].Session != "s-b" || got[1].Epoch != b.Epoch || got[1].Expires.Location() != time.UTC || time.Until(got[1].Expires) < 50*time.Minute {
		t.Fatalf("leases: %+v %v", got, err)
	}
	if got, err := ll.Leases(ctx, 1); err != nil || len(got) != 1 || got[0].Session != "s-a" {
		t.Fatalf("limit 1: %+v %v", got, err)
	}
	if _, err := ll.Leases(ctx, -1); err == nil {
		t.Fatal("negative limit accepted")
	}
}

func TestSQLiteLeasesList(t *testing.T) { checkLeases(t, sqliteOpener()(t)) }

func TestPostgresLeasesList(t *testing.T) {
	pgtest.Base(t)
	checkLeases(t, postgresOpener()(t))
}
