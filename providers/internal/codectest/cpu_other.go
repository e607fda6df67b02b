//go:build !unix

package codectest

import "time"

// ProcessCPU is the CPU time the process has used so far; 0 here, where
// the platform does not say.
func ProcessCPU() time.Duration { return 0 }
