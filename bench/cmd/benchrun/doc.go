// Command benchrun runs Chorus's benchmark report: every scenario for
// every client (the floors, Chorus, and the peer SDKs), each measurement
// in a fresh child process against a loopback server in this process,
// medians of several runs; it then writes RESULTS.md, ratios.png and,
// unless -soak 0, runs the soak test and appends its section.
//
//	cd bench && go run ./cmd/benchrun -out RESULTS.md
//
// -quick shrinks every scenario for a smoke run (about two minutes);
// -only picks scenarios (decode, e2e, concurrent, fanout, ratelimit,
// batch, tls, gateway, inproc, frameworks, route, cache, soak); -from
// a.json,b.json renders one report from several -json dumps, each
// scenario from the last that measured it. route and cache run the root
// module's own Go benchmarks (gobench.go).
package main
