package actors

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// System is the actor system of one runtime.
type System struct {
	sys    *actor.ActorSystem
	nextID atomic.Uint64
}

// NewSystem starts an actor system whose own log lines go to logger (nil:
// discarded), at warning level and above.
func NewSystem(logger *slog.Logger) *System {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	l := logger.With(slog.String("component", "protoactor"))
	sys := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return l }),
		actor.WithDeadLetterThrottleCount(0),
	)
	return &System{sys: sys}
}

// Shutdown stops the actor system. Spawned actors must be stopped first.
func (s *System) Shutdown() { s.sys.Shutdown() }

// Ref is the runtime's handle on a spawned credential actor.
type Ref struct {
	s    *System
	pid  *actor.PID
	Cred *Credential
}

// Spawn starts the actor of a credential.
func (s *System) Spawn(c *Credential) *Ref {
	return &Ref{s: s, pid: s.sys.Root.Spawn(c.Props()), Cred: c}
}

// replyBox is a process that hands its messages to a Go channel: the
// sender PID of an admission, so the reply reaches a caller that can also
// watch its context.
type replyBox struct{ ch chan any }

func (b *replyBox) SendUserMessage(_ *actor.PID, m any) {
	if env, ok := m.(*actor.MessageEnvelope); ok {
		m = env.Message
	}
	select {
	case b.ch <- m:
	default:
	}
}
func (b *replyBox) SendSystemMessage(*actor.PID, any) {}
func (b *replyBox) Stop(*actor.PID)                   {}

// Admit waits until the credential admits a request of cost, and returns
// the grant's sequence number for Finish. It returns the refusal's error
// (llm.ErrOverloaded, ErrClosed, a cooldown past the deadline) or, when ctx
// ends first, ctx's error — withdrawing the request either way.
func (r *Ref) Admit(ctx context.Context, cost int) (uint64, error) {
	id := r.s.nextID.Add(1)
	box := &replyBox{ch: make(chan any, 1)}
	pid, _ := r.s.sys.ProcessRegistry.Add(box, "chorus-admit-"+strconv.FormatUint(id, 36))
	defer r.s.sys.ProcessRegistry.Remove(pid)
	dl, _ := ctx.Deadline()
	r.s.sys.Root.RequestWithCustomSender(r.pid, AdmitRequested{ID: id, Cost: cost, Deadline: dl}, pid)
	select {
	case m := <-box.ch:
		switch m := m.(type) {
		case Admitted:
			return m.Seq, nil
		case AdmitRefused:
			return 0, &RefusedError{Provider: r.Cred.Provider, Err: m.Err, RetryAt: m.RetryAt}
		}
		return 0, fmt.Errorf("actors: unexpected admission reply %T", m)
	case <-ctx.Done():
		// Withdraw; if the grant crossed the cancellation, give it back.
		var seq uint64
		select {
		case m := <-box.ch:
			if a, ok := m.(Admitted); ok {
				seq = a.Seq
			}
		default:
		}
		r.s.sys.Root.Send(r.pid, AdmitCancelled{ID: id, Seq: seq})
		return 0, ctx.Err()
	}
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
	Stats(timeout time.Duration) (Stats, error)
	// Close refuses queued callers with ErrClosed; Stop releases the actor.
	Close(timeout time.Duration) error
	Stop(timeout time.Duration) error
}

var _ Admitter = (*Ref)(nil)

// Load returns the credential's queue, in-flight count and cooldown end.
func (r *Ref) Load() (queued, inFlight int, cooldownUntil time.Time) { return r.Cred.Load() }

// Finish reports the end of grant seq.
func (r *Ref) Finish(f RequestFinished) { r.s.sys.Root.Send(r.pid, f) }

// Stats asks the actor for a snapshot.
func (r *Ref) Stats(timeout time.Duration) (Stats, error) {
	res, err := r.s.sys.Root.RequestFuture(r.pid, StatsRequested{}, timeout).Result()
	if err != nil {
		return Stats{}, err
	}
	s, ok := res.(Stats)
	if !ok {
		return Stats{}, fmt.Errorf("actors: unexpected stats reply %T", res)
	}
	return s, nil
}

// Close stops admissions: queued callers are refused with ErrClosed.
func (r *Ref) Close(timeout time.Duration) error {
	_, err := r.s.sys.Root.RequestFuture(r.pid, CloseRequested{}, timeout).Result()
	return err
}

// Stop stops the actor and waits for it.
func (r *Ref) Stop(timeout time.Duration) error {
	return r.s.sys.Root.StopFuture(r.pid).Wait()
}
