package scenario

import (
	"testing"
	"time"

	"github.com/chorusrt/chorus/bench/internal/clients"
	"github.com/chorusrt/chorus/bench/internal/corpus"
	"github.com/chorusrt/chorus/bench/internal/server"
)

var allClients = []string{"floor-bare", "floor-extract", "chorus", "chorus-cb", "chorus-runtime", "openai-go", "go-openai", "langchaingo", "eino", "anthropic-sdk", "genai"}

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

// TestRateLimitedRuntimePaces checks scenario 5's server and the
// runtime's pacing at a toy size: every request completes, and no 429
// is sent after the first window.
func TestRateLimitedRuntimePaces(t *testing.T) {
	srv, err := server.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	srv.SetMode(server.Mode{RateLimit: server.RateLimit{Requests: 40, Tokens: 4000, Completion: 16, Window: 300 * time.Millisecond}})
	res := Run(Job{Scenario: "ratelimit", Client: "chorus-runtime", Format: corpus.OpenAI, BaseURL: srv.URL, Requests: 100, Concurrency: 16, MaxTokens: 16, Timeout: 30 * time.Second})
	st := srv.Stats()
	if res.Err != "" || res.Values["ok"] != 100 {
		t.Fatalf("%v %v", res.Err, res.Values)
	}
	if st.Admitted != 100 || st.LimitedAfterFirst != 0 {
		t.Errorf("server: %+v", st)
	}
	// A client without retries meets 429s and reports them as failures.
	srv.SetMode(server.Mode{RateLimit: server.RateLimit{Requests: 40, Window: time.Minute}})
	res = Run(Job{Scenario: "ratelimit", Client: "go-openai", Format: corpus.OpenAI, BaseURL: srv.URL, Requests: 60, Concurrency: 4, Timeout: 30 * time.Second})
	if res.Values["ok"] != 40 || res.Values["failed_429"] != 20 || srv.Stats().Limited != 20 {
		t.Errorf("go-openai: %v, server %+v", res.Values, srv.Stats())
	}
}
