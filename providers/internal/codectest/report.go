package codectest

import (
	"testing"
	"time"

	"github.com/chorusrt/chorus/internal/testkit/cputime"
)

// PerDelta reports a benchmark's cost per delta, deltas per iteration:
// ns/delta (wall time) and cpu-ns/delta (the process's CPU time since
// cpu0, a cputime.Process reading taken when the timed loop started). CPU time
// is what decoders are compared by: on a loaded machine wall time also
// counts the time other processes held the cores.
func PerDelta(b *testing.B, deltas int, cpu0 time.Duration) {
	if b.N == 0 || deltas == 0 {
		return
	}
	n := float64(b.N) * float64(deltas)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/delta")
	if cpu := cputime.Process(); cpu > 0 {
		b.ReportMetric(float64((cpu-cpu0).Nanoseconds())/n, "cpu-ns/delta")
	}
}
