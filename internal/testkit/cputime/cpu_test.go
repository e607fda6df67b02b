package cputime

import (
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestProcessCounts: spinning for 50ms of wall time adds CPU time (on a
// platform that reports it), and the reading never goes back.
func TestProcessCounts(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" || runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		if Process() != 0 {
			t.Fatal("a platform without getrusage reported CPU time")
		}
		return
	}
	before := Process()
	x := 0
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
		x++
	}
	after := Process()
	if after <= before {
		t.Fatalf("CPU time %v after spinning, %v before (x=%d)", after, before, x)
	}
}
