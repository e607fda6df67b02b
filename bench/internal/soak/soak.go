package soak

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chorusrt/chorus/bench/internal/clients"
	"github.com/chorusrt/chorus/bench/internal/corpus"
	"github.com/chorusrt/chorus/bench/internal/server"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers"
	chorusrt "github.com/chorusrt/chorus/runtime"
)

// Config sizes a soak run.
type Config struct {
	Duration  time.Duration
	Streams   int     // streams kept in flight
	FaultRate float64 // probability that a request meets a fault
}

// Sample is the process state at one instant.
type Sample struct {
	At         string
	Goroutines int
	HeapBytes  uint64 // live heap after a GC
	InFlight   int64
}

// Report is the outcome of a soak run.
type Report struct {
	Config    Config
	Elapsed   time.Duration
	Started   int64
	Completed int64
	Failed    map[string]int64
	Injected  map[string]int64
	Requests  int64 // requests the server saw (retries included)
	Samples   []Sample
	// GoroutinesBack: goroutines at every quiet point within 2 of the
	// start. NoGrowth: live heap at the end within 10% + 1 MiB of the
	// quiet point between the halves (no growth with time). HeapBack: live
	// heap after the runtime's Close within 10% + 1 MiB of the start, plus
	// 512 bytes per peak goroutine (descriptors the Go runtime keeps).
	GoroutinesBack, NoGrowth, HeapBack bool
	HeapGrowth                         int64 // end minus the quiet point between the halves
	Returned                           bool  // all three
	Err                                string
}

const serveEnv = "CHORUS_BENCH_SOAK_SERVER"

// MaybeServe runs the soak's server when this process was started as one
// (it then returns true once the parent closed its stdin); otherwise it
// returns false at once.
func MaybeServe() bool {
	if os.Getenv(serveEnv) == "" {
		return false
	}
	var m server.Mode
	if err := json.Unmarshal([]byte(os.Getenv(serveEnv)), &m); err != nil {
		fmt.Fprintln(os.Stderr, "soak server:", err)
		os.Exit(1)
	}
	srv, err := server.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak server:", err)
		os.Exit(1)
	}
	srv.SetMode(m)
	fmt.Println(srv.URL)
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes it or exits
	out := map[string]int64{"requests": srv.Requests()}
	for i, n := range srv.Faults() {
		out[server.FaultNames[i]] = n
	}
	srv.Close()
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
	return true
}

// Run soaks the runtime; self is the executable to start as the server
// (it must call MaybeServe first thing).
func Run(ctx context.Context, cfg Config, self string) (*Report, error) {
	if cfg.Streams <= 0 {
		cfg.Streams = 2000
	}
	mode := server.Mode{Deltas: 50, FlushEvery: 5, Interval: 50 * time.Millisecond, FaultRate: cfg.FaultRate, Stall: 3 * time.Second}
	mb, _ := json.Marshal(mode)
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), serveEnv+"="+string(mb))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() {
		return nil, errors.New("soak: server did not start")
	}
	base := strings.TrimSpace(sc.Text())

	rep, err := soak(ctx, cfg, base)
	// Stop the server and read what it injected.
	_ = stdin.Close()
	if sc.Scan() {
		var counts map[string]int64
		if json.Unmarshal(sc.Bytes(), &counts) == nil {
			rep.Requests = counts["requests"]
			delete(counts, "requests")
			rep.Injected = counts
		}
	}
	return rep, err
}

func sample(at string, inflight int64) Sample {
	runtime.GC()
	runtime.GC() // the second empties sync.Pool victim caches
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return Sample{At: at, Goroutines: runtime.NumGoroutine(), HeapBytes: ms.HeapAlloc, InFlight: inflight}
}

func soak(ctx context.Context, cfg Config, base string) (*Report, error) {
	rep := &Report{Config: cfg, Failed: map[string]int64{}}
	hc := clients.NewHTTPClient(cfg.Streams + 64)
	var opts []chorusrt.Option
	var prefixes []string
	for _, f := range corpus.Formats {
		c := clients.ChorusConfig(f, base)
		for _, key := range []string{"k1", "k2"} {
			c.APIKey = providers.Secret(key)
			opts = append(opts, chorusrt.WithProvider(c))
		}
		prefixes = append(prefixes, c.ID+"/")
	}
	opts = append(opts,
		chorusrt.WithQueueSize(1<<16),
		chorusrt.WithClientOptions(providers.WithHTTPClient(hc), providers.WithIdleTimeout(2*time.Second), providers.WithTimeout(60*time.Second)),
	)
	rt, err := chorusrt.New(opts...)
	if err != nil {
		return rep, err
	}
	rep.Samples = append(rep.Samples, sample("start", 0))

	var started, completed, inflight atomic.Int64
	var mu sync.Mutex
	fail := func(kind string) {
		mu.Lock()
		rep.Failed[kind]++
		mu.Unlock()
	}
	// load keeps cfg.Streams calls in flight for d, sampling once in the
	// middle. It then stops starting calls; calls in flight finish on their
	// own budget (60 s), so that no call is cut short and every failure
	// counted is a real one.
	load := func(d time.Duration, middle string) {
		deadline := time.Now().Add(d)
		var wg sync.WaitGroup
		for i := range cfg.Streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				model := prefixes[i%len(prefixes)] + "soak"
				for ctx.Err() == nil && time.Now().Before(deadline) {
					started.Add(1)
					inflight.Add(1)
					cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
					err := one(cctx, rt, model)
					cancel()
					inflight.Add(-1)
					if err == nil {
						completed.Add(1)
						continue
					}
					fail(classify(err) + " [" + strings.TrimSuffix(prefixes[i%len(prefixes)], "/") + "]")
				}
			}()
		}
		select {
		case <-time.After(d / 2):
			rep.Samples = append(rep.Samples, sample(middle, inflight.Load()))
		case <-ctx.Done():
		}
		wg.Wait()
	}
	start := rep.Samples[0]
	// idle closes the idle keep-alive connections (two goroutines each)
	// and samples once the transport has let them go.
	idle := func(at string) Sample {
		var s Sample
		for deadline := time.Now().Add(10 * time.Second); ; {
			hc.CloseIdleConnections()
			s = sample(at, inflight.Load())
			if s.Goroutines <= start.Goroutines+2 || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		rep.Samples = append(rep.Samples, s)
		return s
	}
	// Two halves with a quiet point between them: heap that grows with
	// time, not with the number of streams in flight, shows as growth
	// from the first quiet point to the second.
	t0 := time.Now()
	load(cfg.Duration/2, "first half, under load")
	half := idle("after the first half (load stopped, idle connections closed)")
	load(cfg.Duration-cfg.Duration/2, "second half, under load")
	end := idle("end (load stopped, idle connections closed)")
	rep.Elapsed = time.Since(t0)
	rep.Started, rep.Completed = started.Load(), completed.Load()

	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rt.Close(cctx); err != nil {
		return rep, err
	}
	hc.CloseIdleConnections()
	time.Sleep(100 * time.Millisecond)
	closed := sample("after runtime Close", 0)
	rep.Samples = append(rep.Samples, closed)

	rep.GoroutinesBack = half.Goroutines <= start.Goroutines+2 && end.Goroutines <= start.Goroutines+2 && closed.Goroutines <= start.Goroutines+2
	rep.HeapGrowth = int64(end.HeapBytes) - int64(half.HeapBytes)
	rep.NoGrowth = end.HeapBytes <= half.HeapBytes+half.HeapBytes/10+(1<<20)
	// The Go runtime keeps every goroutine descriptor it ever allocated for
	// reuse (about 450 bytes each): allow 512 bytes per peak goroutine.
	peak := 0
	for _, s := range rep.Samples {
		peak = max(peak, s.Goroutines)
	}
	rep.HeapBack = closed.HeapBytes <= start.HeapBytes+start.HeapBytes/10+(1<<20)+uint64(peak)*512
	rep.Returned = rep.GoroutinesBack && rep.NoGrowth && rep.HeapBack
	return rep, nil
}

func one(ctx context.Context, rt *chorusrt.Runtime, model string) error {
	s, err := rt.Stream(ctx, &llm.ChatRequest{Model: model, Messages: []llm.Message{llm.UserText("soak")}, MaxTokens: 256})
	if err != nil {
		return err
	}
	n := 0
	for ev := range s.Events() {
		if ev.Type == llm.EventText {
			n++
		}
	}
	res, err := s.Result()
	if err != nil {
		return err
	}
	if n != 50 || res.Content != soakText {
		return fmt.Errorf("soak: %d deltas, %d bytes: %w", n, len(res.Content), errWrongAnswer)
	}
	return nil
}

var errWrongAnswer = errors.New("wrong answer")

var soakText = corpus.Text(50)

// classify names an error's kind for the report.
func classify(err error) string {
	var se *llm.StreamError
	if errors.As(err, &se) {
		return "after partial output: " + classify(se.Err)
	}
	var rl *llm.RateLimitError
	var api *llm.APIError
	var de *llm.DecodeError
	var te *llm.TransportError
	switch {
	case errors.Is(err, errWrongAnswer):
		return "wrong answer (silent corruption)"
	case errors.Is(err, llm.ErrIdleTimeout):
		return "idle timeout"
	case errors.Is(err, llm.ErrPrematureClose):
		return "premature close"
	case errors.Is(err, llm.ErrOverloaded):
		return "overloaded (admission queue full)"
	case errors.As(err, &rl):
		return "rate limited (429)"
	case errors.As(err, &api):
		return fmt.Sprintf("API error %d", api.Status)
	case errors.As(err, &te):
		// Checked before DecodeError: a read failure mid-stream comes back
		// as a DecodeError wrapping the TransportError.
		if errors.As(err, &de) {
			return "transport error (inside a decode error)"
		}
		return "transport error"
	case errors.As(err, &de):
		return "decode error"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline exceeded"
	}
	return fmt.Sprintf("other (%T)", err)
}

// Markdown renders the report as the "Soak" section of RESULTS.md.
func (r *Report) Markdown() string {
	var b strings.Builder
	b.WriteString("\n## Soak\n\n")
	fmt.Fprintf(&b, "Same as `go run ./cmd/soak -duration %s -streams %d -fault-rate %.2f`: the runtime with three providers (OpenAI, Anthropic and Gemini formats, two credentials each) keeps %d streams in flight for %s against a loopback server in another process that injects a fault into %.0f%% of requests. Each stream is 50 deltas in 10 flushes 50 ms apart; the idle timeout is 2 s and a stall lasts 3 s.\n\n",
		r.Config.Duration, r.Config.Streams, r.Config.FaultRate, r.Config.Streams, r.Config.Duration, r.Config.FaultRate*100)
	if r.Err != "" {
		fmt.Fprintf(&b, "**The soak did not complete:** %s\n", r.Err)
		return b.String()
	}
	var failed int64
	for _, n := range r.Failed {
		failed += n
	}
	fmt.Fprintf(&b, "| measure | value |\n|---|---|\n")
	fmt.Fprintf(&b, "| elapsed | %s |\n", r.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(&b, "| calls started | %d |\n| completed | %d (%.1f%%) |\n| failed | %d (%.1f%%) |\n", r.Started, r.Completed, pct(r.Completed, r.Started), failed, pct(failed, r.Started))
	fmt.Fprintf(&b, "| completed per second | %.0f |\n", float64(r.Completed)/r.Elapsed.Seconds())
	fmt.Fprintf(&b, "| HTTP requests at the server (retries included) | %d |\n\n", r.Requests)
	b.WriteString("Failures by error type (a call fails only when its retries are spent, or after partial output, when no retry is allowed):\n\n| error | calls |\n|---|---|\n")
	for _, k := range sortedKeys(r.Failed) {
		fmt.Fprintf(&b, "| %s | %d |\n", k, r.Failed[k])
	}
	if len(r.Failed) == 0 {
		b.WriteString("| none | 0 |\n")
	}
	b.WriteString("\nFaults injected by the server:\n\n| fault | requests |\n|---|---|\n")
	for _, k := range sortedKeys(r.Injected) {
		fmt.Fprintf(&b, "| %s | %d |\n", k, r.Injected[k])
	}
	b.WriteString("\nGoroutines and live heap (after two GCs) of the client process, the load run in two halves with a quiet point between them:\n\n| when | goroutines | heap | streams in flight |\n|---|---|---|---|\n")
	for _, s := range r.Samples {
		fmt.Fprintf(&b, "| %s | %d | %.1f MiB | %d |\n", s.At, s.Goroutines, float64(s.HeapBytes)/(1<<20), s.InFlight)
	}
	yes := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "**no**"
	}
	fmt.Fprintf(&b, "\n| check | result |\n|---|---|\n")
	fmt.Fprintf(&b, "| goroutines back to the start level (±2) at every quiet point | %s |\n", yes(r.GoroutinesBack))
	fmt.Fprintf(&b, "| live heap not growing with time (end vs. the quiet point between the halves, within 10%% + 1 MiB) | %s (%+.1f MiB) |\n", yes(r.NoGrowth), float64(r.HeapGrowth)/(1<<20))
	fmt.Fprintf(&b, "| live heap back to the start level after the runtime's Close (within 10%% + 1 MiB, plus 512 B per peak goroutine: the Go runtime keeps goroutine descriptors for reuse) | %s |\n", yes(r.HeapBack))
	if r.NoGrowth && len(r.Samples) >= 4 && r.Samples[2].HeapBytes > r.Samples[0].HeapBytes+(1<<20) {
		fmt.Fprintf(&b, "\nBetween the load and Close the client keeps %.1f MiB more live heap than at the start, the same after one half as after both, so it does not grow with time (the run kept %d streams in flight); whether Close gave it back is the last check above. No heap profile is taken.\n",
			float64(int64(r.Samples[2].HeapBytes)-int64(r.Samples[0].HeapBytes))/(1<<20), r.Config.Streams)
	}
	return b.String()
}

func pct(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

func sortedKeys(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
