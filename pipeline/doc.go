// Package pipeline composes chat, tool and embedding calls into concurrent
// stages: fan-out of one prompt to many models, race, fallback, batches
// with a concurrency limit, tool loops with Go handlers and batched
// embeddings. Stages call a Client: the runtime satisfies it, and so does
// any wrapper of a providers.Client.
//
// The shortest use, one prompt to three models:
//
//	fan := pipeline.FanOut(ctx, rt, req, "openai/gpt-4.1-mini", "anthropic/claude-haiku-4-5", "gemini/gemini-2.5-flash")
//	for t, err := range fan.All() {
//		if err != nil { log.Print(err); continue } // one model failed; the others go on
//		fmt.Printf("[%s] %s", t.Model, t.Event.Text)
//	}
//	for _, r := range fan.Results() { fmt.Println(r.Model, r.Err) }
//
// Stages compose by channels: FromSeq or FromSlice turn values into a
// channel, Map, Batch and Embed read a channel and return a channel of
// Item values ({Index, Value, Err}), which the next stage reads. Per-item
// errors travel inside items and never stop a batch.
//
// Decisions worth knowing:
//   - Cancelling the context is how a pipeline is abandoned: every stage
//     stops reading its input, cancels its calls, drops undelivered output
//     and closes its channel once its goroutines have returned. A consumer
//     that merely stops reading holds the stage where it is (bounded
//     buffers, never unbounded queues).
//   - A Fan has one face, picked by the first call: the merged view (Events
//     or All, where one reader paces every model) or per-model branches
//     (Branch, each with its own bounded buffer, so a stalled branch stalls
//     only its own model). Each model's outcome is kept apart (Result,
//     Results); Wait discards only branches nobody took.
//   - Race waits for every loser to return after cancelling it, and
//     Fallback moves to the next model only before the first event: once
//     output reached the caller, a failure is a *llm.StreamError with the
//     partial answer.
//   - Map and Batch run at most Concurrency calls at once; with Ordered,
//     finished items wait for earlier ones (about Concurrency of them at
//     most). A panic in a stage's function or in a tool handler is
//     recovered as a *PanicError: in the item, or as the tool's error
//     result.
//   - ToolLoop answers every tool call in the history, in call order, even
//     with Parallel; when the model asks for tools past MaxTurns the calls
//     are still answered, then a *MaxTurnsError (ErrMaxTurns) returns the
//     history, ready to continue.
//   - Embed batches BatchSize texts per request (96 by default) and places
//     vectors by input index, whatever order the requests finish in.
//
// Package pipeline/rx offers the same stages as RxGo Observables.
//
// Guide: docs/pipelines.md in the repository, which starts from the task and
// ends with how it is tested; this comment stays the reference.
package pipeline
