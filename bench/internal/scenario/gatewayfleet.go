package scenario

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/chorusrt/chorus/bench/internal/clients"
	"github.com/chorusrt/chorus/bench/internal/corpus"
	"github.com/chorusrt/chorus/gateway"
	"github.com/chorusrt/chorus/keystore"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/runtime"
)

// gatewayFleetRun is the fleet's scenario (issue 31): two gateways over one
// runtime (the bench server upstream, its model priced) in this process,
// both requiring one gateway key whose rpm, tpm, concurrency and budget
// are all set, so that every call is admitted, its cost reserved and
// settled: "off" counts them in the Handler's memory (no key store), "on"
// holds them in a key store on a SQLite file in a temporary directory
// (chorus serve's default; PostgreSQL for a fleet works the same way off
// the request's path), with its leases, its settlement every 250 ms and
// its heartbeat. The load, the alternation and the values are
// gatewayLogRun's, named off_R_*, on_R_* and fleet_R_*; settled_calls is
// what the ledger holds once the on gateway closed (every answered call of
// the on gateway, warm-up included).
func gatewayFleetRun(ctx context.Context, job Job, res *Result) error {
	up := clients.NewHTTPClient(1024)
	model := clients.ChorusConfig(corpus.OpenAI, job.BaseURL).ID + "/m"
	rt, err := clients.NewRuntime(corpus.OpenAI, job.BaseURL, clients.Options{HTTP: up},
		runtime.WithPrices(llm.Prices{model: {Input: 0.4, Output: 1.6}}))
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = rt.Close(cctx)
		up.CloseIdleConnections()
	}()
	dir, err := os.MkdirTemp("", "chorus-bench-keystore-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	st, err := keystore.OpenSQLite(filepath.Join(dir, "gateway.db"))
	if err != nil {
		return err
	}
	defer st.Close()
	const secret = "gk-bench-fleet"
	key := gateway.Key{Name: "bench", SHA256: gateway.HashKey(secret), RPM: 1 << 30, TPM: 1 << 40, Concurrency: 1 << 20, BudgetUSD: 1e9}

	lc := clients.NewHTTPClient(1024)
	defer lc.CloseIdleConnections()
	body := []byte(`{"model":"` + model + `","messages":[{"role":"user","content":"Say hi"}],"max_tokens":1024}`)
	var calls [2]func(context.Context) error
	var handlers [2]*gateway.Handler
	for i, opts := range []gateway.Options{{Keys: []gateway.Key{key}}, {Keys: []gateway.Key{key}, KeyStore: st}} {
		h, err := gateway.New(rt, opts)
		if err != nil {
			return err
		}
		handlers[i] = h
		defer h.Close(context.Background())
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		hs := &http.Server{Handler: h, ReadHeaderTimeout: time.Minute}
		served := make(chan struct{})
		go func() { defer close(served); _ = hs.Serve(ln) }()
		defer func() { _ = hs.Close(); <-served }()
		calls[i] = keyedCall(lc, "http://"+ln.Addr().String(), secret, body)
	}
	for range 50 { // warm up both (connections, the runtime's learnt limits, the leases)
		for _, c := range calls {
			if err := c(ctx); err != nil {
				return err
			}
		}
	}
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
					res.Notes = append(res.Notes, fmt.Sprintf("key store %s at %d/s: first error: %s", names[i], rate, truncate(lr.firstErr.Error(), 160)))
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
		k := fmt.Sprintf("fleet_%d_", rate)
		res.set(k+"cpu_us", cpu[1]-cpu[0])
		if cpu[0] > 0 {
			res.set(k+"cpu_ratio", cpu[1]/cpu[0])
		}
		res.set(k+"p50_us", p50[1]-p50[0])
		res.set(k+"p99_us", p99[1]-p99[0])
	}
	cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := handlers[1].Close(cctx); err != nil { // settles what it holds
		return err
	}
	k, err := st.ByName(cctx, "bench")
	if err != nil {
		return err
	}
	sp, err := st.SpendOf(cctx, k.ID, "")
	if err != nil {
		return err
	}
	res.set("settled_calls", float64(sp.Calls))
	res.set("reserved_after_close", float64(sp.Reserved))
	return nil
}

// keyedCall is gatewayCall with a gateway key.
func keyedCall(lc *http.Client, url, key string, body []byte) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
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
		return nil
	}
}
