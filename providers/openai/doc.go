// Package openai is the OpenAI Chat Completions wire format: the codec that
// package providers uses for OpenAI and every server that speaks the same
// protocol (DeepSeek, Z.ai, Kimi/Moonshot, OpenRouter, Groq, xAI, Ollama's
// /v1, llama.cpp, and any OpenAI-compatible gateway). Codec implements
// wire.Codec; it does no I/O. Per-provider differences come in explicitly as
// wire.Quirks (from the registry) and wire.Learned (learn-once flags); the
// codec never sniffs URLs or model names.
//
// # Requests
//
// Base URLs carry the API version (https://api.openai.com/v1), so every chat
// request is POST /chat/completions. Decisions worth knowing:
//
//   - Each system message is its own "system" message, never concatenated,
//     which keeps provider prefix caches effective.
//   - User content is a plain string when the message is one piece of text,
//     otherwise parts: text, image_url (a data: URL for inline bytes, or the
//     URL) and PDF documents as {"type":"file","file":{"filename":
//     "document.pdf","file_data":"data:application/pdf;base64,..."}}.
//   - Assistant content is null when empty. reasoning_content is echoed when
//     the message has reasoning, and always (empty included) when
//     Quirks.EchoReasoningWithTools is set and the request has tools
//     (DeepSeek rejects a tool turn without it). ThinkingBlocks belong to
//     other formats and are not sent. Empty tool-call arguments are sent
//     as "{}".
//   - Tool results are {role:tool, tool_call_id, content}. OpenAI has no
//     error flag for a tool result: a result marked IsError is sent as its
//     text, unprefixed, so that text should say what went wrong. Images
//     and documents in tool results go into one user message after the run
//     of tool messages, introduced by "Images returned by tool call <id>:"
//     (an image-only result gets the text "(image result attached below)").
//   - parallel_tool_calls is sent only with tools, and not once the
//     provider rejected it (Learned.NoParallelToolCalls). temperature,
//     top_p and seed are dropped the same way.
//   - Reasoning effort: with Quirks.ThinkingObject the request carries
//     thinking{type: enabled|disabled} (EffortNone disables) and, with
//     Quirks.ReasoningEffort too, reasoning_effort low|medium|high. With
//     Quirks.ReasoningEffort alone, reasoning_effort none|low|medium|high.
//     max has no wire value and becomes high. Learned.NoReasoningEffort
//     drops reasoning_effort in both cases. Providers with neither quirk
//     (Kimi, plain gateways) get no reasoning fields; BudgetTokens has no
//     Chat Completions equivalent and is ignored. Quirks.IncludeReasoning
//     sends include_reasoning:true unless reasoning is turned off.
//   - json_schema under Quirks.NoJSONSchema is a *llm.ConfigError: the
//     codec does not silently weaken a schema to json_object.
//
// # Responses
//
// ParseChat uses encoding/json (a buffered body is not the hot path).
// Reasoning is read from reasoning_content, else reasoning, else the fold
// of reasoning_details (text or summary, joined with "\n", encrypted
// entries skipped); values of the wrong type are ignored rather than
// failing the decode. A legacy function_call is returned as a tool call.
// A call without an id (legacy function_call, some local servers) gets
// "call_<position>", which round-trips as is. A call whose arguments never
// arrived ("", null or missing) gets "{}", the JSON of no arguments, so that
// every completed call carries valid JSON; in a stream this is one
// EventToolCallDelta "{}" emitted when the answer completes. A refusal
// (message.refusal, refusal content parts, delta.refusal) goes to Refusal,
// never Content, and an answer with one that finishes stop (or with an
// unmapped reason) finishes content_filter (wire.RefusalFinish).
//
// Usage is normalised to llm.Usage (invariant 9): OpenAI's
// prompt_tokens_details.cached_tokens, DeepSeek's prompt_cache_hit_tokens,
// Kimi's top-level cached_tokens, OpenRouter's cache_write_tokens and
// gateways' Anthropic-named cache_read_input_tokens /
// cache_creation_input_tokens all end up in CacheReadTokens and
// CacheWriteTokens with PromptTokens uncached only. Servers that count
// reasoning outside completion_tokens (xAI: total = prompt + completion +
// reasoning) have it added, so CompletionTokens always include reasoning.
//
// # Streams
//
// The stream decoder is the hot path. It walks each chunk with
// providers/internal/jsonscan and decodes only the strings that become
// events: a content delta costs one allocation (the delta string) and a
// few hundred nanoseconds, against several microseconds and a dozen
// allocations with encoding/json (see BenchmarkStreamDecoder and
// BenchmarkStreamDecoderEncodingJSON). Only choice 0 produces text,
// reasoning, refusal and the finish reason; tool calls of every choice are
// assembled by (choice, index, id) with wire.ToolAssembler, so ids and names
// repeated in every chunk (Kimi through gateways), a reused index with a new
// id, a missing index, and arguments that are "", null, missing or whole in
// one chunk all assemble correctly. Completion is a finish_reason on choice
// 0 or the [DONE] sentinel; a stream that ends with [DONE] but no
// finish_reason keeps the unknown finish reason "" rather than a guessed one.
// Usage may arrive in the finish chunk (Z.ai), in a chunk with empty choices
// (OpenAI include_usage), or under x_groq (Groq without stream_options); an
// EventUsage is emitted whenever it changes, and a repeated finish_reason
// (gateways resend it) is reported once.
//
// Chunks repeat most of their bytes, and the decoder does not walk them
// twice: the members before "choices" (id, object, created, model, ...),
// when they equal the last chunk's, are skipped (jsonscan.ResumeObject);
// and a chunk with the same bytes as the last plain content delta around
// another string is that string's text event, only its members after
// choices walked. Each is kept only from a chunk walked whole, and the
// tests compare every stream with walking each chunk whole. Against a floor
// that only finds and unescapes each delta's text (BenchmarkDecodeMemory in
// package providers), a content delta costs about 1.1 times as much.
//
// Buffered answers are walked with jsonscan too when they have the common
// shape (one choice, a text or refusal message, no tool calls, images or
// error); anything else, or anything encoding/json could read differently,
// is unmarshalled (FuzzParseChatFast checks the two agree).
//
// Not round-tripped: OpenRouter's reasoning_details signatures (Anthropic
// models behind OpenRouter) are read as text only; replaying them would need
// a reasoning_details field on the request.
//
// An error inside a 200 stream (an OpenRouter chunk with an "error" object,
// Groq's `event: error`) is returned as *llm.APIError with Status 0. It is
// retryable unless its status-like code is a 4xx other than 408/429, or its
// code or type names a request, auth, quota or policy problem
// (invalid_request_error, context_length_exceeded, ...). Errors carry
// Provider "openai"; package providers substitutes the credential's
// provider id.
package openai
