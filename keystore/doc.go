// Package keystore keeps a gateway's keys and their spend ledger where
// every replica of a fleet sees them and a restart does not forget them: a
// SQLite file for one server, a PostgreSQL database for a fleet, one
// implementation over database/sql for both, one conformance suite.
//
//	st, _ := keystore.OpenSQLite("gateway.db")
//	defer st.Close()
//	text := keystore.NewSecret() // shown once
//	k, err := st.Create(ctx, keystore.Key{Name: "team-a", Hash: keystore.HashKey(text), RPM: 600, BudgetUSD: 50, BudgetPeriod: keystore.Monthly}, time.Now())
//
// # Keys
//
// A key is kept by its SHA-256 only; its text is never stored, logged or
// returned. Every change (Create, Update, Rotate, Revoke) takes the next
// revision of the store, and Changes(rev) returns the keys changed since:
// each gateway replica polls it (every 250 ms by default), so a key made
// or revoked through one replica holds on every other within one poll.
// A rotated key keeps its id, settings and ledger; its previous hash is
// accepted until the grace period the operator gave ends. A revoked key
// is kept (its ledger with it) and refused. Seed creates the keys of a
// configuration file whose names the store lacks and leaves the others:
// once running, the store is the truth.
//
// # The ledger: reserve, then settle
//
// Money is kept in billionths of a dollar (NanoUSD), so sums are exact.
// A replica leases part of a key's budget with Reserve before the calls
// that spend it, and Settle moves what they cost from its reservation to
// the ledger (and gives back what it will not use), in batches: one
// transaction for every key a replica settles, never one per request.
// What is spent plus what is reserved is what the key has used; Reserve
// grants only what is left of the budget beside both, with the key's row
// locked, so replicas reserving at once never grant more than the budget.
//
// A replica that dies (SIGKILL) stops its heartbeat; once it is older
// than a TTL, Reconcile (run by any live replica) counts everything the
// dead one held reserved as spent: it may have answered calls it never
// settled, and counting the reservation never under-counts. So a killed
// replica can make a key's budget run out early by at most what it held
// reserved, and can never let it be overrun. A replica that comes back
// after being reconciled gets ErrLost from its next call and forgets its
// leases (their calls were counted), so nothing is counted twice.
//
// Periods: a budget is a total, or starts again every UTC day or month
// (Period); the ledger keeps one row per key and period.
//
// # Limits for the whole fleet
//
// Take leases part of a key's requests or tokens of one minute window
// (windows are Unix minutes, aligned on every replica), and TakeSlots
// part of its concurrency: leases are counted across replicas under the
// key's row lock, so their sum never passes the limit. The gateway
// (gateway.Options.KeyStore) takes them in chunks, ahead of need, so a
// request pays no store round trip in the common case.
//
// # Files and batches
//
// The gateway's /v1/files and /v1/batches live here too, so that every
// replica serves them: PutFile, File, FileContent, Files and DeleteFile
// keep a file's bytes and metadata; a batch (CreateBatch, Batch, Batches)
// is the gateway's state as JSON beside what the store needs: whether it
// is done, when a client asked to cancel it (CancelBatch), and which
// replica holds its lease until when. TakeBatch gives a replica one batch
// not done whose lease is free or expired (two replicas never get the
// same one), RenewBatch extends it and returns the cancel, ReleaseBatch
// frees it. Only the lease's holder saves a batch's state (SaveBatch) and
// appends its output lines (AppendBatchOutput, chunks kept in order): a
// replica whose lease was taken over gets ErrLeaseLost and stops, so
// BatchOutput never holds a line twice. A done batch's lines are dropped
// (its output files hold them).
//
// Decisions and limits:
//   - Replicas' clocks are trusted to agree to well within the heartbeat
//     TTL and the minute of a window; skew shifts a replica's windows by
//     the skew.
//   - Unused window leases are not given back (a window ends within a
//     minute); unused budget reservations and slots are, by Settle and
//     ReleaseSlots.
//   - Conflicts are found by name, hash and rotated-out hash before the
//     insert, and by the unique indexes when two replicas race.
package keystore
