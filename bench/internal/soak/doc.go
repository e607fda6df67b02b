// Package soak keeps thousands of streams in flight through the Chorus
// runtime, for a fixed duration, against a loopback server (in a child
// process) that injects faults: 429 with retry-after, 500, 503, resets
// before the headers and mid-stream, premature ends, malformed lines and
// stalls past the idle timeout. It counts completed and failed requests
// by error type and samples goroutines and live heap at the start, in the
// middle and at the end, which must come back to the start level.
package soak
