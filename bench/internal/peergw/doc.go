// Package peergw is the peer gateway scenario (issue 38): in one run and
// on one fake upstream with zero latency (its own process, pre-encoded
// OpenAI Chat Completions bodies from package corpus), it measures
// Chorus's gateway (gateway.New over the runtime, served by net/http in
// a process of its own), a plain net/http/httputil reverse proxy (the
// floor: no translation, no accounting; its own process) and the
// @portkey-ai/gateway npm package (build/start-server.js under the
// machine's Node, pinned by bench/testdata/portkey; its own process),
// each on HTTP/1.1 and on HTTP/2 without TLS (h2c, prior knowledge)
// where it serves it.
//
// For each gateway and protocol, buffered and streamed: the gateway
// process's CPU per request (utime+stime of /proc/<pid>/stat, read
// before and after a closed loop at a fixed concurrency), the throughput
// of that loop, and, at concurrency 1, the latency (buffered), the time
// to the first delta and to the end of the stream (streamed), each also
// straight to the upstream, so that "added" is the gateway's own share. A
// gateway that cannot serve a case is reported with the error it gave.
package peergw
