// Package faultmatrix is the fault matrix (issue 8) as one table: every
// wire format, buffered and streaming, against every fault the llmtest
// server can inject, with the outcome each cell documents. Two runners
// run it: providers/faultmatrix_test.go through a plain providers.Client
// and runtime/faultmatrix_test.go through a Runtime (one credential,
// placed by its actor). Each cell runs on a fresh llmtest server and a
// fresh HTTP client, and checks that the call
//
//   - ends within its budget (plus scheduling slack) in a success or the
//     documented typed error;
//   - sent exactly the requests the retry rules allow: retries (the
//     client's ladder, or through the runtime the actor's cooldown for
//     429/529) only before the first event, none after it;
//   - kept the partial result (the deltas sent before the fault) after it;
//   - left no connection open at the server and no goroutine behind
//     (goleak, per cell);
//   - never shows the API key, nor its last 8 characters, in the error, the
//     log lines, the attempt or learn observers' events, or the events.
//
// Where a call through the runtime differs by design, the row says so in
// its Runtime column (Want.Runtime): the runtime's clients hand 429 and 529
// back at once (providers.WithoutRateLimitRetry); the credential cools down
// for the retry-after (DefaultCooldown when none is given) and the call is
// placed again when it ends, within the caller's budget.
//
// The package imports neither providers nor runtime, so that the tests
// inside package providers can use it: a runner builds its own
// providers.Config from a Format.
package faultmatrix
