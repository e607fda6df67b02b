package store_test

import (
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/store"
	"github.com/chorusrt/chorus/store/storetest"
)

// sqliteOpener returns a storetest opener: one database file per test, the
// same file for every call with the same t.
func sqliteOpener() func(t *testing.T) store.Journal {
	var mu sync.Mutex
	paths := map[*testing.T]string{}
	return func(t *testing.T) store.Journal {
		mu.Lock()
		p, ok := paths[t]
		if !ok {
			p = filepath.Join(t.TempDir(), "journal.db")
			paths[t] = p
		}
		mu.Unlock()
		j, err := store.OpenSQLite(p)
		if err != nil {
			t.Fatalf("OpenSQLite: %v", err)
		}
		t.Cleanup(func() { j.Close() })
		return j
	}
}

func TestSQLiteConformance(t *testing.T) {
	storetest.Run(t, sqliteOpener())
}

func TestSQLiteSettings(t *testing.T) {
	j, err := store.OpenSQLite(filepath.Join(t.TempDir(), "j.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	got, err := store.SQLiteSettings(t.Context(), j, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if v != [3]string{"wal", "2", "10000"} {
			t.Errorf("connection %d: journal_mode, synchronous, busy_timeout = %q, want wal, 2 (FULL), 10000", i, v)
		}
	}
}

// TestSQLiteConcurrentOpen opens one new file from several goroutines at
// once, as processes starting together would: schema creation and the
// switch to WAL must not fail any of them.
func TestSQLiteConcurrentOpen(t *testing.T) {
	for round := range 3 {
		p := filepath.Join(t.TempDir(), "j.db")
		const n = 5
		js := make([]*store.SQLite, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { js[i], errs[i] = store.OpenSQLite(p) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: open %d: %v", round, i, err)
			}
			defer js[i].Close()
		}
		var last int64
		for _, j := range js {
			var err error
			if last, err = j.Append(t.Context(), "s", last, store.Record{Kind: "k", Data: []byte(`{}`)}); err != nil {
				t.Fatal(err)
			}
		}
		if recs, err := js[0].Read(t.Context(), "s", 0); err != nil || len(recs) != n {
			t.Fatalf("round %d: %d records (%v), want %d", round, len(recs), err, n)
		}
	}
}

func TestOpenSQLiteErrors(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("not a database file ", 500)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		field      string // "" when not a ConfigError
	}{
		{"empty", "", "path"},
		{"memory", ":memory:", "path"},
		{"uri", "file:x.db", "path"},
		{"query", filepath.Join(dir, "a?b"), "path"},
		{"missing directory", filepath.Join(dir, "no", "such", "j.db"), ""},
		{"not a database", garbage, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, err := store.OpenSQLite(tc.path)
			if err == nil {
				j.Close()
				t.Fatal("OpenSQLite succeeded")
			}
			var ce *llm.ConfigError
			if isCE := errors.As(err, &ce); isCE != (tc.field != "") || isCE && ce.Field != tc.field {
				t.Fatalf("err = %v (%T), want ConfigError field %q", err, err, tc.field)
			}
		})
	}
}

// TestSQLiteNewerSchema refuses a file written by a newer layout.
func TestSQLiteNewerSchema(t *testing.T) {
	p := filepath.Join(t.TempDir(), "j.db")
	j, err := store.OpenSQLite(p)
	if err != nil {
		t.Fatal(err)
	}
	j.Close()
	db, err := sql.Open("sqlite", p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("PRAGMA user_version = 99"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if j, err := store.OpenSQLite(p); err == nil || !strings.Contains(err.Error(), "newer") {
		if j != nil {
			j.Close()
		}
		t.Fatalf("OpenSQLite of a newer schema = %v, want an error", err)
	}
}

// TestSQLiteCrash kills a writing process with SIGKILL, three times over:
// every acknowledged append survives and the file holds whole batches only.
func TestSQLiteCrash(t *testing.T) {
	runCrashTest(t, "sqlite", filepath.Join(t.TempDir(), "crash.db"))
}

// TestSQLiteMultiProcess has processes contend for one session in one file.
func TestSQLiteMultiProcess(t *testing.T) {
	runContendTest(t, "sqlite", filepath.Join(t.TempDir(), "contend.db"), 3, 15)
}
