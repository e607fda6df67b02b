// Package requestlog keeps the gateway's request log: one Record per call
// the gateway answered (what was asked for, what served it, how long it
// took, what it used and cost) and per request it refused before a call
// (its status and error kind), written off the request's path to a SQLite
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
//   - A Record never holds a key: the key is named by its fingerprint and
//     its name. It holds a prompt or an answer only when the operator
//     turned that on (gateway.Options.LogContent): then RequestBody is the
//     request's body and Answer the answer's text, each cut to a size, in
//     columns of their own; never a header.
//   - Text the stores cannot hold (a NUL, bytes that are not UTF-8, in a
//     body or a client's model name) is stored with U+FFFD in their place,
//     so that no record makes its batch fail.
//
// Reading: List pages newest first by keyset (time, id), never OFFSET, over
// the (time desc), (key, time) and (model, time) indexes; Usage aggregates
// per key, model or provider and per hour or day, with latency and time to
// first token percentiles computed from the rows (nearest rank). ParseQuery
// and ParseUsage read both from URL parameters and name a bad one with a
// *FilterError.
//
// Decisions and limits:
//
//   - Times are stored as Unix nanoseconds (BIGINT) and the schema is the
//     same on both stores, so one implementation over database/sql serves
//     both (PostgreSQL through pgx's stdlib driver).
//   - A key filter matches the fingerprint or the name; each has its
//     index. Status filters are "ok", "error", an HTTP status or an error
//     kind.
//   - Usage reads the matching rows and aggregates them in Go, so the
//     percentiles are exact and the SQL is the same on both stores; its
//     cost grows with the rows in the range (a day of 33,000 records: 63
//     ms on SQLite), and a range of more than MaxBuckets buckets is
//     refused rather than paged.
//   - Retention by rows finds the cut with one ordered lookup (the one
//     OFFSET of the package, in the background) and deletes older rows.
//   - A failed insert is retried with a backoff up to 1 s (or Interval),
//     the batch kept; Close waits for the queue to be written until its
//     context ends.
package requestlog
