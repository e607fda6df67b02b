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
//     become the request's llm.PromptCache (sent to OpenAI only).
//   - Output ids derive from the custom_id (LineID), so a rerun writes the
//     same ids. A chat body's model is "provider/model" as the provider
//     named it; usage prompt_tokens counts all input, cached included, as
//     OpenAI does, with cache reads in prompt_tokens_details.
//   - Progress: Job.Observe receives one event per skipped line, finished
//     item, bad line and announced default model. Report holds the counts
//     and the per-model summary (requests, failed, tokens, wall, cost).
//
// # Cost
//
// Prices come only from the caller (Job.Prices, "provider/model" to an
// llm.Price). An answer is priced by the model that served it; a model
// without a price has no cost (nil, shown "-"), never a guess. Error lines
// cost nothing.
package batch
