package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chorusrt/chorus/bench/internal/clients"
	"github.com/chorusrt/chorus/bench/internal/corpus"
	"github.com/chorusrt/chorus/bench/internal/sysinfo"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/pipeline"
	chorusrt "github.com/chorusrt/chorus/runtime"
)

// Job is one measurement, sent to a child process as JSON.
type Job struct {
	Scenario    string        `json:"scenario"` // decode, e2e, concurrent, fanout, ratelimit, batch
	Client      string        `json:"client"`
	Format      corpus.Format `json:"format"`
	BaseURL     string        `json:"base_url"`
	Deltas      int           `json:"deltas"`
	Streams     int           `json:"streams"`
	Repeats     int           `json:"repeats"`
	Requests    int           `json:"requests"`
	Concurrency int           `json:"concurrency"`
	MaxTokens   int           `json:"max_tokens"`
	Mixed       bool          `json:"mixed"`          // fanout: Chorus over three formats
	Keys        []string      `json:"keys,omitempty"` // API keys (default one)
	// Rates are the open-loop request rates (per second) of the gateway
	// scenario, each held for Duration.
	Rates    []int         `json:"rates,omitempty"`
	Duration time.Duration `json:"duration,omitempty"`
	// CAPEM, when set, is the certificate of BaseURL's TLS server: the
	// client trusts it; HTTP2 lets it negotiate h2.
	CAPEM   []byte        `json:"ca_pem,omitempty"`
	HTTP2   bool          `json:"http2,omitempty"`
	Timeout time.Duration `json:"timeout"` // whole job
}

// Result is what a child reports: named values (medians over the
// repeats where a job repeats), the raw samples, and an error if the job
// could not run.
type Result struct {
	Values  map[string]float64   `json:"values"`
	Samples map[string][]float64 `json:"samples,omitempty"`
	Notes   []string             `json:"notes,omitempty"`
	Err     string               `json:"err,omitempty"`
}

func (r *Result) set(k string, v float64) {
	if r.Values == nil {
		r.Values = map[string]float64{}
	}
	r.Values[k] = v
}

func (r *Result) sample(k string, v float64) {
	if r.Samples == nil {
		r.Samples = map[string][]float64{}
	}
	r.Samples[k] = append(r.Samples[k], v)
}

// medians sets each sampled key's median as its value.
func (r *Result) medians() {
	for k, s := range r.Samples {
		r.set(k, Median(s))
	}
}

// Median is the median of xs (0 for none).
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Run runs job and returns its result; a failure is reported in Err.
func Run(job Job) (res Result) {
	if job.Timeout <= 0 {
		job.Timeout = 3 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), job.Timeout)
	defer cancel()
	var err error
	switch job.Scenario {
	case "decode":
		err = decode(ctx, job, &res)
	case "e2e", "tls-e2e":
		err = endToEnd(ctx, job, &res)
	case "concurrent", "tls-concurrent":
		err = concurrent(ctx, job, &res)
	case "fanout":
		err = fanout(ctx, job, &res)
	case "ratelimit":
		err = rateLimited(ctx, job, &res)
	case "batch":
		err = batch(ctx, job, &res)
	case "gateway":
		err = gatewayRun(ctx, job, &res)
	case "gatewaylog":
		err = gatewayLogRun(ctx, job, &res)
	case "gatewayfleet":
		err = gatewayFleetRun(ctx, job, &res)
	case "inproc":
		err = inProcess(ctx, job, &res)
	case "ranged":
		err = ranged(ctx, job, &res)
	default:
		err = fmt.Errorf("unknown scenario %q", job.Scenario)
	}
	if err != nil {
		res.Err = err.Error()
	}
	res.medians()
	res.set("max_rss", float64(sysinfo.MaxRSS()))
	return res
}

// Encode renders r as one JSON line.
func (r Result) Encode() []byte {
	b, _ := json.Marshal(r)
	return b
}

// counter checks what one stream delivered.
type counter struct {
	n, bytes int
	first    func()
}

func (c *counter) delta(text string) {
	if c.n == 0 && c.first != nil {
		c.first()
	}
	c.n++
	c.bytes += len(text)
}

func (c *counter) check(name string, want int) error {
	if clients.Exact(name) {
		if c.n != want || c.bytes != corpus.TextBytes(want) {
			return fmt.Errorf("%s delivered %d deltas / %d bytes, want %d / %d", name, c.n, c.bytes, want, corpus.TextBytes(want))
		}
		return nil
	}
	if c.n < want {
		return fmt.Errorf("%s framed %d events, want at least %d", name, c.n, want)
	}
	return nil
}

// httpClient is the job's transport: plain, or trusting the job's TLS
// server (HTTP/1.1 or HTTP/2).
func httpClient(job Job, conns int) (*http.Client, error) {
	if len(job.CAPEM) == 0 {
		return clients.NewHTTPClient(conns), nil
	}
	return clients.NewTLSHTTPClient(conns, job.CAPEM, job.HTTP2)
}

func newClient(job Job, hc *http.Client) (clients.Client, error) {
	return clients.New(job.Client, job.Format, clients.Options{BaseURL: job.BaseURL, HTTP: hc, MaxTokens: job.MaxTokens, APIKeys: job.Keys})
}

// memTransport answers every request from memory with one body.
type memTransport struct {
	st *corpus.Stream
}

func (m memTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
	h := http.Header{}
	h.Set("Content-Type", m.st.ContentType)
	return &http.Response{
		Status: "200 OK", StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: &memBody{b: m.st.Body}, ContentLength: -1, Request: req,
	}, nil
}

type memBody struct {
	b   []byte
	off int
}

func (m *memBody) Read(p []byte) (int, error) {
	if m.off >= len(m.b) {
		return 0, io.EOF
	}
	n := copy(p, m.b[m.off:])
	m.off += n
	return n, nil
}

func (m *memBody) Close() error { return nil }

// decode is scenario 1: one stream of job.Deltas deltas, read from memory
// (an http.RoundTripper returning the pre-encoded body), through the
// client's whole stack, repeated until each repeat lasts about 200 ms.
func decode(ctx context.Context, job Job, res *Result) error {
	st := corpus.StreamOf(job.Format, job.Deltas)
	hc := &http.Client{Transport: memTransport{st: st}}
	job.BaseURL = "http://memory.invalid"
	c, err := newClient(job, hc)
	if err != nil {
		return err
	}
	defer c.Close()
	one := func() error {
		var cnt counter
		if err := c.Stream(ctx, "m", cnt.delta); err != nil {
			return err
		}
		return cnt.check(job.Client, job.Deltas)
	}
	// Warm up and calibrate.
	start := time.Now()
	for range 3 {
		if err := one(); err != nil {
			return err
		}
	}
	per := time.Since(start) / 3
	k := max(int((200*time.Millisecond)/max(per, time.Microsecond)), 3)
	var before, after runtime.MemStats
	for range job.Repeats {
		runtime.GC()
		runtime.ReadMemStats(&before)
		cpu0, t0 := sysinfo.CPU(), time.Now()
		for range k {
			if err := one(); err != nil {
				return err
			}
		}
		wall, cpu := time.Since(t0), sysinfo.CPU()-cpu0
		runtime.ReadMemStats(&after)
		d := float64(k * job.Deltas)
		res.sample("ns_per_delta", float64(wall.Nanoseconds())/d)
		res.sample("cpu_ns_per_delta", float64(cpu.Nanoseconds())/d)
		res.sample("allocs_per_delta", float64(after.Mallocs-before.Mallocs)/d)
		res.sample("bytes_per_delta", float64(after.TotalAlloc-before.TotalAlloc)/d)
	}
	res.set("streams_per_repeat", float64(k))
	return nil
}

// endToEnd is scenario 2: one stream of job.Deltas deltas over loopback
// HTTP, the server flushing every delta; wall time from the call to the
// last delta, and the client process's CPU per stream.
func endToEnd(ctx context.Context, job Job, res *Result) error {
	hc, err := httpClient(job, 16)
	if err != nil {
		return err
	}
	c, err := newClient(job, hc)
	if err != nil {
		return err
	}
	defer c.Close()
	one := func() error {
		var cnt counter
		if err := c.Stream(ctx, "m", cnt.delta); err != nil {
			return err
		}
		return cnt.check(job.Client, job.Deltas)
	}
	for range 2 {
		if err := one(); err != nil {
			return err
		}
	}
	for range job.Repeats {
		var walls []float64
		cpu0 := sysinfo.CPU()
		for range job.Streams {
			t0 := time.Now()
			if err := one(); err != nil {
				return err
			}
			walls = append(walls, float64(time.Since(t0).Microseconds()))
		}
		cpu := sysinfo.CPU() - cpu0
		res.sample("us_per_stream", Median(walls))
		res.sample("cpu_us_per_stream", float64(cpu.Microseconds())/float64(job.Streams))
	}
	return nil
}

// concurrent is scenario 3: job.Streams streams at once. The server holds
// every stream after its first delta until all of them are in flight; the
// child then measures heap, goroutines and RSS, opens the gate and waits
// for the rest. Streams are opened at most 512 at a time (a stream counts
// as opened at its first delta), so that the listen backlog never drops
// a SYN.
func concurrent(ctx context.Context, job Job, res *Result) error {
	n, d := job.Streams, job.Deltas
	hc, err := httpClient(job, n+16)
	if err != nil {
		return err
	}
	c, err := newClient(job, hc)
	if err != nil {
		return err
	}
	defer c.Close()
	// Warm up: one whole stream (the runtime learns the provider's limits
	// from its first response).
	{
		var cnt counter
		if err := c.Stream(ctx, "warm", cnt.delta); err != nil {
			return err
		}
	}
	var base, gate runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&base)
	g0, rss0 := runtime.NumGoroutine(), sysinfo.RSS()

	open := make(chan struct{}, 512)
	var first, failed atomic.Int64
	var errMu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	var bad atomic.Int64
	cpu0, t0 := sysinfo.CPU(), time.Now()
	for range n {
		wg.Add(1)
		open <- struct{}{}
		go func() {
			defer wg.Done()
			var once sync.Once
			release := func() { once.Do(func() { <-open }) }
			defer release()
			cnt := counter{first: func() { first.Add(1); release() }}
			err := c.Stream(ctx, "gate", cnt.delta)
			if err == nil {
				err = cnt.check(job.Client, d)
			}
			if err != nil {
				failed.Add(1)
				if cnt.n == 0 {
					bad.Add(1)
				}
				errMu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				errMu.Unlock()
			}
		}()
	}
	// Wait until every stream is in flight (or has failed before it).
	for first.Load()+bad.Load() < int64(n) {
		if ctx.Err() != nil {
			return fmt.Errorf("only %d of %d streams in flight: %w", first.Load(), n, ctx.Err())
		}
		time.Sleep(2 * time.Millisecond)
	}
	cpu1, t1 := sysinfo.CPU(), time.Now()
	inflight := first.Load()
	runtime.GC()
	runtime.ReadMemStats(&gate)
	g1, rss1 := runtime.NumGoroutine(), sysinfo.RSS()
	cpu1b, t1b := sysinfo.CPU(), time.Now()
	if err := release(ctx, hc, job.BaseURL); err != nil {
		return err
	}
	wg.Wait()
	cpu2, t2 := sysinfo.CPU(), time.Now()
	if f := failed.Load(); f > 0 {
		return fmt.Errorf("%d of %d streams failed, first: %v", f, n, firstErr)
	}
	total := float64(n * d)
	wall := t1.Sub(t0) + t2.Sub(t1b)
	cpu := (cpu1 - cpu0) + (cpu2 - cpu1b)
	res.set("deltas_per_s", total/wall.Seconds())
	res.set("wall_s", wall.Seconds())
	res.set("cpu_s_per_1m_deltas", cpu.Seconds()/total*1e6)
	res.set("open_s", t1.Sub(t0).Seconds())
	res.set("inflight", float64(inflight))
	res.set("heap_per_stream", float64(int64(gate.HeapAlloc)-int64(base.HeapAlloc))/float64(n))
	res.set("stack_per_stream", float64(int64(gate.StackInuse)-int64(base.StackInuse))/float64(n))
	res.set("goroutines_per_stream", float64(g1-g0)/float64(n))
	res.set("rss_per_stream", float64(rss1-rss0)/float64(n))
	res.set("heap_inflight", float64(gate.HeapAlloc))
	return nil
}

func release(ctx context.Context, hc *http.Client, base string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/_ctl/release", nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// fanModels are the five models of scenario 4; the server delays model
// fan<k> by k steps, so fan1 is the fastest.
var fanModels = []string{"fan1", "fan2", "fan3", "fan4", "fan5"}

// fanout is scenario 4: time to first event of one prompt fanned out to
// five models, against the fastest single stream, alternating the two.
// Chorus uses pipeline.FanOut over the runtime; the peers, which have no
// fan-out of their own, use goroutines and a channel.
func fanout(ctx context.Context, job Job, res *Result) error {
	hc := clients.NewHTTPClient(64)
	var single func() (time.Duration, error)
	var fan func() (time.Duration, error)
	switch job.Client {
	case "chorus-runtime":
		var opts []chorusrt.Option
		models := make([]string, len(fanModels))
		formats := []corpus.Format{job.Format}
		if job.Mixed {
			formats = corpus.Formats
		}
		for _, f := range formats {
			opts = append(opts, chorusrt.WithProvider(clients.ChorusConfig(f, job.BaseURL)))
		}
		for i, m := range fanModels {
			models[i] = clients.ChorusConfig(formats[i%len(formats)], job.BaseURL).ID + "/" + m
		}
		rt, err := clients.NewRuntime(job.Format, job.BaseURL, clients.Options{HTTP: hc}, opts[1:]...)
		if err != nil {
			return err
		}
		defer func() {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = rt.Close(cctx)
		}()
		req := func(model string) *llm.ChatRequest {
			return &llm.ChatRequest{Model: model, Messages: []llm.Message{llm.UserText("Say hi")}, MaxTokens: 1024}
		}
		single = func() (time.Duration, error) {
			t0 := time.Now()
			s, err := rt.Stream(ctx, req(models[0]))
			if err != nil {
				return 0, err
			}
			var ttfe time.Duration
			for ev := range s.Events() {
				if ev.Type == llm.EventText && ttfe == 0 {
					ttfe = time.Since(t0)
				}
			}
			_, err = s.Result()
			return ttfe, err
		}
		fan = func() (time.Duration, error) {
			t0 := time.Now()
			f := pipeline.FanOut(ctx, rt, req(""), models...)
			var ttfe time.Duration
			for t := range f.Events() {
				if t.Event.Type == llm.EventText && ttfe == 0 {
					ttfe = time.Since(t0)
				}
			}
			if err := f.Wait(); err != nil {
				return 0, err
			}
			return ttfe, nil
		}
	default:
		c, err := newClient(job, hc)
		if err != nil {
			return err
		}
		defer c.Close()
		single = func() (time.Duration, error) {
			t0 := time.Now()
			var ttfe time.Duration
			cnt := counter{first: func() { ttfe = time.Since(t0) }}
			err := c.Stream(ctx, fanModels[0], cnt.delta)
			return ttfe, err
		}
		fan = func() (time.Duration, error) {
			t0 := time.Now()
			var firstNs atomic.Int64
			errs := make(chan error, len(fanModels))
			for _, m := range fanModels {
				go func() {
					cnt := counter{first: func() { firstNs.CompareAndSwap(0, int64(time.Since(t0))) }}
					errs <- c.Stream(ctx, m, cnt.delta)
				}()
			}
			var errOut error
			for range fanModels {
				if err := <-errs; err != nil && errOut == nil {
					errOut = err
				}
			}
			return time.Duration(firstNs.Load()), errOut
		}
	}
	// Warm up the pool: one fan-out opens the five connections.
	if _, err := fan(); err != nil {
		return err
	}
	for range job.Repeats {
		var singles, fans []float64
		for range job.Streams {
			s, err := single()
			if err != nil {
				return err
			}
			f, err := fan()
			if err != nil {
				return err
			}
			singles = append(singles, float64(s.Microseconds()))
			fans = append(fans, float64(f.Microseconds()))
		}
		ms, mf := Median(singles), Median(fans)
		res.sample("single_us", ms)
		res.sample("fanout_us", mf)
		res.sample("overhead_us", mf-ms)
		res.sample("ratio", mf/ms)
	}
	return nil
}

// rateLimited is scenario 5: job.Requests buffered requests from
// job.Concurrency workers against a rate-limited server. Failures are
// counted by kind; 429s are counted at the server by the parent, which
// tells those after the first window from t0_unix_ns, the instant the
// first request was about to leave (same machine, same wall clock).
func rateLimited(ctx context.Context, job Job, res *Result) error {
	hc := clients.NewHTTPClient(job.Concurrency + 16)
	c, err := newClient(job, hc)
	if err != nil {
		return err
	}
	defer c.Close()
	var ok, failed, rateLimited atomic.Int64
	var errMu sync.Mutex
	var firstErr string
	next := make(chan struct{})
	var wg sync.WaitGroup
	t0 := time.Now()
	res.set("t0_unix_ns", float64(t0.UnixNano()))
	for range job.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				_, err := c.Chat(ctx, "rl")
				if err == nil {
					ok.Add(1)
					continue
				}
				failed.Add(1)
				if isRateLimit(err) {
					rateLimited.Add(1)
				}
				errMu.Lock()
				if firstErr == "" {
					firstErr = err.Error()
				}
				errMu.Unlock()
			}
		}()
	}
	for range job.Requests {
		select {
		case next <- struct{}{}:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	res.set("wall_s", time.Since(t0).Seconds())
	res.set("ok", float64(ok.Load()))
	res.set("failed", float64(failed.Load()))
	res.set("failed_429", float64(rateLimited.Load()))
	if firstErr != "" {
		res.Notes = append(res.Notes, "first error: "+truncate(firstErr, 160))
	}
	return nil
}

func isRateLimit(err error) bool {
	if errors.Is(err, llm.ErrRateLimited) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "429") || strings.Contains(strings.ToLower(s), "rate limit") || strings.Contains(s, "RESOURCE_EXHAUSTED")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// batch is scenario 6: job.Requests short buffered requests at
// job.Concurrency. Chorus's runtime row uses pipeline.Batch; every other
// client runs a pool of job.Concurrency goroutines.
func batch(ctx context.Context, job Job, res *Result) error {
	hc := clients.NewHTTPClient(job.Concurrency + 16)
	var failed atomic.Int64
	var run func() error
	switch job.Client {
	case "chorus-runtime":
		rt, err := clients.NewRuntime(job.Format, job.BaseURL, clients.Options{HTTP: hc})
		if err != nil {
			return err
		}
		defer func() {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = rt.Close(cctx)
		}()
		model := clients.ChorusConfig(job.Format, job.BaseURL).ID + "/m"
		run = func() error {
			reqs := make(chan *llm.ChatRequest)
			go func() {
				defer close(reqs)
				for range job.Requests {
					select {
					case reqs <- &llm.ChatRequest{Model: model, Messages: []llm.Message{llm.UserText("Say hi")}, MaxTokens: 1024}:
					case <-ctx.Done():
						return
					}
				}
			}()
			n := 0
			for it := range pipeline.Batch(ctx, rt, reqs, pipeline.BatchOptions{Concurrency: job.Concurrency}) {
				n++
				if it.Err != nil || it.Value == nil || it.Value.Content != corpus.ShortText {
					failed.Add(1)
				}
			}
			if n != job.Requests {
				return fmt.Errorf("batch returned %d items, want %d", n, job.Requests)
			}
			return nil
		}
	default:
		c, err := newClient(job, hc)
		if err != nil {
			return err
		}
		defer c.Close()
		exact := job.Client != "floor-bare"
		run = func() error {
			next := make(chan struct{})
			var wg sync.WaitGroup
			for range job.Concurrency {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range next {
						text, err := c.Chat(ctx, "m")
						if err != nil || (exact && text != corpus.ShortText) {
							failed.Add(1)
						}
					}
				}()
			}
			for range job.Requests {
				select {
				case next <- struct{}{}:
				case <-ctx.Done():
				}
			}
			close(next)
			wg.Wait()
			return nil
		}
	}
	cpu0, t0 := sysinfo.CPU(), time.Now()
	if err := run(); err != nil {
		return err
	}
	wall, cpu := time.Since(t0), sysinfo.CPU()-cpu0
	if f := failed.Load(); f > 0 {
		return fmt.Errorf("%d of %d requests failed", f, job.Requests)
	}
	res.set("req_per_s", float64(job.Requests)/wall.Seconds())
	res.set("wall_s", wall.Seconds())
	res.set("cpu_us_per_req", float64(cpu.Microseconds())/float64(job.Requests))
	return nil
}
