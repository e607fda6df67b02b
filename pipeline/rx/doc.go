// Package rx offers Chorus streams, fan-outs and batches as RxGo
// Observables (github.com/reactivex/rxgo/v2), for code that composes with
// Rx operators. It is the only Chorus package whose API exposes rxgo.
//
// The shortest use:
//
//	stream, err := client.Stream(ctx, req)
//	if err != nil { return err }
//	obs := rx.FromStream(ctx, stream)
//	for item := range obs.Observe() {
//		if item.Error() { return item.E }
//		fmt.Print(item.V.(llm.Event).Text)
//	}
//
// Decisions worth knowing:
//   - Every Observable here is multicast and replaying: one goroutine reads
//     the source once, from the moment the Observable is created, into a
//     log, and every observer (Observe, ForEach, or any operator chain)
//     sees every item from the first one, in order, whenever it subscribes.
//     A second observer never re-issues a request, and observers never slow
//     each other: each replays the log at its own pace. No Connect is
//     needed (the Observable is already connected); do not call it, as it
//     would add an observer nobody reads, held until ctx ends.
//   - The log keeps every item until the Observable is dropped: a stream's
//     events, a fan-out's events, a batch's items. For a very large batch,
//     read the pipeline channel directly instead.
//   - Everything is bound to the context given to the From function:
//     cancelling it stops the source (closing the stream or the Fan) and
//     ends every subscription. An observer that stops reading before the
//     end holds its own goroutine until then, so cancel the context to
//     abandon an Observable.
//   - Failures are error items: the stream's error last, each fan-out
//     model's *pipeline.ModelError when that model fails. Batch items carry
//     their own errors and never end the Observable.
//
// Guide: docs/pipelines.md in the repository, which starts from the task and
// ends with how it is tested; this comment stays the reference.
package rx
