// Package actors holds Chorus's credential actors: the control plane of
// each provider credential, the system they run in, and the messages they
// take. No Proto.Actor type appears in its API: callers hold a Ref (or any
// Admitter) and exchange Go values with it; the Proto.Actor plumbing it
// shares with session and cluster lives in internal/actorkit.
//
// The credential actor never sees a delta. A call asks it for admission
// (AdmitRequested), runs its HTTP exchange on the caller's goroutine with
// the credential's providers.Client, writes its events straight into the
// caller's channel, and reports once when it ends (RequestFinished):
// status, usage, and the rate-limit state the provider sent back. From
// those reports the actor learns the provider's limits and paces admissions
// so that, once the limits are known, no request is sent that the provider
// would refuse.
//
// A credential that paces nothing (no budget configured, learned or
// inferred, no 429 seen) does not trade messages for what needs no wait:
// the Ref applies on the caller's goroutine, under the state's lock, a
// grant the pacer allows at once with nobody queued or asking ahead, the
// acceptance and the report, so such a call costs no actor round trip and
// no wakeup of another goroutine. Once it paces, everything goes through
// the actor in one order, as the pacer's reading of a provider's windows
// needs (CredentialState.TryGrant, Ref).
//
// Pacing reads the limiter behind the headers, not only the numbers
// (pacer.go): a report's "full" instant (arrival + reset) ranks reports
// that arrive out of order; a fixed window refills at its reset and keeps
// charged only what may still land in the next one; a sliding window keeps
// charged what was granted after the report that named its reset; a token
// bucket (OpenAI's and Anthropic's limiters, whose resets mean "until full")
// is recognised when successive reports agree on one refill rate and is
// paced at the lower bound of that rate. Alone on a window, each answered
// request is held until the full instant its own report names, so a
// sliding window frees its requests one by one (pacer.held). A provider that reports no limits
// (Gemini) has its request limit inferred from its 429s: what a window
// accepted, counted when response headers arrive (RequestAccepted), until
// the 429's retry delay names the window's end.
//
// Everything that must survive a supervised restart (learned limits, the
// admission queue with its waiting callers, counters) lives in a
// *CredentialState outside the actor; the actor is a thin behaviour over
// it (an Owner), so a restart loses no state and no waiter. A cluster's
// budget owner is another Owner of the same state, fed by other nodes'
// messages. Learn-once flags are not a credential's: they belong to its
// endpoint, and the runtime shares them among the endpoint's clients.
//
// Credential actors run in the process's one shared Proto.Actor system
// (NewSystem), next to the session actors; closing a runtime stops its own
// actors and leaves the system to the others. Inside a cluster node they
// run in the node's own system instead: Proto.Actor's remote and cluster
// attach to one system per address, and leaving the cluster shuts it down,
// so each node owns one (see package cluster).
//
// Messages are small plain structs named for what happened or what is
// asked. Replies travel to the sender's address, never through a Go
// channel inside a message, so the same messages can cross a node boundary
// once they have an encoding.
//
// Guide: docs/pacing.md in the repository, which starts from the task and
// ends with how it is tested; this comment stays the reference.
package actors
