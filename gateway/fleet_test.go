package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chorusrt/chorus/gateway"
	"github.com/chorusrt/chorus/internal/pgtest"
	"github.com/chorusrt/chorus/keystore"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
)

// replica is one gateway of a fleet: its own runtime, its own store
// connection, one upstream shared by all.
type replica struct {
	h   *gateway.Handler
	rt  *runtime.Runtime
	st  *keystore.Store
	srv *httptest.Server
}

func (r *replica) close(t *testing.T) {
	t.Helper()
	r.srv.CloseClientConnections()
	r.srv.Close()
	if err := r.h.Close(context.Background()); err != nil {
		t.Errorf("close: %v", err)
	}
	r.rt.Close(context.Background())
	r.st.Close()
}

type fleetOpts struct {
	open   func() *keystore.Store
	up     *llmtest.Server
	now    func() time.Time
	prices llm.Prices
	keys   []gateway.Key
}

func startReplica(t *testing.T, o fleetOpts) *replica {
	t.Helper()
	rt, err := runtime.New(
		runtime.WithProvider(providers.Config{ID: "openai", Format: providers.FormatOpenAI, BaseURL: o.up.OpenAIBaseURL(), APIKey: providerKey}),
		runtime.WithClientOptions(providers.WithRetryPolicy(fast)),
		runtime.WithPrices(o.prices),
	)
	if err != nil {
		t.Fatal(err)
	}
	st := o.open()
	h, err := gateway.New(rt, gateway.Options{KeyStore: st, Keys: o.keys, Now: o.now})
	if err != nil {
		t.Fatal(err)
	}
	return &replica{h: h, rt: rt, st: st, srv: httptest.NewServer(h)}
}

func post(t *testing.T, url, key, body string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	if strings.Contains(b.String(), key) && key != "" {
		t.Fatalf("the gateway key is in an answer: %s", b.String())
	}
	return resp.StatusCode, resp.Header, b.String()
}

const chatBody = `{"model":"openai/gpt-4.1-mini","max_tokens":500,"messages":[{"role":"user","content":"hello"}]}`

func pgOpener(t *testing.T) func() *keystore.Store { return pgOpenerTB(t) }

func pgOpenerTB(t testing.TB) func() *keystore.Store {
	dsn := pgtest.SchemaDSN(t)
	return func() *keystore.Store {
		st, err := keystore.OpenPostgres(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
}

func sqliteOpener(t testing.TB) func() *keystore.Store {
	path := filepath.Join(t.TempDir(), "gateway.db")
	return func() *keystore.Store {
		st, err := keystore.OpenSQLite(path)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
}

// eventually polls cond every 20 ms for up to a second.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(time.Second); ; {
		if cond() {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("not within a second: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFleetKeyChangesReachEveryReplica: a key created in the store works
// on every replica within a second; rotated, its old text keeps working
// through the grace period only; revoked, every replica refuses it.
func TestFleetKeyChangesReachEveryReplica(t *testing.T) {
	gateway.SetFleetTiming(t, 50*time.Millisecond, 200*time.Millisecond)
	up := llmtest.NewServer()
	defer up.Close()
	o := fleetOpts{open: pgOpener(t), up: up}
	reps := []*replica{startReplica(t, o), startReplica(t, o)}
	defer func() {
		for _, r := range reps {
			r.close(t)
		}
	}()
	admin := o.open()
	defer admin.Close()
	ctx := context.Background()
	status := func(r *replica, key string) int { s, _, _ := post(t, r.srv.URL, key, chatBody); return s }
	every := func(key string, want int) func() bool {
		return func() bool {
			for _, r := range reps {
				if status(r, key) != want {
					return false
				}
			}
			return true
		}
	}
	secret := keystore.NewSecret()
	k, err := admin.Create(ctx, keystore.Key{Name: "team", Hash: keystore.HashKey(secret)}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "a new key works on every replica", every(secret, 200))
	newer := keystore.NewSecret()
	if _, err := admin.Rotate(ctx, k.ID, keystore.HashKey(newer), time.Hour, time.Now()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the rotated key's new text works", every(newer, 200))
	if s := status(reps[1], secret); s != 200 {
		t.Fatalf("the old text within its grace: %d", s)
	}
	newest := keystore.NewSecret()
	if _, err := admin.Rotate(ctx, k.ID, keystore.HashKey(newest), 0, time.Now()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a text rotated out without grace is refused", every(newer, 401))
	if _, err := admin.Revoke(ctx, k.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a revoked key is refused everywhere", every(newest, 401))
	if _, _, body := post(t, reps[0].srv.URL, newest, chatBody); !strings.Contains(body, "revoked") {
		t.Errorf("the refusal of a revoked key: %s", body)
	}
	if s := status(reps[0], "sk-unknown"); s != 401 {
		t.Errorf("an unknown key: %d", s)
	}
}

// TestFleetRPMHoldsAcrossReplicas: three replicas serve a key of 40
// requests a minute exactly 40 requests in one window, however the
// requests are spread.
func TestFleetRPMHoldsAcrossReplicas(t *testing.T) {
	gateway.SetFleetTiming(t, 50*time.Millisecond, 200*time.Millisecond)
	up := llmtest.NewServer()
	defer up.Close()
	fixed := time.Date(2026, 12, 4, 12, 0, 10, 0, time.UTC)
	o := fleetOpts{open: pgOpener(t), up: up, now: func() time.Time { return fixed },
		keys: []gateway.Key{{Name: "limited", SHA256: gateway.HashKey("gk-limited"), RPM: 40}}}
	reps := []*replica{startReplica(t, o), startReplica(t, o), startReplica(t, o)}
	defer func() {
		for _, r := range reps {
			r.close(t)
		}
	}()
	var ok, refused atomic.Int64
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			for i := range 20 {
				s, h, _ := post(t, reps[(w+i)%3].srv.URL, "gk-limited", chatBody)
				switch s {
				case 200:
					ok.Add(1)
				case 429:
					refused.Add(1)
					if h.Get("retry-after") == "" {
						t.Errorf("a 429 without retry-after")
					}
				default:
					t.Errorf("status %d", s)
				}
			}
		})
	}
	wg.Wait()
	if ok.Load() != 40 || refused.Load() != 80 {
		t.Fatalf("%d served, %d refused of 120; want 40 and 80", ok.Load(), refused.Load())
	}
}

// TestFleetBudgetAcrossReplicas: replicas spending one key's budget at
// once never pass it, refuse with insufficient_quota once it is spent,
// and the ledger holds exactly the costs the clients were told.
func TestFleetBudgetAcrossReplicas(t *testing.T) {
	gateway.SetFleetTiming(t, 50*time.Millisecond, 200*time.Millisecond)
	up := llmtest.NewServer()
	defer up.Close()
	// Each answer: 20 prompt and 500 completion tokens, $0.00404; a
	// request of ~100 bytes with max_tokens 500 reserves $0.0042.
	up.SetResponder(func(llmtest.Recorded) llmtest.Step {
		return llmtest.Step{Reply: &llmtest.Reply{Text: "ok", Usage: &llm.Usage{PromptTokens: 20, CompletionTokens: 500}}}
	})
	const budget = 0.1
	o := fleetOpts{open: pgOpener(t), up: up, prices: llm.Prices{"openai/gpt-4.1-mini": {Input: 2, Output: 8}},
		keys: []gateway.Key{{Name: "capped", SHA256: gateway.HashKey("gk-capped"), BudgetUSD: budget, BudgetPeriod: keystore.Monthly}}}
	reps := []*replica{startReplica(t, o), startReplica(t, o), startReplica(t, o)}
	var told atomic.Int64 // NanoUSD
	var served, quota atomic.Int64
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			for i := range 15 {
				s, h, body := post(t, reps[(w+i)%3].srv.URL, "gk-capped", chatBody)
				switch {
				case s == 200:
					served.Add(1)
					c, err := strconv.ParseFloat(h.Get("x-chorus-cost-usd"), 64)
					if err != nil {
						t.Errorf("x-chorus-cost-usd %q", h.Get("x-chorus-cost-usd"))
					}
					told.Add(keystore.ToNano(c))
				case s == 429 && strings.Contains(body, "insufficient_quota"):
					quota.Add(1)
				default:
					t.Errorf("%d %s", s, body)
				}
			}
		})
	}
	wg.Wait()
	for _, r := range reps {
		r.close(t)
	}
	st := o.open()
	defer st.Close()
	k, err := st.ByName(context.Background(), "capped")
	if err != nil {
		t.Fatal(err)
	}
	sp, err := st.SpendOf(context.Background(), k.ID, keystore.Monthly.ID(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("served %d, refused %d; ledger $%.6f of $%v (%d calls), told $%.6f", served.Load(), quota.Load(), keystore.FromNano(sp.Spent), budget, sp.Calls, keystore.FromNano(told.Load()))
	if sp.Spent != told.Load() || sp.Calls != served.Load() || sp.Reserved != 0 {
		t.Fatalf("ledger %+v; the clients were told %d nUSD over %d calls", sp, told.Load(), served.Load())
	}
	if sp.Spent > keystore.ToNano(budget) {
		t.Fatalf("the budget was overrun: %d nUSD", sp.Spent)
	}
	if quota.Load() == 0 || sp.Spent < keystore.ToNano(budget*0.7) {
		t.Fatalf("the budget was not used: %d refused, %d nUSD spent", quota.Load(), sp.Spent)
	}
}

// TestFleetSpendSurvivesRestart: one server on its SQLite file keeps a
// key's spend across a restart: a spent budget stays spent.
func TestFleetSpendSurvivesRestart(t *testing.T) {
	gateway.SetFleetTiming(t, 50*time.Millisecond, 200*time.Millisecond)
	up := llmtest.NewServer()
	defer up.Close()
	up.SetResponder(func(llmtest.Recorded) llmtest.Step {
		return llmtest.Step{Reply: &llmtest.Reply{Text: "ok", Usage: &llm.Usage{PromptTokens: 20, CompletionTokens: 500}}}
	})
	o := fleetOpts{open: sqliteOpener(t), up: up, prices: llm.Prices{"openai/gpt-4.1-mini": {Input: 2, Output: 8}},
		keys: []gateway.Key{{Name: "capped", SHA256: gateway.HashKey("gk-capped"), BudgetUSD: 0.01}}}
	r := startReplica(t, o)
	n := 0
	for ; n < 10; n++ {
		if s, _, _ := post(t, r.srv.URL, "gk-capped", chatBody); s != 200 {
			break
		}
	}
	r.close(t)
	if n != 2 { // $0.00404 each, $0.0042 reserved: the third does not fit
		t.Fatalf("%d calls served of a $0.01 budget, want 2", n)
	}
	r = startReplica(t, o)
	defer r.close(t)
	if s, _, body := post(t, r.srv.URL, "gk-capped", chatBody); s != 429 || !strings.Contains(body, "insufficient_quota") {
		t.Fatalf("after a restart the spent budget was forgotten: %d %s", s, body)
	}
}

// TestFleetConcurrencyAcrossReplicas: two replicas never have more of a
// key's calls in flight than its concurrency, together; the rest are
// refused with 429, and slots freed on one replica serve the other.
func TestFleetConcurrencyAcrossReplicas(t *testing.T) {
	gateway.SetFleetTiming(t, 50*time.Millisecond, 100*time.Millisecond)
	up := llmtest.NewServer()
	defer up.Close()
	var inFlight, most atomic.Int64
	up.SetResponder(func(llmtest.Recorded) llmtest.Step {
		n := inFlight.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(30 * time.Millisecond)
		inFlight.Add(-1)
		return llmtest.Step{Reply: &llmtest.Reply{Text: "ok"}}
	})
	o := fleetOpts{open: pgOpener(t), up: up, keys: []gateway.Key{{Name: "narrow", SHA256: gateway.HashKey("gk-narrow"), Concurrency: 3}}}
	reps := []*replica{startReplica(t, o), startReplica(t, o)}
	defer func() {
		for _, r := range reps {
			r.close(t)
		}
	}()
	var served, refused atomic.Int64
	var wg sync.WaitGroup
	for w := range 10 {
		wg.Go(func() {
			for i := range 6 {
				switch s, _, body := post(t, reps[(w+i)%2].srv.URL, "gk-narrow", chatBody); s {
				case 200:
					served.Add(1)
				case 429:
					refused.Add(1)
				default:
					t.Errorf("%d %s", s, body)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("served %d, refused %d, at most %d in flight upstream", served.Load(), refused.Load(), most.Load())
	if most.Load() > 3 {
		t.Fatalf("%d calls of a key of concurrency 3 in flight at once across two replicas", most.Load())
	}
	if served.Load() < 3 || refused.Load() == 0 {
		t.Fatalf("served %d, refused %d", served.Load(), refused.Load())
	}
	// Once idle, each replica gives its slots back: one replica alone can
	// then hold all three.
	time.Sleep(300 * time.Millisecond)
	most.Store(0)
	var ok atomic.Int64
	for range 3 {
		wg.Go(func() {
			if s, _, _ := post(t, reps[0].srv.URL, "gk-narrow", chatBody); s == 200 {
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 3 {
		t.Fatalf("after both replicas went idle, %d of 3 concurrent calls on one were served", ok.Load())
	}
}

// TestFleetStoreDown: with the key store's PostgreSQL crashed, a replica
// keeps serving: requests from its leases and then its own share of the
// limit; a budgeted key from its reservation, then with a 503 (never a
// 429 insufficient_quota: its budget is not spent) rather than risk the
// budget. Once the store is back, the calls served meanwhile are settled:
// the ledger holds exactly what the clients were told.
func TestFleetStoreDown(t *testing.T) {
	gateway.SetFleetTiming(t, 50*time.Millisecond, 200*time.Millisecond)
	c := pgtest.Crashable(t)
	dsn := pgtest.SchemaDSNOn(t, c.DSN())
	up := llmtest.NewServer()
	defer up.Close()
	up.SetResponder(func(llmtest.Recorded) llmtest.Step {
		return llmtest.Step{Reply: &llmtest.Reply{Text: "ok", Usage: &llm.Usage{PromptTokens: 20, CompletionTokens: 500}}}
	})
	o := fleetOpts{up: up, prices: llm.Prices{"openai/gpt-4.1-mini": {Input: 2, Output: 8}}, open: func() *keystore.Store {
		st, err := keystore.OpenPostgres(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}, keys: []gateway.Key{
		{Name: "paced", SHA256: gateway.HashKey("gk-paced"), RPM: 600},
		{Name: "capped", SHA256: gateway.HashKey("gk-capped"), BudgetUSD: 1},
	}}
	r := startReplica(t, o)
	closed := false
	defer func() {
		if !closed {
			r.close(t)
		}
	}()
	var told keystore.NanoUSD
	var calls int64
	capped := func() (int, string) {
		s, h, body := post(t, r.srv.URL, "gk-capped", chatBody)
		if s == 200 {
			c, _ := strconv.ParseFloat(h.Get("x-chorus-cost-usd"), 64)
			told += keystore.ToNano(c)
			calls++
		}
		return s, body
	}
	for range 3 {
		if s, _, _ := post(t, r.srv.URL, "gk-paced", chatBody); s != 200 {
			t.Fatalf("paced before the crash: %d", s)
		}
		if s, body := capped(); s != 200 {
			t.Fatalf("capped before the crash: %d %s", s, body)
		}
	}
	if err := c.Crash(); err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		if s, _, body := post(t, r.srv.URL, "gk-paced", chatBody); s != 200 {
			t.Fatalf("paced call %d with the store down: %d %s", i, s, body)
		}
	}
	servedDown, unavailable := 0, 0
	for range 20 {
		switch s, body := capped(); {
		case s == 200:
			servedDown++
		case s == 503:
			unavailable++
		default:
			t.Fatalf("capped with the store down: %d %s", s, body)
		}
	}
	if servedDown == 0 || unavailable == 0 {
		t.Fatalf("with the store down the budgeted key served %d and refused %d: want its reservation served, then 503s", servedDown, unavailable)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	eventually5 := time.Now().Add(15 * time.Second)
	for {
		s, _ := capped()
		if s == 200 {
			break
		}
		if time.Now().After(eventually5) {
			t.Fatalf("the budgeted key is still refused after the store came back: %d", s)
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.close(t)
	closed = true
	st := o.open()
	defer st.Close()
	k, _ := st.ByName(context.Background(), "capped")
	sp, err := st.SpendOf(context.Background(), k.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("served %d with the store down, %d refused with 503; ledger %+v, told %d over %d calls", servedDown, unavailable, sp, told, calls)
	if sp.Spent != told || sp.Calls != calls || sp.Reserved != 0 {
		t.Fatalf("ledger %+v, the clients were told %d nUSD over %d calls", sp, told, calls)
	}
}

// TestFleetBudgetPeriodRolls: a daily budget spent today is refused until
// the next UTC day, which has a budget of its own, even though the
// replica's reservation of the day before was still held at midnight; the
// ledger keeps each day's calls apart.
func TestFleetBudgetPeriodRolls(t *testing.T) {
	gateway.SetFleetTiming(t, 50*time.Millisecond, 10*time.Second) // spare kept: held across midnight
	up := llmtest.NewServer()
	defer up.Close()
	up.SetResponder(func(llmtest.Recorded) llmtest.Step {
		return llmtest.Step{Reply: &llmtest.Reply{Text: "ok", Usage: &llm.Usage{PromptTokens: 20, CompletionTokens: 500}}}
	})
	var clock atomic.Int64
	day1 := time.Date(2026, 12, 4, 23, 59, 0, 0, time.UTC)
	clock.Store(day1.UnixNano())
	o := fleetOpts{open: sqliteOpener(t), up: up, now: func() time.Time { return time.Unix(0, clock.Load()).UTC() },
		prices: llm.Prices{"openai/gpt-4.1-mini": {Input: 2, Output: 8}},
		keys:   []gateway.Key{{Name: "daily", SHA256: gateway.HashKey("gk-daily"), BudgetUSD: 0.01, BudgetPeriod: keystore.Daily}}}
	r := startReplica(t, o)
	served := func() int {
		n := 0
		for ; n < 10; n++ {
			if s, _, _ := post(t, r.srv.URL, "gk-daily", chatBody); s != 200 {
				break
			}
		}
		return n
	}
	if n := served(); n != 2 {
		t.Fatalf("day one: %d calls served of $0.01 at $0.00404 each, want 2", n)
	}
	clock.Store(day1.Add(2 * time.Minute).UnixNano()) // 00:01 the next day
	if n := served(); n != 2 {
		t.Fatalf("the next day: %d calls served, want 2", n)
	}
	r.close(t)
	st := o.open()
	defer st.Close()
	k, _ := st.ByName(context.Background(), "daily")
	ledger, err := st.Ledger(context.Background(), k.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(ledger) != 2 || ledger[0].Period != "2026-12-04" || ledger[0].Calls != 2 || ledger[1].Period != "2026-12-05" || ledger[1].Calls != 2 ||
		ledger[0].Spent != 2*keystore.ToNano(0.00404) || ledger[1].Spent != 2*keystore.ToNano(0.00404) {
		t.Fatalf("ledger %+v", ledger)
	}
	for _, p := range []string{"2026-12-04", "2026-12-05"} {
		if sp, _ := st.SpendOf(context.Background(), k.ID, p); sp.Reserved != 0 {
			t.Errorf("%s: %d still reserved after a clean stop", p, sp.Reserved)
		}
	}
}
