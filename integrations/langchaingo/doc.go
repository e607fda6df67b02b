// Package langchaingo makes Chorus the model layer of LangChainGo: an LLM
// is an llms.Model whose calls go through a *runtime.Runtime (pacing,
// cooldowns, key pools, fallback aliases, learn-once state) or a plain
// *providers.Client.
//
//	rt, _ := runtime.New(runtime.FromEnv(), runtime.WithAlias("smart", "openai/gpt-4.1", "anthropic/claude-sonnet-4-5"))
//	model, _ := langchaingo.New(rt, langchaingo.Config{Model: "smart"})
//	agent := agents.NewOpenAIFunctionsAgent(model, tools)
//	out, _ := chains.Run(ctx, agents.NewExecutor(agent), "What is the weather in Oslo?")
//
// The module is its own (github.com/chorusrt/chorus/integrations/langchaingo):
// Chorus never imports LangChainGo.
//
// # What maps
//
// Requests: the roles system, human and generic (both user), ai, tool and
// function (tool results); text parts; images by URL, data: URL or as
// BinaryContent with an image/* type; PDF as BinaryContent; tool calls in ai
// messages and ToolCallResponse parts (several in one tool message become
// several results). Options: model (a provider/model or an alias), max
// tokens, temperature, top_p, seed, stop words, JSON mode and
// ResponseMIMEType application/json (a JSON object answer), tools and the
// older functions, tool choice ("auto", "none", "required"/"any", a named
// llms.ToolChoice, or the older FunctionCallBehavior), and the thinking
// config (llms.WithThinking*: mode as effort, budget, return/stream
// thinking). WithRequest edits the Chorus request for anything else.
//
// A call with a StreamingFunc or a StreamingReasoningFunc streams: text
// deltas go to StreamingFunc, reasoning deltas and text deltas to
// StreamingReasoningFunc (reasoningChunk, chunk), as LangChainGo's OpenAI
// plugin does. Tool-call deltas are not passed to the streaming funcs: the
// calls are in the response, whole (LangChainGo's plugins disagree on what
// such a chunk would contain). An error from a streaming func stops the
// call and is returned.
//
// Answers: one ContentChoice with Content, ReasoningContent, ToolCalls
// (type "function"), StopReason (stop, length, tool_calls, content_filter
// or empty, never a provider string), and GenerationInfo with usage under
// the keys of LangChainGo's OpenAI plugin (PromptTokens is all input,
// PromptCachedTokens the cache reads, CompletionTokens include
// ReasoningTokens, TotalTokens) and of its Anthropic plugin (InputTokens
// uncached, CacheReadInputTokens, CacheCreationInputTokens, OutputTokens),
// plus ThinkingContent, ThinkingSignature, Model and Provider (the model
// and provider that served the call, which may be a fallback behind an
// alias). GenerationInfo[GenerationReplay] is a Replay part: append it to
// the ai message that replays the answer to keep signed reasoning (Anthropic
// thinking signatures, Gemini thought signatures, OpenAI Responses
// encrypted reasoning) valid across turns.
//
// # What does not map, and why
//
// These are errors (an *UnsupportedError naming what), never dropped:
//   - a role other than those above;
//   - BinaryContent other than images and PDF (audio, video, text files):
//     Chorus's vocabulary has images and inline PDF documents only;
//   - a ToolCallResponse outside a tool message, anything but results in a
//     tool message, a tool call outside an ai message, a tool or tool call
//     whose type is not "function";
//   - CandidateCount or N above 1 (Chorus returns one choice), TopK,
//     MinLength/MaxLength and the repetition, frequency and presence
//     penalties: no Chorus wire format carries them all, and Chorus's
//     request has no field for them;
//   - a ResponseMIMEType other than text/plain and application/json, a
//     thinking mode LangChainGo does not define, a tool choice of another
//     type.
//
// Carried but not as LangChainGo has them:
//   - a temperature of 0 cannot be asked through llms.WithTemperature (0 is
//     LangChainGo's "unset"); use WithRequest;
//   - a refusal is the choice's Content, with StopReason content_filter and
//     the text under GenerationInfo["Refusal"];
//   - images the model returns are GenerationInfo["Image0"], ... (data: URLs
//     or URLs): a ContentChoice has no image field;
//   - LangChainGo's functions agent replays a call's single __arg1
//     argument as a bare string; arguments that are not a JSON object are
//     wrapped back as {"__arg1": ...}, what the model sent, since every
//     Chorus format requires an object.
//
// Not sent: CallOptions.Metadata beyond the thinking config and
// WithRequest's edits (it is the application's data).
//
// A note on LangChainGo's executor: agents.WithCallbacksHandler alone does
// not make an agent stream (the executor's chain options replace the
// agent's streaming func); pass chains.WithStreamingFunc to chains.Run.
package langchaingo
