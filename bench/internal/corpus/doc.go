// Package corpus builds the response bodies every benchmark client reads:
// OpenAI Chat Completions chunks, Anthropic Messages events and Gemini
// streamGenerateContent events, streamed and buffered, pre-encoded once so
// that serving them costs no encoding work and every client reads the very
// same bytes.
//
// The shapes are those of real recorded exchanges (see
// the corpus CHORUS_FIXTURES names): OpenAI chunks carry id, object, created, model,
// service_tier, system_fingerprint, logprobs, usage:null and the
// obfuscation padding; Anthropic data lines are padded with spaces and
// interleaved with a ping; Gemini events use ", " separators, carry
// usageMetadata, modelVersion and responseId in every event and end with
// \r\n\r\n.
package corpus
