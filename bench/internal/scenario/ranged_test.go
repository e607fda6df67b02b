package scenario

import (
	"testing"
	"time"

	"github.com/chorusrt/chorus/bench/internal/corpus"
	"github.com/chorusrt/chorus/bench/internal/server"
)

// TestRanged runs the ranged-streams scenario at toy sizes for each of its
// clients: every stream is checked delta by delta, and the CPU per delta
// is reported.
func TestRanged(t *testing.T) {
	srv, err := server.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	srv.SetMode(server.Mode{Deltas: 30, FlushEvery: 1})
	for _, c := range RangedClients {
		res := Run(Job{Scenario: "ranged", Client: c, Format: corpus.OpenAI, BaseURL: srv.URL, Streams: 8, Deltas: 30, Repeats: 2, Timeout: 30 * time.Second})
		if res.Err != "" {
			t.Fatalf("%s: %s", c, res.Err)
		}
		if res.Values["cpu_ns_per_delta"] <= 0 || len(res.Samples["cpu_ns_per_delta"]) != 2 {
			t.Errorf("%s: %v", c, res.Values)
		}
	}
}
