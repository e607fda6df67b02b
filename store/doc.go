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
// # Leases
//
// When sessions run as cluster grains, two activations of one session may
// briefly coexist on two nodes. Leases fence them: both backends implement
// Leaser, and an activation acquires its session's lease (Acquire) before
// it recovers and writes, renews it (Renew, one call for all the leases of
// a holder), writes through AppendLeased, and releases it (Release) when it
// passivates. Leased adapts a journal to one holder: its Append and
// SaveSnapshot require the lease it holds for the session. The conformance
// suite checks, on both backends:
//
//   - Exclusion. Acquire grants the lease when there is none, when it has
//     expired or was released, and extends it, same epoch, for the holder
//     that holds it unexpired; otherwise it returns a *LeaseHeldError
//     (matching ErrLeaseHeld) naming the holder and its expiry. Of holders
//     racing for a free lease, from one journal or two over the same
//     storage (two processes; for PostgreSQL, concurrent connections),
//     exactly one wins.
//   - Epochs. Every grant other than such an extension increases the
//     session's epoch by one, starting at 1: after an expiry, after a
//     release, whether the new holder is another or the same. A released
//     lease keeps its row (holder emptied), so epochs never repeat.
//   - Fenced writes. AppendLeased writes only when its lease (session,
//     holder, epoch) is the session's current one, checked in the same
//     transaction as the seq compare-and-set: PostgreSQL takes a share lock
//     on the lease row, so that an Acquire handing the lease over waits for
//     an append in flight, and an append that comes after the hand-over
//     finds it; SQLite does both in its one write transaction. A lease
//     taken over, released or never granted fails it with an error matching
//     ErrLeaseLost, and nothing is written (the lease is checked before the
//     seq). An expired lease nobody took still writes. So once a holder has
//     acquired a session's lease, no other activation's AppendLeased can
//     write to it; with the seq compare-and-set, two activations never both
//     write.
//   - Renewal. Renew extends, by ttl from now, the listed leases the holder
//     still holds at the given epochs (expired ones nobody took included)
//     and returns the others, sorted. Release by anyone but the holder at
//     its epoch is a no-op. Expired lists unreleased leases past their
//     expiry, oldest first, up to its limit: the sessions of crashed nodes.
//   - Leased. Append and SaveSnapshot of a session the Leased holds no
//     lease for fail with ErrLeaseLost and write nothing; an Append that
//     finds the lease lost, or a Renew, makes it forget the lease.
//
// Expiry is judged by PostgreSQL's clock (now()), whatever the clocks of the
// machines sharing the database, and by the local clock for SQLite (whose
// processes share one machine). Lease.Expires is UTC. A ttl must be
// positive (an *llm.ConfigError with Field "ttl" otherwise), holders follow
// the rules of session ids (Field "holder"), and Expired's limit must not be
// negative (a limit of 0 lists nothing). A done context fails every lease
// call without changing anything, and after Close they return ErrClosed.
// A lease guards only writes made through AppendLeased (or Leased): a
// plain Append is not fenced.
//
// # Layout
//
// Both backends use the tables chorus_journal_records (session, seq, kind,
// data, at; primary key (session, seq)), chorus_journal_sessions (session,
// last_seq: the compare-and-set target of Append), chorus_journal_snapshots
// and chorus_journal_leases (session, holder, epoch, expires_at; one row per
// session ever leased). Opening a database created before leases existed
// adds the lease table; the schema version stays 1, since older code
// ignores the extra table. PostgreSQL creates them in the first schema of
// the connection's search_path (set search_path in the DSN to keep journals
// apart), under an advisory lock so that processes starting together do
// not collide.
//
// Guide: docs/sessions.md in the repository, which starts from the task and
// ends with how it is tested; this comment stays the reference.
package store
