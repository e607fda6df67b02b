package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chorusrt/chorus/bench/internal/corpus"
	"github.com/chorusrt/chorus/bench/internal/scenario"
)

// The scenarios measured by the root module's own Go benchmarks: what
// only code inside a package can reach (the runtime's routing, which is
// unexported) or what needs no peer (the response cache). benchrun runs
// `go test -bench` in the root module, in a process of its own, and keeps
// the median of -count runs of each benchmark: the report quotes the
// benchmark that measured each figure.

// goBench is one `go test -bench` run of a scenario.
type goBench struct {
	scn, group string
	pkg        string // the root module's package, "./runtime"
	pattern    string // -bench
}

var (
	routeBench = goBench{scn: "route", group: "runtime", pkg: "./runtime", pattern: "^BenchmarkRoute$"}
	cacheBench = []goBench{
		{scn: "cache", group: "runtime", pkg: "./runtime", pattern: "^Benchmark(CacheHitMemory|CacheHitSQLite|CacheMissNone|CacheMissMemory|CacheMissSQLite)$"},
		{scn: "cache", group: "cache", pkg: "./cache", pattern: "^Benchmark(Key|GetMemory|GetSQLite)$"},
	}
)

// route is issue 34's figure: the cost of choosing the order of an
// alias's targets for one call, per strategy, beside a plain fallback
// list (runtime's BenchmarkRoute).
func (r *runner) route() { r.goBench(routeBench) }

// cache is issue 33's figures: a Chat answered from the response cache
// (memory, SQLite), what the cache adds to a miss, and the cache's own
// parts (the canonical key, a store's read).
func (r *runner) cache() {
	for _, g := range cacheBench {
		r.goBench(g)
	}
}

// goBenchArgs are the go command's arguments: -count 5 (the report keeps
// the median), 1 with -quick, each run shorter.
func (r *runner) goBenchArgs(g goBench) []string {
	count, benchtime := "5", "1s"
	if r.quick {
		count, benchtime = "1", "100ms"
	}
	return []string{"test", "-run", "^$", "-bench", g.pattern, "-benchmem", "-count", count, "-benchtime", benchtime, g.pkg}
}

func (r *runner) goBench(g goBench) {
	root, err := rootModule()
	var out []byte
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", r.goBenchArgs(g)...)
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		r.logf("[%s %s] go %s (in %s)", g.scn, g.group, strings.Join(r.goBenchArgs(g), " "), root)
		out, err = cmd.Output()
		if err != nil {
			err = fmt.Errorf("go test: %v: %s", err, lastBytes(append(out, stderr.Bytes()...), 300))
		}
	}
	if err != nil {
		r.logf("[%s %s] %v", g.scn, g.group, err)
		r.rows = append(r.rows, Row{Scenario: g.scn, Group: g.group, Client: g.pattern, Format: corpus.OpenAI, Err: err.Error()})
		return
	}
	rows := parseGoBench(out)
	if len(rows) == 0 {
		r.rows = append(r.rows, Row{Scenario: g.scn, Group: g.group, Client: g.pattern, Format: corpus.OpenAI, Err: "go test printed no benchmark: " + lastBytes(out, 300)})
		return
	}
	for _, row := range rows {
		row.Scenario, row.Group = g.scn, g.group
		r.logf("[%s %s] %s: %d runs, %.0f ns/op, %.1f allocs/op", g.scn, g.group, row.Client, row.Runs, row.Values["ns_per_op"], row.Values["allocs_per_op"])
		r.rows = append(r.rows, row)
	}
}

func lastBytes(b []byte, n int) string {
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return s
}

// rootModule is the directory of Chorus's own go.mod: the first directory
// from here up whose go.mod declares github.com/chorusrt/chorus (bench/
// replaces it with ../).
func rootModule() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(b, []byte("module github.com/chorusrt/chorus\n")) {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("the root module (github.com/chorusrt/chorus) is not in a parent directory")
		}
		dir = up
	}
}

// benchLine is one result line of `go test -bench -benchmem`:
// "BenchmarkRoute/weighted-2   12345   95.3 ns/op   0 B/op   0 allocs/op".
var benchLine = regexp.MustCompile(`^Benchmark(\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op(?:\s+([\d.]+) B/op\s+([\d.]+) allocs/op)?`)

// parseGoBench reads `go test -bench -benchmem -count N` output: one row
// per benchmark (Client its name without "Benchmark" and the -GOMAXPROCS
// suffix: "Route/weighted"), in the order first printed, with the median
// of its runs: ns_per_op, bytes_per_op, allocs_per_op.
func parseGoBench(out []byte) []Row {
	var names []string
	samples := map[string]map[string][]float64{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		name := m[1]
		if samples[name] == nil {
			samples[name] = map[string][]float64{}
			names = append(names, name)
		}
		for i, k := range []string{"ns_per_op", "bytes_per_op", "allocs_per_op"} {
			if v, err := strconv.ParseFloat(m[2+i], 64); err == nil {
				samples[name][k] = append(samples[name][k], v)
			}
		}
	}
	rows := make([]Row, 0, len(names))
	for _, n := range names {
		row := Row{Client: n, Format: corpus.OpenAI, Values: map[string]float64{}, Runs: len(samples[n]["ns_per_op"])}
		for k, s := range samples[n] {
			row.Values[k] = scenario.Median(s)
		}
		rows = append(rows, row)
	}
	return rows
}

// goBenchRow is the row of benchmark name in scn, if measured.
func (r *runner) goBenchRow(scn, name string) (Row, bool) {
	i := slices.IndexFunc(r.rows, func(row Row) bool { return row.Scenario == scn && row.Client == name && row.Err == "" })
	if i < 0 {
		return Row{}, false
	}
	return r.rows[i], true
}

// goBenchErrors lists the runs of scn that failed.
func (r *runner) goBenchErrors(b *strings.Builder, scn string) {
	for _, row := range r.rows {
		if row.Scenario == scn && row.Err != "" {
			fmt.Fprintf(b, "- `%s` (%s) could not run: %s\n", row.Client, row.Group, oneLine(row.Err))
		}
	}
}

// routeStrategies are BenchmarkRoute's sub-benchmarks in report order,
// with what each one is.
var routeStrategies = []struct{ name, what string }{
	{"list", "a plain alias (`WithAlias`): today's ordered fallback list"},
	{"fallback", "`fallback`: a routed alias in list order"},
	{"weighted", "`weighted`: targets drawn in proportion to weights 3, 2, 1"},
	{"least_busy", "`least_busy`: the fewest calls in flight for the credential's room"},
	{"fastest", "`fastest`: power of two choices over the peak-EWMA estimates"},
	{"cheapest", "`cheapest`: the lowest expected cost from `prices:` for the request's size"},
	{"cache_affinity/keyed", "`cache_affinity`, a 5,000-byte system prompt: the prefix keyed and the targets ordered by rendezvous hashing"},
	{"cache_affinity/short", "`cache_affinity`, a short prompt: no prefix long enough to key, so ordered by its `otherwise` (`least_busy`)"},
}

// sectionRoute is issue 34's figure: the cost of choosing a target per
// call for each strategy, beside today's fallback list.
func (r *runner) sectionRoute(b *strings.Builder) {
	if len(r.groups("route")) == 0 {
		return
	}
	b.WriteString("## 12. Choosing a target per call, per routing strategy\n\nWhat a routed alias (`runtime.WithRoutedAlias`, chorus.yaml `aliases:` with a `strategy:`) adds to each call before it is placed: resolving the alias and ordering its three targets, as `Chat` and `Stream` do, with no call made. Measured by the root module's `BenchmarkRoute` (runtime/routing_bench_test.go), run by benchrun as `go test -run '^$' -bench '^BenchmarkRoute$' -benchmem -count 5 ./runtime`; the median of the 5 runs. The targets' providers are idle, `fastest` has an estimate for each target, `cheapest` a price for each.\n\n")
	b.WriteString("| strategy | ns/call | allocs/call | B/call | against the fallback list |\n|---|---:|---:|---:|---:|\n")
	list, hasList := r.goBenchRow("route", "Route/list")
	for _, s := range routeStrategies {
		row, ok := r.goBenchRow("route", "Route/"+s.name)
		if !ok {
			fmt.Fprintf(b, "| %s | not measured | — | — | — |\n", s.what)
			continue
		}
		against := "—"
		if hasList && list.Values["ns_per_op"] > 0 && s.name != "list" {
			against = fmt.Sprintf("%s (+%.0f ns)", ratio(row.Values["ns_per_op"]/list.Values["ns_per_op"]), row.Values["ns_per_op"]-list.Values["ns_per_op"])
		}
		fmt.Fprintf(b, "| %s | %.0f | %.0f | %.0f | %s |\n", s.what, row.Values["ns_per_op"], row.Values["allocs_per_op"], row.Values["bytes_per_op"], against)
	}
	r.goBenchErrors(b, "route")
	b.WriteString("\n")
}

// cacheFigures are the cache scenario's benchmarks in report order.
var cacheFigures = []struct{ name, what string }{
	{"CacheHitMemory", "a `Chat` answered from the in-memory cache (`runtime`)"},
	{"CacheHitSQLite", "a `Chat` answered from a SQLite cache file (`runtime`)"},
	{"CacheMissNone", "a `Chat` answered by an in-memory provider, no cache: the misses' baseline (`runtime`)"},
	{"CacheMissMemory", "the same `Chat`, a miss with the in-memory cache: key, lookup, provider, write (`runtime`)"},
	{"CacheMissSQLite", "the same `Chat`, a miss with a SQLite cache file (`runtime`)"},
	{"Key", "the canonical key of a typical request: a system prompt, a question, a tool (`cache`)"},
	{"GetMemory", "a stored answer read from the memory store (`cache`)"},
	{"GetSQLite", "a stored answer read from SQLite (`cache`)"},
}

// sectionCache is issue 33's figures: what a hit costs, in memory and in
// SQLite, and what the cache adds to a miss.
func (r *runner) sectionCache(b *strings.Builder) {
	if len(r.groups("cache")) == 0 {
		return
	}
	b.WriteString("## 13. Response cache: a hit, and what the cache adds to a miss\n\nThe runtime over an in-memory provider (an `http.RoundTripper` returning the canned answer of scenario 9: the transport excluded), with `runtime.WithCache` over the memory store or a SQLite file (`cache/sqlitecache`), calls one after another. A hit asks the same question again; a miss asks a new one each call (mode write_only past the 4,096 questions, so that every call misses and writes). Measured by the root module's benchmarks, run by benchrun as `go test -run '^$' -bench '^Benchmark(CacheHitMemory|CacheHitSQLite|CacheMissNone|CacheMissMemory|CacheMissSQLite)$' -benchmem -count 5 ./runtime` (runtime/cache_bench_test.go) and `go test -run '^$' -bench '^Benchmark(Key|GetMemory|GetSQLite)$' -benchmem -count 5 ./cache` (cache/bench_test.go); the median of the 5 runs.\n\n")
	b.WriteString("| benchmark | what | µs/call | allocs/call | B/call |\n|---|---|---:|---:|---:|\n")
	for _, f := range cacheFigures {
		row, ok := r.goBenchRow("cache", f.name)
		if !ok {
			fmt.Fprintf(b, "| `Benchmark%s` | %s | not measured | — | — |\n", f.name, f.what)
			continue
		}
		fmt.Fprintf(b, "| `Benchmark%s` | %s | %.2f | %.0f | %.0f |\n", f.name, f.what, row.Values["ns_per_op"]/1000, row.Values["allocs_per_op"], row.Values["bytes_per_op"])
	}
	r.goBenchErrors(b, "cache")
	if base, ok := r.goBenchRow("cache", "CacheMissNone"); ok {
		var parts []string
		for _, s := range []struct{ name, store string }{{"CacheHitMemory", "a hit from memory"}, {"CacheHitSQLite", "a hit from SQLite"}} {
			if row, ok := r.goBenchRow("cache", s.name); ok {
				parts = append(parts, fmt.Sprintf("%s takes %.2f µs, %s the provider's answer without a cache", s.store, row.Values["ns_per_op"]/1000, ratio(row.Values["ns_per_op"]/base.Values["ns_per_op"])))
			}
		}
		for _, s := range []struct{ name, store string }{{"CacheMissMemory", "the memory store"}, {"CacheMissSQLite", "SQLite"}} {
			if row, ok := r.goBenchRow("cache", s.name); ok {
				parts = append(parts, fmt.Sprintf("a miss with %s adds %.2f µs and %.0f allocations to the call", s.store, (row.Values["ns_per_op"]-base.Values["ns_per_op"])/1000, row.Values["allocs_per_op"]-base.Values["allocs_per_op"]))
			}
		}
		if len(parts) > 0 {
			fmt.Fprintf(b, "\nAgainst the uncached call (%.2f µs): %s. A real provider answers in hundreds of milliseconds: what a miss adds is noise beside it, and a hit spends none of it.\n", base.Values["ns_per_op"]/1000, strings.Join(parts, "; "))
		}
	}
	b.WriteString("\n")
}

// cacheTargets is issue 33's line of the targets: a Go benchmark of a hit
// (memory and SQLite) and of what the cache adds to a miss, reported.
func (r *runner) cacheTargets(b *strings.Builder) {
	hm, ok1 := r.goBenchRow("cache", "CacheHitMemory")
	hs, ok2 := r.goBenchRow("cache", "CacheHitSQLite")
	base, ok3 := r.goBenchRow("cache", "CacheMissNone")
	mm, ok4 := r.goBenchRow("cache", "CacheMissMemory")
	ms, ok5 := r.goBenchRow("cache", "CacheMissSQLite")
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		b.WriteString("| response cache: what a hit costs (memory, SQLite), and what the cache adds to a miss (scenario 13) | not measured | — |\n")
		return
	}
	us := func(row Row) float64 { return row.Values["ns_per_op"] / 1000 }
	fmt.Fprintf(b, "| response cache: what a hit costs (memory, SQLite), and what the cache adds to a miss (scenario 13) | hit %.1f µs from memory, %.1f µs from SQLite (the uncached call: %.1f µs); a miss adds %.1f µs (memory), %.1f µs (SQLite) | **reported** |\n",
		us(hm), us(hs), us(base), us(mm)-us(base), us(ms)-us(base))
}
