package cluster

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/proto"

	"github.com/chorusrt/chorus/actors"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/runtime"
	"github.com/chorusrt/chorus/cluster/clusterpb"
)

// Provider budgets are shared: each credential (provider id and key, named
// by the key's fingerprint, never the key) has one budget owner in the
// cluster, a grain of kind chorus-budget placed by the cluster's
// rendezvous hash. The owner runs the same credential logic as a single
// runtime (actors.Credential: the admission queue, pacing from learned
// limits, cooldown on 429/529), for the admissions of every node. Each
// node's runtime asks it for one grant per request (an allowance of one
// request and its estimated tokens) and reports each request's end with
// the rate-limit headers the provider sent, so the owner learns the key's
// limits from every node's traffic.
//
// When the owner's node dies, waiting admissions are asked again of the
// next activation, which starts knowing nothing: it probes with a few
// requests and learns the limits again from the headers, as a fresh
// runtime does. Grants of the dead activation are not known to the new one
// (each activation has its own token), so their reports are ignored.

type budgets struct {
	n     *Node
	mu    sync.Mutex
	creds map[string]runtime.Credential // by identity
}

func newBudgets(n *Node) *budgets { return &budgets{n: n, creds: map[string]runtime.Credential{}} }

func budgetIdentity(c runtime.Credential) string { return c.Provider + "/" + c.KeyID }

// admitter is the runtime.SharedBudget of the node.
func (b *budgets) admitter(c runtime.Credential) (actors.Admitter, error) {
	id := budgetIdentity(c)
	b.mu.Lock()
	b.creds[id] = c
	b.mu.Unlock()
	return &remoteAdmitter{n: b.n, identity: id, provider: c.Provider, grants: map[uint64]grantRef{}}, nil
}

func (b *budgets) props() *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &budgetOwner{b: b} })
}

// budgetOwner is the grain owning one credential's budget.
type budgetOwner struct {
	b     *budgets
	cred  *actors.Credential
	token uint64
}

func (o *budgetOwner) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		return
	case *clusterpb.AdmitRequest:
		o.init(c)
		if m.Seen != nil {
			o.cred.Seed(fromRateLimit(m.Seen), fromUnixNano(m.SeenUnixNano))
		}
		o.cred.Handle(c, actors.AdmitRequested{ID: m.Id, Cost: int(m.Cost), Deadline: fromUnixNano(m.DeadlineUnixNano)})
	case *clusterpb.AdmitCancelled:
		o.init(c)
		seq := m.Seq
		if m.Owner != o.token {
			seq = 0
		}
		o.cred.Handle(c, actors.AdmitCancelled{ID: m.Id, Seq: seq})
	case *clusterpb.RequestFinished:
		o.init(c)
		if m.Owner == o.token {
			o.cred.Handle(c, fromFinished(m))
		}
	case *clusterpb.BudgetStatsRequest:
		o.init(c)
		st := o.cred.Snapshot()
		respond(c, &clusterpb.BudgetStats{
			Queued: int64(st.Queued), InFlight: int64(st.InFlight), Requests: st.Requests, RateLimited: st.RateLimited,
			RemainingRequests: int64(st.RemainingReqs), RemainingTokens: int64(st.RemainingToks),
			CooldownUntilUnixNano: unixNano(st.CooldownUntil), Owner: o.token, Node: o.b.n.addr,
		})
	default:
		if o.cred != nil {
			o.cred.Handle(c, m) // its timer, Stopped
		}
	}
}

// init builds the credential state on the first message: the identity is
// known only once the cluster has set it.
func (o *budgetOwner) init(c actor.Context) {
	if o.cred != nil {
		return
	}
	id := c.Self().Id
	if ci := clusterIdentity(c); ci != "" {
		id = ci
	}
	o.b.mu.Lock()
	info, ok := o.b.creds[id]
	o.b.mu.Unlock()
	lim, queue := actors.Limits{}, 1024
	if ok {
		lim, queue = actors.Limits(info.Limits), info.QueueSize
	}
	o.cred = actors.NewCredential(id, 0, nil, lim, queue)
	o.token = randUint64()
	o.cred.Reply = func(ctx actor.Context, to *actor.PID, msg any) {
		var pm proto.Message
		switch m := msg.(type) {
		case actors.Admitted:
			pm = &clusterpb.Admitted{Id: m.ID, Seq: m.Seq, Owner: o.token}
		case actors.AdmitRefused:
			pm = &clusterpb.AdmitRefused{Id: m.ID, Err: toFailure(m.Err), RetryAtUnixNano: unixNano(m.RetryAt)}
		default:
			return
		}
		sendFrom(ctx, to, pm)
	}
}

// grantRef is a grant this node holds: which owner activation made it.
type grantRef struct {
	seq   uint64
	owner uint64
	pid   *actor.PID
}

// remoteAdmitter is a node's side of a shared credential.
type remoteAdmitter struct {
	n        *Node
	identity string
	provider string

	nextID   atomic.Uint64
	inFlight atomic.Int64
	cooldown atomic.Int64
	closed   atomic.Bool

	mu     sync.Mutex
	grants map[uint64]grantRef // by local seq
	seen   llm.RateLimit       // the latest limits a response reported
	seenAt time.Time
}

var _ actors.Admitter = (*remoteAdmitter)(nil)

// Admit asks the owner for a grant, again of the next activation when the
// owner's node is lost while the request waits.
func (a *remoteAdmitter) Admit(ctx context.Context, cost int) (uint64, error) {
	if a.closed.Load() {
		return 0, &actors.RefusedError{Provider: a.provider, Err: actors.ErrClosed}
	}
	dl, _ := ctx.Deadline()
	for {
		pid := a.owner(ctx)
		if pid == nil {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			return 0, &actors.RefusedError{Provider: a.provider, Err: errNoMembers}
		}
		id := a.nextID.Add(1)
		w := newWaiter(a.n, pid)
		req := &clusterpb.AdmitRequest{Id: id, Cost: int64(cost), DeadlineUnixNano: unixNano(dl)}
		a.mu.Lock()
		if !a.seenAt.IsZero() {
			req.Seen, req.SeenUnixNano = toRateLimit(a.seen), a.seenAt.UnixNano()
		}
		a.mu.Unlock()
		sendAs(a.n.sys, pid, req, w.pid)
		select {
		case m := <-w.ch:
			w.stop()
			switch m := m.(type) {
			case *clusterpb.Admitted:
				a.inFlight.Add(1)
				a.mu.Lock()
				local := a.nextID.Add(1)
				a.grants[local] = grantRef{seq: m.Seq, owner: m.Owner, pid: pid}
				a.mu.Unlock()
				return local, nil
			case *clusterpb.AdmitRefused:
				if at := fromUnixNano(m.RetryAtUnixNano); !at.IsZero() {
					a.cooldown.Store(at.UnixNano())
				}
				return 0, &actors.RefusedError{Provider: a.provider, Err: orOther(fromFailure(m.Err), "refused"), RetryAt: fromUnixNano(m.RetryAtUnixNano)}
			case *actor.Terminated:
				a.n.forget(a.identity, kindBudget, pid)
				if !sleepCtx(ctx, 100*time.Millisecond) {
					return 0, ctx.Err()
				}
				continue // the owner's node is gone: ask the next activation
			default:
				return 0, &ProtocolError{Msg: fmt.Sprintf("unexpected admission reply %T", m)}
			}
		case <-ctx.Done():
			w.stop()
			var seq, owner uint64
			select {
			case m := <-w.ch:
				if ad, ok := m.(*clusterpb.Admitted); ok {
					seq, owner = ad.Seq, ad.Owner
				}
			default:
			}
			send(a.n.sys, pid, &clusterpb.AdmitCancelled{Id: id, Seq: seq, Owner: owner})
			return 0, ctx.Err()
		}
	}
}

// owner resolves the owner grain, activating it; it waits for a member.
func (a *remoteAdmitter) owner(ctx context.Context) *actor.PID {
	for {
		if pid := a.n.grain(a.identity, kindBudget); pid != nil {
			return pid
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return nil
		}
	}
}

func (a *remoteAdmitter) Finish(f actors.RequestFinished) {
	a.mu.Lock()
	g, ok := a.grants[f.Seq]
	delete(a.grants, f.Seq)
	if f.RateLimit.HasRequests || f.RateLimit.HasTokens {
		a.seen, a.seenAt = f.RateLimit, time.Now()
	}
	a.mu.Unlock()
	if !ok {
		return
	}
	a.inFlight.Add(-1)
	if f.RateLimited {
		wait := f.RetryAfter
		if wait <= 0 {
			wait = time.Second
		}
		a.cooldown.Store(time.Now().Add(wait).UnixNano())
	}
	f.Seq = g.seq
	send(a.n.sys, g.pid, toFinished(f, g.owner))
}

func (a *remoteAdmitter) Load() (int, int, time.Time) {
	var cd time.Time
	if v := a.cooldown.Load(); v != 0 {
		cd = time.Unix(0, v)
	}
	return 0, int(a.inFlight.Load()), cd
}

// Stats asks the owner.
func (a *remoteAdmitter) Stats(timeout time.Duration) (actors.Stats, error) {
	s := actors.Stats{Provider: a.provider, RemainingReqs: -1, RemainingToks: -1}
	pid := a.n.grain(a.identity, kindBudget)
	if pid == nil {
		return s, errNoMembers
	}
	r, err := request(a.n.sys, pid, &clusterpb.BudgetStatsRequest{}, timeout)
	if err != nil {
		return s, fmt.Errorf("cluster: budget stats: %w", err)
	}
	bs, ok := r.(*clusterpb.BudgetStats)
	if !ok {
		return s, &ProtocolError{Msg: "budget stats reply of the wrong type"}
	}
	s.Queued, s.InFlight, s.Requests, s.RateLimited = int(bs.Queued), int(bs.InFlight), bs.Requests, bs.RateLimited
	s.RemainingReqs, s.RemainingToks = int(bs.RemainingRequests), int(bs.RemainingTokens)
	s.CooldownUntil = fromUnixNano(bs.CooldownUntilUnixNano)
	return s, nil
}

func (a *remoteAdmitter) Close(time.Duration) error { a.closed.Store(true); return nil }
func (a *remoteAdmitter) Stop(time.Duration) error  { return nil }

// waiter is a short-lived local actor that receives one call's replies
// and the Terminated of the remote actor it watches.
type waiter struct {
	sys *actor.ActorSystem
	pid *actor.PID
	ch  chan any
}

type waiterActor struct {
	watch *actor.PID
	ch    chan any
}

func (w *waiterActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		if w.watch != nil {
			c.Watch(w.watch)
		}
	case *actor.Stopping, *actor.Stopped, *actor.Restarting:
	case proto.Message, *actor.Terminated:
		select {
		case w.ch <- m:
		default:
		}
	}
}

func newWaiter(n *Node, watch *actor.PID) *waiter {
	ch := make(chan any, 4)
	pid := n.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &waiterActor{watch: watch, ch: ch} }))
	return &waiter{sys: n.sys, pid: pid, ch: ch}
}

func (w *waiter) stop() { w.sys.Root.Stop(w.pid) }

// askWatched sends m to pid and waits for its one proto reply, watching
// pid: ErrNodeLost when pid's actor or node goes away first, ctx's error
// when ctx ends first.
func (n *Node) askWatched(ctx context.Context, pid *actor.PID, m proto.Message) (proto.Message, error) {
	w := newWaiter(n, pid)
	defer w.stop()
	sendAs(n.sys, pid, m, w.pid)
	select {
	case r := <-w.ch:
		if _, lost := r.(*actor.Terminated); lost { // itself a proto message: check it first
			return nil, ErrNodeLost
		}
		return r.(proto.Message), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// clusterIdentity is the grain's identity ("" outside a grain).
func clusterIdentity(c actor.Context) (id string) {
	defer func() {
		if recover() != nil {
			id = ""
		}
	}()
	if ci := pcluster.GetClusterIdentity(c); ci != nil {
		return ci.Identity
	}
	return ""
}
