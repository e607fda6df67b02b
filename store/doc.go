// Package store is the journal of durable agent sessions: an append-only,
// per-session log of records (user messages, model results, tool starts and
// outcomes, approvals...) plus one snapshot per session. Package session
// writes a record before the step it describes starts its side effect, and
// rebuilds a session after a crash by loading its snapshot and reading the
// records after it.
//
// Two backends implement Journal:
//
//   - SQLite (OpenSQLite), the embedded default: one file, pure Go
//     (modernc.org/sqlite, no cgo), WAL mode with synchronous=FULL. Several
//     processes may share the file.
//   - Postgres (OpenPostgres), for journals shared between processes and
//     machines (github.com/jackc/pgx/v5, connections pooled by its pgxpool).
//
// # Guarantees
//
// Both backends pass the same conformance suite (package store/storetest)
// and the same crash tests, which check exactly these guarantees:
//
//   - Durable before return. When Append or SaveSnapshot returns nil, the
//     write is committed: SQLite has fsync'd its WAL (synchronous=FULL), and
//     PostgreSQL has flushed its WAL (synchronous_commit is forced on when a
//     connection has it off; the server must run with fsync on). The crash
//     tests kill a writing process with SIGKILL (and, for PostgreSQL, crash
//     the server with an immediate shutdown) and find every acknowledged
//     append after recovery.
//   - Atomic appends. Append's records are all written or none are. Every
//     record is validated before anything is written; a bad one is an
//     *llm.ConfigError whose Field names it ("session", "expectedSeq",
//     "recs[2].Kind", "recs[0].Session"). After a crash the journal holds
//     whole batches only, a contiguous prefix of what was appended.
//   - Optimistic concurrency. Seqs start at 1 and are contiguous per session.
//     Append succeeds only when the session's last seq is expectedSeq (0 for
//     a new session); otherwise it writes nothing and returns an error
//     matching ErrConflict. Of writers racing with the same expectedSeq, in
//     one process or many, exactly one wins: there is never a gap or a
//     duplicate seq.
//   - Outcome of a failed append. ErrConflict and validation errors mean
//     nothing was written. Any other error, a cancelled context in
//     particular, leaves the outcome unknown (the commit may have happened
//     just before the failure): read LastSeq, or the records, to find out.
//   - Context. Every call honours its context: a done context fails the call
//     with an error matching the context's error, without writing.
//
// Append sets Record.Seq and Record.At (values the caller put there are
// ignored); Record.Session may be left empty or must name the session
// appended to, and Read fills it in. At is UTC, truncated to the microsecond
// both backends store. Data is stored byte for byte as given (nil reads back
// as empty) and never aliased.
// Session ids and kinds must be non-empty, valid UTF-8 without NUL bytes, at
// most MaxIDLen bytes. Appending no records checks expectedSeq and writes
// nothing. A snapshot at the same seq as the stored one replaces it; an
// older one is ignored. Sessions lists sessions that have at least one
// record, sorted bytewise. After Close every call returns ErrClosed.
//
// # Layout
//
// Both backends use the tables chorus_journal_records (session, seq, kind,
// data, at; primary key (session, seq)), chorus_journal_sessions (session,
// last_seq: the compare-and-set target of Append) and
// chorus_journal_snapshots. PostgreSQL creates them in the first schema of
// the connection's search_path (set search_path in the DSN to keep journals
// apart), under an advisory lock so that processes starting together do
// not collide.
package store
