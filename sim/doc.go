// Package sim is Chorus's built-in simulator: an in-process llmtest server
// on a loopback port that answers like an LLM provider, deterministically,
// so that the chorus command, the examples and a user's own tests run with
// no API key and exercise the whole stack (the real OpenAI-format provider,
// the runtime's credential actors, pacing, retries).
//
//	s, err := sim.Start(sim.Options{Latency: 20 * time.Millisecond, TokensPerSecond: 200})
//	if err != nil { return err }
//	defer s.Close()
//	rt, err := runtime.New(runtime.WithProvider(s.Config())) // provider "sim"
//	res, err := rt.Chat(ctx, &llm.ChatRequest{Model: "sim/echo", Messages: []llm.Message{llm.UserText("hi")}})
//	// res.Content == "[simulated] hi"
//
// The server speaks the three wire formats of llmtest (OpenAI Chat
// Completions and Responses, Anthropic Messages, Gemini generateContent),
// embeddings and model lists included; Config registers it with the
// OpenAI-format provider under the id "sim", so models are "sim/<name>".
//
// Conventions (the same on every format):
//   - Every simulated answer carries the header X-Chorus-Simulated: true,
//     and every text answer begins with "[simulated": "[simulated] " for
//     model echo, "[simulated <model>] " for any other model.
//   - Model "echo" answers "[simulated] " followed by the last user message.
//     Any other model name answers deterministic prose derived from the
//     model name and the prompt: the same request always gets the same
//     answer. max_tokens (or the format's equivalent) cuts the text at about
//     four bytes per token with finish reason "length".
//   - Tool calls on request: when the request carries tools and the last
//     user message names one or more of them (as whole words), the answer
//     calls each named tool once, in the order named. Its arguments are the
//     JSON object that follows the tool's name in the message, if there is
//     one ("call get_weather {\"city\":\"Paris\"}"), else a value per
//     property of the tool's schema (strings "simulated" or the first enum
//     value, numbers 1, booleans true, arrays [], objects {}). A forced
//     tool choice (a named tool, "required", Anthropic "any", Gemini ANY)
//     calls the forced or first tool even when none is named; tool choice
//     "none" never calls. When the last message holds tool results, the
//     answer is a text that lists them, so a tool loop ends.
//   - "[sim:status=NNN]" anywhere in the last user message makes the
//     request fail with HTTP status NNN (every attempt, so retryable
//     statuses fail after the client's retries): a way to exercise error
//     paths.
//   - Embeddings are llmtest.EmbeddingFor(text, dimensions): a hash of the
//     text, 8 dimensions unless the request asks for more. Equal texts get
//     equal vectors; different texts get unrelated ones, so nearest
//     neighbours are only meaningful for exact repeats.
//   - Usage follows llmtest: prompt tokens are len(request body)/4,
//     completion tokens the number of streamed deltas (about 4 bytes each).
//
// Timing: Options.Latency delays every answer before its headers;
// Options.TokensPerSecond spreads an answer's completion tokens over time,
// streamed or buffered. Options.RPM and Options.TPM turn on llmtest's
// rate-limit emulation (x-ratelimit-* headers, 429 with retry-after past
// the limit) per Options.Window, one minute by default. FromEnv reads the
// same settings from CHORUS_SIM_* variables.
//
// The llmtest server records every request it serves (llmtest.Server.Requests),
// so a long-running simulator's memory grows with the requests it has seen.
//
// Guide: docs/providers.md (the simulator) in the repository, which starts
// from the task and ends with how it is tested; this comment stays the
// reference.
package sim
