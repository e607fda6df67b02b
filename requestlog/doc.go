// Package requestlog keeps the gateway's request log: one Record per call
// the gateway answered (what was asked for, what served it, how long it
// took, what it used and cost), written off the request's path to a SQLite
// file or a PostgreSQL database, and read back newest first or as usage
// aggregates.
//
//	st, _ := requestlog.OpenSQLite("requests.db")
//	lg := requestlog.New(st, requestlog.Options{Retain: 720 * time.Hour})
//	defer lg.Close(ctx) // flushes what is queued, then closes st
//	lg.Log(requestlog.Record{Time: start, Model: "openai/gpt-4.1-mini", Status: 200})
//
// What is guaranteed:
//
//   - Log never blocks and never fails: a record goes into a bounded queue
//     (Options.Queue). When the queue is full the record is dropped and
//     counted (Stats.Dropped), never silently lost.
//   - A background writer inserts queued records in batches (every
//     Options.Interval or Options.Batch records, whichever comes first). A
//     batch the store refuses is retried until it is written or Close
//     gives up; meanwhile new records wait in the queue, then overflow.
//   - Close writes what is queued, within its context's deadline; what it
//     could not write is counted in Stats.Dropped.
//   - Retention (Options.Retain by age, Options.MaxRows by count) is
//     enforced in the background, never on a request.
//   - A Record never holds a prompt, an answer or a key: the key is named by
//     its fingerprint and its name.
//
// Reading: List pages newest first by keyset (time, id), never OFFSET, over
// the (time desc), (key, time) and (model, time) indexes; Usage aggregates
// per key, model or provider and per hour or day, with latency and time to
// first token percentiles computed from the rows (nearest rank). ParseQuery
// and ParseUsage read both from URL parameters and name a bad one with a
// *FilterError.
package requestlog
