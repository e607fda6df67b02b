// Package eino makes Chorus the model layer of CloudWeGo's eino: a
// ChatModel is an eino model.ToolCallingChatModel whose calls go through a
// *runtime.Runtime (pacing, cooldowns, key pools, fallback aliases,
// learn-once state) or a plain *providers.Client.
//
//	rt, _ := runtime.New(runtime.FromEnv(), runtime.WithAlias("smart", "openai/gpt-4.1", "anthropic/claude-sonnet-4-5"))
//	cm, _ := eino.New(rt, eino.Config{Model: "smart"})
//	agent, _ := react.NewAgent(ctx, &react.AgentConfig{ToolCallingModel: cm, ToolsConfig: compose.ToolsNodeConfig{Tools: tools}})
//
// The module is its own (github.com/chorusrt/chorus/integrations/eino):
// Chorus never imports eino.
//
// # What maps
//
// Requests: the roles system, user, assistant and tool; text; images from
// UserInputMultiContent, the older MultiContent or an assistant's
// AssistantGenMultiContent, inline (base64 or a data: URL) or by URL; PDF
// files inline; tool calls and tool results (ToolCallID, ToolName); the
// assistant's ReasoningContent; tools (ParamsOneOf rendered as JSON Schema).
// eino's common options: model (a provider/model or an alias), temperature,
// max tokens, top_p, stop, tools, tool choice (forbidden, allowed, forced;
// allowed tool names restrict the tools sent, and forcing with exactly one
// name forces that tool). Chorus's own options ride on eino's
// implementation-specific options: WithReasoning, WithResponseFormat,
// WithParallelToolCalls, WithSeed, WithHeaders, WithPromptCache and, for
// anything else, WithRequest.
//
// Answers: text, reasoning (ReasoningContent), tool calls (Index is the
// call's position, on every format and in every chunk), images the model
// returned (AssistantGenMultiContent), the finish reason (stop, length,
// tool_calls, content_filter or empty, never a provider string), and usage
// in eino's OpenAI-shaped TokenUsage: PromptTokens is all input with
// PromptTokenDetails.CachedTokens the cache reads, CompletionTokens include
// reasoning, CompletionTokensDetails.ReasoningTokens the reasoning part.
// Signed reasoning (Anthropic thinking blocks with their signatures, Gemini
// thought signatures on tool calls, OpenAI Responses encrypted reasoning)
// is kept as JSON text under Extra[ExtraReplay] and sent back when eino
// replays the message, so multi-turn reasoning round-trips.
//
// A stream is one eino chunk per Chorus delta; the last chunk has no
// content and carries the finish reason, the usage and the replay data. A
// failure after the first chunk is the reader's error (a *llm.StreamError
// holding the partial answer); retries and fallbacks happen only before the
// first chunk. Closing the reader early cancels the call and releases its
// connection.
//
// Callbacks: the ChatModel reports IsCallbacksEnabled true and type
// "Chorus", and runs OnStart with a *model.CallbackInput, then OnEnd with a
// *model.CallbackOutput (OnEndWithStreamOutput for streams, usage on the
// last chunk) or OnError. The model named in the callback config is the one
// eino asked for: an alias stays the alias, the fallback behind it is
// invisible to the framework.
//
// # What does not map, and why
//
// These are errors naming what could not be sent (an *UnsupportedError
// for message content), never dropped silently:
//   - a role other than the four above;
//   - audio and video parts, and files that are not PDF, or PDF by URL:
//     Chorus's vocabulary has images and inline PDF documents only;
//   - non-text parts in a tool result, and tool calls or reasoning on a
//     message that is not the assistant's;
//   - tool calls whose type is not "function";
//   - allowed tool names that are not among the tools.
//
// Carried but not as eino has them:
//   - a refusal is the Content of the answer (eino has no refusal field),
//     with the finish reason content_filter and the text under
//     Extra[ExtraRefusal];
//   - cache writes (Anthropic) are counted in PromptTokens; eino's
//     TokenUsage has no field of their own;
//   - eino's schema.ConcatMessages keeps the largest prompt, completion,
//     total and cached counts of a stream's chunks but not the reasoning
//     tokens: read them from the last chunk, or from the callback output.
//
// Not sent: Message.Name (no Chorus wire format has a per-message author
// name) and Message.Extra other than the keys above (it is eino's
// application data). Not returned: log probabilities (Chorus does not
// request them).
//
// eino's ReAct agent decides from a stream's first non-empty chunk whether
// the answer calls tools (its StreamToolCallChecker); models that write text
// before their tool calls (Claude often does) need a checker that reads the
// whole stream, as eino's documentation says.
package eino
