package main

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/chorusrt/chorus/bench/internal/clients"
	"github.com/chorusrt/chorus/bench/internal/corpus"
	"github.com/chorusrt/chorus/bench/internal/report"
	"github.com/chorusrt/chorus/bench/internal/sysinfo"
)

// metric is one column of a scenario table.
type metric struct {
	key    string
	header string
	format func(float64) string
	// higher is better (throughput) rather than lower (cost).
	higher bool
}

func f0(v float64) string { return fmt.Sprintf("%.0f", v) }
func f1(v float64) string { return fmt.Sprintf("%.1f", v) }
func f2(v float64) string { return fmt.Sprintf("%.2f", v) }
func g3(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}
func kib(v float64) string { return fmt.Sprintf("%.1f", v/1024) }
func mib(v float64) string { return fmt.Sprintf("%.0f", v/(1<<20)) }
func si(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	default:
		return fmt.Sprintf("%.0f", v)
	}
}

// ratio formats a ratio for a table cell.
func ratio(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0) || v <= 0:
		return "—"
	case v >= 100:
		return fmt.Sprintf("%.0f×", v)
	case v >= 10:
		return fmt.Sprintf("%.1f×", v)
	default:
		return fmt.Sprintf("%.2f×", v)
	}
}

// advantage is how many times better Chorus's value c is than other's o
// (>1: Chorus better).
func advantage(m metric, c, o float64) float64 {
	if c <= 0 || o <= 0 {
		return math.NaN()
	}
	if m.higher {
		return c / o
	}
	return o / c
}

func (r *runner) rowsOf(scn, group string) []Row {
	var out []Row
	for _, row := range r.rows {
		if row.Scenario == scn && row.Group == group {
			out = append(out, row)
		}
	}
	return out
}

func (r *runner) groups(scn string) []string {
	var out []string
	for _, row := range r.rows {
		if row.Scenario == scn && !slices.Contains(out, row.Group) {
			out = append(out, row.Group)
		}
	}
	return out
}

// chorusRef is the Chorus row a client is compared with: plain Chorus on
// the same format.
func chorusRef(rows []Row, f corpus.Format, name string) (Row, bool) {
	for _, row := range rows {
		if row.Client == name && row.Format == f && row.Err == "" {
			return row, true
		}
	}
	return Row{}, false
}

func cellOr(row Row, m metric) string {
	if row.Err != "" {
		return "—"
	}
	v, ok := row.Values[m.key]
	if !ok {
		return "—"
	}
	return m.format(v)
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "|", "/")
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

// table writes one scenario group: a row per client with every metric,
// then the main metric against the floor and against plain Chorus on the
// same format, then a note column for errors.
func (r *runner) table(b *strings.Builder, rows []Row, ms []metric, main metric, floorName string, chorusName string) {
	b.WriteString("| client |")
	for _, m := range ms {
		b.WriteString(" " + m.header + " |")
	}
	fmt.Fprintf(b, " %s vs %s | %s: Chorus advantage | note |\n|---|", main.header, floorName, main.header)
	for range ms {
		b.WriteString("---:|")
	}
	b.WriteString("---:|---:|---|\n")
	for _, row := range rows {
		fmt.Fprintf(b, "| %s |", label(row))
		for _, m := range ms {
			b.WriteString(" " + cellOr(row, m) + " |")
		}
		floorCell, advCell := "—", "—"
		if row.Err == "" {
			if fl, ok := chorusRef(rows, row.Format, floorName); ok {
				v, fv := row.Values[main.key], fl.Values[main.key]
				if main.higher {
					floorCell = ratio(fv/v) + " slower"
				} else {
					floorCell = ratio(v / fv)
				}
			}
			if ch, ok := chorusRef(rows, row.Format, chorusName); ok {
				if row.Client == chorusName {
					advCell = "1× (reference)"
				} else {
					advCell = ratio(advantage(main, ch.Values[main.key], row.Values[main.key]))
				}
			}
		}
		note := ""
		if row.Err != "" {
			note = "could not run: " + oneLine(row.Err)
		} else if len(row.Notes) > 0 {
			note = oneLine(strings.Join(row.Notes, "; "))
		}
		if fl, ok := chorusRef(rows, row.Format, floorName); ok && row.Err == "" && clients.Kind(row.Client) == "chorus" {
			if beaten := floorBeaten(row, fl, ms, main); beaten != "" {
				flag := "**floor not a floor**: " + beaten
				note = strings.TrimPrefix(note+"; "+flag, "; ")
				r.flags = append(r.flags, fmt.Sprintf("%s, %s: `%s` %s", r.scenarioTitle(row.Scenario), row.Group, label(row), beaten))
			}
		}
		fmt.Fprintf(b, " %s | %s | %s |\n", floorCell, advCell, note)
	}
}

// floorBeaten says where a Chorus row is better than its floor, on the
// table's main metric and on every CPU metric: a floor is the least work
// that produces the same events from the same bytes on the same
// transport, so no client may beat it.
func floorBeaten(row, fl Row, ms []metric, main metric) string {
	var out []string
	for _, m := range ms {
		if m.key != main.key && !strings.Contains(m.key, "cpu") {
			continue
		}
		c, okc := row.Values[m.key]
		f, okf := fl.Values[m.key]
		if !okc || !okf || c <= 0 || f <= 0 {
			continue
		}
		if (m.higher && c > f) || (!m.higher && c < f) {
			out = append(out, fmt.Sprintf("%s %s against the floor's %s", m.header, m.format(c), m.format(f)))
		}
	}
	return strings.Join(out, ", ")
}

func (r *runner) scenarioTitle(scn string) string {
	switch scn {
	case "decode":
		return "1 (decode from memory)"
	case "e2e":
		return "2 (one stream end to end)"
	case "concurrent":
		return "3 (concurrent streams)"
	case "batch":
		return "6 (batch)"
	case "tls-e2e":
		return "8 (TLS, one stream end to end)"
	case "tls-concurrent":
		return "8 (TLS, concurrent streams)"
	case "inproc":
		return "9 (one buffered request in-process)"
	}
	return scn
}

// floorCheck writes how the floors were checked and every figure where a
// Chorus client beat its floor.
func (r *runner) floorCheck(b *strings.Builder) {
	b.WriteString("## Floor check\n\nA floor is the least work that produces the same events from the same bytes on the same transport. How the floors were checked: `TestFloorExtracts` (bench/internal/clients) runs each format's corpus stream through `floor-extract` and requires exactly the corpus's deltas and text, escapes undone, and `floor-bare` to frame at least one event per delta; `TestFloorNeedsEnd` requires a truncated OpenAI or Anthropic stream to be an error for the floor as for Chorus; `TestFloorAnthropicEventLine` requires the Anthropic floor to end at the `message_stop` event line and to look for text only in `content_block_delta` data; `TestFloorLongLines` requires lines longer than the floor's 4 KiB pooled buffer to be gathered, not refused. Every scenario run checks each stream's delta count and bytes. Then this report compares every Chorus row with `floor-extract` on the same format, on each table's main metric and every CPU metric: a Chorus figure better than its floor's is flagged **floor not a floor** in the table's note and listed here.\n\n")
	if len(r.flags) == 0 {
		b.WriteString("No Chorus figure beat its floor in this run.\n\n")
		return
	}
	b.WriteString("Flagged in this run (the floor lost; on a loaded machine a difference of a few per cent is within the noise of a median, and Chorus's channel face decodes on a second goroutine, so its wall time can beat a single-goroutine floor on 2 cores while its CPU cannot):\n\n")
	for _, f := range r.flags {
		b.WriteString("- " + f + "\n")
	}
	b.WriteString("\n")
}

// matrix writes, for every metric, each Chorus row against the floors and
// each peer: how many times better Chorus is (>1) or worse (<1).
func matrix(b *strings.Builder, rows []Row, ms []metric, chorusRows []string) {
	var cols []Row
	for _, row := range rows {
		if clients.Kind(row.Client) != "chorus" {
			cols = append(cols, row)
		}
	}
	if len(cols) == 0 {
		return
	}
	b.WriteString("\nChorus against the floors and each peer (each cell: how many times better Chorus is; below 1, the other is better; across formats only the same metric is compared):\n\n| Chorus row | metric |")
	for _, c := range cols {
		b.WriteString(" " + label(c) + " |")
	}
	b.WriteString("\n|---|---|")
	for range cols {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	for _, cr := range rows {
		if !slices.Contains(chorusRows, cr.Client) || cr.Err != "" {
			continue
		}
		for _, m := range ms {
			fmt.Fprintf(b, "| %s | %s |", label(cr), m.header)
			for _, c := range cols {
				cell := "—"
				if c.Err != "" {
					cell = "n/a (could not run)"
				} else if v, ok := c.Values[m.key]; ok {
					cell = ratio(advantage(m, cr.Values[m.key], v))
				}
				b.WriteString(" " + cell + " |")
			}
			b.WriteString("\n")
		}
	}
}

func label(row Row) string { return row.Spec().Label() }

func (r *runner) report(pngName string) string {
	quick, total := r.quick, r.total
	var b strings.Builder
	m := r.machine
	mods := sysinfo.Modules()
	b.WriteString("# Chorus benchmark results\n\n")
	fmt.Fprintf(&b, "Generated by `make bench` (`cd bench && go run ./cmd/benchrun -out RESULTS.md`) on %s; the whole run took %s", r.date.UTC().Format("2006-01-02 15:04 UTC"), total.Round(time.Second))
	var parts []string
	for _, s := range []string{"decode", "e2e", "concurrent", "fanout", "ratelimit", "batch", "tls", "gateway", "gatewaylog", "gatewayfleet", "inproc", "frameworks", "route", "cache", "peergw", "ranged", "soak"} {
		if d, ok := r.timing[s]; ok {
			parts = append(parts, fmt.Sprintf("%s %s", s, d.Round(time.Second)))
		}
	}
	fmt.Fprintf(&b, " (%s). Chart: [%s](%s), each client's cost relative to plain Chorus on the same format (anthropic-sdk against `chorus (anthropic)`, genai against `chorus (gemini)`).\n\n", strings.Join(parts, ", "), pngName, pngName)
	if len(r.dates) > 0 {
		byDate := map[string][]string{}
		var days []string
		for scn, t := range r.dates {
			d := t.UTC().Format("2006-01-02 15:04 UTC")
			if d == r.date.UTC().Format("2006-01-02 15:04 UTC") {
				continue
			}
			if byDate[d] == nil {
				days = append(days, d)
			}
			byDate[d] = append(byDate[d], scn)
		}
		slices.Sort(days)
		if len(days) > 0 {
			var parts []string
			for _, d := range days {
				slices.Sort(byDate[d])
				parts = append(parts, strings.Join(byDate[d], ", ")+" measured on "+d)
			}
			fmt.Fprintf(&b, "Merged from runs on this machine (`benchrun -from a.json,b.json`, each scenario from the last run that measured it): %s; the rest on the date above. The times above are each scenario's own; the load averages below are the earliest run's.\n\n", strings.Join(parts, "; "))
		}
	}
	if quick {
		b.WriteString("> **Smoke run (-quick):** sizes are scaled far down and each macro figure is a single run; do not quote these numbers.\n\n")
	}
	b.WriteString("## Machine\n\n| CPU | cores | memory | OS | Go | load average at start | at the end |\n|---|---|---|---|---|---|---|\n")
	loadEnd := r.loadEnd
	if loadEnd == "" {
		loadEnd = "—"
	}
	fmt.Fprintf(&b, "| %s | %d | %s | %s | %s %s/%s | %s | %s |\n\n", m.CPUModel, m.Cores, m.MemTotal, m.Kernel, m.GoVer, m.GOOS, m.GOARCH, m.Load, loadEnd)
	if loadAbove(m.Load, float64(m.Cores)) || loadAbove(r.loadEnd, float64(m.Cores)) {
		fmt.Fprintf(&b, "> **A loaded machine.** The load average above is over the %d cores: other processes shared the cores during this run, so every figure is slower and noisier than on a quiet machine, latencies under load (the gateway's open loop, scenario 7) most of all; ratios between clients measured one after another suffer less, but a client measured during a burst of other work looks worse than it is.\n\n", m.Cores)
	}
	b.WriteString("Everything runs on this one machine: the loopback server in the benchrun process, each measurement in a fresh child process (so CPU time from getrusage, peak RSS and heap are the client's own), both sharing the same cores.\n\n")

	b.WriteString("## Versions\n\n| client | module | version |\n|---|---|---|\n")
	b.WriteString("| chorus, chorus-cb, chorus-runtime | github.com/chorusrt/chorus | this checkout (replace => ../) |\n")
	pm := clients.PeerModules()
	for _, p := range clients.Peers {
		v := mods[pm[p]]
		if p == "eino" {
			fmt.Fprintf(&b, "| eino | github.com/cloudwego/eino + %s | %s + %s |\n", pm[p], mods["github.com/cloudwego/eino"], v)
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", p, pm[p], v)
	}
	b.WriteString("\nPeers are the newest versions the Go module proxy served when bench/go.mod was last updated (`go get -u` inside bench/ refreshes them; the root go.mod never sees them). anthropic-sdk-go is its /v2 module, the current major version. eino's OpenAI model needed github.com/bytedance/sonic raised to v1.15.5 to build on Go 1.26.\n\n")

	b.WriteString("## How to read this\n\n")
	b.WriteString("- **Floors** are the physical limit: `floor-bare` is net/http plus a line loop over a pooled 4 KiB `bufio.Reader` that only frames SSE events; `floor-extract` is the same loop finding each delta's text with `bytes.Index` and unescaping it, without allocating (Anthropic: the `event:` line tells the end and which data lines hold text). Nothing that decodes a stream can be cheaper: how that was checked, and any figure where Chorus beat its floor, is in the Floor check section at the end.\n")
	b.WriteString("- **Chorus** rows: `chorus` is a plain `providers.Client` streaming through its channel (`Stream`, ranging over `Events()`), `chorus-cb` the same client's callback face (`StreamTo`, no channel, no extra goroutine), `chorus-runtime` the runtime (`runtime.New`, `rt.Stream`/`rt.Chat`: credential actor admission, pacing and the report after each call). Chorus always builds the whole `ChatResult` as it decodes.\n")
	b.WriteString("- **Peers** read the delta's text from their own chunk type, the cheapest idiomatic way, without their optional accumulators. Every client, Chorus included, uses the same `*http.Client` (same transport, pools sized for the run) and keeps its library's default retry policy.\n")
	b.WriteString("- A format suffix, `(anthropic)` or `(gemini)`, says the client spoke that format; without one it spoke OpenAI Chat Completions. Every client of a format reads byte-identical responses, built once from the shapes of real recorded exchanges (OpenAI chunks with obfuscation padding, Anthropic events with padded data lines and a ping, Gemini events with usage metadata in every event).\n")
	b.WriteString("- **Chorus advantage** is how many times better Chorus is than the row (cost of the row ÷ cost of Chorus; for throughput, Chorus ÷ row), against plain `chorus` on the same format. `vs floor-extract` is the row's cost over the floor's.\n")
	fmt.Fprintf(&b, "- Scenario 1 figures are the median of %d repeats; scenarios 2 and 4 the median of %d repeats in one child process; scenarios 3, 5 and 6 the median of %d runs, each in a fresh child process. The load average above says how quiet the machine was: on a busy machine every figure is slower, the ratios less so.\n\n", r.p.MicroRuns, r.p.MacroRuns, r.p.MacroRuns)

	r.flags = nil
	r.targets(&b)
	r.section1(&b)
	r.section2(&b)
	r.section3(&b)
	r.section4(&b)
	r.section5(&b)
	r.section6(&b)
	r.sectionGateway(&b)
	r.sectionTLS(&b)
	r.sectionInproc(&b)
	r.sectionFrameworks(&b)
	r.sectionGatewayLog(&b)
	r.sectionRoute(&b) // gobench.go
	r.sectionCache(&b)
	r.sectionGatewayFleet(&b) // fleet.go
	r.sectionPeerGW(&b)
	r.sectionRanged(&b)
	r.floorCheck(&b)
	return b.String()
}

// loadAbove reports whether the 1-minute load average in s ("1.0 0.9
// 0.8") exceeds n.
func loadAbove(s string, n float64) bool {
	f := strings.Fields(s)
	if len(f) == 0 {
		return false
	}
	var v float64
	if _, err := fmt.Sscanf(f[0], "%g", &v); err != nil {
		return false
	}
	return v > n
}

func verdict(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**missed**"
}

func (r *runner) targets(b *strings.Builder) {
	b.WriteString("## Targets\n\n| target | measured | verdict |\n|---|---|---|\n")
	for _, f := range corpus.Formats {
		cb, err1 := r.find("decode", string(f), "chorus-cb", f)
		fl, err2 := r.find("decode", string(f), "floor-extract", f)
		if err1 != nil || err2 != nil || cb.Err != "" || fl.Err != "" {
			fmt.Fprintf(b, "| decode within 1.5× the field-extraction floor (%s) | not measured | — |\n", f)
			continue
		}
		x := cb.Values["cpu_ns_per_delta"] / fl.Values["cpu_ns_per_delta"]
		v := verdict(x <= 1.5)
		if x > 1.5 {
			v += fmt.Sprintf(" by %.1f%% (%.3f× instead of 1.5×)", (x/1.5-1)*100, x)
		}
		fmt.Fprintf(b, "| decode within 1.5× the field-extraction floor, building the whole `ChatResult` (%s, `StreamTo`, CPU time) | %.0f ns vs %.0f ns CPU per delta: %.2f× | %s |\n", f, cb.Values["cpu_ns_per_delta"], fl.Values["cpu_ns_per_delta"], x, v)
		a := cb.Values["allocs_per_delta"]
		v = verdict(a <= 2)
		if a > 2 {
			v += fmt.Sprintf(" by %.2f allocations", a-2)
		}
		fmt.Fprintf(b, "| at most 2 allocations per delta (%s, `StreamTo`) | %.2f allocs, %.0f B per delta | %s |\n", f, a, cb.Values["bytes_per_delta"], v)
	}
	// CPU per delta against openai-go: scenario 3 at the largest size, and
	// scenario 1 from memory.
	for _, n := range r.p.ConcSizes {
		g := fmt.Sprintf("%d streams", n)
		og, e1 := r.find("concurrent", g, "openai-go", corpus.OpenAI)
		for _, cn := range []string{"chorus", "chorus-runtime"} {
			ch, e2 := r.find("concurrent", g, cn, corpus.OpenAI)
			if e1 != nil || e2 != nil || og.Err != "" || ch.Err != "" {
				fmt.Fprintf(b, "| ≥10× less CPU per delta than openai-go (%s, %s) | not measured | — |\n", cn, g)
				continue
			}
			x := og.Values["cpu_s_per_1m_deltas"] / ch.Values["cpu_s_per_1m_deltas"]
			v := verdict(x >= 10)
			if x < 10 {
				v += fmt.Sprintf(" by %.0f%% (%.1f× instead of 10×)", (1-x/10)*100, x)
			}
			fmt.Fprintf(b, "| ≥10× less CPU per delta than openai-go (`%s`, %s over loopback, connections and requests included) | %.2f s vs %.2f s per 1M deltas: %.1f× less | %s |\n", cn, g, ch.Values["cpu_s_per_1m_deltas"], og.Values["cpu_s_per_1m_deltas"], x, v)
		}
	}
	if og, err := r.find("decode", "openai", "openai-go", corpus.OpenAI); err == nil && og.Err == "" {
		if ch, err := r.find("decode", "openai", "chorus", corpus.OpenAI); err == nil && ch.Err == "" {
			x := og.Values["cpu_ns_per_delta"] / ch.Values["cpu_ns_per_delta"]
			v := verdict(x >= 10)
			if x < 10 {
				v += fmt.Sprintf(" by %.0f%% (%.1f×)", (1-x/10)*100, x)
			}
			fmt.Fprintf(b, "| ≥10× less CPU per delta than openai-go (`chorus`, decoding from memory) | %.0f ns vs %.0f ns CPU per delta: %.1f× less | %s |\n", ch.Values["cpu_ns_per_delta"], og.Values["cpu_ns_per_delta"], x, v)
		}
	}
	if len(r.p.ConcSizes) > 0 {
		n := r.p.ConcSizes[len(r.p.ConcSizes)-1]
		g := fmt.Sprintf("%d streams", n)
		for _, cn := range []string{"chorus", "chorus-runtime"} {
			ch, err := r.find("concurrent", g, cn, corpus.OpenAI)
			if err != nil {
				continue
			}
			if ch.Err != "" {
				fmt.Fprintf(b, "| %d concurrent streams on %d cores, under 32 KiB heap per in-flight stream (`%s`) | could not run: %s | **missed** |\n", n, r.machine.Cores, cn, oneLine(ch.Err))
				continue
			}
			h := ch.Values["heap_per_stream"] / 1024
			v := verdict(h < 32 && ch.Values["inflight"] >= float64(n))
			if h >= 32 {
				v += fmt.Sprintf(" by %.1f KiB (%.0f%%)", h-32, (h/32-1)*100)
			}
			fmt.Fprintf(b, "| %d concurrent streams on %d cores, under 32 KiB heap per in-flight stream (`%s`) | %.0f in flight at once; %.1f KiB heap (+%.1f KiB goroutine stacks) per stream; %s deltas/s | %s |\n",
				n, r.machine.Cores, cn, ch.Values["inflight"], h, ch.Values["stack_per_stream"]/1024, si(ch.Values["deltas_per_s"]), v)
		}
	}
	r.issue20Targets(b)
	r.rlTargets(b)
	r.gwTargets(b)
	r.gwLogTargets(b)
	r.gwFleetTargets(b) // fleet.go
	r.inprocTargets(b)
	b.WriteString("\nThe benchmarks never fail the build: a missed target is reported here, with by how much.\n\n")
}

var decodeMetrics = []metric{
	{key: "ns_per_delta", header: "ns/delta", format: f0},
	{key: "cpu_ns_per_delta", header: "CPU ns/delta", format: f0},
	{key: "allocs_per_delta", header: "allocs/delta", format: f2},
	{key: "bytes_per_delta", header: "B/delta", format: f0},
}

func (r *runner) section1(b *strings.Builder) {
	if len(r.groups("decode")) == 0 {
		return
	}
	fmt.Fprintf(b, "## 1. Decode cost per streamed delta, from memory\n\nOne stream of %d text deltas, served from memory by an `http.RoundTripper` that returns the pre-encoded body, through each client's whole stack (request building, response handling, framing, decoding, the caller's loop), repeated for about 200 ms per repeat. CPU ns/delta, the process's CPU time, is the cost compared (it is immune to other processes on the machine, and counts every goroutine: Chorus's channel face decodes on one and hands events to another, so its wall time can be lower); ns/delta is wall time. Allocations and bytes per delta include each stream's fixed costs spread over its deltas.\n\n", r.p.DecodeDeltas)
	for _, g := range r.groups("decode") {
		fmt.Fprintf(b, "### %s\n\n", formatTitle(g))
		rows := r.rowsOf("decode", g)
		r.table(b, rows, decodeMetrics, decodeMetrics[1], "floor-extract", "chorus")
		matrix(b, rows, decodeMetrics[:3], []string{"chorus-cb", "chorus"})
		b.WriteString("\n")
	}
}

func formatTitle(g string) string {
	switch g {
	case "openai":
		return "OpenAI Chat Completions chunks"
	case "anthropic":
		return "Anthropic Messages events"
	case "gemini":
		return "Gemini streamGenerateContent events"
	}
	return g
}

var e2eMetrics = []metric{
	{key: "us_per_stream", header: "µs/stream", format: f0},
	{key: "cpu_us_per_stream", header: "client CPU µs/stream", format: f0},
}

func (r *runner) section2(b *strings.Builder) {
	if len(r.groups("e2e")) == 0 {
		return
	}
	fmt.Fprintf(b, "## 2. One %d-delta stream over loopback HTTP, end to end\n\nThe server writes and flushes each event on its own, as a provider does; time from the call to the last delta, median of %d streams per run on a warm keep-alive connection, and the client process's CPU time per stream. Server and client share the cores, so wall time includes the server's writes. With every event in its own write, each delta costs the client a wakeup (read syscall, netpoller, scheduler: a few µs even for the floor), which dominates here and varies with how busy the machine is: scenario 1 isolates decoding, this one shows what is left of it end to end.\n\n", r.p.E2EDeltas, r.p.E2EStreams)
	for _, g := range r.groups("e2e") {
		fmt.Fprintf(b, "### %s\n\n", formatTitle(g))
		rows := r.rowsOf("e2e", g)
		r.table(b, rows, e2eMetrics, e2eMetrics[0], "floor-extract", "chorus")
		matrix(b, rows, e2eMetrics, []string{"chorus", "chorus-runtime"})
		b.WriteString("\n")
	}
}

var concMetrics = []metric{
	{key: "deltas_per_s", header: "deltas/s", format: si, higher: true},
	{key: "cpu_s_per_1m_deltas", header: "CPU s per 1M deltas", format: f2},
	{key: "heap_per_stream", header: "heap KiB/stream", format: kib},
	{key: "stack_per_stream", header: "stack KiB/stream", format: kib},
	{key: "goroutines_per_stream", header: "goroutines/stream", format: f1},
	{key: "rss_per_stream", header: "RSS KiB/stream", format: kib},
	{key: "max_rss", header: "peak RSS MiB", format: mib},
	{key: "open_s", header: "s to open all", format: f2},
}

func (r *runner) section3(b *strings.Builder) {
	if len(r.groups("concurrent")) == 0 {
		return
	}
	var sizes []string
	for i, n := range r.p.ConcSizes {
		sizes = append(sizes, fmt.Sprintf("%d streams of %d deltas", n, r.p.ConcDeltas[i]))
	}
	fmt.Fprintf(b, "## 3. Concurrent streams\n\nN streams at once (%s), the server flushing every %d events. The server holds every stream after its first delta until all N are in flight; the client process then measures live heap (after a GC), goroutine stacks, goroutines and RSS against its idle state before the run, and opens the gate. Streams are opened at most 512 at a time (a stream counts as opened at its first delta) so that the listen backlog (somaxconn) never drops a connection. Throughput and CPU cover opening and draining, not the measurement pause, so they include each stream's connection and request; CPU is the client process's own. Peak RSS is the child process's whole-life maximum. The deltas per stream are scaled down (real streams run to hundreds of deltas) so that the 10,000-stream runs of the slowest peers fit the 15-minute budget; fewer deltas per stream weigh each stream's fixed costs more in the per-delta CPU, for every client alike.\n\n", strings.Join(sizes, ", "), r.p.ConcFlush)
	for _, g := range r.groups("concurrent") {
		fmt.Fprintf(b, "### %s\n\n", g)
		rows := r.rowsOf("concurrent", g)
		r.table(b, rows, concMetrics, concMetrics[1], "floor-extract", "chorus")
		matrix(b, rows, concMetrics[:3], []string{"chorus", "chorus-runtime"})
		b.WriteString("\n")
	}
}

var fanMetrics = []metric{
	{key: "single_us", header: "fastest single stream: first event µs", format: f0},
	{key: "fanout_us", header: "fan-out to 5: first event µs", format: f0},
	{key: "overhead_us", header: "fan-out overhead µs", format: f0},
	{key: "ratio", header: "fan-out ÷ single", format: f2},
}

func (r *runner) section4(b *strings.Builder) {
	if len(r.groups("fanout")) == 0 {
		return
	}
	fmt.Fprintf(b, "## 4. Fan-out of one prompt to 5 models\n\nFive models answer with first-token latencies of 1 to 5 × %s (the server waits before its headers); each answer is 20 deltas. The fan-out's time to first event is compared with the fastest model streamed alone, the two alternating, median of %d pairs per run. Chorus uses `pipeline.FanOut` over the runtime (merged `Events()`), once with the five models on one OpenAI-format provider and once spread over the three formats; the floor, plain `chorus` and the peers are given the usual hand-written fan-out of a plain client: five goroutines, the first delta wins. Ideal: fan-out ÷ single = 1.\n\n", r.p.FanStep, r.p.FanStreams)
	for _, g := range r.groups("fanout") {
		fmt.Fprintf(b, "### %s\n\n", g)
		rows := r.rowsOf("fanout", g)
		b.WriteString("| client |")
		for _, m := range fanMetrics {
			b.WriteString(" " + m.header + " |")
		}
		b.WriteString(" note |\n|---|")
		for range fanMetrics {
			b.WriteString("---:|")
		}
		b.WriteString("---|\n")
		for _, row := range rows {
			fmt.Fprintf(b, "| %s |", fanLabel(row))
			for _, m := range fanMetrics {
				b.WriteString(" " + cellOr(row, m) + " |")
			}
			note := ""
			if row.Err != "" {
				note = "could not run: " + oneLine(row.Err)
			}
			fmt.Fprintf(b, " %s |\n", note)
		}
		b.WriteString("\n")
	}
	// Chorus's overhead against each peer's.
	var ch Row
	var ok bool
	for _, row := range r.rowsOf("fanout", "5 models") {
		if row.Client == "chorus-runtime" && row.Err == "" {
			ch, ok = row, true
		}
	}
	if ok {
		b.WriteString("Chorus (`pipeline.FanOut`, one format) against each hand-written fan-out: fan-out ÷ single of the other ÷ Chorus's (above 1: Chorus's first event comes relatively sooner):\n\n| ")
		var cells []string
		for _, row := range r.rowsOf("fanout", "5 models") {
			if row.Client == "chorus-runtime" {
				continue
			}
			c := "could not run"
			if row.Err == "" {
				c = ratio(row.Values["ratio"] / ch.Values["ratio"])
			}
			cells = append(cells, label(row)+": "+c)
		}
		b.WriteString(strings.Join(cells, " | ") + " |\n|" + strings.Repeat("---|", len(cells)) + "\n\n")
	}
}

func fanLabel(row Row) string {
	switch row.Client {
	case "chorus-runtime":
		return "chorus-runtime + pipeline.FanOut"
	case "floor-extract", "chorus":
		return label(row) + " (goroutines)"
	}
	if clients.Kind(row.Client) == "peer" {
		return label(row) + " (goroutines)"
	}
	return label(row)
}

// rlTargets writes issue 21's targets for each limiter model: every item
// succeeds; no 429 after the first window where the provider reports its
// limits, at most 2 per window after the first on Gemini (a window stands
// for Gemini's minute); wall time within 5% of the minimum.
func (r *runner) rlTargets(b *strings.Builder) {
	for _, m := range r.rlModels() {
		row, err := r.find("ratelimit", m.Name, "chorus-runtime", m.Format)
		if err != nil {
			continue
		}
		what := "every item succeeds, zero 429s after the first window, wall time within 5% of the minimum"
		if !m.Headers {
			what = "every item succeeds, at most 2 429s per window after the first (no headers: the limit is learnt from 429s), wall time within 5% of the minimum"
		}
		if row.Err != "" {
			fmt.Fprintf(b, "| rate limits, %s (`chorus-runtime`): %s | could not run: %s | **missed** |\n", m.Name, what, oneLine(row.Err))
			continue
		}
		v := row.Values
		after, x := v["limited_after_first"], v["ratio"]
		windows := math.Max(v["wall_s"]/m.Limit.Window.Seconds()-1, 1)
		allowed := 0.0
		if !m.Headers {
			allowed = 2 * windows
		}
		lost := float64(r.p.RLRequests) - v["ok"]
		var why []string
		if lost > 0 {
			why = append(why, fmt.Sprintf("%.0f of %d items lost", lost, r.p.RLRequests))
		}
		if after > allowed {
			why = append(why, fmt.Sprintf("%.0f 429s after the first window (allowed %.0f)", after, allowed))
		}
		if x > 1.05 {
			why = append(why, fmt.Sprintf("%.0f%% over the minimum instead of 5%%", (x-1)*100))
		}
		verd := verdict(len(why) == 0)
		if len(why) > 0 {
			verd += ": " + strings.Join(why, ", ")
		}
		fmt.Fprintf(b, "| rate limits, %s (`chorus-runtime`): %s | %.0f/%d succeeded; %.0f 429s in all, %.0f after the first window; %.2f s vs %.2f s minimum (%.2f×) | %s |\n",
			m.Name, what, v["ok"], r.p.RLRequests, v["limited"], after, v["wall_s"], v["min_s"], x, verd)
	}
}

func (r *runner) section5(b *strings.Builder) {
	if len(r.groups("ratelimit")) == 0 {
		return
	}
	fmt.Fprintf(b, "## 5. Rate-limited goodput, per limiter model\n\n%d buffered requests from %d workers against a limit of %d requests per %s, under each limiter model providers run. The server is `llmtest.Server` with `llmtest.WithRateLimit` (the root module's limiter, the one the runtime's pacing tests use; a fresh server per run), each model speaking its format's real headers and 429s: OpenAI's `x-ratelimit-{limit,remaining,reset}-requests` (resets as Go durations meaning \"until whole again\") with `retry-after` and `retry-after-ms` on a 429; Anthropic's `anthropic-ratelimit-*` (RFC 3339 resets) with `retry-after`; Gemini no header at all, its 429 a `RESOURCE_EXHAUSTED` carrying a `QuotaFailure` with a per-minute quota id and a `RetryInfo` delay. The organisation row gives the clients 3 keys drawing on one budget: the runtime holds them as 3 credentials of one provider, each peer is built once per key and its calls go round-robin over them. The minimum wall time is what the limit allows: (⌈requests ÷ limit⌉ − 1) windows for fixed and sliding windows, (requests − limit) ÷ limit windows for a bucket (it starts full). 429s are counted at the server, in all and after the first window (from the instant the client's first request left). Each client keeps its default retry behaviour; a lost item is a call that returned an error. %d run per client and model (the limit, not the machine, sets these figures).\n\n",
		r.p.RLRequests, r.p.RLConc, r.p.RLLimit, r.p.RLWindow, r.p.RLRuns)
	for _, g := range r.groups("ratelimit") {
		fmt.Fprintf(b, "### %s\n\n", g)
		b.WriteString("| client | succeeded | lost (of which 429) | 429s at the server | 429s after the first window | requests at the server | wall s | minimum s | wall ÷ minimum | default retry behaviour / note |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
		for _, row := range r.rowsOf("ratelimit", g) {
			v := row.Values
			if row.Err != "" {
				fmt.Fprintf(b, "| %s | — | — | — | — | — | — | — | — | could not run: %s |\n", label(row), oneLine(row.Err))
				continue
			}
			note := retryNote(row.Client)
			if len(row.Notes) > 0 {
				note += "; " + oneLine(strings.Join(row.Notes, "; "))
			}
			ratioCell := f2(v["ratio"]) + "×"
			if v["ok"] < float64(r.p.RLRequests) {
				ratioCell += " (not all succeeded)"
			}
			fmt.Fprintf(b, "| %s | %.0f / %d | %.0f (%.0f) | %.0f | %.0f | %.0f | %.2f | %.2f | %s | %s |\n", label(row), v["ok"], r.p.RLRequests, v["failed"], v["failed_429"], v["limited"], v["limited_after_first"], v["requests_at_server"], v["wall_s"], v["min_s"], ratioCell, note)
		}
		b.WriteString("\n")
	}
}

func retryNote(name string) string {
	switch name {
	case "chorus-runtime":
		return "paces admissions from the rate-limit headers (Gemini: from its 429s' quota details); a 429 cools the credential down until retry-after"
	case "chorus":
		return "plain client: retry ladder (5 attempts) honouring retry-after-ms / retry-after / RetryInfo, no pacing"
	case "openai-go", "anthropic-sdk":
		return "2 retries, honouring retry-after-ms / retry-after"
	case "go-openai", "langchaingo", "eino":
		return "no retry: every 429 is a failed call"
	case "genai":
		return "no retry unless HTTPOptions.RetryOptions is set: every 429 is a failed call"
	}
	return ""
}

var batchMetrics = []metric{
	{key: "req_per_s", header: "requests/s", format: si, higher: true},
	{key: "cpu_us_per_req", header: "client CPU µs/request", format: f0},
	{key: "wall_s", header: "wall s", format: f2},
	{key: "max_rss", header: "peak RSS MiB", format: mib},
}

func (r *runner) section6(b *strings.Builder) {
	if len(r.groups("batch")) == 0 {
		return
	}
	fmt.Fprintf(b, "## 6. Batch throughput\n\n%d short buffered requests (a ~%d-byte answer each) at concurrency %d. `chorus-runtime` uses `pipeline.Batch` over the runtime; every other client runs %d goroutines pulling from a channel.\n\n", r.p.BatchRequests, len(corpus.BufferedOf(corpus.OpenAI).Body), r.p.BatchConc, r.p.BatchConc)
	for _, g := range r.groups("batch") {
		rows := r.rowsOf("batch", g)
		r.table(b, rows, batchMetrics, batchMetrics[1], "floor-extract", "chorus")
		matrix(b, rows, batchMetrics[:2], []string{"chorus", "chorus-runtime"})
		b.WriteString("\n")
	}
}

// chart draws the main ratios: each client's cost relative to plain
// Chorus on the same format, per scenario.
func (r *runner) chart(path string) error {
	type grp struct {
		scn, group, key, label string
		higher                 bool
	}
	var groups []grp
	groups = append(groups, grp{"decode", "", "cpu_ns_per_delta", "1 DECODE CPU", false})
	for _, n := range r.p.ConcSizes {
		groups = append(groups, grp{"concurrent", fmt.Sprintf("%d streams", n), "cpu_s_per_1m_deltas", fmt.Sprintf("3 CPU %d", n), false})
	}
	if n := len(r.p.ConcSizes); n > 0 {
		groups = append(groups, grp{"concurrent", fmt.Sprintf("%d streams", r.p.ConcSizes[n-1]), "heap_per_stream", fmt.Sprintf("3 HEAP %d", r.p.ConcSizes[n-1]), false})
	}
	groups = append(groups, grp{"batch", fmt.Sprintf("%d requests at %d", r.p.BatchRequests, r.p.BatchConc), "cpu_us_per_req", "6 BATCH CPU", false})
	series := []clients.Spec{
		{Name: "floor-extract", Format: corpus.OpenAI}, {Name: "chorus", Format: corpus.OpenAI},
		{Name: "openai-go", Format: corpus.OpenAI}, {Name: "go-openai", Format: corpus.OpenAI},
		{Name: "langchaingo", Format: corpus.OpenAI}, {Name: "eino", Format: corpus.OpenAI},
		{Name: "anthropic-sdk", Format: corpus.Anthropic}, {Name: "genai", Format: corpus.Gemini},
	}
	c := &report.Chart{
		Title:  "COST RELATIVE TO CHORUS ON THE SAME FORMAT (LOG SCALE; LOWER = CHEAPER; 1X = CHORUS)",
		YLabel: "GROUPS: SCENARIO AND METRIC (CPU PER DELTA OR REQUEST, HEAP PER IN-FLIGHT STREAM)",
		Ref:    1,
	}
	for _, g := range groups {
		c.Groups = append(c.Groups, g.label)
	}
	c.Values = make([][]float64, len(series))
	for i, s := range series {
		c.Series = append(c.Series, s.Name) // each against chorus on its own format
		for _, g := range groups {
			group := g.group
			if g.scn == "decode" {
				group = string(s.Format)
			}
			v := math.NaN()
			row, e1 := r.find(g.scn, group, s.Name, s.Format)
			ch, e2 := r.find(g.scn, group, "chorus", s.Format)
			if e1 == nil && e2 == nil && row.Err == "" && ch.Err == "" && ch.Values[g.key] > 0 {
				v = row.Values[g.key] / ch.Values[g.key]
			}
			c.Values[i] = append(c.Values[i], v)
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := c.WritePNG(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// gwRow is the gateway scenario's row, if it ran.
func (r *runner) gwRow() (Row, bool) {
	row, err := r.find("gateway", "openai", "gateway", corpus.OpenAI)
	return row, err == nil
}

// gwTargets writes issue 18's targets: at 5,000 req/s no error and p50
// added under 100 µs (JSON both ways), under 1 µs per streamed delta.
func (r *runner) gwTargets(b *strings.Builder) {
	row, ok := r.gwRow()
	if !ok {
		return
	}
	if row.Err != "" {
		fmt.Fprintf(b, "| gateway: no error at 5,000 req/s, p50 added < 100 µs, < 1 µs added per streamed delta | could not run: %s | **missed** |\n", oneLine(row.Err))
		return
	}
	v := row.Values
	top := 0
	for _, rt := range r.p.GWRates {
		top = max(top, rt)
	}
	k := fmt.Sprintf("%d", top)
	errs := v["gw_"+k+"_errors"] + v["inproc_"+k+"_errors"]
	achieved := v["gw_"+k+"_achieved_rps"]
	reached := achieved >= 0.95*float64(top)
	verd := verdict(errs == 0 && reached)
	var why []string
	if errs > 0 {
		why = append(why, fmt.Sprintf("%.0f errors", errs))
	}
	if !reached {
		why = append(why, fmt.Sprintf("the load generator reached %.0f req/s, not %d (this machine could not offer the rate)", achieved, top))
	}
	if len(why) > 0 {
		verd += ": " + strings.Join(why, ", ")
	}
	fmt.Fprintf(b, "| gateway at %s req/s (open loop, small buffered chat requests): no error | %.0f errors of %.0f requests; %.0f req/s achieved | %s |\n", si(float64(top)), errs, v["gw_"+k+"_requests"], v["gw_"+k+"_achieved_rps"], verd)
	added := v["added_"+k+"_p50_us"]
	verd = verdict(added < 100)
	if added >= 100 {
		verd += fmt.Sprintf(" by %.0f µs (%.1f× the target)", added-100, added/100)
	}
	fmt.Fprintf(b, "| gateway at %s req/s: p50 added latency under 100 µs, JSON both ways included | %.0f µs (gateway p50 %.0f µs against %.0f µs in-process; p99 added %.0f µs) | %s |\n", si(float64(top)), added, v["gw_"+k+"_p50_us"], v["inproc_"+k+"_p50_us"], v["added_"+k+"_p99_us"], verd)
	if d, ok := v["added_cpu_ns_per_delta"]; ok {
		verd = verdict(d < 1000)
		if d >= 1000 {
			verd += fmt.Sprintf(" by %.2f µs (%.1f× the target)", d/1000-1, d/1000)
		}
		fmt.Fprintf(b, "| gateway: under 1 µs added per streamed delta | %.2f µs CPU per delta (%.2f µs through the gateway against %.2f µs in-process) | %s |\n", d/1000, v["gw_cpu_ns_per_delta"]/1000, v["inproc_cpu_ns_per_delta"]/1000, verd)
	}
}

func (r *runner) sectionGateway(b *strings.Builder) {
	row, ok := r.gwRow()
	if !ok {
		return
	}
	fmt.Fprintf(b, "## 7. Gateway: what `chorus serve` adds\n\nThe runtime over the bench server (OpenAI format), called two ways in one child process: in-process (`rt.Chat`, `rt.Stream`) and through the gateway (`gateway.New(rt, gateway.Options{})` served by `net/http` on a loopback port of the same process, a plain `net/http` client posting `/v1/chat/completions` and decoding the JSON answer with `encoding/json`). The load is open-loop: small buffered requests (the same ~%d-byte answer as scenario 6) started at a fixed rate for %s whatever the earlier ones are doing, each on its own goroutine; latency runs from each request's send to its decoded answer. **Added** is gateway minus in-process: for latency, the difference of the percentiles; for CPU, of the process's CPU time per request (load generator, gateway and runtime: the whole process, so the client's side of the hop is included). Streams: %d streams of %d deltas each way, the upstream flushing every %d events; the gateway's stream is read by the extracting floor's loop; CPU per delta is the process's. Median of %d runs, each in a fresh process.\n\n",
		len(corpus.BufferedOf(corpus.OpenAI).Body), r.p.GWDuration, r.p.GWStreams, r.p.GWDeltas, r.p.ConcFlush, r.p.MacroRuns)
	if row.Err != "" {
		fmt.Fprintf(b, "Could not run: %s\n\n", oneLine(row.Err))
		return
	}
	v := row.Values
	b.WriteString("| rate | requests | achieved req/s | errors (in-process / gateway) | in-process p50 / p99 µs | gateway p50 / p99 µs | added p50 / p99 µs | CPU µs/request in-process | through the gateway | added CPU µs/request |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, rate := range r.p.GWRates {
		k := fmt.Sprintf("%d", rate)
		fmt.Fprintf(b, "| %s/s | %.0f | %.0f | %.0f / %.0f | %.0f / %.0f | %.0f / %.0f | %.0f / %.0f | %.1f | %.1f | %.1f |\n", si(float64(rate)), v["gw_"+k+"_requests"], v["gw_"+k+"_achieved_rps"], v["inproc_"+k+"_errors"], v["gw_"+k+"_errors"],
			v["inproc_"+k+"_p50_us"], v["inproc_"+k+"_p99_us"], v["gw_"+k+"_p50_us"], v["gw_"+k+"_p99_us"], v["added_"+k+"_p50_us"], v["added_"+k+"_p99_us"],
			v["inproc_"+k+"_cpu_us_per_req"], v["gw_"+k+"_cpu_us_per_req"], v["added_"+k+"_cpu_us"])
	}
	if _, ok := v["gw_cpu_ns_per_delta"]; ok {
		fmt.Fprintf(b, "\n| stream of %d deltas | CPU µs per delta | wall µs per delta |\n|---|---:|---:|\n| in-process (`rt.Stream`, ranging over `Events()`) | %.2f | %.2f |\n| through the gateway (SSE chunks over loopback) | %.2f | %.2f |\n| **added per delta** | **%.2f** | %.2f |\n",
			r.p.GWDeltas, v["inproc_cpu_ns_per_delta"]/1000, v["inproc_ns_per_delta"]/1000, v["gw_cpu_ns_per_delta"]/1000, v["gw_ns_per_delta"]/1000, v["added_cpu_ns_per_delta"]/1000, (v["gw_ns_per_delta"]-v["inproc_ns_per_delta"])/1000)
	}
	if len(row.Notes) > 0 {
		fmt.Fprintf(b, "\nNotes: %s\n", oneLine(strings.Join(row.Notes, "; ")))
	}
	b.WriteString("\nAnchors, quoted from issue 18 and not measured here: Bifrost reports 11 µs (4 vCPU) and 59 µs (2 vCPU) added per request at 5,000 req/s, excluding JSON and HTTP; measured through a real hop it adds 0.44–0.62 ms; LiteLLM adds 2–4 ms. Targets on these 2 cores: at 5,000 req/s no error, p50 added under 100 µs including JSON both ways, under 1 µs per streamed delta; the verdicts are in the Targets table above. The load generator, the gateway, the runtime and (in the benchrun process) the upstream server share the 2 cores, so at the higher rate the added latency includes queueing for a core.\n\n")
}

// floorRatio is a Chorus row's main metric over floor-extract's in a
// scenario group (0 when either is missing).
func (r *runner) floorRatio(scn, group, client string, f corpus.Format, key string) float64 {
	ch, e1 := r.find(scn, group, client, f)
	fl, e2 := r.find(scn, group, "floor-extract", f)
	if e1 != nil || e2 != nil || ch.Err != "" || fl.Err != "" || fl.Values[key] <= 0 {
		return 0
	}
	return ch.Values[key] / fl.Values[key]
}

func (r *runner) sectionTLS(b *strings.Builder) {
	if len(r.groups("tls-e2e")) == 0 && len(r.groups("tls-concurrent")) == 0 {
		return
	}
	fmt.Fprintf(b, "## 8. TLS: scenarios 2 and 3 over HTTP/1.1 and HTTP/2\n\nEvery provider is TLS, most with HTTP/2. The same loopback server, handler and bytes behind `httptest`'s TLS listener (a fresh self-signed ECDSA P-256 certificate, the key type the providers present; `EnableHTTP2` on or off), every client, floors included, trusting the certificate the way its users trust a private CA: the shared `*http.Client`'s transport gets it in `TLSClientConfig.RootCAs` (and `ForceAttemptHTTP2` for HTTP/2, which a custom TLS config otherwise turns off). The server counts requests by protocol; the bench's tests check that each client really negotiates the protocol asked for. Scenario 2 as above (%d streams of %d deltas, median of %d repeats); scenario 3 at %d streams of %d deltas, %d run per client (the TLS handshakes of every connection are in the CPU figures).\n\n",
		r.p.E2EStreams, r.p.E2EDeltas, r.p.MacroRuns, r.p.TLSConcSize, r.p.TLSConcDeltas, r.p.TLSRuns)
	for _, g := range r.groups("tls-e2e") {
		fmt.Fprintf(b, "### One stream end to end, %s\n\n", g)
		rows := r.rowsOf("tls-e2e", g)
		r.table(b, rows, e2eMetrics, e2eMetrics[0], "floor-extract", "chorus")
		b.WriteString("\n")
	}
	for _, g := range r.groups("tls-concurrent") {
		fmt.Fprintf(b, "### Concurrent streams, %s\n\n", g)
		rows := r.rowsOf("tls-concurrent", g)
		r.table(b, rows, concMetrics, concMetrics[1], "floor-extract", "chorus")
		b.WriteString("\n")
	}
	// Chorus against the floor on TLS and on plain HTTP.
	b.WriteString("Chorus over the floor (`floor-extract`), on plain HTTP and on TLS (issue 20's goal: as good on TLS as on plain HTTP, relative to the floor):\n\n| scenario | client | plain HTTP | TLS HTTP/1.1 | TLS HTTP/2 |\n|---|---|---:|---:|---:|\n")
	for _, f := range corpus.Formats {
		for _, c := range []string{"chorus", "chorus-runtime"} {
			plain := r.floorRatio("e2e", string(f), c, f, "us_per_stream")
			h1 := r.floorRatio("tls-e2e", "HTTP/1.1, "+string(f), c, f, "us_per_stream")
			h2 := r.floorRatio("tls-e2e", "HTTP/2, "+string(f), c, f, "us_per_stream")
			if plain == 0 && h1 == 0 && h2 == 0 {
				continue
			}
			fmt.Fprintf(b, "| 2, µs per stream | %s | %s | %s | %s |\n", clients.Spec{Name: c, Format: f}, ratio(plain), ratio(h1), ratio(h2))
		}
	}
	n := r.p.TLSConcSize
	for _, s := range crossClients(false) {
		if clients.Kind(s.Name) != "chorus" {
			continue
		}
		plain := r.floorRatio("concurrent", fmt.Sprintf("%d streams", n), s.Name, s.Format, "cpu_s_per_1m_deltas")
		h1 := r.floorRatio("tls-concurrent", fmt.Sprintf("HTTP/1.1, %d streams", n), s.Name, s.Format, "cpu_s_per_1m_deltas")
		h2 := r.floorRatio("tls-concurrent", fmt.Sprintf("HTTP/2, %d streams", n), s.Name, s.Format, "cpu_s_per_1m_deltas")
		if plain == 0 && h1 == 0 && h2 == 0 {
			continue
		}
		fmt.Fprintf(b, "| 3, CPU per delta at %d streams | %s | %s | %s | %s |\n", n, s, ratio(plain), ratio(h1), ratio(h2))
	}
	b.WriteString("\n")
}

var inprocMetrics = []metric{
	{key: "cpu_us_per_req", header: "CPU µs/request", format: f2},
	{key: "us_per_req", header: "µs/request (wall)", format: f2},
	{key: "allocs_per_req", header: "allocs/request", format: f0},
	{key: "bytes_per_req", header: "B/request", format: f0},
}

func (r *runner) inprocTargets(b *strings.Builder) {
	row, err := r.find("inproc", "one small buffered request", "chorus-runtime", corpus.OpenAI)
	if err != nil {
		return
	}
	if row.Err != "" {
		fmt.Fprintf(b, "| one small buffered request through the runtime, in-process (transport excluded): under 20 µs | could not run: %s | **missed** |\n", oneLine(row.Err))
		return
	}
	v := row.Values
	c := v["cpu_us_per_req"]
	verd := verdict(c < 20)
	if c >= 20 {
		verd += fmt.Sprintf(" by %.1f µs (%.2f× the target)", c-20, c/20)
	}
	fmt.Fprintf(b, "| one small buffered request through the runtime, in-process (admission through the credential actor, encoding, decoding, the report after the call; transport excluded): under 20 µs on %d cores | %.1f µs CPU (%.1f µs wall), %.0f allocations, %.1f KiB per request; anchor: Bifrost 59 µs on 2 vCPU excluding JSON | %s |\n", r.machine.Cores, c, v["us_per_req"], v["allocs_per_req"], v["bytes_per_req"]/1024, verd)
}

func (r *runner) sectionInproc(b *strings.Builder) {
	g := "one small buffered request"
	rows := r.rowsOf("inproc", g)
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "## 9. One small buffered request, in-process\n\nThe whole in-process cost of one small buffered chat request (the ~%d-byte answer of scenario 6), transport excluded: each client's `*http.Client` has an in-memory `http.RoundTripper` that returns the canned answer. For `chorus-runtime` that is admission through the credential actor, request encoding, response decoding and the report after the call; for the others, their own request building and decoding. Requests one after another, CPU of the whole process (every goroutine, the actors' included) and wall time per request, median of %d repeats of about 200 ms. Target (issue 20): under 20 µs through the runtime on these 2 cores. Anchor, quoted and not measured here: Bifrost self-reports 59 µs per request on 2 vCPU excluding JSON.\n\n", len(corpus.BufferedOf(corpus.OpenAI).Body), r.p.MicroRuns)
	r.table(b, rows, inprocMetrics, inprocMetrics[0], "floor-extract", "chorus")
	b.WriteString("\n")
}

// issue20Targets writes the rest of issue 20's targets: loopback CPU per
// delta within 1.25× the floor, the least heap and goroutines per stream
// of all clients, TLS as good as plain HTTP relative to the floor,
// buffered requests through the runtime within 1.2× the floor and ahead
// of every peer, and the remote-stream cost (measured elsewhere).
func (r *runner) issue20Targets(b *strings.Builder) {
	for _, n := range r.p.ConcSizes {
		g := fmt.Sprintf("%d streams", n)
		for _, cn := range []string{"chorus", "chorus-runtime"} {
			x := r.floorRatio("concurrent", g, cn, corpus.OpenAI, "cpu_s_per_1m_deltas")
			if x == 0 {
				fmt.Fprintf(b, "| CPU per delta over loopback within 1.25× the floor (`%s`, %s) | not measured | — |\n", cn, g)
				continue
			}
			v := verdict(x <= 1.25)
			if x > 1.25 {
				v += fmt.Sprintf(" by %.1f%% (%.3f× instead of 1.25×)", (x/1.25-1)*100, x)
			}
			fmt.Fprintf(b, "| CPU per delta over loopback within 1.25× the floor (`%s`, %s, scenario 3) | %.2f× `floor-extract` | %s |\n", cn, g, x, v)
		}
	}
	if len(r.p.ConcSizes) > 0 {
		n := r.p.ConcSizes[len(r.p.ConcSizes)-1]
		g := fmt.Sprintf("%d streams", n)
		for _, k := range []struct{ key, what string }{{"heap_per_stream", "heap"}, {"goroutines_per_stream", "goroutines"}} {
			ch, err := r.find("concurrent", g, "chorus", corpus.OpenAI)
			if err != nil || ch.Err != "" {
				fmt.Fprintf(b, "| the least %s per in-flight stream of all clients (%s) | not measured | — |\n", k.what, g)
				continue
			}
			best, bestName := math.Inf(1), ""
			for _, row := range r.rowsOf("concurrent", g) {
				if clients.Kind(row.Client) != "peer" || row.Err != "" {
					continue
				}
				if v := row.Values[k.key]; v < best {
					best, bestName = v, label(row)
				}
			}
			c := ch.Values[k.key]
			format := func(v float64) string {
				if k.key == "heap_per_stream" {
					return kib(v) + " KiB"
				}
				return f1(v)
			}
			v := verdict(c <= best)
			if c > best {
				v += fmt.Sprintf(" by %.0f%% (%s against %s's %s)", (c/best-1)*100, format(c), bestName, format(best))
			}
			fmt.Fprintf(b, "| the least %s per in-flight stream of all clients (`chorus`, %s) | %s; least peer: %s, %s | %s |\n", k.what, g, format(c), bestName, format(best), v)
		}
	}
	for _, p := range tlsProtos {
		for _, c := range []struct {
			scn, plainGroup, tlsGroup, key, what string
		}{
			{"concurrent", fmt.Sprintf("%d streams", r.p.TLSConcSize), fmt.Sprintf("%s, %d streams", p.name, r.p.TLSConcSize), "cpu_s_per_1m_deltas", fmt.Sprintf("CPU per delta, %d streams", r.p.TLSConcSize)},
			{"e2e", "openai", p.name + ", openai", "us_per_stream", "µs per stream end to end"},
		} {
			plain := r.floorRatio(c.scn, c.plainGroup, "chorus", corpus.OpenAI, c.key)
			tl := r.floorRatio("tls-"+c.scn, c.tlsGroup, "chorus", corpus.OpenAI, c.key)
			if plain == 0 || tl == 0 {
				fmt.Fprintf(b, "| on TLS %s as good as on plain HTTP relative to the floor (`chorus`, %s) | not measured | — |\n", p.name, c.what)
				continue
			}
			v := verdict(tl <= plain)
			if tl > plain {
				v += fmt.Sprintf(" by %.0f%% (%.2f× the floor on TLS against %.2f× on plain HTTP)", (tl/plain-1)*100, tl, plain)
			}
			fmt.Fprintf(b, "| on TLS %s as good as on plain HTTP relative to the floor (`chorus`, %s) | %.2f× the floor on TLS, %.2f× on plain HTTP | %s |\n", p.name, c.what, tl, plain, v)
		}
	}
	g := fmt.Sprintf("%d requests at %d", r.p.BatchRequests, r.p.BatchConc)
	if x := r.floorRatio("batch", g, "chorus-runtime", corpus.OpenAI, "cpu_us_per_req"); x > 0 {
		v := verdict(x <= 1.2)
		if x > 1.2 {
			v += fmt.Sprintf(" by %.1f%% (%.3f× instead of 1.2×)", (x/1.2-1)*100, x)
		}
		fmt.Fprintf(b, "| batch: client CPU per request through the runtime within 1.2× the floor (scenario 6) | %.2f× `floor-extract` | %s |\n", x, v)
		ch, _ := r.find("batch", g, "chorus-runtime", corpus.OpenAI)
		var ahead []string
		for _, row := range r.rowsOf("batch", g) {
			if clients.Kind(row.Client) == "peer" && row.Err == "" && row.Values["cpu_us_per_req"] <= ch.Values["cpu_us_per_req"] {
				ahead = append(ahead, fmt.Sprintf("%s %.0f µs", label(row), row.Values["cpu_us_per_req"]))
			}
		}
		v = verdict(len(ahead) == 0)
		if len(ahead) > 0 {
			v += ": ahead of Chorus: " + strings.Join(ahead, ", ")
		}
		fmt.Fprintf(b, "| batch: through the runtime ahead of every peer on client CPU per request (scenario 6) | `chorus-runtime` %.0f µs per request | %s |\n", ch.Values["cpu_us_per_req"], v)
	} else {
		fmt.Fprintf(b, "| batch: client CPU per request through the runtime within 1.2× the floor, ahead of every peer | not measured | — |\n")
	}
	b.WriteString("| remote streams: pool or batch the per-delta proto struct (about 530 B and 0.8 µs more per delta than local) | not measured by benchrun: `go test -run '^$' -bench Remote ./cluster` measures it (cluster, not the peer comparison) | — |\n")
	r.cacheTargets(b) // gobench.go
}

// sectionFrameworks is issue 35's comparison: each framework on its own
// model plugin against the same framework on Chorus.
func (r *runner) sectionFrameworks(b *strings.Builder) {
	if len(r.groups("frameworks")) == 0 {
		return
	}
	fmt.Fprintf(b, "## 10. Frameworks: their own model plugin against Chorus\n\neino and LangChainGo each make the same calls twice: on their own OpenAI model plugin (eino-ext's `openai.ChatModel`; `llms/openai`), and on Chorus through `integrations/eino` and `integrations/langchaingo` over a `providers.Client`, the framework's types and all (eino's `StreamReader` of `*schema.Message` chunks; LangChainGo's `StreamingFunc`). Same bytes, same transport. Decode: one stream of %d deltas from memory, as in scenario 1; loopback: one %d-delta stream over HTTP, as in scenario 2. `floor-extract` and plain `chorus` are there for reference.\n\n", r.p.DecodeDeltas, r.p.E2EDeltas)
	groups := []struct {
		name, title string
		ms          []metric
	}{
		{"decode", "Decode cost per streamed delta, from memory", decodeMetrics},
		{"e2e", "One stream over loopback HTTP", e2eMetrics},
	}
	for _, g := range groups {
		rows := r.rowsOf("frameworks", g.name)
		if len(rows) == 0 {
			continue
		}
		fmt.Fprintf(b, "### %s\n\n", g.title)
		r.table(b, rows, g.ms, g.ms[1], "floor-extract", "chorus")
		b.WriteString("\nEach framework on Chorus against the same framework on its own plugin (how many times better Chorus is; below 1, the plugin is better):\n\n| framework |")
		for _, m := range g.ms {
			b.WriteString(" " + m.header + " |")
		}
		b.WriteString("\n|---|")
		for range g.ms {
			b.WriteString("---:|")
		}
		b.WriteString("\n")
		for _, p := range clients.Frameworks {
			own, e1 := r.find("frameworks", g.name, p.Own, corpus.OpenAI)
			ch, e2 := r.find("frameworks", g.name, p.Chorus, corpus.OpenAI)
			fmt.Fprintf(b, "| %s |", p.Own)
			for _, m := range g.ms {
				cell := "not measured"
				if e1 == nil && e2 == nil {
					switch {
					case own.Err != "" || ch.Err != "":
						cell = "n/a (could not run)"
					default:
						cell = fmt.Sprintf("%s (%s against %s)", ratio(advantage(m, ch.Values[m.key], own.Values[m.key])), m.format(ch.Values[m.key]), m.format(own.Values[m.key]))
					}
				}
				b.WriteString(" " + cell + " |")
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
}

// gwLogRow is the request log scenario's row, if it ran.
func (r *runner) gwLogRow() (Row, bool) {
	row, err := r.find("gatewaylog", "openai", "gateway", corpus.OpenAI)
	return row, err == nil
}

// logRatio is the gateway's CPU per request with the log on over off at
// rate k, from the figures' medians (0 when off is missing).
func logRatio(v map[string]float64, k string) float64 {
	if v["off_"+k+"_cpu_us_per_req"] <= 0 {
		return 0
	}
	return v["on_"+k+"_cpu_us_per_req"] / v["off_"+k+"_cpu_us_per_req"]
}

// gwLogTargets is issue 32's target: the gateway's CPU per request with
// the request log on within 10% of off, at each rate.
func (r *runner) gwLogTargets(b *strings.Builder) {
	row, ok := r.gwLogRow()
	if !ok {
		return
	}
	r.offOnTargets(b, row, 1.10, "with the request log on", "with the request log on (SQLite)")
}

// offOnTargets writes an off/on scenario's target rows: on's CPU per
// request at most limit times off's, at each rate. what names on in the
// row of a run that failed, whatAt in the rows of each rate.
func (r *runner) offOnTargets(b *strings.Builder, row Row, limit float64, what, whatAt string) {
	pct := int((limit-1)*100 + 0.5)
	if row.Err != "" {
		fmt.Fprintf(b, "| gateway %s: CPU per request within %d%% of off | could not run: %s | **missed** |\n", what, pct, oneLine(row.Err))
		return
	}
	v := row.Values
	for _, rate := range r.p.GWRates {
		k := fmt.Sprintf("%d", rate)
		ratio := logRatio(v, k)
		verd := verdict(ratio <= limit && v["on_"+k+"_errors"] == 0)
		if ratio > limit {
			verd += fmt.Sprintf(" by %.1f%% (%.2f× instead of %.2f×)", (ratio/limit-1)*100, ratio, limit)
		}
		fmt.Fprintf(b, "| gateway at %s req/s %s: CPU per request within %d%% of off | %.1f µs on vs %.1f µs off: %.2f×; p50 %+.0f µs; %.0f errors | %s |\n",
			si(float64(rate)), whatAt, pct, v["on_"+k+"_cpu_us_per_req"], v["off_"+k+"_cpu_us_per_req"], ratio, v["on_"+k+"_p50_us"]-v["off_"+k+"_p50_us"], v["on_"+k+"_errors"], verd)
	}
}

// sectionGatewayLog is issue 32's figures: the gateway with the request
// log off and on, in the same child process, alternating.
func (r *runner) sectionGatewayLog(b *strings.Builder) {
	row, ok := r.gwLogRow()
	if !ok {
		return
	}
	fmt.Fprintf(b, "## 11. Request log: the gateway with it off and on\n\nMeasured on %s by `benchrun` (scenario `gatewaylog`; load average %s at the run's start, %s at its end, on %d cores). Two gateways over one runtime in one child process, served on two loopback ports: `gateway.Options{}` and `gateway.Options{RequestLog: lg}`, `lg` a `requestlog.Logger` with its default options writing to a SQLite file in a temporary directory (what `chorus serve` keeps by default). The load is scenario 7's open loop of small buffered chat requests, %s at each rate, off and on alternating %d times (each figure the median of those), median of %d runs, each in a fresh process. CPU is the whole process's per request: the load generator, both gateways, the runtime and the log's writer with its SQLite inserts, so what the log costs off the request's path is counted too. **Log** is on minus off, and on ÷ off their ratio, from the medians shown.\n\n",
		r.date.UTC().Format("2006-01-02 15:04 UTC"), r.machine.Load, r.loadEnd, r.machine.Cores, r.p.GWDuration, r.p.MacroRuns, r.p.MacroRuns)
	if row.Err != "" {
		fmt.Fprintf(b, "Could not run: %s\n\n", oneLine(row.Err))
		return
	}
	v := row.Values
	r.offOnTable(b, v, "log")
	fmt.Fprintf(b, "\nThe log wrote %.0f records and dropped %.0f (median of the runs). Target (issue 32): on within 10%% of off; the verdicts are in the Targets table above.\n\n", v["written"], v["dropped"])
	if len(row.Notes) > 0 {
		fmt.Fprintf(b, "Notes: %s\n\n", oneLine(strings.Join(row.Notes, "; ")))
	}
}

// offOnTable writes an off/on scenario's figures per rate; diff names the
// on-minus-off columns ("log", "fleet").
func (r *runner) offOnTable(b *strings.Builder, v map[string]float64, diff string) {
	fmt.Fprintf(b, "| rate | requests | achieved req/s | errors (off / on) | off p50 / p99 µs | on p50 / p99 µs | %s p50 / p99 µs | CPU µs/request off | on | %s CPU µs/request | on ÷ off |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n", diff, diff)
	for _, rate := range r.p.GWRates {
		k := fmt.Sprintf("%d", rate)
		fmt.Fprintf(b, "| %s/s | %.0f | %.0f | %.0f / %.0f | %.0f / %.0f | %.0f / %.0f | %+.0f / %+.0f | %.1f | %.1f | %+.1f | %.2f× |\n", si(float64(rate)), v["on_"+k+"_requests"], v["on_"+k+"_achieved_rps"], v["off_"+k+"_errors"], v["on_"+k+"_errors"],
			v["off_"+k+"_p50_us"], v["off_"+k+"_p99_us"], v["on_"+k+"_p50_us"], v["on_"+k+"_p99_us"], v["on_"+k+"_p50_us"]-v["off_"+k+"_p50_us"], v["on_"+k+"_p99_us"]-v["off_"+k+"_p99_us"],
			v["off_"+k+"_cpu_us_per_req"], v["on_"+k+"_cpu_us_per_req"], v["on_"+k+"_cpu_us_per_req"]-v["off_"+k+"_cpu_us_per_req"], logRatio(v, k))
	}
}
