// Command soak keeps thousands of streams in flight through the Chorus
// runtime against a fault-injecting loopback server, then prints (and,
// with -append, appends to RESULTS.md) the calls completed, the failures
// by error type, and goroutines and heap at the start, middle and end.
//
//	cd bench && go run ./cmd/soak -duration 60s -streams 2000 -fault-rate 0.05
//
// It stops by itself after -duration (plus the time in-flight calls need
// to end) and exits non-zero if goroutines or heap did not return to the
// start level.
package main
