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
