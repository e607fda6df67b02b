package pgcache_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/chorusrt/chorus/cache"
	"github.com/chorusrt/chorus/cache/cachetest"
	"github.com/chorusrt/chorus/cache/pgcache"
	"github.com/chorusrt/chorus/internal/pgtest"
	"github.com/chorusrt/chorus/llm"
)

// The tests use CHORUS_PG_DSN when it is set, otherwise a throwaway
// cluster (internal/pgtest); without either they skip, saying why, and
// fail when CI is set. Each test works in a schema of its own.
func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

func open(t *testing.T, lim cache.Limits) cache.Store {
	s, err := pgcache.Open(t.Context(), pgtest.SchemaDSN(t), lim)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	pgtest.Base(t)
	cachetest.Run(t, open)
}

// TestFleet: three stores on one database (three gateway replicas) share
// entries: what one wrote, the others read.
func TestFleet(t *testing.T) {
	dsn := pgtest.SchemaDSN(t)
	var stores []*pgcache.Store
	for range 3 {
		s, err := pgcache.Open(t.Context(), dsn, cache.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores = append(stores, s)
	}
	now := time.Now()
	if err := stores[0].Put(context.Background(), cache.Entry{Namespace: "n", Key: "k", Value: []byte("v"), Created: now}); err != nil {
		t.Fatal(err)
	}
	for i, s := range stores[1:] {
		if v, ok, err := s.Get(context.Background(), "n", "k", now); err != nil || !ok || string(v) != "v" {
			t.Fatalf("replica %d: Get = %q, %v, %v", i+1, v, ok, err)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	_, err := pgcache.Open(t.Context(), "postgres://u:hunter2@[::1/db", cache.Limits{})
	var ce *llm.ConfigError
	if !errors.As(err, &ce) || ce.Field != "dsn" {
		t.Fatalf("Open(bad dsn) = %v, want a ConfigError naming dsn", err)
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("the error shows the password: %v", err)
	}
	port, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	if s, err := pgcache.Open(t.Context(), fmt.Sprintf("postgres://u:hunter2@127.0.0.1:%d/db?sslmode=disable&connect_timeout=5", port), cache.Limits{}); err == nil || strings.Contains(err.Error(), "hunter2") {
		if s != nil {
			s.Close()
		}
		t.Fatalf("Open(nobody listening) = %v: want an error without the password", err)
	}
	if s, err := pgcache.Open(t.Context(), "postgres://127.0.0.1:1/db", cache.Limits{MaxEntries: -1}); !errors.As(err, &ce) || ce.Field != "max_entries" {
		if s != nil {
			s.Close()
		}
		t.Fatalf("Open(negative max_entries) = %v, want a ConfigError naming max_entries", err)
	}
}

// TestFailingAtRunTime: a PostgreSQL store that fails under a cache (its
// table dropped by someone else) makes calls go to the provider, counted,
// never failed.
func TestFailingAtRunTime(t *testing.T) {
	dsn := pgtest.SchemaDSN(t)
	s, err := pgcache.Open(t.Context(), dsn, cache.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, _ := cache.New(s, cache.Options{})
	pgtest.Exec(t, dsn, `DROP TABLE chorus_cache`)
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
