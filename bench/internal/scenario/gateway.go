package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chorusrt/chorus/bench/internal/clients"
	"github.com/chorusrt/chorus/bench/internal/corpus"
	"github.com/chorusrt/chorus/bench/internal/sysinfo"
	"github.com/chorusrt/chorus/gateway"
	"github.com/chorusrt/chorus/llm"
)

// gatewayRun is the gateway scenario (issue 18): the runtime over the
// bench server, called in-process and through gateway.New served on
// loopback HTTP by this same process, under an open-loop load of small
// buffered chat requests at each of job.Rates requests per second for
// job.Duration; then job.Streams streams of job.Deltas deltas each way.
//
// Values, for each rate R: inproc_R_* and gw_R_* (p50_us, p99_us,
// cpu_us_per_req, errors, achieved_rps), added_R_p50_us, added_R_p99_us,
// added_R_cpu_us; for streams: inproc_cpu_ns_per_delta,
// gw_cpu_ns_per_delta, added_cpu_ns_per_delta (and wall ns per delta).
// Latency runs from the moment a request is sent; CPU is the whole
// process's (load generator, gateway, runtime) per request or delta.
func gatewayRun(ctx context.Context, job Job, res *Result) error {
	up := clients.NewHTTPClient(1024)
	rt, err := clients.NewRuntime(corpus.OpenAI, job.BaseURL, clients.Options{HTTP: up})
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = rt.Close(cctx)
		up.CloseIdleConnections()
	}()
	h, err := gateway.New(rt, gateway.Options{})
	if err != nil {
		return err
	}
	gwURL, stop, err := serveLoopback(h)
	if err != nil {
		return err
	}
	defer stop()
	lc := clients.NewHTTPClient(1024)
	defer lc.CloseIdleConnections()

	model := clients.ChorusConfig(corpus.OpenAI, job.BaseURL).ID + "/m"
	body := []byte(`{"model":"` + model + `","messages":[{"role":"user","content":"Say hi"}],"max_tokens":1024}`)
	inproc := func(ctx context.Context) error {
		r, err := rt.Chat(ctx, &llm.ChatRequest{Model: model, Messages: []llm.Message{llm.UserText("Say hi")}, MaxTokens: 1024})
		if err != nil {
			return err
		}
		if r.Content != corpus.ShortText {
			return fmt.Errorf("in-process answer %q", r.Content)
		}
		return nil
	}
	viaGateway := gatewayCall(lc, gwURL, body)
	// Warm up both paths (connections, the runtime's learnt limits).
	for range 50 {
		if err := inproc(ctx); err != nil {
			return err
		}
		if err := viaGateway(ctx); err != nil {
			return err
		}
	}
	for _, rate := range job.Rates {
		var p50 [2]float64
		var p99 [2]float64
		var cpu [2]float64
		for i, path := range []struct {
			name string
			fn   func(context.Context) error
		}{{"inproc", inproc}, {"gw", viaGateway}} {
			lr := openLoop(ctx, rate, job.Duration, path.fn)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			k := fmt.Sprintf("%s_%d_", path.name, rate)
			res.set(k+"p50_us", lr.pct(0.50))
			res.set(k+"p99_us", lr.pct(0.99))
			res.set(k+"cpu_us_per_req", lr.cpuPerReq)
			res.set(k+"errors", float64(lr.errors))
			res.set(k+"achieved_rps", lr.achieved)
			res.set(k+"requests", float64(lr.n))
			if lr.firstErr != nil {
				res.Notes = append(res.Notes, fmt.Sprintf("%s at %d/s: first error: %s", path.name, rate, truncate(lr.firstErr.Error(), 160)))
			}
			p50[i], p99[i], cpu[i] = lr.pct(0.50), lr.pct(0.99), lr.cpuPerReq
		}
		k := fmt.Sprintf("added_%d_", rate)
		res.set(k+"p50_us", p50[1]-p50[0])
		res.set(k+"p99_us", p99[1]-p99[0])
		res.set(k+"cpu_us", cpu[1]-cpu[0])
	}
	if job.Streams > 0 {
		fl, err := clients.New("floor-extract", corpus.OpenAI, clients.Options{BaseURL: gwURL, HTTP: lc})
		if err != nil {
			return err
		}
		defer fl.Close()
		streamIn := func() error {
			s, err := rt.Stream(ctx, &llm.ChatRequest{Model: model, Messages: []llm.Message{llm.UserText("Say hi")}, MaxTokens: 1024})
			if err != nil {
				return err
			}
			var cnt counter
			for ev := range s.Events() {
				if ev.Type == llm.EventText {
					cnt.delta(ev.Text)
				}
			}
			if _, err := s.Result(); err != nil {
				return err
			}
			return cnt.check("chorus-runtime", job.Deltas)
		}
		streamGW := func() error {
			var cnt counter
			if err := fl.Stream(ctx, model, cnt.delta); err != nil {
				return err
			}
			return cnt.check("gateway", job.Deltas)
		}
		for _, path := range []struct {
			name string
			fn   func() error
		}{{"inproc", streamIn}, {"gw", streamGW}} {
			if err := path.fn(); err != nil { // warm-up
				return fmt.Errorf("%s stream: %w", path.name, err)
			}
		}
		var cpuPer [2]float64
		for rep := range max(job.Repeats, 1) {
			for i, path := range []struct {
				name string
				fn   func() error
			}{{"inproc", streamIn}, {"gw", streamGW}} {
				cpu0, t0 := sysinfo.CPU(), time.Now()
				for range job.Streams {
					if err := path.fn(); err != nil {
						return fmt.Errorf("%s stream: %w", path.name, err)
					}
				}
				wall, c := time.Since(t0), sysinfo.CPU()-cpu0
				d := float64(job.Streams * job.Deltas)
				res.sample(path.name+"_cpu_ns_per_delta", float64(c.Nanoseconds())/d)
				res.sample(path.name+"_ns_per_delta", float64(wall.Nanoseconds())/d)
				cpuPer[i] = float64(c.Nanoseconds()) / d
			}
			res.sample("added_cpu_ns_per_delta", cpuPer[1]-cpuPer[0])
			_ = rep
		}
	}
	return nil
}

// serveLoopback serves h on a loopback port of its own until stop.
func serveLoopback(h http.Handler) (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: time.Minute}
	served := make(chan struct{})
	go func() { defer close(served); _ = hs.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = hs.Close(); <-served }, nil
}

// gatewayCall posts body to the gateway at url's /v1/chat/completions
// with lc and checks the answer's text.
func gatewayCall(lc *http.Client, url string, body []byte) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := lc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("gateway: status %d: %.200s", resp.StatusCode, b)
		}
		var out struct {
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(b, &out); err != nil {
			return err
		}
		if len(out.Choices) == 0 || out.Choices[0].Message.Content != corpus.ShortText {
			return fmt.Errorf("gateway answer %.200s", b)
		}
		return nil
	}
}

// loadResult is one open-loop run.
type loadResult struct {
	n, errors int
	firstErr  error
	lat       []float64 // µs, sorted
	cpuPerReq float64   // µs
	achieved  float64   // requests started per second
}

func (l loadResult) pct(p float64) float64 {
	if len(l.lat) == 0 {
		return 0
	}
	i := min(int(p*float64(len(l.lat))), len(l.lat)-1)
	return l.lat[i]
}

// openLoop starts rate requests per second for dur, each on its own
// goroutine at its scheduled instant whatever the previous ones are
// doing (an open loop: a slow answer never delays the next request), and
// waits for all of them.
func openLoop(ctx context.Context, rate int, dur time.Duration, fn func(context.Context) error) loadResult {
	n := max(int(float64(rate)*dur.Seconds()), 1)
	interval := time.Second / time.Duration(rate)
	lat := make([]float64, n)
	var errs atomic.Int64
	var errOnce sync.Once
	var firstErr error
	var wg sync.WaitGroup
	cpu0, t0 := sysinfo.CPU(), time.Now()
	for i := range n {
		at := t0.Add(time.Duration(i) * interval)
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		}
		if ctx.Err() != nil {
			n = i
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			err := fn(ctx)
			lat[i] = float64(time.Since(start).Nanoseconds()) / 1e3
			if err != nil {
				errs.Add(1)
				errOnce.Do(func() { firstErr = err })
			}
		}()
	}
	sent := time.Since(t0)
	wg.Wait()
	cpu := sysinfo.CPU() - cpu0
	lat = lat[:n]
	sort.Float64s(lat)
	out := loadResult{n: n, errors: int(errs.Load()), firstErr: firstErr, lat: lat, cpuPerReq: float64(cpu.Microseconds()) / float64(max(n, 1))}
	if sent > 0 {
		out.achieved = float64(n) / sent.Seconds()
	}
	if out.errors > 0 && firstErr == nil {
		out.firstErr = errors.New("unknown")
	}
	return out
}
