package scenario

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/chorusrt/chorus/bench/internal/clients"
	"github.com/chorusrt/chorus/bench/internal/corpus"
	"github.com/chorusrt/chorus/gateway"
	"github.com/chorusrt/chorus/requestlog"
)

// gatewayLogRun is the request log's scenario (issue 32): two gateways
// over one runtime (the bench server upstream) in this process, one with
// no request log and one with a requestlog.Logger writing to a SQLite file
// in a temporary directory (chorus serve's default store), under the same
// open-loop load of small buffered chat requests at each of job.Rates
// requests per second for job.Duration; off and on alternate job.Repeats
// times at each rate, and each figure is the median of its repeats.
//
// Values, for each rate R: off_R_* and on_R_* (p50_us, p99_us,
// cpu_us_per_req, errors, achieved_rps, requests), log_R_cpu_us (on minus
// off, CPU per request), log_R_cpu_ratio (on over off), log_R_p50_us and
// log_R_p99_us (the percentiles' differences); written and dropped (the
// Logger's counts once closed).
func gatewayLogRun(ctx context.Context, job Job, res *Result) error {
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
	dir, err := os.MkdirTemp("", "chorus-bench-requestlog-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	st, err := requestlog.OpenSQLite(filepath.Join(dir, "requests.db"))
	if err != nil {
		return err
	}
	lg := requestlog.New(st, requestlog.Options{})
	closed := false
	closeLog := func() error {
		if closed {
			return nil
		}
		closed = true
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return lg.Close(cctx)
	}
	defer closeLog()

	lc := clients.NewHTTPClient(1024)
	defer lc.CloseIdleConnections()
	model := clients.ChorusConfig(corpus.OpenAI, job.BaseURL).ID + "/m"
	body := []byte(`{"model":"` + model + `","messages":[{"role":"user","content":"Say hi"}],"max_tokens":1024}`)
	var calls [2]func(context.Context) error
	for i, opts := range []gateway.Options{{}, {RequestLog: lg}} {
		h, err := gateway.New(rt, opts)
		if err != nil {
			return err
		}
		url, stop, err := serveLoopback(h) // gateway.go
		if err != nil {
			return err
		}
		defer stop()
		calls[i] = gatewayCall(lc, url, body)
	}
	for range 50 { // warm up both (connections, the runtime's learnt limits, the store)
		for _, c := range calls {
			if err := c(ctx); err != nil {
				return err
			}
		}
	}
	if err := offOnLoad(ctx, job, res, "log", "log", calls); err != nil {
		return err
	}
	if err := closeLog(); err != nil {
		return err
	}
	s := lg.Stats()
	res.set("written", float64(s.Written))
	res.set("dropped", float64(s.Dropped))
	return nil
}

// offOnLoad runs calls[0] ("off") and calls[1] ("on") alternating under
// the open-loop load at each of job.Rates, job.Repeats times each, and sets
// off_R_* and on_R_* (p50_us, p99_us, cpu_us_per_req, errors,
// achieved_rps, requests, medians of the repeats) and <diff>_R_cpu_us,
// _cpu_ratio, _p50_us, _p99_us (on against off). what names the
// comparison in a note of a first error.
func offOnLoad(ctx context.Context, job Job, res *Result, diff, what string, calls [2]func(context.Context) error) error {
	names := [2]string{"off", "on"}
	for _, rate := range job.Rates {
		var runs [2][]loadResult
		for range max(job.Repeats, 1) {
			for i, c := range calls {
				lr := openLoop(ctx, rate, job.Duration, c)
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if lr.firstErr != nil && len(runs[i]) == 0 {
					res.Notes = append(res.Notes, fmt.Sprintf("%s %s at %d/s: first error: %s", what, names[i], rate, truncate(lr.firstErr.Error(), 160)))
				}
				runs[i] = append(runs[i], lr)
			}
		}
		var p50, p99, cpu [2]float64
		for i := range names {
			med := func(f func(loadResult) float64) float64 {
				v := make([]float64, len(runs[i]))
				for j, lr := range runs[i] {
					v[j] = f(lr)
				}
				return Median(v)
			}
			k := fmt.Sprintf("%s_%d_", names[i], rate)
			p50[i], p99[i], cpu[i] = med(func(l loadResult) float64 { return l.pct(0.50) }), med(func(l loadResult) float64 { return l.pct(0.99) }), med(func(l loadResult) float64 { return l.cpuPerReq })
			res.set(k+"p50_us", p50[i])
			res.set(k+"p99_us", p99[i])
			res.set(k+"cpu_us_per_req", cpu[i])
			res.set(k+"errors", med(func(l loadResult) float64 { return float64(l.errors) }))
			res.set(k+"achieved_rps", med(func(l loadResult) float64 { return l.achieved }))
			res.set(k+"requests", med(func(l loadResult) float64 { return float64(l.n) }))
		}
		k := fmt.Sprintf("%s_%d_", diff, rate)
		res.set(k+"cpu_us", cpu[1]-cpu[0])
		if cpu[0] > 0 {
			res.set(k+"cpu_ratio", cpu[1]/cpu[0])
		}
		res.set(k+"p50_us", p50[1]-p50[0])
		res.set(k+"p99_us", p99[1]-p99[0])
	}
	return nil
}
