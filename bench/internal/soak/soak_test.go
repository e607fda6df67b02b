package soak

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if MaybeServe() { // the test binary is also the soak's server
		return
	}
	goleak.VerifyTestMain(m)
}

// TestSoakShort runs a three-second soak: calls complete, only faults that
// strike after output fail a call, and goroutines and heap come back.
func TestSoakShort(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), Config{Duration: 3 * time.Second, Streams: 60, FaultRate: 0.1}, self)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Completed == 0 || rep.Requests < rep.Started {
		t.Fatalf("completed %d of %d, server saw %d", rep.Completed, rep.Started, rep.Requests)
	}
	var injected int64
	for _, n := range rep.Injected {
		injected += n
	}
	if injected == 0 {
		t.Error("no fault injected")
	}
	for kind := range rep.Failed {
		if !strings.HasPrefix(kind, "after partial output:") {
			t.Errorf("a fault before output was not retried: %s", kind)
		}
	}
	if !rep.Returned {
		t.Errorf("goroutines or heap did not return: %+v", rep.Samples)
	}
	if md := rep.Markdown(); !strings.Contains(md, "## Soak") || !strings.Contains(md, "| start |") {
		t.Errorf("markdown: %s", md)
	}
}
