// Package gemini is the Gemini generateContent wire format: Codec builds
// requests, parses buffered answers and error bodies, and decodes streams for
// the provider client. It does no I/O.
//
// Requests go to /v1beta/models/{model}:generateContent, or
// :streamGenerateContent?alt=sse when streaming, with the key in
// x-goog-api-key. A "models/" prefix on the model name is dropped; the rest
// is path-escaped. The body is built as structs (every check and field
// error lives there); a plain text request is then written by an append
// encoder (request_append.go) that gives encoding/json's exact bytes, and
// any other by encoding/json.
//
// How the vocabulary maps:
//
//   - System messages become systemInstruction parts, one per message (text
//     only). User and tool turns are role "user", assistant turns "model".
//   - Inline images and PDF documents are inlineData parts; image URLs are
//     fileData parts.
//   - Consecutive tool messages share one user turn of functionResponse
//     parts; images a tool returned follow them in that turn. The function
//     name is Message.ToolName, or the name of the earlier assistant call
//     with that id (a *llm.ConfigError on messages[i].tool_call_id when
//     neither exists). A JSON-object result is sent as the response; any
//     other result is wrapped as {"result": ...}, with a JSON value kept as
//     JSON and text as a string; an error result is {"error": ...}.
//   - Tool-call ids are sent back on functionCall and functionResponse
//     (Gemini accepts client ids, and matches same-named parallel calls by
//     them). Calls the model sent without an id get call_<n>, n being the
//     call's position.
//   - Tools are functionDeclarations with the JSON Schema in
//     parametersJsonSchema. Tool choice maps to functionCallingConfig
//     (auto AUTO, none NONE, required ANY, a named tool ANY with
//     allowedFunctionNames). ParallelToolCalls has no Gemini control and is
//     ignored.
//   - json_schema output sends responseMimeType application/json with
//     responseJsonSchema; json_object the MIME type only.
//   - Reasoning sends thinkingConfig: BudgetTokens, else the effort's budget
//     (none 0, low 1024, medium 8192, high and max 24576; no effort leaves the
//     model's dynamic default), and includeThoughts.
//
// Reasoning round trip (invariant 7). Gemini signs parts with
// thoughtSignature. A parsed answer keeps them per part: a function call's
// signature in ToolCall.Signature; thought text as ThinkingBlocks of Format
// "gemini" with the signature of the part that closed them (consecutive
// thought parts of a stream form one block); the signature of a plain text
// part as a gemini block with a Signature and no Text. Replay puts each back
// where it came from: thought blocks first as thought parts, a text-less
// block's signature on the assistant's first text part, call signatures on
// their functionCall parts. Blocks of other formats, and the plain
// Message.Reasoning text, are never sent. The signature of an inline image
// part is not kept, since Message does not replay images.
//
// Answers. Finish reasons map STOP to stop (tool_calls when the turn made
// calls), MAX_TOKENS to length, the safety family (SAFETY, RECITATION,
// BLOCKLIST, PROHIBITED_CONTENT, SPII, IMAGE_SAFETY, IMAGE_PROHIBITED_CONTENT,
// IMAGE_RECITATION) to content_filter, and anything else to "". The legacy
// integer encoding (enum-encoding=int) is read with the numbers of
// google.ai.generativelanguage.v1beta: 1 STOP, 2 MAX_TOKENS, 3 SAFETY,
// 4 RECITATION, 5 OTHER, 6 LANGUAGE, 7 BLOCKLIST, 8 PROHIBITED_CONTENT,
// 9 SPII, 10 MALFORMED_FUNCTION_CALL, 11 IMAGE_SAFETY. A prompt blocked by
// promptFeedback.blockReason, with no candidate, finishes content_filter.
// Usage: PromptTokens is promptTokenCount minus cachedContentTokenCount
// plus toolUsePromptTokenCount, CacheReadTokens the cached count,
// CompletionTokens candidates plus thoughts, ReasoningTokens the thoughts.
// responseId is the result ID and modelVersion its Model. Only the first
// candidate is read.
//
// Streams. Each SSE event (or each element of a JSON-array stream) is a
// whole GenerateContentResponse, walked with jsonscan. Text and thought parts
// become EventText and EventReasoning; a functionCall part becomes one
// EventToolCallStart carrying the whole compact argument JSON and the
// signature. Vertex AI can also stream one call's arguments as partialArgs
// fragments (jsonPath plus a string, number, bool or null value, strings in
// pieces); these become EventToolCallDelta events whose text concatenates to
// the argument JSON. usageMetadata is cumulative: EventUsage is emitted when
// it changes, and a chunk without token counts leaves it alone. EventFinish
// comes once, after the chunk's content and usage. There is no terminal
// sentinel: Complete reports whether a finish reason or a prompt block was
// seen, and a body that ends before is a premature close. An error object
// inside a chunk is an *llm.APIError, retryable for UNAVAILABLE,
// RESOURCE_EXHAUSTED and INTERNAL (codes 429, 500, 503).
//
// A chunk is walked once, its parts collected and applied only when it is
// whole, so a truncated chunk emits nothing. Gemini repeats most bytes of a
// chunk in the next (usageMetadata, modelVersion, responseId, the
// candidate's structure): when the bytes after a leading candidates member
// equal the last applied chunk's, they are not walked again, and a chunk
// with the same bytes as the last plain text delta around another string is
// that string's text event. The tests compare every stream with walking
// each chunk whole.
//
// Text deltas are decoded straight onto the end of an append-only buffer
// (textBuf, text.go) and each text event's Text is a string over the bytes
// that delta added: bytes below a block's length are never written again,
// so the strings are immutable however the buffer grows, and a delta
// allocates nothing (it used to allocate its string, then copy it into the
// result's builder). A delta that does not fit starts a new block rather
// than moving the text; Content joins the blocks once, into an array of
// the text's exact size, so an answer allocates about twice its text. A
// buffered answer sizes its blocks exactly: one text part is its own
// Content. Short plain deltas are found and copied in one pass
// (jsonscan.AppendStringPrefix).
//
// Cost, on bench/RESULTS.md's Gemini body (usage repeated in every chunk,
// 1,000 deltas): framing and decoding cost about what bench's
// floor-extract does (frame the lines, bytes.Index of "text":, unescape in
// place), 0.85 to 0.97 times it (BenchmarkStreamDecoder/corpus/vs-floor,
// which times both by turns); the whole StreamTo, request to result, about
// 1.2 times the floor (BenchmarkDecodeMemory in package providers, median
// of 4 alternated runs at load 8; 1.64 times with the decoder before these
// changes, 10 times before the template path), with 76 allocations and
// 21.1 KB per stream instead of 1,010 and 31.7 KB. bench's own decode
// scenario measured 1.10 to 1.28 times (1.38 to 1.82 before) in 3
// alternated runs.
//
// Errors. ParseError reads {"error":{code,message,status}} (also as the
// first element of an array) and RetryDelay reads the google.rpc.RetryInfo
// retryDelay for the retry ladder.
package gemini
