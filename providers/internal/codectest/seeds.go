package codectest

import (
	"net/url"
	"testing"

	"github.com/chorusrt/chorus/internal/testkit/fixture"
)

// MaxSeed keeps the seed corpus small enough for the mutator: Seeds skips
// bodies longer than MaxSeed bytes.
const MaxSeed = 64 << 10

// Seeds returns the recorded response bodies of the non-synthetic fixtures
// whose provider is accepted by provider and whose exchange is accepted by
// keep, deduplicated, at most MaxSeed bytes each, in index order. It fails
// tb when the fixtures cannot be loaded or when no body is left.
func Seeds(tb testing.TB, provider func(string) bool, keep func(e fixture.Entry, ex fixture.Exchange) bool) [][]byte {
	tb.Helper()
	dir := fixture.Require(tb)
	idx, err := fixture.LoadIndex(dir)
	if err != nil {
		tb.Fatalf("fixtures: %v", err)
	}
	seen := map[string]bool{}
	var out [][]byte
	for _, e := range idx {
		if e.Synthetic() || !provider(e.Provider) {
			continue
		}
		exs, err := fixture.Load(dir, e)
		if err != nil {
			tb.Fatalf("load %s: %v", e.File, err)
		}
		for _, ex := range exs {
			b := ex.Response.Body
			if len(b) == 0 || len(b) > MaxSeed || seen[string(b)] || !keep(e, ex) {
				continue
			}
			seen[string(b)] = true
			out = append(out, b)
		}
	}
	if len(out) == 0 {
		tb.Fatal("fixtures: no seed body")
	}
	return out
}

// URLPath is the path of a recorded request URL ("" when none or when it
// does not parse).
func URLPath(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Path
}
