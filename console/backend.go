package console

import (
	"context"
	"errors"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/session"
	"github.com/chorusrt/chorus/store"
)

// sessions is what the console reads and changes of durable sessions: a
// local session.Manager, or a cluster node's sessions with the cluster's
// journal for the list and timelines.
type sessions interface {
	list(ctx context.Context) ([]string, error)
	// live are the sessions that may be running or waiting for approval
	// (nil when not known): a list looks at them past its limit.
	live() []string
	// snapshot reads a session's state without activating it.
	snapshot(ctx context.Context, id string) (*session.Snapshot, error)
	timeline(ctx context.Context, id string) ([]session.TimelineEntry, error)
	send(ctx context.Context, id string, msg llm.Message) error
	resolve(ctx context.Context, id, interrupt string, approved bool, note string) error
	cancel(ctx context.Context, id string) error
	// events follows the session's event stream after seq; stop ends it.
	events(ctx context.Context, id string, after uint64) (<-chan session.Event, func())
}

// managerSessions are a local Manager's sessions.
type managerSessions struct{ m *session.Manager }

func (s managerSessions) list(ctx context.Context) ([]string, error) { return s.m.Sessions(ctx) }
func (s managerSessions) live() []string                             { return s.m.Live() }
func (s managerSessions) snapshot(ctx context.Context, id string) (*session.Snapshot, error) {
	return s.m.Peek(ctx, id)
}
func (s managerSessions) timeline(ctx context.Context, id string) ([]session.TimelineEntry, error) {
	return s.m.Timeline(ctx, id)
}
func (s managerSessions) send(ctx context.Context, id string, msg llm.Message) error {
	return s.m.Send(ctx, id, msg)
}
func (s managerSessions) resolve(ctx context.Context, id, interrupt string, approved bool, note string) error {
	return s.m.Resolve(ctx, id, interrupt, approved, note)
}
func (s managerSessions) cancel(ctx context.Context, id string) error { return s.m.CancelTurn(ctx, id) }
func (s managerSessions) events(_ context.Context, id string, after uint64) (<-chan session.Event, func()) {
	return s.m.Events(id, after)
}

// RemoteSessions are sessions reached through a cluster member
// (*cluster.Sessions, from Node.Sessions, satisfies it).
type RemoteSessions interface {
	Send(ctx context.Context, id string, msg llm.Message) error
	Resolve(ctx context.Context, id, interrupt string, approved bool, reason string) error
	CancelTurn(ctx context.Context, id string) error
	Snapshot(ctx context.Context, id string) (*session.Snapshot, error)
	Events(ctx context.Context, id string, after uint64) (<-chan session.Event, func())
}

// Cluster is what the Cluster page shows of a cluster member
// (*cluster.Node satisfies it).
type Cluster interface {
	// Address is the member's actor address; Members the live members'.
	Address() string
	Members() []string
}

// clusterSessions are the sessions a cluster hosts, reached through a node;
// the list and timelines come from the cluster's journal.
type clusterSessions struct {
	s RemoteSessions
	j store.Journal
}

var errNoJournal = errors.New("console: the cluster's journal was not given (Options.Journal)")

func (s clusterSessions) list(ctx context.Context) ([]string, error) {
	if s.j == nil {
		return nil, errNoJournal
	}
	return s.j.Sessions(ctx)
}

func (s clusterSessions) live() []string { return nil }

// snapshot reads the session from the cluster's journal, which activates
// it nowhere (without a journal, from the member running it).
func (s clusterSessions) snapshot(ctx context.Context, id string) (*session.Snapshot, error) {
	if s.j == nil {
		return s.s.Snapshot(ctx, id)
	}
	return session.ReadSnapshot(ctx, s.j, id)
}
func (s clusterSessions) timeline(ctx context.Context, id string) ([]session.TimelineEntry, error) {
	if s.j == nil {
		return nil, errNoJournal
	}
	return session.ReadTimeline(ctx, s.j, id)
}
func (s clusterSessions) send(ctx context.Context, id string, msg llm.Message) error {
	return s.s.Send(ctx, id, msg)
}
func (s clusterSessions) resolve(ctx context.Context, id, interrupt string, approved bool, note string) error {
	return s.s.Resolve(ctx, id, interrupt, approved, note)
}
func (s clusterSessions) cancel(ctx context.Context, id string) error { return s.s.CancelTurn(ctx, id) }
func (s clusterSessions) events(ctx context.Context, id string, after uint64) (<-chan session.Event, func()) {
	return s.s.Events(ctx, id, after)
}
