//go:build unix

package codectest

import (
	"syscall"
	"time"
)

// ProcessCPU is the CPU time (user and system) the process has used so
// far, every thread counted; 0 where the platform does not say.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
