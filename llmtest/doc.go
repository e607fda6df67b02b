// Package llmtest provides fake LLM provider servers for hermetic tests,
// in the spirit of net/http/httptest.
//
// A Server listens on a loopback port and speaks three wire formats, chosen
// by the request path, each as the real provider does:
//
//   - OpenAI Chat Completions: POST {OpenAIBaseURL()}/chat/completions,
//     buffered chat.completion JSON or, with "stream":true, SSE
//     chat.completion.chunk events ending in data: [DONE] (a usage chunk
//     with "choices": [] first when stream_options.include_usage is set).
//   - Anthropic Messages: POST /v1/messages, buffered or SSE with event
//     names (message_start, content_block_*, ping, message_delta,
//     message_stop), data lines padded with spaces as Anthropic does.
//   - Gemini: POST /v1beta/models/{model}:generateContent and
//     :streamGenerateContent, as SSE with \r\n\r\n separators when
//     alt=sse is set and as one JSON array written in pieces otherwise.
//   - OpenAI Responses: POST {OpenAIBaseURL()}/responses, a buffered
//     response object or SSE with event names (recorded as FormatOpenAI).
//   - The other operations, in each format that offers them: embeddings,
//     speech, transcription (multipart), token counting and paginated model
//     lists (see ops.go).
//
// Use it like httptest:
//
//	srv := llmtest.NewServer()
//	defer srv.Close()
//	srv.Push(llmtest.Text("hello"), llmtest.Status(429, 2*time.Second))
//	// point the client under test at srv.OpenAIBaseURL(), srv.AnthropicBaseURL()
//	// or srv.GeminiBaseURL(); then inspect srv.Requests().
//
// Each request consumes one scripted Step (Push); when the script is empty
// a responder set with SetResponder chooses the Step from the request, else
// the default reply answers (WithDefault; "simulated reply" by default).
// A Step is a Reply (text, reasoning, refusal, tool calls, finish, usage,
// headers) or a Fault (an error status, a connection reset before the
// headers or mid-stream, a stall, a malformed or truncated or oversize
// line, a premature close, a buffered answer to a stream request, an
// in-stream error event, a slow drip). Mid-stream faults act after
// Fault.After content deltas.
//
// Deterministic numbers, so tests can predict them: texts are streamed in
// chunks of about 4 bytes cut on rune boundaries (unless Reply.Deltas says
// otherwise); when Reply.Usage is nil, prompt tokens are len(request
// body)/4 and completion tokens are the number of deltas (reasoning,
// refusal, text and tool-argument chunks), reasoning tokens the number of
// reasoning deltas. Ids are "chatcmpl-llmtest-<n>", "msg_llmtest_<n>",
// "call_llmtest_<i>", "toolu_llmtest_<i>", where n counts requests from 1.
//
// Rate-limit emulation (WithRateLimit) is a fixed window that starts at
// the first request. Each admitted request costs one request and
// len(body)/4 + completion tokens (zero completion tokens for a FaultStatus
// or FaultResetBeforeHeaders step); Anthropic's input and output budgets
// each get the whole Tokens limit. Every answer carries the format's
// headers: x-ratelimit-{limit,remaining,reset}-{requests,tokens} for
// OpenAI (reset as Go duration text, "850ms"), anthropic-ratelimit-*
// (requests, tokens, input-tokens, output-tokens; reset as an RFC 3339
// time with millisecond precision); Gemini sends none. A request over the
// limit consumes neither budget nor a script step: it gets 429 with
// retry-after (seconds, rounded up) and retry-after-ms until it would fit
// (Gemini: a QuotaFailure with a per-minute quota id and a RetryInfo
// retryDelay in the body instead; a per-day quota, Window of 24h or more,
// has no RetryInfo), and is counted by RateLimited.
//
// RateLimit.Model picks the limiter providers really run: FixedWindow
// (above), TokenBucket (starts full, refills continuously at the budget per
// window; resets mean "until full again", as OpenAI's and Anthropic's do)
// or SlidingWindow (at most the budget in any trailing window). By default
// every API key draws on one budget (one organisation); RateLimit.PerKey
// gives each key its own and RateLimit.Orgs groups keys into
// organisations. WithClock lets a test step the limiter's time.
//
// Requests records every request (format, path, query, headers, body,
// stream flag, model); OpenConns and CloseClientConnections help check
// that clients release their connections. Close stops the listener,
// closes every connection, ends stalled handlers and waits until no
// goroutine of the server is left.
//
// The package speaks the wire formats itself (encoding/json on its own
// structs) and never imports the provider codecs it is meant to test.
//
// Guide: docs/testing.md in the repository, which starts from the task and
// ends with how it is tested; this comment stays the reference.
package llmtest
