package main

import (
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/chorusrt/chorus/bench/internal/corpus"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func row(scn, group, client string, f corpus.Format, vals map[string]float64) Row {
	return Row{Scenario: scn, Group: group, Client: client, Format: f, Values: vals, Runs: 1}
}

// TestFloorNotAFloor checks that a Chorus figure better than its floor's
// is flagged in the table and listed in the Floor check section, and that
// a floor that wins is not.
func TestFloorNotAFloor(t *testing.T) {
	r := &runner{p: fullParams(), timing: map[string]time.Duration{}}
	r.rows = []Row{
		row("e2e", "openai", "floor-extract", corpus.OpenAI, map[string]float64{"us_per_stream": 100, "cpu_us_per_stream": 50}),
		row("e2e", "openai", "chorus", corpus.OpenAI, map[string]float64{"us_per_stream": 90, "cpu_us_per_stream": 60}),
		row("e2e", "openai", "chorus-runtime", corpus.OpenAI, map[string]float64{"us_per_stream": 120, "cpu_us_per_stream": 70}),
	}
	md := r.report("ratios.png")
	if !strings.Contains(md, "**floor not a floor**: µs/stream 90 against the floor's 100") {
		t.Errorf("no flag in the table:\n%s", md)
	}
	if len(r.flags) != 1 || !strings.Contains(r.flags[0], "`chorus`") {
		t.Errorf("flags %q, want one for chorus", r.flags)
	}
	if !strings.Contains(md, "## Floor check") || !strings.Contains(md, "TestFloorExtracts") {
		t.Error("the report does not say how floors were checked")
	}
}

// TestTargetsVerdicts checks the verdicts of issue 21's, 18's and 20's
// targets from made-up rows: a missed target says by how much.
func TestTargetsVerdicts(t *testing.T) {
	r := &runner{p: fullParams(), timing: map[string]time.Duration{}}
	r.p.GWRates = []int{1000, 5000}
	r.rows = []Row{
		row("ratelimit", "fixed window (OpenAI headers)", "chorus-runtime", corpus.OpenAI, map[string]float64{"ok": 200, "limited": 0, "limited_after_first": 0, "wall_s": 2.52, "min_s": 2, "ratio": 1.26}),
		row("ratelimit", "token bucket (OpenAI headers)", "chorus-runtime", corpus.OpenAI, map[string]float64{"ok": 200, "limited": 3, "limited_after_first": 0, "wall_s": 2.06, "min_s": 2, "ratio": 1.03}),
		row("gateway", "openai", "gateway", corpus.OpenAI, map[string]float64{"gw_5000_errors": 0, "inproc_5000_errors": 0, "gw_5000_achieved_rps": 3100, "gw_5000_requests": 10000, "added_5000_p50_us": 80, "added_cpu_ns_per_delta": 500, "gw_cpu_ns_per_delta": 1500, "inproc_cpu_ns_per_delta": 1000}),
		row("inproc", "one small buffered request", "chorus-runtime", corpus.OpenAI, map[string]float64{"cpu_us_per_req": 44, "us_per_req": 45, "allocs_per_req": 84, "bytes_per_req": 8192}),
	}
	md := r.report("ratios.png")
	for _, want := range []string{
		"2.52 s vs 2.00 s minimum (1.26×) | **missed**: 26% over the minimum instead of 5%",
		"2.06 s vs 2.00 s minimum (1.03×) | **met**",
		"**missed**: the load generator reached 3100 req/s, not 5000",
		"p50 added latency under 100 µs, JSON both ways included | 80 µs",
		"under 1 µs added per streamed delta | 0.50 µs CPU per delta",
		"44.0 µs CPU (45.0 µs wall), 84 allocations, 8.0 KiB per request; anchor: Bifrost 59 µs on 2 vCPU excluding JSON | **missed** by 24.0 µs (2.20× the target)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// TestFrameworksSection checks issue 35's section from made-up rows: each
// framework on Chorus against the same framework on its own plugin, per
// metric, and a pair that could not run says so.
func TestFrameworksSection(t *testing.T) {
	r := &runner{p: fullParams(), timing: map[string]time.Duration{}}
	r.rows = []Row{
		row("frameworks", "decode", "floor-extract", corpus.OpenAI, map[string]float64{"ns_per_delta": 250, "cpu_ns_per_delta": 240, "allocs_per_delta": 0.03, "bytes_per_delta": 2}),
		row("frameworks", "decode", "chorus", corpus.OpenAI, map[string]float64{"ns_per_delta": 390, "cpu_ns_per_delta": 360, "allocs_per_delta": 1, "bytes_per_delta": 33}),
		row("frameworks", "decode", "eino", corpus.OpenAI, map[string]float64{"ns_per_delta": 9000, "cpu_ns_per_delta": 8600, "allocs_per_delta": 40, "bytes_per_delta": 4000}),
		row("frameworks", "decode", "eino-chorus", corpus.OpenAI, map[string]float64{"ns_per_delta": 800, "cpu_ns_per_delta": 700, "allocs_per_delta": 3, "bytes_per_delta": 280}),
		row("frameworks", "decode", "langchaingo", corpus.OpenAI, map[string]float64{"ns_per_delta": 10000, "cpu_ns_per_delta": 7600, "allocs_per_delta": 25, "bytes_per_delta": 4900}),
		{Scenario: "frameworks", Group: "decode", Client: "langchaingo-chorus", Format: corpus.OpenAI, Err: "boom"},
	}
	md := r.report("ratios.png")
	for _, want := range []string{
		"## 10. Frameworks: their own model plugin against Chorus",
		"| eino | 11.2× (800 against 9000) | 12.3× (700 against 8600) | 13.3× (3.00 against 40.00) | 14.3× (280 against 4000) |",
		"| langchaingo | n/a (could not run) |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md[strings.Index(md, "## 10."):])
		}
	}
}

// TestParseGoBench reads `go test -bench -benchmem -count N` output: one
// row per benchmark, its name without "Benchmark" and the GOMAXPROCS
// suffix, the median of its runs.
func TestParseGoBench(t *testing.T) {
	out := []byte(`goos: linux
goarch: amd64
pkg: github.com/chorusrt/chorus/runtime
BenchmarkRoute/list-2         	 9000000	       120.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkRoute/list-2         	 9000000	       100.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkRoute/list-2         	 9000000	       110.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkRoute/cache_affinity/keyed-2 	  500000	      2400 ns/op	      64 B/op	       2 allocs/op
BenchmarkCacheHitMemory       	  300000	      3600 ns/op	    2100 B/op	      17 allocs/op
PASS
ok  	github.com/chorusrt/chorus/runtime	12.3s
`)
	rows := parseGoBench(out)
	if len(rows) != 3 {
		t.Fatalf("rows %+v", rows)
	}
	if rows[0].Client != "Route/list" || rows[0].Runs != 3 || rows[0].Values["ns_per_op"] != 110 {
		t.Errorf("first row %+v", rows[0])
	}
	if rows[1].Client != "Route/cache_affinity/keyed" || rows[1].Values["allocs_per_op"] != 2 || rows[1].Values["bytes_per_op"] != 64 {
		t.Errorf("second row %+v", rows[1])
	}
	if rows[2].Client != "CacheHitMemory" || rows[2].Values["ns_per_op"] != 3600 {
		t.Errorf("third row %+v", rows[2])
	}
}

// TestRouteAndCacheSections checks issue 34's and 33's sections from
// made-up rows: each strategy against the fallback list, each cache
// figure with what a miss adds, and a run that failed says so.
func TestRouteAndCacheSections(t *testing.T) {
	r := &runner{p: fullParams(), timing: map[string]time.Duration{}}
	gb := func(scn, name string, ns, allocs, bytes float64) Row {
		return row(scn, "runtime", name, corpus.OpenAI, map[string]float64{"ns_per_op": ns, "allocs_per_op": allocs, "bytes_per_op": bytes})
	}
	r.rows = []Row{
		gb("route", "Route/list", 100, 0, 0),
		gb("route", "Route/weighted", 150, 0, 0),
		gb("cache", "CacheHitMemory", 3600, 17, 2100),
		gb("cache", "CacheMissNone", 9000, 60, 6000),
		gb("cache", "CacheMissMemory", 14000, 90, 9000),
		{Scenario: "cache", Group: "cache", Client: "^Benchmark(Key|GetMemory|GetSQLite)$", Format: corpus.OpenAI, Err: "go test: exit status 1"},
	}
	md := r.report("ratios.png")
	for _, want := range []string{
		"## 12. Choosing a target per call, per routing strategy",
		"| `weighted`: targets drawn in proportion to weights 3, 2, 1 | 150 | 0 | 0 | 1.50× (+50 ns) |",
		"| `fastest`: power of two choices over the peak-EWMA estimates | not measured |",
		"## 13. Response cache: a hit, and what the cache adds to a miss",
		"| `BenchmarkCacheHitMemory` | a `Chat` answered from the in-memory cache (`runtime`) | 3.60 | 17 | 2100 |",
		"a hit from memory takes 3.60 µs, 0.40× the provider's answer without a cache",
		"a miss with the memory store adds 5.00 µs and 30 allocations to the call",
		"could not run: go test: exit status 1",
		"| response cache: what a hit costs (memory, SQLite), and what the cache adds to a miss (scenario 13) | not measured | — |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md[strings.Index(md, "## 12."):])
		}
	}
}

// TestMerge: a report from several dumps takes each scenario, and the
// soak, from the last dump that measured it, and says when the others
// were measured.
func TestMerge(t *testing.T) {
	full := dump{Params: fullParams(), Date: time.Date(2026, 12, 3, 5, 56, 0, 0, time.UTC), LoadEnd: "3.0 2.0 1.0",
		Timing: map[string]time.Duration{"decode": 13 * time.Second, "frameworks": time.Second},
		Rows: []Row{row("decode", "openai", "chorus", corpus.OpenAI, map[string]float64{"ns_per_delta": 400}),
			row("frameworks", "decode", "eino", corpus.OpenAI, map[string]float64{"ns_per_delta": 1})}}
	part := dump{Params: quickParams(), Date: time.Date(2026, 12, 4, 21, 30, 0, 0, time.UTC), LoadEnd: "1.0 1.0 1.0",
		Timing: map[string]time.Duration{"frameworks": 7 * time.Second},
		Rows:   []Row{row("frameworks", "decode", "eino", corpus.OpenAI, map[string]float64{"ns_per_delta": 9000})}}
	m := merge([]dump{full, part})
	if len(m.Rows) != 2 || m.Rows[1].Values["ns_per_delta"] != 9000 || m.Rows[0].Scenario != "decode" {
		t.Fatalf("rows %+v", m.Rows)
	}
	if !m.Date.Equal(part.Date) || m.LoadEnd != full.LoadEnd || m.Params.DecodeDeltas != full.Params.DecodeDeltas || m.Timing["frameworks"] != 7*time.Second || m.Total != 20*time.Second {
		t.Fatalf("merged %+v", m)
	}
	r := &runner{p: m.Params, rows: m.Rows, timing: m.Timing, date: m.Date, dates: m.Dates}
	if md := r.report("ratios.png"); !strings.Contains(md, "decode measured on 2026-12-03 05:56 UTC") || strings.Contains(md, "frameworks measured on") {
		t.Errorf("the report does not say when decode was measured:\n%s", md[:800])
	}
}
