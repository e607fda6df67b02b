package peergw

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestScenario runs every case at toy sizes: straight to the upstream,
// the reverse proxy and Chorus's gateway must serve them all (each
// answer and each stream checked), and the Node gateway is either
// measured or reported with why not (here, when it is not installed).
func TestScenario(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := filepath.Abs("../../../.cache/npm-portkey")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cases, err := Run(ctx, Config{Self: self, PortkeyDir: dir, Requests: 20, Streams: 5, Deltas: 30, Concurrency: 4, Duration: 200 * time.Millisecond, ProfileDir: t.TempDir(), Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if want := len(Gateways) * len(Protos) * len(Modes); len(cases) != want {
		t.Fatalf("%d cases, want %d", len(cases), want)
	}
	for _, c := range cases {
		if c.Gateway == "portkey" {
			if c.Err == "" && c.Values["cpu_us"] <= 0 {
				t.Errorf("portkey %s %s: neither measured nor explained: %+v", c.Proto, c.Mode, c)
			}
			continue
		}
		if c.Err != "" {
			t.Errorf("%s %s %s: %s", c.Gateway, c.Proto, c.Mode, c.Err)
			continue
		}
		keys := []string{"p50_us", "p99_us", "rps"}
		if c.Mode == "streamed" {
			keys = []string{"ttfd_p50_us", "end_p99_us", "streams_per_s"}
		}
		if c.Gateway != "direct" {
			keys = append(keys, "cpu_us")
		}
		for _, k := range keys {
			if c.Values[k] <= 0 {
				t.Errorf("%s %s %s: %s = %v", c.Gateway, c.Proto, c.Mode, k, c.Values[k])
			}
		}
	}
}

func TestProcCPU(t *testing.T) {
	d, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if d < 0 {
		t.Fatalf("cpu %v", d)
	}
}
