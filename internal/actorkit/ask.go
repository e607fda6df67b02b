package actorkit

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// Errors of Ask besides ctx's.
var (
	// ErrNotDelivered: the message reached no actor (the target had
	// stopped, or never was), so nothing was done with it.
	ErrNotDelivered = errors.New("actorkit: message not delivered")
	// ErrTerminated: the watched target, or its node, ended before it
	// answered (AskOptions.Watch).
	ErrTerminated = errors.New("actorkit: target ended before it answered")
	// ErrStopped: AskOptions.Until closed before an answer.
	ErrStopped = errors.New("actorkit: stopped waiting")
)

// UnexpectedReplyError is an answer of another type than the one asked for.
type UnexpectedReplyError struct{ Reply any }

func (e *UnexpectedReplyError) Error() string {
	return fmt.Sprintf("actorkit: unexpected reply %T", e.Reply)
}

// AskOptions are the other ends of an Ask's wait, besides its context.
type AskOptions struct {
	// Watch watches the target while waiting: its end, or its node's, is
	// ErrTerminated (unless its answer came first).
	Watch bool
	// Until, when it closes, ends the wait with ErrStopped (unless the
	// answer came first).
	Until <-chan struct{}
}

// Ask sends msg to pid with a reply address of its own as the sender, and
// waits for the first answer: a T, ErrNotDelivered when the message went to
// a dead letter, an *UnexpectedReplyError for any other answer. When ctx
// ends first it returns ctx's error, together with an answer that crossed
// the cancellation if one is already there (say, a grant the caller must
// give back). The reply address lives in sys's process registry for the
// call only.
func Ask[T any](ctx context.Context, sys *actor.ActorSystem, pid *actor.PID, msg any, o AskOptions) (T, error) {
	var zero T
	b := &box{ch: make(chan any, 2)}
	if o.Watch {
		b.term = make(chan struct{})
	}
	self, _ := sys.ProcessRegistry.Add(b, "ask"+sys.ProcessRegistry.NextId())
	defer sys.ProcessRegistry.Remove(self)
	if o.Watch {
		target, _ := sys.ProcessRegistry.Get(pid)
		target.SendSystemMessage(pid, &actor.Watch{Watcher: self})
		defer func() {
			select {
			case <-b.term:
			default:
				target.SendSystemMessage(pid, &actor.Unwatch{Watcher: self})
			}
		}()
	}
	sys.Root.RequestWithCustomSender(pid, msg, self)
	select {
	case m := <-b.ch:
		return answer[T](m)
	case <-b.term:
		if m, ok := b.ready(); ok {
			return answer[T](m)
		}
		return zero, ErrTerminated
	case <-o.Until:
		if m, ok := b.ready(); ok {
			return answer[T](m)
		}
		return zero, ErrStopped
	case <-ctx.Done():
		if m, ok := b.ready(); ok {
			if v, ok := m.(T); ok {
				return v, ctx.Err()
			}
		}
		return zero, ctx.Err()
	}
}

func answer[T any](m any) (T, error) {
	var zero T
	if _, ok := m.(*actor.DeadLetterResponse); ok {
		return zero, ErrNotDelivered
	}
	if v, ok := m.(T); ok {
		return v, nil
	}
	return zero, &UnexpectedReplyError{Reply: m}
}

// box is an Ask's reply address: a process whose user messages go to a Go
// channel (never blocking the sender: an answer beyond the first two is
// dropped), and whose Terminated closes term.
type box struct {
	ch   chan any
	term chan struct{}
	once sync.Once
}

func (b *box) ready() (any, bool) {
	select {
	case m := <-b.ch:
		return m, true
	default:
		return nil, false
	}
}

func (b *box) SendUserMessage(_ *actor.PID, m any) {
	if env, ok := m.(*actor.MessageEnvelope); ok {
		m = env.Message
	}
	select {
	case b.ch <- m:
	default:
	}
}

func (b *box) SendSystemMessage(_ *actor.PID, m any) {
	if _, ok := m.(*actor.Terminated); ok && b.term != nil {
		b.once.Do(func() { close(b.term) })
	}
}

func (b *box) Stop(*actor.PID) {}

// Tell delivers msg to pid, an actor of this process, from nobody: an
// actor's own timer waking it. It is for messages that never cross a node.
func Tell(sys *actor.ActorSystem, pid *actor.PID, msg any) { sys.Root.Send(pid, msg) }
