// Package genkit is a Firebase Genkit for Go plugin whose models are Chorus:
// every call goes through a *runtime.Runtime (pacing, cooldowns, key pools,
// fallback aliases, learn-once state) or a plain *providers.Client.
//
//	rt, _ := runtime.New(runtime.FromEnv(), runtime.WithAlias("smart", "openai/gpt-4.1", "anthropic/claude-sonnet-4-5"))
//	g := genkit.Init(ctx, genkit.WithPlugins(&chorusgenkit.Plugin{Client: rt}))
//	text, _ := genkit.GenerateText(ctx, g, ai.WithModel(chorusgenkit.Model(g, "smart")), ai.WithPrompt("Hello"))
//
// The module is its own (github.com/chorusrt/chorus/integrations/genkit):
// Chorus never imports Genkit.
//
// # Models
//
// Init defines, with ai.NewModel, one Genkit model per entry of
// Plugin.Models and per alias of the runtime, named "chorus/<name>"
// ("chorus/smart", "chorus/openai/gpt-4.1"). Any other name the Client
// serves is defined on first use: the plugin is a Genkit DynamicPlugin, so
// genkit.LookupModel(g, "chorus/anthropic/claude-haiku-4-5") or Model(g,
// "anthropic/claude-haiku-4-5") works without listing it. The fallback
// behind an alias is invisible to Genkit; the response's Custom says which
// model and provider served.
//
// # What maps
//
// Requests: the roles system, user, model and tool; text parts; media parts
// with an image type (a data: URL or a URL) and PDF (a data: URL); tool
// requests and tool responses (a string output as is, any other output as
// JSON, followed by the text of the response's content parts); reasoning
// parts of model messages, with their Chorus thinking blocks; tool
// definitions (their input schema), tool choice (auto, none, required);
// structured output (a JSON format with a schema is a native JSON Schema
// response format, without one a JSON object) — the models declare
// constrained output, so Genkit passes the schema instead of prompting for
// it. Config (ai.WithConfig) is read as Config, whose JSON names are
// ai.GenerationCommonConfig's (maxOutputTokens, stopSequences, temperature,
// topP) plus Chorus's own (seed, parallelToolCalls, reasoning, cache,
// headers); a *ai.GenerationCommonConfig, a Config or a map all work.
// Documents (ai.WithDocs) reach the model as Genkit's own context
// middleware puts them in the prompt (the models declare no native context
// support).
//
// Answers: a model message with reasoning parts (one per signed thinking
// block, its signature in Genkit's "signature" metadata and the whole block
// under MetaThinking, so that the history replays it), text, images (media
// parts) and tool requests (Ref is the call id; a Gemini thought signature
// rides under MetaSignature); the finish reason (stop, also for an answer
// that calls tools; length; blocked for a content filter, with a refusal's
// text as FinishMessage; unknown), and usage: InputTokens all input,
// CachedContentTokens the cache reads, OutputTokens with reasoning,
// ThoughtsTokens the reasoning part, TotalTokens, and Custom
// uncachedInputTokens and cacheWriteTokens.
//
// Streaming: with a stream callback the call streams; each text or
// reasoning delta is one chunk, and the answer's tool requests follow as one
// chunk, whole, once the answer is complete (Genkit runs tools from the
// response, not the chunks). An error from the callback stops the call.
//
// # What does not map, and why
//
// These are errors (an *UnsupportedError naming what), never dropped:
//   - a role other than the four above;
//   - data, custom and resource parts (Genkit resolves resources before the
//     model is called), and media other than images and PDF (audio, video):
//     Chorus's vocabulary has text, images and inline PDF documents;
//   - PDF by URL (Chorus sends documents inline), a non-text part inside a
//     tool response, anything but tool responses in a tool message, tool
//     requests or reasoning outside a model message;
//   - config fields Chorus has no equivalent for (topK, version) or does not
//     know (the models declare Config's JSON Schema, so Genkit itself refuses
//     an unknown field first);
//   - a tool choice Genkit does not define.
package genkit
