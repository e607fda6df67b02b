package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/bench/internal/corpus"
)

// TestPeerGWSection renders the peer gateway section from made-up cases:
// the targets' verdicts (a miss says by how much), added latency against
// the upstream, and a case a gateway could not serve listed with why.
func TestPeerGWSection(t *testing.T) {
	r := &runner{p: fullParams(), timing: map[string]time.Duration{}}
	add := func(group, gw string, v map[string]float64, err string) {
		r.rows = append(r.rows, Row{Scenario: "peergw", Group: group, Client: gw, Format: corpus.OpenAI, Values: v, Runs: 1, Err: err})
	}
	for _, proto := range []string{"http1", "h2c"} {
		add(proto+"/buffered", "direct", map[string]float64{"p50_us": 50, "p99_us": 90, "rps": 20000}, "")
		add(proto+"/buffered", "proxy", map[string]float64{"p50_us": 150, "p99_us": 300, "rps": 8000, "cpu_us": 80}, "")
		add(proto+"/buffered", "chorus", map[string]float64{"p50_us": 140, "p99_us": 280, "rps": 9000, "cpu_us": 70}, "")
		add(proto+"/streamed", "direct", map[string]float64{"ttfd_p50_us": 100, "ttfd_p99_us": 200, "end_p50_us": 300, "end_p99_us": 400, "streams_per_s": 4000}, "")
		add(proto+"/streamed", "proxy", map[string]float64{"ttfd_p50_us": 160, "ttfd_p99_us": 260, "end_p50_us": 360, "end_p99_us": 460, "streams_per_s": 3000, "cpu_us": 100, "cpu_ns_per_delta": 1000}, "")
		add(proto+"/streamed", "chorus", map[string]float64{"ttfd_p50_us": 300, "ttfd_p99_us": 400, "end_p50_us": 500, "end_p99_us": 600, "streams_per_s": 2000, "cpu_us": 150, "cpu_ns_per_delta": 1500}, "")
	}
	add("h2c/buffered", "portkey", nil, `Post "http://x": http2: frame too large, note that the frame header looked like an HTTP/1.1 header`)
	var b strings.Builder
	r.sectionPeerGW(&b)
	md := b.String()
	for _, want := range []string{
		pgwBegin, pgwEnd,
		"| Chorus's CPU per request at most the reverse proxy's (buffered, HTTP/1.1) | 70.0 µs against 80.0 µs (0.88×) | **met** |",
		"(streamed, HTTP/1.1) | 150.0 µs against 100.0 µs (1.50×) | **missed** by 50.0 µs (1.50× the proxy's) |",
		"| 200 µs added against the proxy's 60 µs | **missed** by 90 µs |",
		"| Portkey 1.15.2 | HTTP/2 without TLS (h2c) | buffered | serves HTTP/1.1 only",
		"| Chorus (`gateway.New`) | 70.0 | 0.88× | 9.0k | 140 | 280 | 90 | 190 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("no %q in:\n%s", want, md)
		}
	}
}

// TestSplice replaces the section between its markers and keeps the rest;
// a report without the section gets it appended.
func TestSplice(t *testing.T) {
	p := filepath.Join(t.TempDir(), "R.md")
	if err := os.WriteFile(p, []byte("head\n"+pgwBegin+"old\n"+pgwEnd+"tail\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := splice(p, pgwBegin, pgwEnd, pgwBegin+"new\n"+pgwEnd); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if got, want := string(b), "head\n"+pgwBegin+"new\n"+pgwEnd+"tail\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if err := os.WriteFile(p, []byte("head\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := splice(p, pgwBegin, pgwEnd, pgwBegin+"new\n"+pgwEnd); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(p)
	if got, want := string(b), "head\n\n"+pgwBegin+"new\n"+pgwEnd; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
