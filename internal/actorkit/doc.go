// Package actorkit is Chorus's own Proto.Actor plumbing, shared by actors,
// session and cluster and invisible to users (an internal package): the
// process's shared actor system, the one ask-with-context helper, and the
// hooks through which a cluster node hands its own system to the runtime
// and session manager it builds.
//
// One process, one actor system: runtimes and session managers spawn their
// actors into the process-wide system Shared returns, created on first use
// with Proto.Actor's log lines routed to the slog loggers of its current
// users. Closing a runtime or a manager stops its own actors and releases
// its hold; the system itself holds no goroutine when idle (Proto.Actor's
// Shutdown only closes a channel), so it is never shut down.
//
// The exception is a cluster node: Proto.Actor's remote and cluster are
// extensions of one system, bound to one address, and the cluster's
// Shutdown shuts its system down. So a node owns its system (several nodes
// may share a process, as in the cluster's tests), and the runtime and
// session manager a node builds spawn into the node's system (Borrow),
// never into the shared one.
package actorkit
