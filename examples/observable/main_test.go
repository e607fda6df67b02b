package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestObservable: the live text is the simulator's answer, and the
// counting observers agree with it (one request, several observers).
func TestObservable(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out bytes.Buffer
	if err := run(context.Background(), &out, []string{"Describe", "a", "river", "delta."}); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	m := regexp.MustCompile(`(?s)== sim/prose, live ==\n(.*?)\n(\d+) text deltas, (\d+) bytes\n`).FindStringSubmatch(got)
	if m == nil {
		t.Fatalf("output:\n%s", got)
	}
	text := m[1]
	var deltas, size int
	fmt.Sscan(m[2], &deltas)
	fmt.Sscan(m[3], &size)
	if !strings.HasPrefix(text, "[simulated prose] You wrote 4 word(s)") || size != len(text) || deltas < size/4 || deltas > size {
		t.Errorf("text %q (%d bytes), counted %d deltas and %d bytes", text, len(text), deltas, size)
	}
	// The pace observer saw the same deltas, spread over several windows.
	pm := regexp.MustCompile(`deltas per 100 ms window: \[([\d ]+)\]`).FindStringSubmatch(got)
	sum, windows := 0, 0
	if pm != nil {
		for _, f := range strings.Fields(pm[1]) {
			var n int
			fmt.Sscan(f, &n)
			sum += n
			windows++
		}
	}
	if sum != deltas || windows < 3 {
		t.Errorf("pace windows %v: %d deltas in %d windows, want %d over several", pm, sum, windows, deltas)
	}
	if !strings.Contains(got, "finish stop") {
		t.Errorf("no finish line:\n%s", got)
	}
	fan := regexp.MustCompile(`fan-out: sim/prose sent (\d+) text deltas\nfan-out: sim/echo sent (\d+) text deltas`).FindStringSubmatch(got)
	if fan == nil || fan[1] != m[2] || fan[2] == "0" {
		t.Errorf("fan-out counts %v (the first model should match the %s deltas above):\n%s", fan, m[2], got)
	}
}
