// Package cluster runs Chorus on a Proto.Actor cluster, for when one
// machine is not enough: nodes share the budgets of the provider keys they
// hold, host durable sessions that any node can reach and that move to a
// survivor when their node dies, and run the model calls that any node
// (or a client, such as chorus batch --cluster) spreads over them.
// Single-machine users never import it, so they never link gRPC.
//
//	n, err := cluster.Join(ctx, cluster.Config{
//		Name: "prod", Bind: "10.0.0.5:7100",
//		Peers:    []string{"10.0.0.5:7100", "10.0.0.6:7100", "10.0.0.7:7100"},
//		Runtime:  []runtime.Option{runtime.FromEnv()},
//		Sessions: &session.Options{Journal: pg, ModelName: "openai/gpt-4.1-mini", Tools: tools},
//	})
//	defer n.Close(ctx)
//	n.Runtime().Stream(ctx, req)                 // local call, cluster-wide key budget
//	n.Stream(ctx, req)                           // on some member, deltas relayed here
//	n.Sessions().Send(ctx, "support-42", msg)    // wherever the session lives
//
// # Membership
//
// Proto.Actor's cluster with its automanaged provider: a static member
// list (Config.Peers), each member serving a health endpoint on its actor
// port plus one (bound to the Bind host only), polled every
// RefreshInterval; no external service. Placement is Proto.Actor's
// rendezvous hashing (disthash). For production membership, Proto.Actor
// has providers for Kubernetes (cluster/clusterproviders/k8s), Consul
// (consul) and etcd (etcd); switching means building the cluster config
// with one of them instead of automanaged in Join — the kinds, messages
// and guarantees below do not depend on it. A member reached at another
// address than Bind (NAT, a container's mapped port, a proxy) names it in
// Config.Advertise. A member dropped by the others (its health check
// failing for 2 s, as in a partition) is blocked by id for good: it comes
// back once restarted.
//
// # What crosses a node
//
// Every message one node sends another is protobuf, generated from
// clusterpb/chorus_cluster.proto by `make proto` (checked in; `make
// proto-check` fails when it is stale). This package sends only through
// helpers typed proto.Message, so a plain struct sent across nodes does not
// compile, and TestOnlyProtoCrossesNodes checks that nothing sends any
// other way. Requests and results travel as JSON of the llm types inside
// their messages (once per call); stream deltas have proto fields. Errors
// cross typed: *llm.APIError, *llm.RateLimitError, *llm.StreamError with
// its partial result, *llm.ConfigError, session.ResolveError, and the
// sentinels (llm.ErrOverloaded, context.Canceled, session.ErrUnknownSession,
// ...) match with errors.Is on the caller's side.
//
// # Shared provider budgets
//
// Each credential (provider id and key, named by the key's SHA-256
// fingerprint, never the key) has one budget owner in the cluster, a grain
// running the same admission logic as a single runtime (queue, pacing from
// learned header limits, cooldown on 429/529) for every node: each
// request asks it for a grant and reports its end with the provider's
// rate-limit headers. When the owner's node dies, the next activation
// learns again: from the latest headers the asking nodes saw it knows the
// limit and the window's reset, takes that window as spent (the dead owner
// may have granted the rest of it), and after the reset sends one request
// at a time until its own first response says what remains. So a failover
// costs at most the rest of a window, never a 429.
//
// Learn-once lessons (invariant 6: they belong to the endpoint, shared by
// all its callers) travel through the same owners: every report carries
// the node's learn-once state of the credential's endpoint, the owner
// keeps the union, and every grant carries it back, so a node applies a
// lesson another node learned before it sends its own request. A node's
// runtime shares one state among an endpoint's keys, so a lesson that
// reaches it through one key's owner serves the endpoint's other keys on
// that node too. (An owner knows what the nodes using its key reported: a
// lesson learned with one key reaches a node that only ever uses another
// key once some node that knows it uses that key.)
//
// # Sessions
//
// Sessions are grains keyed by session id, on session.Manager, journaled in
// PostgreSQL (store.Postgres, shared by the nodes) through store.Leased: a
// node takes a session's lease before the session recovers, renews it every
// LeaseTTL/3, and every append checks the lease (holder and epoch) in the
// same transaction as the compare-and-swap on the last sequence number, so
// two activations never both write, and a tool never starts without its
// tool_started record. A node that dies stops renewing; once its leases
// expire, a sweep on every node (each LeaseTTL/2) activates the sessions
// it held on their new owners, which recover from the journal under the
// crash rules of one machine: a read or idempotent write interrupted runs
// again, a single-attempt write ends outcome_unknown and never runs twice.
// Sessions.Send is not retried after a lost node (the message may or may
// not be journaled: ErrNodeLost says the outcome is unknown); Snapshot,
// Wait, Resolve, CancelTurn follow the session to its next node.
//
// # Remote streams
//
// Node.Stream runs a call on a member (round robin) and relays its events
// to the caller in ordered batches: the producer sends whatever events are
// ready as one DeltaBatch (up to 128; never waiting to fill one), at most
// 8 batches beyond what the caller has taken (credit), so a slow reader
// slows the provider's stream as it does locally; cancelling the caller's
// stream cancels the call on the member; each side watches the other, and
// a lost member is ErrNodeLost: retried on another member before the first
// event, returned with the partial result after it. Node.Chat, which
// delivers nothing before the end, runs a call whose member was lost again,
// as Node.Embed does; cancelling an embed's context cancels it on its
// member too (CallCancel), ending the provider request there. A batch's
// events travel packed column-wise (see stream.go): the nodes of a cluster
// run one build, and a build before the packing cannot read its batches.
//
// # Guarantees as tested
//
// TestClusterSurvivesSIGKILL starts three member processes and a client,
// runs eighteen sessions (each turn calls a non-idempotent and an
// idempotent tool) and a 60-item batch against one fake provider key
// enforcing its limit, and, past the first window, kills the member that
// owns the key's budget (and holds sessions) with SIGKILL while tools run
// and items stream. Every session finishes on a survivor; no single-attempt
// write ran twice (ledger and journal agree); the batch has exactly one
// answer per custom_id; the provider's 429s all fall within the first
// window. cmd/chorus's TestBatchClusterSIGKILL kills a chorus node
// mid-batch and the batch process itself, and checks each custom_id is
// written exactly once after --resume. The partition tests
// (partition_test.go; member_partition_test.go under the partitions build
// tag, run by make partitions, outside CI for an open failure, see
// docs/reliability.md) and TestClockSkewOfALease put fault proxies between
// member processes and between each and PostgreSQL, or skew the members'
// clocks, and check the same history plus its lease and journal
// operations for linearizability (porcupine, history_test.go);
// TestPartitionSoak chains random faults (make soak-partitions).
//
// Decisions and limits:
//   - A node owns its Proto.Actor system, where a single-machine runtime or
//     session manager uses the process's shared one: Proto.Actor's remote
//     and cluster are extensions of one system, bound to one address, and
//     the cluster's Shutdown shuts that system down, so attaching a node to
//     the shared system would tie every other runtime of the process to
//     the node's life, and a second node (the tests run several in one
//     process) could not attach at all. The runtime and session manager a
//     node builds spawn into the node's system, handed to them through
//     internal/actorkit (no public option shows a Proto.Actor type).
//   - A node's leave never stops Proto.Actor's endpoint manager, whose
//     stop can panic in a connection's own goroutine (beyond any recover):
//     each connection is closed through it, then the gRPC server stops
//     (leaveCluster; TestCloseNeverPanics).
//   - Proto.Actor leaves some goroutines behind after shutdown (its
//     throttles, gRPC connections to nodes already gone); the tests' leak
//     check names them and fails on any other.
//   - The remote round trip is the Proto.Actor floor: 110-140 µs on the
//     2-core machine (BenchmarkRemoteRoundTrip); a budget grant costs one.
//     A remote stream adds about 0.8 µs per delta, a session turn driven
//     from another node about 1 ms (BenchmarkRemoteStream,
//     BenchmarkRemoteSessionStep).
//
// Guide: docs/cluster.md in the repository, which starts from the task and
// ends with how it is tested; this comment stays the reference.
package cluster
