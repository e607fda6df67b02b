//go:build unix

// Package cputime reads the CPU time the process has used, for benchmarks
// that report CPU per unit of work beside wall time (every goroutine and
// thread counted): the packages' Go benchmarks share this one reading.
package cputime

import (
	"syscall"
	"time"
)

// Process is the CPU time (user and system) the process has used so far,
// every thread counted; 0 where the platform does not say.
func Process() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
