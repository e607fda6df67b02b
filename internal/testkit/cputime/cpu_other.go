//go:build !unix

// Package cputime reads the CPU time the process has used, for benchmarks
// that report CPU per unit of work beside wall time (every goroutine and
// thread counted): the packages' Go benchmarks share this one reading.
package cputime

import "time"

// Process is the CPU time the process has used so far; 0 here, where the
// platform does not say.
func Process() time.Duration { return 0 }
