package main

import (
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/bench/internal/corpus"
)

// TestRangedSection renders the ranged-streams section from made-up rows:
// the advantage over openai-go and the target's verdict, a miss by how
// much.
func TestRangedSection(t *testing.T) {
	r := &runner{p: fullParams(), timing: map[string]time.Duration{}}
	for c, v := range map[string]float64{"floor-extract": 900, "chorus-all": 1000, "openai-go": 14000} {
		r.rows = append(r.rows, Row{Scenario: "ranged", Group: "200 streams", Client: c, Format: corpus.OpenAI, Values: map[string]float64{"cpu_ns_per_delta": v, "deltas_per_s": 1e6}, Runs: 1})
	}
	var b strings.Builder
	r.sectionRanged(&b)
	md := b.String()
	for _, want := range []string{rangedBegin, rangedEnd, "| 1000 ns against 14000 ns per delta: 14.0× less | **missed** by 18% (14.0× instead of 17×) |", "| 14000 | 15.6× | 14.0× |"} {
		if !strings.Contains(md, want) {
			t.Errorf("no %q in:\n%s", want, md)
		}
	}
}
