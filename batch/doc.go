// Package batch runs batch jobs: an OpenAI Batch input file (JSONL, one
// chat or embedding request per line) in, one OpenAI Batch output line per
// custom_id out. It is the engine behind "chorus batch"; a Go program runs
// the same job with the same guarantees:
//
//	out, err := batch.OpenOutput("results.jsonl", batch.Resume)
//	if err != nil { ... }
//	rep, err := batch.Run(ctx, batch.Job{Input: in, Output: out, Runner: rt})
//	cerr := out.Close()
//
// Runner is where a line runs: a *runtime.Runtime, a *cluster.Node (the
// CLI's --cluster), or any value with Chat and Embed. The package imports
// neither cluster nor any server: those layers sit above it.
//
// # Guarantees
//
//   - One line per custom_id. Output is append-only: each line is built
//     whole in memory and handed to the kernel in one write on an O_APPEND
//     file by a single writer, so a process killed at any moment (even by
//     SIGKILL) leaves whole lines and at worst one unterminated last line.
//     OpenOutput in Resume mode cuts that tail and remembers every
//     custom_id written; Run then skips those lines (EventSkipped) and runs
//     the others, so no custom_id is ever written twice.
//   - A failed item is written as an error line ("response": null,
//     "error": {code, message}) and is not retried by a resumed job. A call
//     cut short because ctx ended is not written: the resumed job runs it.
//   - A bad input line does not stop the job. It is reported (Report.
//     BadLines, EventBadLine) with its line number and the JSON path at
//     fault; when it has a custom_id, an error line is written under it. A
//     custom_id that repeats an earlier line is a bad line. Unknown request
//     fields make a line bad rather than being dropped, except user,
//     metadata, store, service_tier, stream, stream_options and
//     safety_identifier. prompt_cache_key and prompt_cache_retention
//     become the request's llm.PromptCache (sent to OpenAI only);
//     cache_control {"type": "ephemeral", "ttl": ...} on a content part or
//     a tool becomes a llm.CacheMark on its message or tool (Anthropic).
//   - Output ids derive from the custom_id (LineID), so a rerun writes the
//     same ids. A chat body's model is "provider/model" as the provider
//     named it; usage prompt_tokens counts all input, cached included, as
//     OpenAI does, with cache reads in prompt_tokens_details.
//   - Progress: Job.Observe receives one event per skipped line, finished
//     item, bad line and announced default model. Report holds the counts
//     and the per-model summary (requests, failed, tokens, wall, cost).
//
// # Native batch APIs
//
// With Job.Native, the chat lines (and OpenAI embedding lines) of
// providers with a batch API and a Client in Native.Clients go to that API (OpenAI Batch, Anthropic Message
// Batches, Gemini Batch Mode with inlined requests), one batch per
// provider (per model on Gemini), split at each API's limits; the other
// lines run live on Runner. Each result becomes the output line the live
// path writes. The guarantees, with the journal next to the output
// (JournalPath, one synced line per step):
//
//   - An intent, with a token the batch carries (OpenAI metadata
//     chorus_job, Gemini displayName), is durable before the submit
//     starts; the batch id is durable as soon as the provider names it;
//     the end is recorded once every result is in the output.
//   - Resume never submits a line twice: the lines of a recorded batch are
//     held for it; a batch whose id was lost is found by its token
//     (Anthropic, which carries none: the batch created after the intent
//     with the same number of requests) and, only when none exists, its
//     lines are submitted again. Resume never writes a custom_id twice:
//     results already in the output are skipped, so a download cut by a
//     kill is simply done again.
//   - Requests a batch expired or cancelled are reported (EventNotRun,
//     Report.NotRun) and not written; the journal gives them back, and a
//     resumed job runs them live.
//   - A Create-mode job over an output whose journal records batches is
//     refused (ErrOutputExists): it would submit twice. When ctx ends the
//     remote batches keep running (Report.Remote); Native.Cancel cancels
//     them and writes what they finished.
//   - The journal holds ids, tokens and custom_ids, never a key.
//
// Native answers are priced with the model's batch discount; ModelSummary
// counts them (Native) and what the discount saved (Saved).
//
// # Cost
//
// Prices come only from the caller (Job.Prices, "provider/model" to an
// llm.Price). An answer is priced by the model that served it; a model
// without a price has no cost (nil, shown "-"), never a guess. A priced
// answer's output line carries usage.cost (US dollars, as OpenRouter
// reports it). Error lines cost nothing.
//
// Guide: docs/batch.md in the repository, which starts from the task and
// ends with how it is tested; this comment stays the reference.
package batch
