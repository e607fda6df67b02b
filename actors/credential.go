package actors

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers"
)

// ErrClosed is the answer to an admission asked after Close began.
var ErrClosed = errors.New("chorus: runtime closed")

// AdmitRequested asks a credential to admit one request. The reply, sent to
// the sender's PID, is Admitted or AdmitRefused.
type AdmitRequested struct {
	ID uint64
	// Cost is the request's estimated token cost.
	Cost int
	// Deadline is when the caller stops waiting; zero means none. A
	// credential cooling down past it refuses at once, so the caller can
	// fall back instead of waiting in vain.
	Deadline time.Time
}

// Admitted grants request ID; Seq identifies the grant in RequestFinished.
type Admitted struct {
	ID  uint64
	Seq uint64
}

// AdmitRefused refuses request ID: the queue is full (llm.ErrOverloaded),
// the credential cools down past the deadline, or the runtime is closing.
type AdmitRefused struct {
	ID  uint64
	Err error
	// RetryAt is when the credential expects to serve again, if known.
	RetryAt time.Time
}

// AdmitCancelled withdraws request ID: the caller stopped waiting. If the
// grant crossed the cancellation, the grant is returned.
type AdmitCancelled struct {
	ID  uint64
	Seq uint64
}

// RequestFinished reports a granted request's end: once per grant.
type RequestFinished struct {
	Seq       uint64
	Status    int
	Usage     llm.Usage
	RateLimit llm.RateLimit
	// RateLimited: the provider answered 429 or 529.
	RateLimited bool
	RetryAfter  time.Duration
	Failed      bool
}

// StatsRequested asks for a Stats reply.
type StatsRequested struct{}

// CloseRequested stops admitting: queued callers get ErrClosed; in-flight
// requests finish.
type CloseRequested struct{}

// wake is the actor's own timer message.
type wake struct{}

// crashRequested makes the actor panic, for supervision tests.
type crashRequested struct{}

// Stats is a snapshot of one credential.
type Stats struct {
	Provider string
	// Credential is the credential's position among the provider's keys.
	Credential    int
	Queued        int
	InFlight      int
	Requests      int64
	Failed        int64
	RateLimited   int64
	Restarts      int64
	RateLimit     llm.RateLimit
	RemainingReqs int // -1 when unknown
	RemainingToks int // -1 when unknown
	CooldownUntil time.Time
}

type waiter struct {
	id       uint64
	cost     int
	deadline time.Time
	reply    *actor.PID
}

// Credential is the state of one provider credential that outlives its
// actor: the client (with its learn-once state), the pacer, the queue of
// waiting callers and the counters. Only the credential's actor touches it.
type Credential struct {
	Provider string
	Index    int
	Client   *providers.Client

	queueCap int
	pacer    *pacer
	queue    []waiter
	closed   bool
	timer    *time.Timer
	timerAt  time.Time

	requests, failed, rateLimited, restarts int64

	// Reply sends Admitted and AdmitRefused to a waiter; nil means
	// ctx.Send. A budget owner in a cluster encodes them for the wire.
	Reply func(ctx actor.Context, to *actor.PID, msg any)

	// view is published after every message for lock-free reads by callers
	// choosing a credential.
	queued, inFlight atomic.Int64
	cooldown         atomic.Int64 // unix nanoseconds
}

// Load returns the credential's queue length, requests in flight and the
// end of its cooldown, as of the last message it handled. Safe from any
// goroutine.
func (c *Credential) Load() (queued, inFlight int, cooldownUntil time.Time) {
	cd := c.cooldown.Load()
	if cd != 0 {
		cooldownUntil = time.Unix(0, cd)
	}
	return int(c.queued.Load()), int(c.inFlight.Load()), cooldownUntil
}

func (c *Credential) publish() {
	c.queued.Store(int64(len(c.queue)))
	c.inFlight.Store(int64(c.pacer.inFlight))
	if !c.pacer.cooldownUntil.IsZero() {
		c.cooldown.Store(c.pacer.cooldownUntil.UnixNano())
	}
}

// NewCredential returns the state of one credential.
func NewCredential(provider string, index int, client *providers.Client, limits Limits, queueCap int) *Credential {
	if queueCap <= 0 {
		queueCap = 1024
	}
	return &Credential{Provider: provider, Index: index, Client: client, queueCap: queueCap, pacer: newPacer(limits, time.Now())}
}

// credentialActor is the behaviour over a Credential.
type credentialActor struct {
	c *Credential
}

// Props returns the actor's props. The producer closes over c, so a
// supervised restart builds a new actor over the same state.
func (c *Credential) Props() *actor.Props {
	first := true
	return actor.PropsFromProducer(func() actor.Actor {
		if !first {
			c.restarts++
		}
		first = false
		return &credentialActor{c: c}
	}, actor.WithSupervisor(actor.NewOneForOneStrategy(1_000_000, time.Second, actor.DefaultDecider)))
}

func (a *credentialActor) Receive(ctx actor.Context) { a.c.Handle(ctx, ctx.Message()) }

// Handle runs the credential's behaviour on one message, in the actor that
// owns the credential: its own actor, or (cluster) a budget owner
// that translates messages from other nodes. Replies go through Reply.
func (c *Credential) Handle(ctx actor.Context, msg any) {
	defer c.publish()
	switch m := msg.(type) {
	case *actor.Started, *actor.Restarting, *actor.Stopping:
	case *actor.Restart:
	case *actor.Stopped:
		if c.timer != nil {
			c.timer.Stop()
		}
	case AdmitRequested:
		c.admit(ctx, waiter{id: m.ID, cost: m.Cost, deadline: m.Deadline, reply: ctx.Sender()})
	case AdmitCancelled:
		for i, w := range c.queue {
			if w.id == m.ID {
				c.queue = append(c.queue[:i], c.queue[i+1:]...)
				return
			}
		}
		if m.Seq != 0 {
			c.pacer.cancelGrant(m.Seq)
			c.drain(ctx)
		}
	case RequestFinished:
		c.requests++
		if m.Failed {
			c.failed++
		}
		if m.RateLimited {
			c.rateLimited++
		}
		c.pacer.release(m.Seq, m.RateLimit, m.RateLimited, m.RetryAfter, time.Now())
		c.drain(ctx)
	case wake:
		c.timerAt = time.Time{}
		c.drain(ctx)
	case StatsRequested:
		ctx.Respond(c.stats())
	case CloseRequested:
		c.closed = true
		for _, w := range c.queue {
			c.reply(ctx, w.reply, AdmitRefused{ID: w.id, Err: ErrClosed})
		}
		c.queue = nil
		ctx.Respond(struct{}{})
	case crashRequested:
		panic("actors: crash requested")
	}
}

func (c *Credential) reply(ctx actor.Context, to *actor.PID, msg any) {
	if c.Reply != nil {
		c.Reply(ctx, to, msg)
		return
	}
	ctx.Send(to, msg)
}

func (c *Credential) admit(ctx actor.Context, w waiter) {
	if c.closed {
		c.reply(ctx, w.reply, AdmitRefused{ID: w.id, Err: ErrClosed})
		return
	}
	now := time.Now()
	if len(c.queue) == 0 {
		if blocked, _ := c.pacer.blocked(w.cost, now); !blocked {
			c.reply(ctx, w.reply, Admitted{ID: w.id, Seq: c.pacer.grant(w.cost)})
			return
		}
	}
	if !w.deadline.IsZero() && c.pacer.cooldownUntil.After(w.deadline) {
		c.reply(ctx, w.reply, AdmitRefused{ID: w.id, Err: errCoolingDown, RetryAt: c.pacer.cooldownUntil})
		return
	}
	if len(c.queue) >= c.queueCap {
		c.reply(ctx, w.reply, AdmitRefused{ID: w.id, Err: llm.ErrOverloaded})
		return
	}
	c.queue = append(c.queue, w)
	c.drain(ctx)
}

// ErrCoolingDown is the refusal of a credential whose cooldown outlasts the
// caller's deadline.
var errCoolingDown = errors.New("chorus: credential cooling down past the deadline")

// ErrCoolingDown reports whether err is a cooldown refusal.
func ErrCoolingDown(err error) bool { return errors.Is(err, errCoolingDown) }

// drain grants queued requests in order while the pacer allows, and arms a
// timer for the earliest moment a blocked head could go.
func (c *Credential) drain(ctx actor.Context) {
	now := time.Now()
	for len(c.queue) > 0 {
		w := c.queue[0]
		if !w.deadline.IsZero() && now.After(w.deadline) {
			c.queue = c.queue[1:]
			c.reply(ctx, w.reply, AdmitRefused{ID: w.id, Err: errCoolingDown})
			continue
		}
		blocked, at := c.pacer.blocked(w.cost, now)
		if blocked {
			if !at.IsZero() {
				c.arm(ctx, at)
			}
			return
		}
		c.queue = c.queue[1:]
		c.reply(ctx, w.reply, Admitted{ID: w.id, Seq: c.pacer.grant(w.cost)})
	}
}

func (c *Credential) arm(ctx actor.Context, at time.Time) {
	if !c.timerAt.IsZero() && !at.Before(c.timerAt) {
		return
	}
	if c.timer != nil {
		c.timer.Stop()
	}
	c.timerAt = at
	self, sys := ctx.Self(), ctx.ActorSystem()
	c.timer = time.AfterFunc(time.Until(at), func() { sys.Root.Send(self, wake{}) })
}

func (c *Credential) stats() Stats {
	s := Stats{
		Provider: c.Provider, Credential: c.Index, Queued: len(c.queue), InFlight: c.pacer.inFlight,
		Requests: c.requests, Failed: c.failed, RateLimited: c.rateLimited, Restarts: c.restarts,
		RateLimit: c.pacer.last, RemainingReqs: -1, RemainingToks: -1,
	}
	if c.pacer.reqs.known {
		s.RemainingReqs = c.pacer.reqs.remaining
	}
	if c.pacer.toks.known {
		s.RemainingToks = c.pacer.toks.remaining
	}
	if time.Now().Before(c.pacer.cooldownUntil) {
		s.CooldownUntil = c.pacer.cooldownUntil
	}
	return s
}

// CoolingDown returns the cooldown refusal's error, for a refusal that
// crossed a node and is rebuilt on the caller's side.
func CoolingDown() error { return errCoolingDown }

// Snapshot returns the credential's stats; only from the actor that owns it.
func (c *Credential) Snapshot() Stats { return c.stats() }

// Seed teaches a credential that knows nothing yet the limits another
// holder of the key saw in a response at time at: a budget owner that
// replaces one on a dead node starts from the nodes' latest headers
// instead of probing blind. The seed is old, and the dead owner may have
// granted the rest of that window since, so the window it describes is
// taken as spent: nothing is sent until its reset, then one request at a
// time until a response of its own says what remains. A seed whose window
// has already reset gives the limit, and the same single probe. Seed does
// nothing once the credential has seen a response.
func (c *Credential) Seed(rl llm.RateLimit, at time.Time) {
	p := c.pacer
	if p.observed || (!rl.HasRequests && !rl.HasTokens) {
		return
	}
	now := time.Now()
	age := now.Sub(at)
	seed := func(b *budget, limit int, reset time.Duration) {
		if limit <= 0 || b.known {
			return
		}
		remaining := limit
		if reset > age {
			remaining, reset = 0, reset-age // that window is spent, as far as we know
		} else {
			reset = 0
		}
		b.learn(p.seq, limit, remaining, reset, 0, now)
	}
	if rl.HasRequests {
		seed(&p.reqs, rl.LimitRequests, rl.ResetRequests)
	}
	if rl.HasTokens {
		seed(&p.toks, rl.LimitTokens, rl.ResetTokens)
	}
	p.probeConcurrency = 1
	p.last = rl
}
