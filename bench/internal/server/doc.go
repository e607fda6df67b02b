// Package server is the benchmarks' loopback provider server. It speaks
// the three wire formats by their paths (POST .../chat/completions,
// POST /v1/messages, POST /v1beta/models/{model}:generateContent and
// :streamGenerateContent) and answers with the pre-encoded bodies of
// package corpus, so that it does no encoding work per request and every
// client reads identical bytes.
//
// Behaviour is set per run with SetMode and chosen per request by model
// name:
//   - a model starting with "gate" is held after its first text delta until
//     Release (or GET /_ctl/release) opens the gate, so that a benchmark can
//     look at N streams all in flight at once;
//   - a model "fan<k>" (k = 1..9) waits k*Mode.FanStep before its headers,
//     the time to first token of a slower or faster model.
//
// Mode.FaultRate injects faults for the soak test: error statuses (429
// with retry-after, 500, 503), connection resets before the headers and
// mid-stream, premature ends, malformed lines and stalls.
//
// Rate limits are not emulated here: scenario 5 runs against
// llmtest.Server with llmtest.WithRateLimit, the root module's limiter
// models (fixed window, token bucket, sliding window; per key or per
// organisation; each format's real headers and 429 bodies), so that the
// benchmarks and the runtime's own tests meet one implementation.
package server
