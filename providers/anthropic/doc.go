// Package anthropic is the Anthropic Messages wire format
// (POST {base}/v1/messages, base https://api.anthropic.com) as a wire.Codec:
// it builds requests from the shared llm vocabulary, parses buffered
// answers and error bodies, and decodes streams. It does no I/O; package
// providers owns transport, retries and learn-once state.
//
// Requests. max_tokens is always sent (Anthropic requires it): MaxTokens,
// else 8192, or budget+8192 under thinking. System messages, wherever they
// sit in the history, become the top-level system array, one text block per
// message, in order. Assistant turns replay their ThinkingBlocks of Format
// "anthropic" first, each with its own signature (a block without one is a
// *llm.ConfigError; redacted blocks replay their data), then text, then
// tool_use blocks; blocks of any other format (Format "" included) are
// dropped so foreign signatures never reach Anthropic. Consecutive tool
// messages merge into one user message of tool_result blocks. Thinking is
// {type:enabled,budget_tokens}: Reasoning.BudgetTokens wins (raised to the
// 1024 minimum), else the effort preset (low 1024, medium 8192, high and max
// 16384), clamped to MaxTokens/2 when an explicit MaxTokens is smaller than
// twice the preset; an explicit budget at or above MaxTokens is a
// *llm.ConfigError. EffortNone, or a Reasoning with neither effort nor
// budget, sends no thinking. Under thinking temperature and top_p are
// omitted. Structured output is native (output_config.format). Seed has no
// Anthropic equivalent and is not sent.
//
// Answers. Text blocks concatenate into Content; thinking and
// redacted_thinking blocks become ThinkingBlocks in order (Format
// "anthropic") and their text becomes Reasoning; tool_use blocks become
// ToolCalls whose Arguments are the compact JSON of input. Server-side tool
// blocks (server_tool_use, web_search_tool_result, ...) are run by Anthropic
// and are not client tool calls: they are skipped. Usage keeps Anthropic's
// meaning, which already matches llm.Usage: input_tokens is uncached input,
// cache reads and writes are separate, output_tokens includes thinking.
// Anthropic does not report a reasoning share, so ReasoningTokens stays 0.
//
// Streams. The decoder walks each event with providers/internal/jsonscan
// (one allocation per text delta: the delta string) and dispatches on the
// JSON "type", never on the SSE event name. Event.ToolIndex is the call's
// position among tool_use blocks, not Anthropic's content-block index. A
// tool_use block that streamed no argument bytes completes with "{}" so
// Arguments is always valid JSON. A content_block_start, _delta or _stop
// without its index (or a second start of a block still open) is an
// *llm.DecodeError: it is never taken for block 0. Usage from message_start is folded into
// the result without an event, so an error event that follows it can still
// be retried; message_delta emits the cumulative usage (non-zero fields
// overwrite). Complete is true only after message_stop. An in-stream error
// event is an *llm.APIError, retryable for overloaded_error (Status 529)
// and api_error.
package anthropic
