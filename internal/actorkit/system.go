package actorkit

import (
	"context"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// System is one user's hold on a Proto.Actor system: the process's shared
// one (Shared) or one its owner lends (Borrow).
type System struct {
	// Sys is the actor system; a holder spawns and stops its own actors in
	// it and never shuts it down.
	Sys *actor.ActorSystem

	once    sync.Once
	release func()
}

// Release ends the hold: on the shared system, its Proto.Actor log lines
// stop going to the holder's logger. It stops no actor. Safe to call more
// than once.
func (s *System) Release() {
	s.once.Do(func() {
		if s.release != nil {
			s.release()
		}
	})
}

var shared struct {
	once sync.Once
	sys  *actor.ActorSystem
	logs router
}

// Shared returns a hold on the process-wide actor system, creating it on
// first use. While the hold lasts, Proto.Actor's log lines go to logger
// (nil: to nobody), with component=protoactor; with several holders they
// go to each distinct logger once.
func Shared(logger *slog.Logger) *System {
	shared.once.Do(func() {
		l := slog.New(routed{r: &shared.logs})
		shared.sys = actor.NewActorSystem(
			actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return l }),
			actor.WithDeadLetterThrottleCount(0),
			// A dead letter (a late report to a stopped actor) starts a
			// throttle timer goroutine; keep it short-lived.
			actor.WithDeadLetterThrottleInterval(time.Millisecond),
		)
	})
	return &System{Sys: shared.sys, release: shared.logs.add(logger)}
}

// Borrow returns a hold on sys, a system someone else owns and shuts
// down (a cluster node's). Release does nothing.
func Borrow(sys *actor.ActorSystem) *System { return &System{Sys: sys} }

// router fans the shared system's log records out to its holders'
// loggers.
type router struct {
	mu    sync.RWMutex
	sinks []*sink
}

type sink struct {
	base slog.Handler // the holder's handler, to send a record once per handler
	h    slog.Handler // with component=protoactor
}

func (r *router) add(l *slog.Logger) func() {
	if l == nil {
		return nil
	}
	s := &sink{base: l.Handler(), h: l.With(slog.String("component", "protoactor")).Handler()}
	r.mu.Lock()
	r.sinks = append(r.sinks, s)
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if i := slices.Index(r.sinks, s); i >= 0 {
			r.sinks = slices.Delete(r.sinks, i, i+1)
		}
	}
}

// distinct returns the sinks, one per distinct handler.
func (r *router) distinct() []*sink {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*sink, 0, len(r.sinks))
	for _, s := range r.sinks {
		if !slices.ContainsFunc(out, func(o *sink) bool { return sameHandler(o.base, s.base) }) {
			out = append(out, s)
		}
	}
	return out
}

func sameHandler(a, b slog.Handler) bool {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	return ta == tb && ta.Comparable() && a == b
}

// routed is the shared system's slog.Handler: the router, with the
// attributes and groups Proto.Actor added, applied per holder.
type routed struct {
	r   *router
	ops []func(slog.Handler) slog.Handler
}

func (h routed) handler(s *sink) slog.Handler {
	out := s.h
	for _, op := range h.ops {
		out = op(out)
	}
	return out
}

func (h routed) Enabled(ctx context.Context, level slog.Level) bool {
	h.r.mu.RLock()
	defer h.r.mu.RUnlock()
	for _, s := range h.r.sinks {
		if s.h.Enabled(ctx, level) {
			return true
		}
	}
	return false
}

func (h routed) Handle(ctx context.Context, rec slog.Record) error {
	for _, s := range h.r.distinct() {
		if hh := h.handler(s); hh.Enabled(ctx, rec.Level) {
			_ = hh.Handle(ctx, rec.Clone())
		}
	}
	return nil
}

func (h routed) WithAttrs(attrs []slog.Attr) slog.Handler {
	return routed{r: h.r, ops: append(slices.Clip(h.ops), func(x slog.Handler) slog.Handler { return x.WithAttrs(attrs) })}
}

func (h routed) WithGroup(name string) slog.Handler {
	return routed{r: h.r, ops: append(slices.Clip(h.ops), func(x slog.Handler) slog.Handler { return x.WithGroup(name) })}
}
