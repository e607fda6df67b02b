// Package gateway serves the providers' own wire formats over a
// runtime.Runtime, so that code in any language, through its official SDK,
// gets Chorus's pacing, fallbacks, learn-once state and aliases. A Handler
// is an http.Handler: mount it in your own server, or run it with
// "chorus serve".
//
//	rt, _ := runtime.New(runtime.FromEnv())
//	h, _ := gateway.New(rt, gateway.Options{})
//	http.ListenAndServe("127.0.0.1:8080", h) // no keys: loopback only
//
// # Endpoints
//
// OpenAI Chat Completions format:
//
//	POST /v1/chat/completions   buffered, or SSE chunks with "stream":true
//	                            (tools, tool_choice, response_format,
//	                            stream_options.include_usage)
//	POST /v1/responses          the Responses API, stateless: buffered, or
//	                            its SSE events with "stream":true (function
//	                            tools, reasoning items with encrypted_content
//	                            replayed, text.format); previous_response_id,
//	                            conversation and background are refused (400)
//	POST /v1/embeddings         input as a string or strings; float or base64
//	GET  /v1/models             the runtime's aliases, then every provider's
//	                            models as provider/model (to a client that
//	                            sends anthropic-version, an Anthropic SDK,
//	                            Anthropic's pages: limit, after_id,
//	                            before_id, has_more)
//	GET  /v1/models/{model}     one of them (the model may hold a slash)
//
// OpenAI Files and Batch (batch jobs on any provider, through package batch):
//
//	POST   /v1/files                 multipart upload, purpose=batch only
//	GET    /v1/files, /v1/files/{id}, GET /v1/files/{id}/content, DELETE /v1/files/{id}
//	POST   /v1/batches               endpoint /v1/chat/completions or /v1/embeddings, window 24h
//	GET    /v1/batches, /v1/batches/{id}
//	POST   /v1/batches/{id}/cancel
//
// A batch is validated first (status validating): every line must be JSON
// with a custom_id, the batch's endpoint as url, and a model its key may
// call; otherwise the batch fails with OpenAI's errors list (code, line,
// param) and nothing runs. Then it runs (in_progress) through batch.Run:
// live on the runtime, paced to the providers' limits, with
// Options.BatchConcurrency lines at once; or, with Options.BatchNative, on
// the providers' own batch APIs where they have one. Its output is split
// (finalizing) into OpenAI's output file (answered lines) and error file
// (failed lines, bad lines included), each with an id only once it holds a
// line. Cancel stops the job at once (upstream calls are cancelled, native
// batches cancelled) and leaves in the files what finished. The completion
// window is kept: at expires_at (24 hours after creation, also across a
// restart) the job stops as a cancel does, and the batch is expired, its
// answered lines in the output file and every other line in the error
// file with OpenAI's code batch_expired. Batch lines are not charged to the key's RPM, TPM or concurrency:
// the runtime paces them.
//
// Files and batches live in Options.FilesDir (default a temporary
// directory, removed by Close): each file as its bytes and a JSON object
// beside them, each batch as a JSON object and its append-only output.
// Ids are "file-" or "batch_" and 128 random bits, unguessable; a file or
// batch belongs to the gateway key that made it (another key is told 404).
// An upload is streamed to disk and capped at Options.MaxFileBytes
// (default 200 MiB, 413 past it); a batch at Options.MaxBatchLines lines
// (default 50,000). A Handler closed while batches run leaves them in the
// directory, and a new Handler on it resumes them (batch.Resume: a line
// already answered is never run or written again). With Options.KeyStore
// they live in the store instead (see the fleet, below).
//
// Anthropic Messages format:
//
//	POST /v1/messages              buffered, or Anthropic's streamed events
//	                               (message_start, content_block_start, ping
//	                               after the first, *_delta,
//	                               content_block_stop, message_delta,
//	                               message_stop); thinking blocks with their
//	                               signatures, tool_use and tool_result
//	POST /v1/messages/count_tokens the provider's own count, never an estimate
//
// Gemini format (the model may hold a slash: models/openai/gpt-4.1-mini):
//
//	POST /v1beta/models/{model}:generateContent
//	POST /v1beta/models/{model}:streamGenerateContent?alt=sse   (SSE only;
//	                               a tool call is sent whole in the last
//	                               chunk, as Gemini never streams arguments)
//	POST /v1beta/models/{model}:embedContent
//	POST /v1beta/models/{model}:batchEmbedContents
//	GET  /v1beta/models[/{model}]  the same models as Gemini lists them
//	                               (pageSize, pageToken)
//
// A Gemini functionCall without an id is given its name as id; a
// functionResponse answers the call with its id, else its name.
//
// The root, for whoever opens the address (root.go; no key needed):
//
//	GET /          a browser (Accept: text/html) is sent to Options.Console
//	               when a console is mounted; otherwise the version and the
//	               endpoint families above as JSON (Root)
//	GET /version   the build's version (module version, VCS revision)
//
// A path no route serves is a 404 in the client's own format (Gemini's under
// /v1beta/, Anthropic's for a client sending anthropic-version or x-api-key,
// OpenAI's otherwise with code unknown_endpoint) that names the method and
// path and says it is not an endpoint.
//
// Any model behind any format: an Anthropic client may call
// openai/gpt-4.1-mini and an OpenAI client anthropic/claude-haiku-4-5; the
// request and answer are translated through package llm. A streamed
// Anthropic thinking block ends with its signature_delta exactly as
// Anthropic sent it (the runtime's stream carries it as an EventReasoning
// with empty Text and the Signature, once per block); the buffered answer
// carries the signatures too.
//
// A model is what the runtime takes: provider/model or an alias (a fallback
// list), or a fan-out alias of Options.FanOut: POST /v1/chat/completions
// sends it to each of its models at once and answers with a choice per
// model, as OpenAI answers n > 1 (choice i: model i; buffered, or the
// choices' chunks interleaved in one stream; usage summed; a model that
// failed before its answer began has no choice and is named in
// x-chorus-fanout-failed, a trailer once a stream's headers went). The
// other endpoints refuse a fan-out (400): their formats have one answer. Requests
// are decoded, and answers encoded, by the server side of each format's
// codec package (server.go in providers/openai, providers/anthropic and providers/gemini): the gateway holds no wire
// knowledge of its own. On the hot path of a stream, a text delta is
// written as a frame taken from the codec's own encoding of a text delta
// (two probe texts, checked byte for byte, per stream or per Anthropic
// text block) around the delta's JSON string, escaped as encoding/json
// escapes; where the check fails the codec writes every event. Measured:
// the codecs' encoding/json was two thirds of the gateway's CPU per delta
// and all but one of its allocations (BenchmarkStream).
//
// # Keys
//
// With Options.Keys empty the handler authenticates no one: whoever can
// reach it spends the runtime's provider keys, so it must listen on
// loopback only ("chorus serve" refuses any other address without keys).
// With keys, every request must present one the way its SDK sends it:
// Authorization: Bearer (OpenAI), x-api-key (Anthropic), x-goog-api-key or
// ?key= (Gemini). Only SHA-256 hashes are kept; a presented key is hashed
// and looked up by its hash, so the time taken depends on the hash of what
// the client sent, never on how much of a key it guessed. A key may be limited to models (exact names or "provider/*"; 403
// otherwise), to requests and tokens per minute, and to calls in flight;
// past a limit the answer is 429 with retry-after. A key may have a budget
// in US dollars (Key.BudgetUSD), charged each answer's cost from the
// runtime's prices (batch lines included); once spent, its calls get a 429
// insufficient_quota with x-should-retry: false, which the SDKs do not
// retry. The window is a fixed
// minute from the first request after the previous window ended; tokens are
// charged after each call from the usage it reported (prompt and
// completion), so the last call of a window may overrun its token budget.
// Provider keys are never taken from a client, never forwarded from one,
// never shown: a client's key is only ever compared with the gateway keys.
//
// # A fleet: keys, limits and spend in a key store
//
// With Options.KeyStore (package keystore: a SQLite file for one server,
// PostgreSQL for a fleet) the keys live in the store: Options.Keys seed
// it, and every change made in it (through any replica's console, or
// chorus keys) is followed by a poll every 250 ms, a rotated key's
// previous hash accepted through its grace period. Limits and budgets
// then hold for every replica on the store (fleet.go): requests and
// tokens are leased per aligned UTC minute, a twentieth of the limit at a
// time, concurrency slots one at a time, and budget as a reservation, a
// hundredth at a time, each ahead of need, so a request pays a store round
// trip only when its replica's lease has run out. Each call reserves its
// most possible cost before it runs (estimate.go: its bytes as tokens at
// the dearest input price, its max_tokens or 4,096 at the output price)
// and is refused when the key's budget cannot cover it: the budget is
// never overrun (but by what a call without max_tokens answered beyond
// 4,096 tokens). Costs are settled in one transaction per replica every
// 250 ms; a call that cost more than its reservation reserves the rest
// before its answer is sent. A replica killed with SIGKILL leaves its
// reservation counted, and after 10 s of silence a live replica counts it
// as spent: the ledger never under-counts, and over-counts by at most what
// the dead replica held (its calls' reservations and two hundredths of
// the budget). While the store is unreachable a replica serves from its
// leases, then from its share of each limit (the limit over the live
// replicas it last saw) for the window; a call that needs more budget
// reservation gets a 503. Departure from DESIGN.md's "through the
// cluster": the store is the owner of each key's leases, not a cluster
// grain. Every replica already shares the store and needs it for the
// ledger (which must survive SIGKILL); an owner grain would add a second
// thing to fail and a round trip per grant, and would still have to write
// the store. Leases taken from the store in chunks keep the request path
// free of both.
//
// Files and batches are in the store too (fleetfiles.go), the files
// directory a cache: every replica lists, reads, downloads, deletes and
// cancels them. One replica runs a batch under a lease (10 s, renewed
// every second, when it also sees a cancel asked through another
// replica); its output lines reach the store every 200 ms, appended by
// the lease's holder only. When the holder dies its lease expires and
// another replica takes the batch, rebuilds its output from the store and
// resumes it: no custom_id is written twice, and a line answered within
// the last flush before the kill (or in flight at it) runs again. A
// Handler given a store on a files directory it used without one moves
// the files and batches there into the store.
//
// # Headers
//
// Every answer to a keyed request carries the key's own limits in the
// names the OpenAI SDKs read: x-ratelimit-{limit,remaining,reset}-
// {requests,tokens} (reset as Go duration text, "45s").
//
// Every answer a provider served (or a failed call tried) says how, from
// the runtime's CallReport:
//
//	x-chorus-model          provider/model that served (an alias's target)
//	x-chorus-provider       its provider id
//	x-chorus-credential     the credential's fingerprint (a short hash, never the key)
//	x-chorus-fallback-step  the target's index in the alias's list (0: first)
//	x-chorus-attempts       placements on a credential, the serving one included
//	x-chorus-queue-ms       time spent waiting for admission, in milliseconds
//	x-chorus-http-attempts  HTTP attempts of the serving placement (buffered only)
//	x-chorus-cost-usd       the answer's cost, when its model is priced
//
// A stream's headers are sent before its first byte, so they carry what is
// known then: model, provider, credential, step, attempts and queue time
// (final: a stream never falls back after its first event). Its cost, known
// only at its end, is sent as an HTTP trailer x-chorus-cost-usd. A failed
// call's error answer carries the same headers for what it tried last.
//
// # Errors
//
// Errors are written in the client's format with a status its SDK maps to
// its own exception (see errorFor): 400 for a request the gateway or the
// runtime refuses, 404 for a model no provider or alias serves, 401 and
// 403 for gateway keys, 429 with retry-after for rate limits (the key's,
// or the providers' once the runtime's waiting and fallbacks are spent),
// 503 for a full admission queue, 502 for a provider that failed, 504 for
// a passed deadline. A provider's own 401 or 403 is a 502: the client's
// key was fine.
//
// # Telemetry
//
// Each request is an OpenTelemetry HTTP server span (semconv v1.41.0
// names: "POST /v1/chat/completions", http.request.method, http.route,
// http.response.status_code, url.path, url.scheme, server.address,
// server.port, client.address, user_agent.original,
// network.protocol.version; error.type and an error status for 5xx only).
// An incoming W3C traceparent is honoured, whatever the global propagator:
// the span is the client's span's child. The runtime's spans of the call
// are the server span's children when both use one TracerProvider
// (Options.Telemetry and runtime.WithTelemetry, or the global one). The
// gateway uses the OpenTelemetry API only; no content and no key is
// recorded.
//
// # Streams
//
// Nothing is written before the stream's first event, so until then the
// runtime's retries and fallbacks apply and a failure is an ordinary error
// answer. After it, a failure is an in-band error event in the client's
// format (OpenAI: data: {"error":{...}} with no [DONE]; Responses: event:
// error with code and message at its top level and nested under "error",
// with no response.completed; Anthropic: event:
// error with no message_stop; Gemini: data: {"error":{code, message,
// status}} with no finishReason), never a silently
// truncated stream. A client that disconnects cancels the upstream call at
// once (the request's context is the call's). A slow client slows only its
// own stream: events wait in the runtime's bounded stream buffer, and the
// gateway holds at most Options.FlushEvents encoded events, so the
// upstream read blocks instead of memory growing (measured: a client
// reading nothing held a 20,000-delta upstream at 388 deltas, socket
// buffers included, while other streams went on). The upstream read's
// idle timeout (providers.WithIdleTimeout, 90s by default) also runs while
// a slow client holds it back: a client that reads nothing for that long
// ends its stream with an in-band error.
//
// Writes: events already waiting go out together, one write and flush for
// up to Options.FlushEvents of them. With none waiting, the gateway yields
// the processor once (runtime.Gosched: the upstream reader may be in the
// middle of one read's events) and, still with none, flushes what it
// holds: no timer, and a delta is never held for one that has not arrived
// (TestStreamNeverHoldsADeltaBack). Measured (BenchmarkStream): one flush
// per 58 deltas instead of per 18 from a fast upstream, half the write
// system calls. A larger FlushEvents (256) halved them again but saved no
// CPU, so the default stays 64.
//
// Guide: docs/gateway.md in the repository, which starts from the task and
// ends with how it is tested; this comment stays the reference.
package gateway
