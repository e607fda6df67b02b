// Package storetest is the conformance suite every store.Journal backend
// runs. Run checks, against a journal the caller opens:
//
//   - records round trip (kind, payload bytes as given, UTC timestamps set by
//     Append), with seqs 1, 2, 3, ... per session and no aliasing of the
//     caller's buffers;
//   - ErrConflict for a stale, early or wrong expected seq, with nothing
//     written;
//   - all-or-nothing batches: a record failing validation anywhere in a batch
//     is an *llm.ConfigError naming the field (e.g. "recs[1].Kind") and writes
//     nothing;
//   - writers racing on one expected seq, from two journals over the same
//     storage: exactly one wins each round, the others get ErrConflict, no gap
//     and no duplicate;
//   - Read from any seq, LastSeq, snapshots (latest wins, older ignored,
//     ErrNotFound), the sorted session list, 1 MiB payloads;
//   - context cancellation, both before a call and in the middle of
//     concurrent appends (every acknowledged append present at its seq);
//   - durability across Close and reopen, and ErrClosed after Close;
//   - leases, for journals that implement store.Leaser (skipped otherwise):
//     Acquire on a free, expired, released or held lease (*LeaseHeldError
//     naming the holder), epochs that only increase, Renew (lost sessions
//     returned, the others extended, expired ones nobody took included),
//     Release by a non-holder a no-op, Expired oldest first within its
//     limit, AppendLeased refused with ErrLeaseLost and nothing written once
//     the lease is taken over or released, holders racing from two journals
//     for a free lease (exactly one wins), and two store.Leased adapters
//     handing a session over: the first can then neither append nor save a
//     snapshot.
//
// Crash tests (a process killed with SIGKILL mid-append) need a child
// process and live with each backend's own tests.
package storetest
