package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/chorusrt/chorus/bench/internal/clients"
	"github.com/chorusrt/chorus/bench/internal/corpus"
	"github.com/chorusrt/chorus/bench/internal/peergw"
	"github.com/chorusrt/chorus/bench/internal/scenario"
	"github.com/chorusrt/chorus/bench/internal/server"
	"github.com/chorusrt/chorus/bench/internal/soak"
	"github.com/chorusrt/chorus/bench/internal/sysinfo"
	"github.com/chorusrt/chorus/llmtest"
)

// params are the sizes of every scenario.
type params struct {
	MicroRuns, MacroRuns int

	DecodeDeltas int

	E2EDeltas, E2EStreams int

	ConcSizes  []int
	ConcDeltas []int // deltas per stream, by size
	ConcFlush  int

	FanStep    time.Duration
	FanStreams int

	RLRequests, RLConc, RLLimit, RLRuns int
	RLWindow                            time.Duration

	BatchRequests, BatchConc int

	TLSConcSize, TLSConcDeltas, TLSRuns int

	GWRates             []int
	GWDuration          time.Duration
	GWStreams, GWDeltas int

	PGW pgwParams

	Ranged rangedParams

	Soak soak.Config
}

func fullParams() params {
	return params{
		MicroRuns: 5, MacroRuns: 3,
		DecodeDeltas: 1000,
		E2EDeltas:    1000, E2EStreams: 10,
		ConcSizes: []int{1000, 10000}, ConcDeltas: []int{200, 50}, ConcFlush: 10,
		FanStep: 2 * time.Millisecond, FanStreams: 20,
		RLRequests: 200, RLConc: 16, RLLimit: 40, RLWindow: 500 * time.Millisecond, RLRuns: 1,
		BatchRequests: 10000, BatchConc: 256,
		TLSConcSize: 1000, TLSConcDeltas: 200, TLSRuns: 1,
		GWRates: []int{1000, 5000}, GWDuration: 2 * time.Second, GWStreams: 10, GWDeltas: 1000,
		PGW:    pgwParams{Requests: 2000, Streams: 200, Deltas: 100, Concurrency: 32, Duration: 3 * time.Second},
		Ranged: rangedParams{Streams: 200, Deltas: 200, Repeats: 3},
		Soak:   soak.Config{Duration: 45 * time.Second, Streams: 2000, FaultRate: 0.05},
	}
}

func quickParams() params {
	p := fullParams()
	p.MicroRuns, p.MacroRuns = 3, 1
	p.DecodeDeltas = 300
	p.E2EStreams = 3
	p.ConcSizes, p.ConcDeltas = []int{100, 1000}, []int{100, 50}
	p.FanStreams = 5
	p.RLRequests, p.RLLimit, p.RLWindow = 80, 20, 300*time.Millisecond
	p.BatchRequests = 2000
	p.GWDuration, p.GWStreams, p.GWDeltas = 500*time.Millisecond, 3, 300
	p.TLSConcSize, p.TLSConcDeltas = 100, 100
	p.PGW = pgwParams{Requests: 200, Streams: 20, Deltas: 50, Concurrency: 32, Duration: 500 * time.Millisecond}
	p.Ranged = rangedParams{Streams: 200, Deltas: 50, Repeats: 1}
	p.Soak = soak.Config{Duration: 10 * time.Second, Streams: 300, FaultRate: 0.05}
	return p
}

// Row is one client's medians in one scenario (and group: a format, a
// stream count).
type Row struct {
	Scenario string             `json:"scenario"`
	Group    string             `json:"group"`
	Client   string             `json:"client"`
	Format   corpus.Format      `json:"format"`
	Values   map[string]float64 `json:"values"`
	Runs     int                `json:"runs"`
	Err      string             `json:"err,omitempty"`
	Notes    []string           `json:"notes,omitempty"`
}

// Spec is the row's client and format.
func (r Row) Spec() clients.Spec { return clients.Spec{Name: r.Client, Format: r.Format} }

type runner struct {
	p       params
	srv     *server.Server
	self    string
	rows    []Row
	timing  map[string]time.Duration
	log     *os.File
	machine sysinfo.Machine
	quick   bool
	total   time.Duration
	clients []string             // labels to run; all when empty
	date    time.Time            // when the measurements ended
	flags   []string             // figures where Chorus beat its floor (report)
	loadEnd string               // load average when the measurements ended
	dates   map[string]time.Time // when each scenario was measured, where not date (merged dumps)

	portkeyDir string   // where @portkey-ai/gateway is installed (peergw)
	pgwProfile string   // where Chorus's gateway writes CPU profiles (peergw)
	pgwOnly    []string // the gateways measured (peergw; all when empty)
}

// dump is everything a report is made of, written with -json and read
// back with -from to render the report again without measuring.
type dump struct {
	Params  params                   `json:"params"`
	Quick   bool                     `json:"quick"`
	Total   time.Duration            `json:"total"`
	Timing  map[string]time.Duration `json:"timing"`
	Machine sysinfo.Machine          `json:"machine"`
	Date    time.Time                `json:"date"`
	LoadEnd string                   `json:"load_end,omitempty"`
	Rows    []Row                    `json:"rows"`
	Soak    *soak.Report             `json:"soak,omitempty"`
	// Dates are when each scenario was measured, where it differs from
	// Date (a report merged from several dumps: -from a,b).
	Dates map[string]time.Time `json:"dates,omitempty"`
}

// scenarios are the scenarios with rows in d, and "soak" when it has one.
func (d *dump) scenarios() []string {
	var out []string
	for _, row := range d.Rows {
		if !slices.Contains(out, row.Scenario) {
			out = append(out, row.Scenario)
		}
	}
	if d.Soak != nil {
		out = append(out, "soak")
	}
	return out
}

// merge renders one report from several dumps (-from a.json,b.json): each
// scenario's measurements, and the soak, come from the last dump that has
// them, so that a run of a few scenarios (-only) replaces theirs in the
// full run's dump and keeps the rest. Sizes, machine and load averages
// come from the first dump, -quick from any; Date is the latest, Dates
// when each scenario was measured.
func merge(ds []dump) dump {
	out := ds[0]
	out.Timing, out.Dates = map[string]time.Duration{}, map[string]time.Time{}
	out.Rows, out.Soak = nil, nil
	for _, d := range ds {
		scns := d.scenarios()
		out.Rows = slices.DeleteFunc(out.Rows, func(row Row) bool { return slices.Contains(scns, row.Scenario) })
		out.Rows = append(out.Rows, d.Rows...)
		if d.Soak != nil {
			out.Soak = d.Soak
		}
		for _, scn := range scns {
			out.Dates[scn] = d.Date
			if t, ok := d.Dates[scn]; ok {
				out.Dates[scn] = t
			}
		}
		for step, t := range d.Timing { // by step ("tls"), not by row scenario ("tls-e2e")
			out.Timing[step] = t
		}
		out.Quick = out.Quick || d.Quick
		if d.Date.After(out.Date) {
			out.Date = d.Date // the load averages stay the first run's
		}
	}
	out.Total = 0
	for _, t := range out.Timing {
		out.Total += t
	}
	return out
}

func main() {
	if peergw.MaybeServe() { // a server process of the peer gateway scenario
		return
	}
	child := flag.String("child", "", "internal: run one job (JSON) and print its result")
	soakChild := flag.String("soak-child", "", "internal: run the soak (JSON config) and print its report")
	out := flag.String("out", "RESULTS.md", "report to write")
	pngOut := flag.String("png", "ratios.png", "chart to write (next to -out when relative)")
	jsonOut := flag.String("json", "", "also write the raw rows as JSON here")
	quick := flag.Bool("quick", false, "small sizes for a smoke run")
	only := flag.String("only", "", "comma-separated scenarios to run (default all)")
	soakDur := flag.Duration("soak", -1, "soak duration (0 skips the soak; default 45s, 10s with -quick)")
	from := flag.String("from", "", "render the report from a -json dump instead of measuring; a,b merges dumps, each scenario from the last that has it")
	runs := flag.Int("runs", 0, "runs per macro figure (default 3, 1 with -quick)")
	only2 := flag.String("clients", "", "comma-separated client labels to run, e.g. 'chorus,genai (gemini)' (default all)")
	portkey := flag.String("portkey", "../.cache/npm-portkey", "where @portkey-ai/gateway is installed (make bench-gateways installs it)")
	pgwProfile := flag.String("peergw-profile", "", "a folder: Chorus's gateway and the proxy write a CPU profile of each peer gateway case there")
	pgwOnly := flag.String("peergw-gateways", "", "comma-separated gateways of the peer gateway scenario to measure besides direct (proxy,chorus,portkey; default all)")
	spliceOut := flag.Bool("splice", false, "replace only the sections measured (the peer gateway section) in the existing -out report")
	flag.Parse()

	if *child != "" {
		runChild(*child)
		return
	}
	if *soakChild != "" {
		runSoakChild(*soakChild)
		return
	}
	if soak.MaybeServe() {
		return
	}
	if *from != "" {
		var ds []dump
		for _, f := range strings.Split(*from, ",") {
			b, err := os.ReadFile(f)
			if err != nil {
				fatal(err)
			}
			var d dump
			if err := json.Unmarshal(b, &d); err != nil {
				fatal(fmt.Errorf("%s: %w", f, err))
			}
			ds = append(ds, d)
		}
		d := ds[0]
		if len(ds) > 1 {
			d = merge(ds)
		}
		if *jsonOut != "" {
			b, _ := json.MarshalIndent(d, "", "  ")
			if err := os.WriteFile(*jsonOut, b, 0o644); err != nil {
				fatal(err)
			}
		}
		r := &runner{p: d.Params, rows: d.Rows, timing: d.Timing, machine: d.Machine, quick: d.Quick, total: d.Total, date: d.Date, loadEnd: d.LoadEnd, dates: d.Dates, log: os.Stderr}
		r.write(*out, *pngOut, d.Soak)
		return
	}
	p := fullParams()
	if *quick {
		p = quickParams()
	}
	if *runs > 0 {
		p.MacroRuns = *runs
	}
	if *soakDur >= 0 {
		p.Soak.Duration = *soakDur
	}
	self, err := os.Executable()
	if err != nil {
		fatal(err)
	}
	srv, err := server.Start()
	if err != nil {
		fatal(err)
	}
	defer srv.Close()
	r := &runner{p: p, srv: srv, self: self, timing: map[string]time.Duration{}, log: os.Stderr, machine: sysinfo.ReadMachine(), quick: *quick, portkeyDir: *portkey, pgwProfile: *pgwProfile}
	if *pgwOnly != "" {
		r.pgwOnly = strings.Split(*pgwOnly, ",")
	}
	if *only2 != "" {
		r.clients = strings.Split(*only2, ",")
	}
	want := func(s string) bool {
		return *only == "" || slices.Contains(strings.Split(*only, ","), s)
	}
	start := time.Now()
	steps := []struct {
		name string
		fn   func()
	}{
		{"decode", r.decode}, {"e2e", r.endToEnd}, {"concurrent", r.concurrent},
		{"fanout", r.fanout}, {"ratelimit", r.rateLimit}, {"batch", r.batch},
		{"tls", r.tls}, {"gateway", r.gateway}, {"gatewaylog", r.gatewayLog}, {"gatewayfleet", r.gatewayFleet}, {"inproc", r.inproc}, {"frameworks", r.frameworks},
		{"route", r.route}, {"cache", r.cache}, // gobench.go
		{"peergw", r.peerGateways}, {"ranged", r.rangedStreams},
	}
	for _, s := range steps {
		if want(s.name) {
			t0 := time.Now()
			s.fn()
			r.timing[s.name] = time.Since(t0)
			r.logf("== %s done in %s", s.name, r.timing[s.name].Round(time.Second))
		}
	}
	var soakRep *soak.Report
	if p.Soak.Duration > 0 && (*only == "" || want("soak")) {
		t0 := time.Now()
		r.logf("== soak: %s, %d streams in flight, fault rate %.2f", p.Soak.Duration, p.Soak.Streams, p.Soak.FaultRate)
		soakRep = r.soak()
		r.timing["soak"] = time.Since(t0)
	}
	r.total = time.Since(start)
	r.date = time.Now()
	r.loadEnd = sysinfo.ReadMachine().Load
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(dump{Params: r.p, Quick: r.quick, Total: r.total, Timing: r.timing, Machine: r.machine, Date: r.date, LoadEnd: r.loadEnd, Rows: r.rows, Soak: soakRep}, "", "  ")
		if err := os.WriteFile(*jsonOut, b, 0o644); err != nil {
			fatal(err)
		}
	}
	if *spliceOut {
		for _, sec := range []struct {
			name, begin, end string
			render           func(*strings.Builder)
		}{{"peergw", pgwBegin, pgwEnd, r.sectionPeerGW}, {"ranged", rangedBegin, rangedEnd, r.sectionRanged}} {
			if !want(sec.name) {
				continue
			}
			var b strings.Builder
			sec.render(&b)
			if err := splice(*out, sec.begin, sec.end, b.String()); err != nil {
				fatal(err)
			}
			r.logf("replaced the %s section of %s", sec.name, *out)
		}
		return
	}
	r.write(*out, *pngOut, soakRep)
}

// write renders RESULTS.md (with the soak section) and the chart.
func (r *runner) write(out, pngOut string, soakRep *soak.Report) {
	pngPath := pngOut
	if !filepath.IsAbs(pngPath) {
		pngPath = filepath.Join(filepath.Dir(out), pngPath)
	}
	md := r.report(filepath.Base(pngPath))
	if soakRep != nil {
		md += soakRep.Markdown()
	}
	if err := os.WriteFile(out, []byte(md), 0o644); err != nil {
		fatal(err)
	}
	if err := r.chart(pngPath); err != nil {
		fatal(err)
	}
	r.logf("wrote %s and %s (run took %s)", out, pngPath, r.total.Round(time.Second))
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "benchrun:", err)
	os.Exit(1)
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(r.log, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func runChild(spec string) {
	var job scenario.Job
	if err := json.Unmarshal([]byte(spec), &job); err != nil {
		fatal(err)
	}
	res := scenario.Run(job)
	os.Stdout.Write(append(res.Encode(), '\n'))
}

func runSoakChild(spec string) {
	var cfg soak.Config
	if err := json.Unmarshal([]byte(spec), &cfg); err != nil {
		fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		fatal(err)
	}
	rep, err := soak.Run(context.Background(), cfg, self)
	if rep == nil {
		rep = &soak.Report{Config: cfg}
	}
	if err != nil {
		rep.Err = err.Error()
	}
	b, _ := json.Marshal(rep)
	os.Stdout.Write(append(b, '\n'))
}

// soak runs the soak in a fresh child process (its own heap and
// goroutines, nothing of the benchmarks' server), which starts the soak's
// server in another.
func (r *runner) soak() *soak.Report {
	b, _ := json.Marshal(r.p.Soak)
	ctx, cancel := context.WithTimeout(context.Background(), r.p.Soak.Duration+3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.self, "-soak-child", string(b))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var rep soak.Report
	if jerr := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &rep); jerr != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 300 {
			msg = msg[len(msg)-300:]
		}
		r.logf("soak failed: %v %v: %s", err, jerr, msg)
		return &soak.Report{Config: r.p.Soak, Err: fmt.Sprintf("soak process: %v: %s", err, msg)}
	}
	r.logf("soak: %d calls, %d completed; returned to start level: %v", rep.Started, rep.Completed, rep.Returned)
	return &rep
}

// spawn runs job in a fresh child process.
func (r *runner) spawn(job scenario.Job) scenario.Result {
	if job.Timeout == 0 {
		job.Timeout = 3 * time.Minute
	}
	b, _ := json.Marshal(job)
	ctx, cancel := context.WithTimeout(context.Background(), job.Timeout+30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.self, "-child", string(b))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var res scenario.Result
	lines := bytes.Split(bytes.TrimSpace(stdout.Bytes()), []byte("\n"))
	if jerr := json.Unmarshal(lines[len(lines)-1], &res); jerr != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 300 {
			msg = msg[len(msg)-300:]
		}
		if err == nil {
			err = jerr
		}
		res.Err = fmt.Sprintf("child process: %v: %s", err, msg)
	}
	return res
}

// measure runs job runs times (a fresh child each time) and keeps the
// median of every value; a run that fails makes the row fail.
func (r *runner) measure(scn, group string, job scenario.Job, runs int, before func(*scenario.Job), after func(*scenario.Result)) Row {
	row := Row{Scenario: scn, Group: group, Client: job.Client, Format: job.Format, Values: map[string]float64{}}
	if len(r.clients) > 0 && !slices.Contains(r.clients, row.Spec().Label()) {
		return row
	}
	samples := map[string][]float64{}
	for i := range runs {
		if before != nil {
			before(&job)
		}
		t0 := time.Now()
		res := r.spawn(job)
		if after != nil {
			after(&res)
		}
		r.logf("[%s %s] %s run %d/%d: %s %s", scn, group, clients.Spec{Name: job.Client, Format: job.Format}, i+1, runs, time.Since(t0).Round(10*time.Millisecond), short(res))
		if res.Err != "" {
			row.Err = res.Err
			row.Notes = append(row.Notes, res.Notes...)
			break
		}
		row.Runs++
		for k, v := range res.Values {
			samples[k] = append(samples[k], v)
		}
		if i == 0 {
			row.Notes = append(row.Notes, res.Notes...) // the first run's notes speak for all
		}
	}
	for k, s := range samples {
		row.Values[k] = scenario.Median(s)
	}
	r.rows = append(r.rows, row)
	return row
}

func short(res scenario.Result) string {
	if res.Err != "" {
		return "ERROR " + res.Err
	}
	keys := make([]string, 0, len(res.Values))
	for k := range res.Values {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		if k == "max_rss" {
			continue
		}
		fmt.Fprintf(&b, "%s=%.4g ", k, res.Values[k])
	}
	return b.String()
}

// streamClients are the clients of the per-format scenarios, in report
// order.
func streamClients(f corpus.Format) []string {
	var out []string
	for _, n := range []string{"floor-bare", "floor-extract", "chorus-cb", "chorus", "chorus-runtime"} {
		out = append(out, n)
	}
	for _, n := range clients.Peers {
		if clients.Supports(n, f) {
			out = append(out, n)
		}
	}
	return out
}

func (r *runner) decode() {
	for _, f := range corpus.Formats {
		for _, c := range streamClients(f) {
			r.measure("decode", string(f), scenario.Job{Scenario: "decode", Client: c, Format: f, Deltas: r.p.DecodeDeltas, Repeats: r.p.MicroRuns}, 1, nil, nil)
		}
	}
}

func (r *runner) endToEnd() {
	r.srv.SetMode(server.Mode{Deltas: r.p.E2EDeltas, FlushEvery: 1})
	for _, f := range corpus.Formats {
		for _, c := range streamClients(f) {
			if c == "chorus-cb" {
				continue
			}
			r.measure("e2e", string(f), scenario.Job{Scenario: "e2e", Client: c, Format: f, BaseURL: r.srv.URL, Deltas: r.p.E2EDeltas, Streams: r.p.E2EStreams, Repeats: r.p.MacroRuns}, 1, nil, nil)
		}
	}
}

// crossClients are the clients of the cross-format scenarios: every
// OpenAI-format client, then each other format's peer next to Chorus on
// the same format.
func crossClients(withFloors bool) []clients.Spec {
	var out []clients.Spec
	if withFloors {
		out = append(out, clients.Spec{Name: "floor-bare", Format: corpus.OpenAI}, clients.Spec{Name: "floor-extract", Format: corpus.OpenAI})
	}
	out = append(out, clients.Spec{Name: "chorus", Format: corpus.OpenAI}, clients.Spec{Name: "chorus-runtime", Format: corpus.OpenAI})
	for _, n := range []string{"openai-go", "go-openai", "langchaingo", "eino"} {
		out = append(out, clients.Spec{Name: n, Format: corpus.OpenAI})
	}
	out = append(out,
		clients.Spec{Name: "chorus", Format: corpus.Anthropic}, clients.Spec{Name: "anthropic-sdk", Format: corpus.Anthropic},
		clients.Spec{Name: "chorus", Format: corpus.Gemini}, clients.Spec{Name: "genai", Format: corpus.Gemini})
	return out
}

func (r *runner) concurrent() {
	for i, n := range r.p.ConcSizes {
		group := fmt.Sprintf("%d streams", n)
		d := r.p.ConcDeltas[i]
		for _, s := range crossClients(true) {
			job := scenario.Job{Scenario: "concurrent", Client: s.Name, Format: s.Format, BaseURL: r.srv.URL, Deltas: d, Streams: n, Timeout: 4 * time.Minute}
			r.measure("concurrent", group, job, r.p.MacroRuns, func(*scenario.Job) {
				r.srv.SetMode(server.Mode{Deltas: d, FlushEvery: r.p.ConcFlush})
			}, nil)
		}
	}
}

func (r *runner) fanout() {
	r.srv.SetMode(server.Mode{Deltas: 20, FlushEvery: 1, FanStep: r.p.FanStep})
	var specs []scenario.Job
	specs = append(specs,
		scenario.Job{Client: "chorus-runtime", Format: corpus.OpenAI},
		scenario.Job{Client: "chorus-runtime", Format: corpus.OpenAI, Mixed: true},
		scenario.Job{Client: "floor-extract", Format: corpus.OpenAI},
		scenario.Job{Client: "chorus", Format: corpus.OpenAI},
	)
	for _, s := range crossClients(false)[2:] {
		if clients.Kind(s.Name) == "peer" {
			specs = append(specs, scenario.Job{Client: s.Name, Format: s.Format})
		}
	}
	for _, j := range specs {
		j.Scenario, j.BaseURL, j.Streams, j.Repeats = "fanout", r.srv.URL, r.p.FanStreams, r.p.MacroRuns
		group := "5 models"
		row := r.measure("fanout", group, j, 1, nil, nil)
		if j.Mixed {
			r.rows[len(r.rows)-1].Group = "5 models, 3 formats"
			_ = row
		}
	}
}

// rlModel is one limiter model of scenario 5: the limit llmtest's server
// enforces, the format whose headers and 429s it speaks, and the keys the
// clients hold.
type rlModel struct {
	Name   string
	Format corpus.Format
	Limit  llmtest.RateLimit
	Keys   []string
	// Headers says whether the format reports its limits (every model
	// but Gemini's).
	Headers bool
}

// rlModels are scenario 5's limiter models, at the run's sizes.
func (r *runner) rlModels() []rlModel {
	rl := func(m llmtest.LimiterModel) llmtest.RateLimit {
		return llmtest.RateLimit{Requests: r.p.RLLimit, Window: r.p.RLWindow, Model: m}
	}
	org := rl(llmtest.TokenBucket)
	org.Orgs = map[string]string{"k-org-1": "org-bench", "k-org-2": "org-bench", "k-org-3": "org-bench"}
	return []rlModel{
		{Name: "fixed window (OpenAI headers)", Format: corpus.OpenAI, Limit: rl(llmtest.FixedWindow), Headers: true},
		{Name: "token bucket (OpenAI headers)", Format: corpus.OpenAI, Limit: rl(llmtest.TokenBucket), Headers: true},
		{Name: "sliding window (OpenAI headers)", Format: corpus.OpenAI, Limit: rl(llmtest.SlidingWindow), Headers: true},
		{Name: "Anthropic (token bucket, anthropic-ratelimit-*)", Format: corpus.Anthropic, Limit: rl(llmtest.TokenBucket), Headers: true},
		{Name: "Gemini per-minute quota (fixed window, no headers)", Format: corpus.Gemini, Limit: rl(llmtest.FixedWindow)},
		{Name: "3 keys of one organisation (OpenAI token bucket)", Format: corpus.OpenAI, Limit: org, Keys: []string{"k-org-1", "k-org-2", "k-org-3"}, Headers: true},
	}
}

// rlMinimum is the least wall time the limit allows for n requests: a
// fixed or sliding window admits the limit per window, so the last
// request can start after ⌈n ÷ limit⌉ − 1 windows; a bucket starts full
// and then refills the limit per window, so (n − limit) ÷ limit windows.
// Keys of one organisation share one budget.
func rlMinimum(m llmtest.LimiterModel, limit, n int, w time.Duration) time.Duration {
	if m == llmtest.TokenBucket {
		return time.Duration(float64(max(n-limit, 0)) / float64(limit) * float64(w))
	}
	return time.Duration(math.Ceil(float64(n)/float64(limit))-1) * w
}

// rlClients are the clients of a limiter model's format: Chorus through
// the runtime and the peers as their users write them.
func rlClients(f corpus.Format) []string {
	switch f {
	case corpus.Anthropic:
		return []string{"chorus-runtime", "anthropic-sdk"}
	case corpus.Gemini:
		return []string{"chorus-runtime", "genai"}
	}
	return []string{"chorus-runtime", "openai-go", "go-openai"}
}

// rateLimit is scenario 5: for each limiter model, a fresh llmtest server
// enforcing it per run (its limiter is the root module's), every client of
// the model's format sending the same requests; 429s are counted at the
// server.
func (r *runner) rateLimit() {
	for _, m := range r.rlModels() {
		for _, c := range rlClients(m.Format) {
			var srv *llmtest.Server
			job := scenario.Job{Scenario: "ratelimit", Client: c, Format: m.Format, Requests: r.p.RLRequests, Concurrency: r.p.RLConc, Keys: m.Keys, Timeout: 2 * time.Minute}
			r.measure("ratelimit", m.Name, job, r.p.RLRuns, func(j *scenario.Job) {
				srv = llmtest.NewServer(llmtest.WithRateLimit(m.Limit))
				j.BaseURL = srv.URL
			}, func(res *scenario.Result) {
				defer srv.Close()
				if res.Values == nil {
					res.Values = map[string]float64{}
				}
				t0 := time.Unix(0, int64(res.Values["t0_unix_ns"]))
				limited, after := 0, 0
				for _, at := range srv.RateLimitedAt() {
					limited++
					if at.Sub(t0) > m.Limit.Window {
						after++
					}
				}
				min := rlMinimum(m.Limit.Model, m.Limit.Requests, r.p.RLRequests, m.Limit.Window)
				res.Values["limited"] = float64(limited)
				res.Values["limited_after_first"] = float64(after)
				res.Values["requests_at_server"] = float64(srv.Count())
				res.Values["min_s"] = min.Seconds()
				if min > 0 {
					res.Values["ratio"] = res.Values["wall_s"] / min.Seconds()
				}
			})
		}
	}
}

func (r *runner) batch() {
	r.srv.SetMode(server.Mode{})
	for _, s := range crossClients(true) {
		if s.Name == "floor-bare" {
			continue
		}
		job := scenario.Job{Scenario: "batch", Client: s.Name, Format: s.Format, BaseURL: r.srv.URL, Requests: r.p.BatchRequests, Concurrency: r.p.BatchConc}
		r.measure("batch", fmt.Sprintf("%d requests at %d", r.p.BatchRequests, r.p.BatchConc), job, r.p.MacroRuns, nil, nil)
	}
}

// tlsProtos are the TLS variants of scenarios 2 and 3.
var tlsProtos = []struct {
	name  string
	http2 bool
}{{"HTTP/1.1", false}, {"HTTP/2", true}}

// tls runs scenarios 2 and 3 again over loopback TLS, HTTP/1.1 and
// HTTP/2, every client trusting the test certificate through its
// http.Client: the end-to-end stream for every client of every format,
// and the concurrent streams at the smaller size.
func (r *runner) tls() {
	for _, p := range tlsProtos {
		ts, err := r.srv.StartTLS(p.http2)
		if err != nil {
			r.logf("tls %s: %v", p.name, err)
			continue
		}
		r.srv.SetMode(server.Mode{Deltas: r.p.E2EDeltas, FlushEvery: 1})
		for _, f := range corpus.Formats {
			for _, c := range streamClients(f) {
				if c == "chorus-cb" {
					continue
				}
				job := scenario.Job{Scenario: "tls-e2e", Client: c, Format: f, BaseURL: ts.URL, CAPEM: ts.CAPEM, HTTP2: p.http2, Deltas: r.p.E2EDeltas, Streams: r.p.E2EStreams, Repeats: r.p.MacroRuns}
				r.measure("tls-e2e", p.name+", "+string(f), job, 1, nil, nil)
			}
		}
		n, d := r.p.TLSConcSize, r.p.TLSConcDeltas
		for _, s := range crossClients(true) {
			job := scenario.Job{Scenario: "tls-concurrent", Client: s.Name, Format: s.Format, BaseURL: ts.URL, CAPEM: ts.CAPEM, HTTP2: p.http2, Deltas: d, Streams: n, Timeout: 4 * time.Minute}
			r.measure("tls-concurrent", fmt.Sprintf("%s, %d streams", p.name, n), job, r.p.TLSRuns, func(*scenario.Job) {
				r.srv.SetMode(server.Mode{Deltas: d, FlushEvery: r.p.ConcFlush})
			}, nil)
		}
		ts.Close()
	}
}

// inprocSpecs are the clients of the in-process request cost.
var inprocSpecs = []clients.Spec{
	{Name: "floor-extract", Format: corpus.OpenAI}, {Name: "chorus", Format: corpus.OpenAI}, {Name: "chorus-runtime", Format: corpus.OpenAI},
	{Name: "openai-go", Format: corpus.OpenAI}, {Name: "go-openai", Format: corpus.OpenAI},
	{Name: "chorus-runtime", Format: corpus.Anthropic}, {Name: "chorus-runtime", Format: corpus.Gemini},
}

// inproc is the in-process cost of one small buffered request (issue
// 20): transport excluded, one child per client.
func (r *runner) inproc() {
	for _, s := range inprocSpecs {
		job := scenario.Job{Scenario: "inproc", Client: s.Name, Format: s.Format, Repeats: r.p.MicroRuns}
		r.measure("inproc", "one small buffered request", job, 1, nil, nil)
	}
}

// frameworkClients are the clients of the frameworks scenario: the floor
// and plain Chorus for reference, then each framework on its own model
// plugin and on Chorus.
func frameworkClients() []string {
	out := []string{"floor-extract", "chorus"}
	for _, p := range clients.Frameworks {
		out = append(out, p.Own, p.Chorus)
	}
	return out
}

// frameworks is issue 35's comparison: eino and LangChainGo each on its
// own OpenAI model plugin and on Chorus (integrations/<framework> over a
// providers.Client), the same framework calls against the same bytes:
// decode cost per streamed delta from memory (scenario 1's method) and
// one stream over loopback HTTP (scenario 2's).
func (r *runner) frameworks() {
	for _, c := range frameworkClients() {
		r.measure("frameworks", "decode", scenario.Job{Scenario: "decode", Client: c, Format: corpus.OpenAI, Deltas: r.p.DecodeDeltas, Repeats: r.p.MicroRuns}, 1, nil, nil)
	}
	r.srv.SetMode(server.Mode{Deltas: r.p.E2EDeltas, FlushEvery: 1})
	for _, c := range frameworkClients() {
		r.measure("frameworks", "e2e", scenario.Job{Scenario: "e2e", Client: c, Format: corpus.OpenAI, BaseURL: r.srv.URL, Deltas: r.p.E2EDeltas, Streams: r.p.E2EStreams, Repeats: r.p.MacroRuns}, 1, nil, nil)
	}
}

// gateway is the gateway scenario (issue 18): in a child process, the
// runtime over the bench server called in-process and through
// gateway.New on loopback HTTP, under an open-loop load, then streams.
func (r *runner) gateway() {
	job := scenario.Job{Scenario: "gateway", Client: "gateway", Format: corpus.OpenAI, BaseURL: r.srv.URL, Rates: r.p.GWRates, Duration: r.p.GWDuration, Streams: r.p.GWStreams, Deltas: r.p.GWDeltas, Repeats: 1, Timeout: 3 * time.Minute}
	r.measure("gateway", "openai", job, r.p.MacroRuns, func(*scenario.Job) {
		r.srv.SetMode(server.Mode{Deltas: r.p.GWDeltas, FlushEvery: r.p.ConcFlush})
	}, nil)
}

// gatewayLog is the request log's scenario (issue 32): in a child
// process, two gateways over one runtime, the request log off and on
// (SQLite), under the gateway scenario's open-loop load, alternating.
func (r *runner) gatewayLog() {
	job := scenario.Job{Scenario: "gatewaylog", Client: "gateway", Format: corpus.OpenAI, BaseURL: r.srv.URL, Rates: r.p.GWRates, Duration: r.p.GWDuration, Repeats: r.p.MacroRuns, Timeout: 5 * time.Minute}
	r.measure("gatewaylog", "openai", job, r.p.MacroRuns, func(*scenario.Job) {
		r.srv.SetMode(server.Mode{Deltas: r.p.GWDeltas, FlushEvery: r.p.ConcFlush})
	}, nil)
}

// errNoRow marks a missing measurement.
var errNoRow = errors.New("not measured")

func (r *runner) find(scn, group, client string, f corpus.Format) (Row, error) {
	for _, row := range r.rows {
		if row.Scenario == scn && row.Group == group && row.Client == client && row.Format == f {
			return row, nil
		}
	}
	return Row{}, errNoRow
}
