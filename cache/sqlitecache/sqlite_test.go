package sqlitecache_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/chorusrt/chorus/cache"
	"github.com/chorusrt/chorus/cache/cachetest"
	"github.com/chorusrt/chorus/cache/sqlitecache"
	"github.com/chorusrt/chorus/llm"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func open(t *testing.T, lim cache.Limits) cache.Store {
	s, err := sqlitecache.Open(filepath.Join(t.TempDir(), "cache.db"), lim)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) { cachetest.Run(t, open) }

// TestShared: two stores on one file read each other's entries (the
// processes of one machine share a cache file).
func TestShared(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	a, err := sqlitecache.Open(path, cache.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := sqlitecache.Open(path, cache.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	now := time.Now()
	if err := a.Put(context.Background(), cache.Entry{Namespace: "n", Key: "k", Value: []byte("v"), Created: now}); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := b.Get(context.Background(), "n", "k", now); err != nil || !ok || string(v) != "v" {
		t.Fatalf("second store's Get = %q, %v, %v", v, ok, err)
	}
}

func TestOpenErrors(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		lim        cache.Limits
		field      string
	}{
		{"empty path", "", cache.Limits{}, "path"},
		{"missing directory", filepath.Join(t.TempDir(), "no", "such", "cache.db"), cache.Limits{}, "path"},
		{"negative max_entries", filepath.Join(t.TempDir(), "c.db"), cache.Limits{MaxEntries: -1}, "max_entries"},
		{"negative max_bytes", filepath.Join(t.TempDir(), "c.db"), cache.Limits{MaxBytes: -1}, "max_bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := sqlitecache.Open(tc.path, tc.lim)
			var ce *llm.ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field {
				if s != nil {
					s.Close()
				}
				t.Fatalf("Open = %v, want a ConfigError naming %s", err, tc.field)
			}
		})
	}
}

// TestFailingAtRunTime: a SQLite store that fails under a cache (its
// table gone) makes calls go to the provider, counted, never failed.
func TestFailingAtRunTime(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	s, err := sqlitecache.Open(path, cache.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, _ := cache.New(s, cache.Options{})
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`DROP TABLE chorus_cache`); err != nil {
		t.Fatal(err)
	}
	fetched := 0
	for range 2 {
		res, out, err := c.Do(context.Background(), cache.On, "n", "k", func(context.Context) (*llm.ChatResult, error) {
			fetched++
			return &llm.ChatResult{Content: "x", FinishReason: llm.FinishStop, Usage: llm.Usage{CompletionTokens: 1}}, nil
		})
		if err != nil || out != cache.Miss || res.Content != "x" {
			t.Fatalf("Do = %v, %v, %+v", out, err, res)
		}
	}
	if st := c.Stats(); fetched != 2 || st.Errors != 4 {
		t.Fatalf("fetched %d, stats %+v; want 2 fetches, 4 errors", fetched, st)
	}
}

// TestCapWithinATenthPercent: with a large cap the size is checked every
// thousandth of the entries: the cache holds at most 0.1% more.
func TestCapWithinATenthPercent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	s, err := sqlitecache.Open(path, cache.Limits{MaxEntries: 3000})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t0 := time.Unix(1e9, 0)
	for i := range 6000 {
		if err := s.Put(context.Background(), cache.Entry{Namespace: "n", Key: fmt.Sprint(i), Value: []byte("v"), Created: t0.Add(time.Duration(i) * time.Millisecond)}); err != nil {
			t.Fatal(err)
		}
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM chorus_cache`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n < 3000 || n > 3003 {
		t.Fatalf("%d entries, want 3000 to 3003", n)
	}
	if _, ok, _ := s.Get(context.Background(), "n", "5999", t0); !ok {
		t.Fatal("the newest entry was evicted")
	}
	if _, ok, _ := s.Get(context.Background(), "n", "0", t0); ok {
		t.Fatal("the oldest entry is still there")
	}
}
