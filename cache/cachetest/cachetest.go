// Package cachetest is the conformance suite every cache.Store passes:
// the in-memory store, SQLite (cache/sqlitecache) and PostgreSQL
// (cache/pgcache) run the same tests, and a store of the user's own can
// too:
//
//	func TestConformance(t *testing.T) {
//		cachetest.Run(t, func(t *testing.T, lim cache.Limits) cache.Store { return open(t, lim) })
//	}
package cachetest

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/chorusrt/chorus/cache"
)

// Opener returns a new, empty store capped by lim, closed when t ends.
type Opener func(t *testing.T, lim cache.Limits) cache.Store

// t0 is the suite's clock: entries are written and read at fixed times.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// Run runs the suite against the stores open returns.
func Run(t *testing.T, open Opener) {
	t.Run("Missing", func(t *testing.T) { testMissing(t, open) })
	t.Run("RoundTrip", func(t *testing.T) { testRoundTrip(t, open) })
	t.Run("Replace", func(t *testing.T) { testReplace(t, open) })
	t.Run("Namespaces", func(t *testing.T) { testNamespaces(t, open) })
	t.Run("Expiry", func(t *testing.T) { testExpiry(t, open) })
	t.Run("MaxEntries", func(t *testing.T) { testMaxEntries(t, open) })
	t.Run("MaxBytes", func(t *testing.T) { testMaxBytes(t, open) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, open) })
	t.Run("Closed", func(t *testing.T) { testClosed(t, open) })
}

func put(t *testing.T, s cache.Store, e cache.Entry) {
	t.Helper()
	if e.Created.IsZero() {
		e.Created = t0
	}
	if err := s.Put(context.Background(), e); err != nil {
		t.Fatalf("Put(%s/%s): %v", e.Namespace, e.Key, err)
	}
}

func get(t *testing.T, s cache.Store, ns, key string, now time.Time) ([]byte, bool) {
	t.Helper()
	v, ok, err := s.Get(context.Background(), ns, key, now)
	if err != nil {
		t.Fatalf("Get(%s/%s): %v", ns, key, err)
	}
	return v, ok
}

func testMissing(t *testing.T, open Opener) {
	s := open(t, cache.Limits{})
	if v, ok := get(t, s, "ns", "nothing", t0); ok || v != nil {
		t.Fatalf("Get of a key never put = %q, %v", v, ok)
	}
}

func testRoundTrip(t *testing.T, open Opener) {
	s := open(t, cache.Limits{})
	val := []byte{0, 1, 2, 0xff, '{', '"', '}'}
	put(t, s, cache.Entry{Namespace: "ns", Key: "k", Value: val})
	val[0] = 9 // the store keeps its own copy
	v, ok := get(t, s, "ns", "k", t0)
	if !ok || !bytes.Equal(v, []byte{0, 1, 2, 0xff, '{', '"', '}'}) {
		t.Fatalf("Get = %v, %v; want the bytes put", v, ok)
	}
}

func testReplace(t *testing.T, open Opener) {
	s := open(t, cache.Limits{MaxEntries: 2})
	put(t, s, cache.Entry{Namespace: "ns", Key: "k", Value: []byte("one")})
	put(t, s, cache.Entry{Namespace: "ns", Key: "k", Value: []byte("two"), Created: t0.Add(time.Second)})
	put(t, s, cache.Entry{Namespace: "ns", Key: "other", Value: []byte("x"), Created: t0.Add(2 * time.Second)})
	if v, ok := get(t, s, "ns", "k", t0); !ok || string(v) != "two" {
		t.Fatalf("Get after replace = %q, %v; want two (a replaced entry counts once)", v, ok)
	}
}

func testNamespaces(t *testing.T, open Opener) {
	s := open(t, cache.Limits{})
	put(t, s, cache.Entry{Namespace: "key-a", Key: "k", Value: []byte("a")})
	if _, ok := get(t, s, "key-b", "k", t0); ok {
		t.Fatal("namespace key-b reads key-a's entry")
	}
	put(t, s, cache.Entry{Namespace: "key-b", Key: "k", Value: []byte("b")})
	if v, _ := get(t, s, "key-a", "k", t0); string(v) != "a" {
		t.Fatalf("key-a's entry = %q after key-b wrote the same key, want a", v)
	}
	if v, _ := get(t, s, "key-b", "k", t0); string(v) != "b" {
		t.Fatalf("key-b's entry = %q, want b", v)
	}
	// A namespace and key never run into each other.
	put(t, s, cache.Entry{Namespace: "a", Key: "bc", Value: []byte("1")})
	if _, ok := get(t, s, "ab", "c", t0); ok {
		t.Fatal("(ab, c) reads (a, bc)")
	}
}

func testExpiry(t *testing.T, open Opener) {
	s := open(t, cache.Limits{})
	put(t, s, cache.Entry{Namespace: "ns", Key: "ttl", Value: []byte("v"), Expires: t0.Add(time.Minute)})
	put(t, s, cache.Entry{Namespace: "ns", Key: "forever", Value: []byte("v")})
	if _, ok := get(t, s, "ns", "ttl", t0.Add(59*time.Second)); !ok {
		t.Fatal("entry missing before it expires")
	}
	if _, ok := get(t, s, "ns", "ttl", t0.Add(time.Minute)); ok {
		t.Fatal("entry served at its expiry time")
	}
	if _, ok := get(t, s, "ns", "forever", t0.Add(1000*time.Hour)); !ok {
		t.Fatal("entry without expiry missing")
	}
}

func testMaxEntries(t *testing.T, open Opener) {
	s := open(t, cache.Limits{MaxEntries: 5})
	for i := range 8 {
		put(t, s, cache.Entry{Namespace: "ns", Key: fmt.Sprint("k", i), Value: []byte("v"), Created: t0.Add(time.Duration(i) * time.Second)})
	}
	for i := range 8 {
		_, ok := get(t, s, "ns", fmt.Sprint("k", i), t0)
		if want := i >= 3; ok != want {
			t.Fatalf("k%d present = %v, want %v (cap 5 keeps the 5 newest of 8)", i, ok, want)
		}
	}
}

func testMaxBytes(t *testing.T, open Opener) {
	// Each entry is 2 (ns) + 2 (key) + 96 (value) = 100 bytes; 350 hold 3.
	s := open(t, cache.Limits{MaxBytes: 350})
	val := bytes.Repeat([]byte("x"), 96)
	for i := range 6 {
		put(t, s, cache.Entry{Namespace: "ns", Key: fmt.Sprint("k", i), Value: val, Created: t0.Add(time.Duration(i) * time.Second)})
	}
	for i := range 6 {
		_, ok := get(t, s, "ns", fmt.Sprint("k", i), t0)
		if want := i >= 3; ok != want {
			t.Fatalf("k%d present = %v, want %v (350 bytes hold the 3 newest 100-byte entries)", i, ok, want)
		}
	}
}

func testConcurrent(t *testing.T, open Opener) {
	s := open(t, cache.Limits{MaxEntries: 50})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := range 25 {
				k := fmt.Sprint("k", w, "-", i)
				if err := s.Put(context.Background(), cache.Entry{Namespace: "ns", Key: k, Value: []byte(k), Created: t0.Add(time.Duration(i) * time.Millisecond)}); err != nil {
					errs <- err
					return
				}
				v, ok, err := s.Get(context.Background(), "ns", k, t0)
				if err != nil {
					errs <- err
					return
				}
				if ok && string(v) != k {
					errs <- fmt.Errorf("Get(%s) = %q", k, v)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func testClosed(t *testing.T, open Opener) {
	s := open(t, cache.Limits{})
	put(t, s, cache.Entry{Namespace: "ns", Key: "k", Value: []byte("v")})
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, _, err := s.Get(context.Background(), "ns", "k", t0); err == nil {
		t.Fatal("Get after Close succeeded")
	}
	if err := s.Put(context.Background(), cache.Entry{Namespace: "ns", Key: "k2", Value: []byte("v"), Created: t0}); err == nil {
		t.Fatal("Put after Close succeeded")
	}
}
