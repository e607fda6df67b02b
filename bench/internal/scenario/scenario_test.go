package scenario

import (
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/bench/internal/clients"
	"github.com/chorusrt/chorus/bench/internal/corpus"
	"github.com/chorusrt/chorus/bench/internal/server"
	"github.com/chorusrt/chorus/llmtest"
)

var allClients = []string{"floor-bare", "floor-extract", "chorus", "chorus-cb", "chorus-runtime", "openai-go", "go-openai", "langchaingo", "eino", "anthropic-sdk", "genai", "eino-chorus", "langchaingo-chorus"}

// TestEveryClientEveryScenario runs each scenario at toy sizes for every
// client on every format it speaks: each stream is checked delta by delta
// (count and bytes), each buffered answer by its text.
func TestEveryClientEveryScenario(t *testing.T) {
	srv, err := server.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, f := range corpus.Formats {
		for _, c := range allClients {
			if !clients.Supports(c, f) {
				continue
			}
			t.Run(string(f)+"/"+c, func(t *testing.T) {
				jobs := []Job{
					{Scenario: "decode", Deltas: 40, Repeats: 1},
					{Scenario: "e2e", Deltas: 40, Streams: 2, Repeats: 1},
					{Scenario: "concurrent", Deltas: 20, Streams: 30},
					{Scenario: "fanout", Streams: 2, Repeats: 1},
					{Scenario: "batch", Requests: 40, Concurrency: 8},
				}
				for _, j := range jobs {
					j.Client, j.Format, j.BaseURL, j.Timeout = c, f, srv.URL, 30*time.Second
					switch j.Scenario {
					case "fanout":
						srv.SetMode(server.Mode{Deltas: 5, FanStep: time.Millisecond})
					case "concurrent":
						srv.SetMode(server.Mode{Deltas: j.Deltas, FlushEvery: 7})
					default:
						srv.SetMode(server.Mode{Deltas: max(j.Deltas, 1)})
					}
					res := Run(j)
					if res.Err != "" {
						t.Fatalf("%s: %s", j.Scenario, res.Err)
					}
					if j.Scenario == "concurrent" && res.Values["inflight"] != float64(j.Streams) {
						t.Errorf("concurrent: %v streams in flight at once, want %d", res.Values["inflight"], j.Streams)
					}
					if j.Scenario == "fanout" && !(res.Values["fanout_us"] > 0 && res.Values["single_us"] > 0) {
						t.Errorf("fanout: %v", res.Values)
					}
				}
			})
		}
	}
}

// TestRateLimitedRuntimePaces checks scenario 5 against llmtest's
// limiter at a toy size: through the runtime every request succeeds, and
// on a fixed window that reports its limits no 429 comes after the first
// window; a client without retries (go-openai) loses exactly the refused
// calls, which the server counts; with several keys of one organisation
// the peers go round-robin over one client per key.
func TestRateLimitedRuntimePaces(t *testing.T) {
	rl := llmtest.RateLimit{Requests: 20, Window: 300 * time.Millisecond}
	srv := llmtest.NewServer(llmtest.WithRateLimit(rl))
	defer srv.Close()
	res := Run(Job{Scenario: "ratelimit", Client: "chorus-runtime", Format: corpus.OpenAI, BaseURL: srv.URL, Requests: 60, Concurrency: 8, Timeout: 30 * time.Second})
	if res.Err != "" || res.Values["ok"] != 60 {
		t.Fatalf("%v %v", res.Err, res.Values)
	}
	t0 := time.Unix(0, int64(res.Values["t0_unix_ns"]))
	for _, at := range srv.RateLimitedAt() {
		if at.Sub(t0) > rl.Window {
			t.Errorf("429 at %v after the start, past the first window", at.Sub(t0))
		}
	}

	// A client without retries meets 429s and reports them as failures.
	srv2 := llmtest.NewServer(llmtest.WithRateLimit(llmtest.RateLimit{Requests: 20, Window: time.Minute}))
	defer srv2.Close()
	res = Run(Job{Scenario: "ratelimit", Client: "go-openai", Format: corpus.OpenAI, BaseURL: srv2.URL, Requests: 30, Concurrency: 4, Timeout: 30 * time.Second})
	if res.Values["ok"] != 20 || res.Values["failed_429"] != 10 || srv2.RateLimited() != 10 {
		t.Errorf("go-openai: %v, server sent %d 429s", res.Values, srv2.RateLimited())
	}

	// Several keys of one organisation: one budget, every key used.
	keys := []string{"k-a", "k-b", "k-c"}
	srv3 := llmtest.NewServer(llmtest.WithRateLimit(llmtest.RateLimit{Requests: 12, Window: time.Minute, Orgs: map[string]string{"k-a": "o", "k-b": "o", "k-c": "o"}}))
	defer srv3.Close()
	res = Run(Job{Scenario: "ratelimit", Client: "go-openai", Format: corpus.OpenAI, BaseURL: srv3.URL, Requests: 15, Concurrency: 3, Keys: keys, Timeout: 30 * time.Second})
	if res.Values["ok"] != 12 || srv3.RateLimited() != 3 {
		t.Errorf("go-openai, 3 keys of one organisation: %v, server sent %d 429s", res.Values, srv3.RateLimited())
	}
	seen := map[string]int{}
	for _, r := range srv3.Requests() {
		seen[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]++
	}
	for _, k := range keys {
		if seen[k] != 5 {
			t.Errorf("key %s sent %d requests, want 5 (round-robin): %v", k, seen[k], seen)
		}
	}
}

// TestGatewayScenario runs the gateway scenario at a toy size: every
// request through the gateway and in-process answers the expected text,
// every stream delivers every delta, and each figure is measured.
func TestGatewayScenario(t *testing.T) {
	srv, err := server.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	srv.SetMode(server.Mode{Deltas: 30, FlushEvery: 5})
	res := Run(Job{Scenario: "gateway", BaseURL: srv.URL, Rates: []int{200}, Duration: 250 * time.Millisecond, Streams: 2, Deltas: 30, Repeats: 1, Timeout: 30 * time.Second})
	if res.Err != "" {
		t.Fatal(res.Err)
	}
	for _, k := range []string{"inproc_200_errors", "gw_200_errors"} {
		if v, ok := res.Values[k]; !ok || v != 0 {
			t.Errorf("%s = %v (present %v), notes %v", k, v, ok, res.Notes)
		}
	}
	for _, k := range []string{"inproc_200_p50_us", "gw_200_p50_us", "gw_200_p99_us", "gw_200_cpu_us_per_req", "gw_cpu_ns_per_delta", "inproc_cpu_ns_per_delta"} {
		if !(res.Values[k] > 0) {
			t.Errorf("%s = %v, want > 0", k, res.Values[k])
		}
	}
	if n := res.Values["gw_200_requests"]; n != 50 {
		t.Errorf("gateway requests %v, want 50 (200/s for 250 ms)", n)
	}
}

// TestTLSScenarios runs scenarios 2 and 3 over loopback TLS, HTTP/1.1 and
// HTTP/2, for a floor, Chorus and a peer of each format, each trusting
// the test certificate through its http.Client; the server counts the
// requests that came over HTTP/2.
func TestTLSScenarios(t *testing.T) {
	srv, err := server.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	specs := []clients.Spec{{Name: "floor-extract", Format: corpus.OpenAI}, {Name: "chorus", Format: corpus.OpenAI}, {Name: "chorus-runtime", Format: corpus.OpenAI},
		{Name: "openai-go", Format: corpus.OpenAI}, {Name: "anthropic-sdk", Format: corpus.Anthropic}, {Name: "genai", Format: corpus.Gemini}}
	for _, h2 := range []bool{false, true} {
		ts, err := srv.StartTLS(h2)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range specs {
			before := srv.HTTP2Requests()
			for _, j := range []Job{{Scenario: "tls-e2e", Deltas: 40, Streams: 2, Repeats: 1}, {Scenario: "tls-concurrent", Deltas: 20, Streams: 30}} {
				j.Client, j.Format, j.BaseURL, j.CAPEM, j.HTTP2, j.Timeout = s.Name, s.Format, ts.URL, ts.CAPEM, h2, 30*time.Second
				if j.Scenario == "tls-concurrent" {
					srv.SetMode(server.Mode{Deltas: j.Deltas, FlushEvery: 7})
				} else {
					srv.SetMode(server.Mode{Deltas: j.Deltas})
				}
				if res := Run(j); res.Err != "" {
					t.Fatalf("h2=%v %s %s: %s", h2, s, j.Scenario, res.Err)
				}
			}
			if got := srv.HTTP2Requests() - before; h2 != (got > 0) {
				t.Errorf("h2=%v %s: %d requests over HTTP/2", h2, s, got)
			}
		}
		ts.Close()
	}
}

// TestInProcess runs the in-process request cost for the runtime on every
// format, plain Chorus, the floor and a peer: every answer is checked and
// every figure measured.
func TestInProcess(t *testing.T) {
	for _, s := range []clients.Spec{{Name: "chorus-runtime", Format: corpus.OpenAI}, {Name: "chorus-runtime", Format: corpus.Anthropic}, {Name: "chorus-runtime", Format: corpus.Gemini},
		{Name: "chorus", Format: corpus.OpenAI}, {Name: "floor-extract", Format: corpus.OpenAI}, {Name: "go-openai", Format: corpus.OpenAI}} {
		res := Run(Job{Scenario: "inproc", Client: s.Name, Format: s.Format, Repeats: 1, Timeout: 30 * time.Second})
		if res.Err != "" {
			t.Fatalf("%s: %s", s, res.Err)
		}
		for _, k := range []string{"cpu_us_per_req", "us_per_req", "allocs_per_req", "bytes_per_req"} {
			if !(res.Values[k] > 0) {
				t.Errorf("%s: %s = %v", s, k, res.Values[k])
			}
		}
	}
}

// TestGatewayLogScenario runs the request log scenario at a toy size:
// every request answers with the log off and on, each figure is measured,
// and the log wrote a record per request it served.
func TestGatewayLogScenario(t *testing.T) {
	srv, err := server.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	res := Run(Job{Scenario: "gatewaylog", BaseURL: srv.URL, Rates: []int{200}, Duration: 250 * time.Millisecond, Repeats: 2, Timeout: 30 * time.Second})
	if res.Err != "" {
		t.Fatal(res.Err)
	}
	for _, k := range []string{"off_200_errors", "on_200_errors", "dropped"} {
		if v, ok := res.Values[k]; !ok || v != 0 {
			t.Errorf("%s = %v (present %v), notes %v", k, v, ok, res.Notes)
		}
	}
	for _, k := range []string{"off_200_cpu_us_per_req", "on_200_cpu_us_per_req", "log_200_cpu_ratio", "on_200_p50_us"} {
		if res.Values[k] <= 0 {
			t.Errorf("%s = %v", k, res.Values[k])
		}
	}
	// The warm-up's 50 and two runs of 50 requests at 200/s for 250 ms.
	if w := res.Values["written"]; w != 150 {
		t.Errorf("written %v, want 150", w)
	}
}

// TestGatewayFleetScenario: the fleet's scenario serves every request of
// both gateways, and the key store's ledger holds one settled call per
// request its gateway answered, nothing left reserved once it closed.
func TestGatewayFleetScenario(t *testing.T) {
	srv, err := server.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	res := Run(Job{Scenario: "gatewayfleet", BaseURL: srv.URL, Rates: []int{200}, Duration: 250 * time.Millisecond, Repeats: 2, Timeout: 30 * time.Second})
	if res.Err != "" {
		t.Fatal(res.Err)
	}
	for _, k := range []string{"off_200_errors", "on_200_errors", "reserved_after_close"} {
		if v, ok := res.Values[k]; !ok || v != 0 {
			t.Errorf("%s = %v (present %v), notes %v", k, v, ok, res.Notes)
		}
	}
	for _, k := range []string{"off_200_cpu_us_per_req", "on_200_cpu_us_per_req", "fleet_200_cpu_ratio", "on_200_p50_us"} {
		if res.Values[k] <= 0 {
			t.Errorf("%s = %v", k, res.Values[k])
		}
	}
	if c := res.Values["settled_calls"]; c != 150 {
		t.Errorf("settled calls %v, want 150 (50 warm-up, two runs of 50)", c)
	}
}
