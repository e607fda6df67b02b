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

// TestBatch runs the example on 1,500 prompts against a simulator limited
// to 500 requests per second: every prompt succeeds, the limit is obeyed
// (at least three seconds), and pacing leaves few 429s.
func TestBatch(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out bytes.Buffer
	if err := run(context.Background(), &out, []string{"-n", "1500", "-rps", "500", "-progress", "200ms"}); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	m := regexp.MustCompile(`(\d+) prompts in (\S+): \d+ req/s, (\d+) tokens, (\d+) failed`).FindStringSubmatch(got)
	if m == nil || m[1] != "1500" || m[4] != "0" || m[3] == "0" {
		t.Fatalf("summary:\n%s", got)
	}
	var reqs, limited int
	s := regexp.MustCompile(`provider sim credential 0: \d+ requests, \d+ answered 429`).FindString(got)
	fmt.Sscanf(s, "provider sim credential 0: %d requests, %d answered 429", &reqs, &limited)
	// Requests counts every admitted attempt, a 429 included.
	if reqs-limited != 1500 || limited > 45 {
		t.Errorf("%d requests, %d 429s; want 1500 answered and at most 3%% refused:\n%s", reqs, limited, got)
	}
	if strings.Count(got, "ETA") < 3 {
		t.Errorf("too few progress lines:\n%s", got)
	}
	var secs float64
	fmt.Sscanf(strings.TrimSuffix(m[2], "s"), "%f", &secs)
	if !strings.HasSuffix(m[2], "s") || strings.HasSuffix(m[2], "ms") || secs < 2 {
		t.Errorf("1500 prompts at 500/s took %s: the limit was not applied", m[2])
	}
}
