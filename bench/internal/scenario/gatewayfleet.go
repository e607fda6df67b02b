package scenario

import (
	"context"
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
		url, stop, err := serveLoopback(h) // gateway.go
		if err != nil {
			return err
		}
		defer stop()
		calls[i] = keyedCall(lc, url, secret, body)
	}
	for range 50 { // warm up both (connections, the runtime's learnt limits, the leases)
		for _, c := range calls {
			if err := c(ctx); err != nil {
				return err
			}
		}
	}
	if err := offOnLoad(ctx, job, res, "fleet", "key store", calls); err != nil { // gatewaylog.go
		return err
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

// keyedCall is gatewayCall with a gateway key: lc's transport, the key
// added to each request.
func keyedCall(lc *http.Client, url, key string, body []byte) func(context.Context) error {
	return gatewayCall(&http.Client{Transport: withKey{next: lc.Transport, key: key}, Timeout: lc.Timeout}, url, body)
}

// withKey adds a gateway key to each request.
type withKey struct {
	next http.RoundTripper
	key  string
}

func (t withKey) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.key)
	return t.next.RoundTrip(r)
}
