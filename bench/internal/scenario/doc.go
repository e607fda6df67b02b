// Package scenario holds the measuring side of each benchmark scenario.
// Each Job runs in a fresh child process (cmd/benchrun -child), so that
// its CPU time (getrusage), peak RSS and heap are its own, while the
// loopback server runs in the parent.
package scenario
