package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/chorusrt/chorus/internal/actorkit"
)

// System is the actor system credential actors run in: a hold on the
// process's shared Proto.Actor system, or (in a cluster node's runtime)
// on the node's own. Its Release ends the hold and stops none of the
// actors in it.
type System = actorkit.System

// NewSystem returns a hold on the process's shared actor system, whose own
// log lines go to logger (nil: discarded) while the hold lasts. Release it
// once its actors are stopped.
func NewSystem(logger *slog.Logger) *System { return actorkit.Shared(logger) }

// Ref is the runtime's handle on the actor of a credential, once spawned.
//
// What needs no wait it applies on the caller's goroutine, under the
// state's lock, without a message: a grant the pacer allows at once with
// nobody ahead (CredentialState.TryGrant), an acceptance, a report. The
// actor serves whoever must wait: queued callers, the pacing timer, a
// cooldown's end. Callers served this way and through the actor see one
// order: nobody is granted at once while another caller's request is on
// its way to the actor or waiting in its queue.
type Ref struct {
	sys    *actor.ActorSystem
	pid    *actor.PID
	nextID atomic.Uint64
	// asking counts the callers whose AdmitRequested is with the actor
	// (sent, not yet answered): while there is one, a new caller queues
	// behind it instead of taking a grant at once.
	asking atomic.Int64
	owner  refOwner
	Cred   *CredentialState
}

// Spawn starts the actor of a credential in s.
func Spawn(s *System, c *CredentialState) *Ref {
	pid := s.Sys.Root.Spawn(props(c))
	return &Ref{sys: s.Sys, pid: pid, owner: refOwner{sys: s.Sys, pid: pid}, Cred: c}
}

// refOwner is the Owner of what a Ref applies on a caller's goroutine: its
// answers to queued callers go out as the actor's would, and a pacing
// timer it arms wakes the actor.
type refOwner struct {
	sys *actor.ActorSystem
	pid *actor.PID
}

func (o refOwner) Reply(to any, msg any) {
	if pid, ok := to.(*actor.PID); ok && pid != nil {
		o.sys.Root.Send(pid, msg)
	}
}

func (o refOwner) Wake() { actorkit.Tell(o.sys, o.pid, wake{}) }

// wake is the actor's own timer message.
type wake struct{}

// crashRequested makes the actor panic, for supervision tests.
type crashRequested struct{}

// props returns a credential actor's props. The producer closes over c, so
// a supervised restart builds a new actor over the same state.
func props(c *CredentialState) *actor.Props {
	first := true
	return actor.PropsFromProducer(func() actor.Actor {
		if !first {
			c.mu.Lock()
			c.restarts++
			c.mu.Unlock()
		}
		first = false
		return &credentialActor{c: c}
	}, actor.WithSupervisor(actor.NewOneForOneStrategy(1_000_000, time.Second, actor.DefaultDecider)))
}

// credentialActor is the behaviour over a CredentialState, and its Owner.
type credentialActor struct {
	c    *CredentialState
	sys  *actor.ActorSystem
	self *actor.PID
}

func (a *credentialActor) Reply(to any, msg any) {
	if pid, ok := to.(*actor.PID); ok && pid != nil {
		a.sys.Root.Send(pid, msg)
	}
}

func (a *credentialActor) Wake() { actorkit.Tell(a.sys, a.self, wake{}) }

func (a *credentialActor) Receive(ctx actor.Context) {
	if a.sys == nil {
		a.sys, a.self = ctx.ActorSystem(), ctx.Self()
	}
	switch m := ctx.Message().(type) {
	case AdmitRequested:
		a.c.Admit(a, ctx.Sender(), m)
	case AdmitCancelled:
		a.c.Cancel(a, m)
	case RequestFinished:
		a.c.Finish(a, m)
	case RequestAccepted:
		a.c.Accept(a, m)
	case sent:
		switch m := m.msg.(type) {
		case RequestFinished:
			a.c.Finish(a, m)
		case RequestAccepted:
			a.c.Accept(a, m)
		case foreignFinished:
			a.c.foreign(a, m)
		}
		a.c.sent.Add(-1)
	case wake:
		a.c.Wake(a)
	case StatsRequested:
		ctx.Respond(a.c.Snapshot())
	case CloseRequested:
		a.c.Close(a)
		ctx.Respond(struct{}{})
	case *actor.Stopped:
		a.c.Stopped()
	case crashRequested:
		panic("actors: crash requested")
	}
}

// Admit waits until the credential admits a request of cost, and returns
// the grant's sequence number for Finish. It returns the refusal's error
// (llm.ErrOverloaded, ErrClosed, a cooldown past the deadline) or, when ctx
// ends first, ctx's error — withdrawing the request either way.
func (r *Ref) Admit(ctx context.Context, cost int) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if r.asking.Load() == 0 {
		if seq, ok := r.Cred.TryGrant(cost); ok {
			return seq, nil
		}
	}
	r.asking.Add(1)
	defer r.asking.Add(-1)
	id := r.nextID.Add(1)
	dl, _ := ctx.Deadline()
	m, err := actorkit.Ask[any](ctx, r.sys, r.pid, AdmitRequested{ID: id, Cost: cost, Deadline: dl}, actorkit.AskOptions{})
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			// Withdraw; if the grant crossed the cancellation, give it back.
			var seq uint64
			if a, ok := m.(Admitted); ok {
				seq = a.Seq
			}
			r.sys.Root.Send(r.pid, AdmitCancelled{ID: id, Seq: seq})
			return 0, err
		}
		if errors.Is(err, actorkit.ErrNotDelivered) {
			return 0, &RefusedError{Provider: r.Cred.Provider, Err: ErrClosed}
		}
		return 0, err
	}
	switch m := m.(type) {
	case Admitted:
		if w, ok := ctx.Value(admitHookKey{}).(AdmitWatcher); ok {
			w.AdmitWaited(m.Queued, m.Paced)
		}
		return m.Seq, nil
	case AdmitRefused:
		return 0, &RefusedError{Provider: r.Cred.Provider, Err: m.Err, RetryAt: m.RetryAt}
	}
	return 0, fmt.Errorf("actors: unexpected admission reply %T", m)
}

type admitHookKey struct{}

// AdmitWatcher hears how long a grant waited (WithAdmitWatcher).
type AdmitWatcher interface {
	// AdmitWaited is called with how long the grant waited behind others
	// in the credential's queue, then at its head for the pacer.
	AdmitWaited(queued, paced time.Duration)
}

// WithAdmitWatcher returns ctx carrying w, which Ref.Admit tells how long
// a grant that waited for the credential's actor waited (telemetry; a
// grant on arrival does not call it, nor does an Admitter of another kind).
func WithAdmitWatcher(ctx context.Context, w AdmitWatcher) context.Context {
	return context.WithValue(ctx, admitHookKey{}, w)
}

// RefusedError is an admission refusal.
type RefusedError struct {
	Provider string
	Err      error
	RetryAt  time.Time
}

func (e *RefusedError) Error() string { return "chorus: " + e.Provider + ": " + e.Err.Error() }

// Unwrap returns the reason.
func (e *RefusedError) Unwrap() error { return e.Err }

// Admitter admits the requests of one credential: its own actor (Ref) or,
// in a cluster, the credential's budget owner on some node. The runtime
// holds one per credential.
type Admitter interface {
	// Admit waits for a grant of one request of estimated token cost.
	Admit(ctx context.Context, cost int) (uint64, error)
	// Finish reports the end of a grant, with what the provider said.
	Finish(RequestFinished)
	// Load is the credential's queue, requests in flight and cooldown end
	// as last seen; safe from any goroutine and cheap.
	Load() (queued, inFlight int, cooldownUntil time.Time)
	Stats(timeout time.Duration) (AdmissionStats, error)
	// Close refuses queued callers with ErrClosed; Stop then stops what
	// serves the credential, if anything runs for it alone.
	Close(timeout time.Duration) error
	Stop(timeout time.Duration) error
}

var _ Admitter = (*Ref)(nil)

// Acceptor is an Admitter that also hears when a granted request was
// accepted, before it ends (see RequestAccepted). An Admitter that is not
// one paces a provider without limit headers from its 429s and ends alone.
type Acceptor interface {
	Accepted(seq uint64)
}

var _ Acceptor = (*Ref)(nil)

// Load returns the credential's queue, in-flight count and cooldown end.
func (r *Ref) Load() (queued, inFlight int, cooldownUntil time.Time) { return r.Cred.Load() }

// Outlook returns the credential's Outlook as of now.
func (r *Ref) Outlook() Outlook { return r.Cred.Outlook() }

// Finish reports the end of grant seq. While the credential paces
// nothing it is applied at once, on the caller's goroutine (the callers it
// lets go are answered as the actor answers them); otherwise, or when the
// report teaches a limit or a cooldown, it goes to the actor.
func (r *Ref) Finish(f RequestFinished) {
	if !r.Cred.finishNow(r.owner, f) {
		r.send(f)
	}
}

// Divert stops the credential admitting, for good: the runtime paces it in
// one budget with the other keys of its endpoint (CredentialState.Divert).
func (r *Ref) Divert() { r.Cred.Divert(r.owner) }

// Adopt makes r's credential the one budget of keys found to share a
// limit (CredentialState.Adopt), and has each key tell it the end of
// every grant the key still has in flight: what the adoption had to count
// as uncounted, their reports can show the provider counted.
func (r *Ref) Adopt(keys ...*Ref) {
	states := make([]*CredentialState, len(keys))
	for i, k := range keys {
		states[i] = k.Cred
	}
	r.Cred.adopt(func(m foreignFinished) { r.send(m) }, states)
}

// Shed refuses up to n of the credential's queued callers, the newest
// first, so that they are placed again (CredentialState.Shed).
func (r *Ref) Shed(n int) int { return r.Cred.Shed(r.owner, n) }

// Accepted reports that grant seq's request was accepted (see
// RequestAccepted). It is an Acceptor's method, applied at once or sent
// like Finish.
func (r *Ref) Accepted(seq uint64) {
	if m := (RequestAccepted{Seq: seq}); !r.Cred.acceptNow(r.owner, m) {
		r.send(m)
	}
}

// sent is a report or an acceptance a Ref sent to its actor, counted in
// CredentialState.sent until the actor applied it.
type sent struct{ msg any }

func (r *Ref) send(m any) {
	r.Cred.sent.Add(1)
	r.sys.Root.Send(r.pid, sent{m})
}

// Stats asks the actor for a snapshot.
func (r *Ref) Stats(timeout time.Duration) (AdmissionStats, error) {
	res, err := r.sys.Root.RequestFuture(r.pid, StatsRequested{}, timeout).Result()
	if err != nil {
		return AdmissionStats{}, err
	}
	s, ok := res.(AdmissionStats)
	if !ok {
		return AdmissionStats{}, fmt.Errorf("actors: unexpected stats reply %T", res)
	}
	return s, nil
}

// Close stops admissions: queued callers are refused with ErrClosed.
func (r *Ref) Close(timeout time.Duration) error {
	_, err := r.sys.Root.RequestFuture(r.pid, CloseRequested{}, timeout).Result()
	return err
}

// Stop stops the actor and waits for it.
func (r *Ref) Stop(timeout time.Duration) error {
	return r.sys.Root.StopFuture(r.pid).Wait()
}
