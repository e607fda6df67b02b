package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/proto"

	"github.com/chorusrt/chorus/actors"
	"github.com/chorusrt/chorus/cluster/clusterpb"
	"github.com/chorusrt/chorus/internal/actorkit"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
)

// Provider budgets are shared: each credential (provider id and key, named
// by the key's fingerprint, never the key) has one budget owner in the
// cluster, a grain of kind chorus-budget placed by the cluster's
// rendezvous hash. The owner runs the same credential logic as a single
// runtime (actors.CredentialState: the admission queue, pacing from
// learned limits, cooldown on 429/529), for the admissions of every node.
// Each node's runtime asks it for one grant per request (an allowance of
// one request and its estimated tokens) and reports each request's end
// with the rate-limit headers the provider sent, so the owner learns the
// key's limits from every node's traffic.
//
// Learn-once lessons travel the same way (invariant 6: they belong to the
// endpoint, shared by every caller): each report carries the node's
// learn-once state of the credential's endpoint, the owner keeps their
// union, and every grant carries it back, so a node applies what another
// node learned before it sends its request. A node's runtime shares one
// state among the endpoint's credentials, so what reaches it through one
// key's owner serves all the endpoint's keys on that node. The owner's
// union is lost with its node; the next activation gathers it again from
// the nodes' next reports.
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
	learned := c.Learned
	if learned == nil {
		learned = &providers.Learned{}
	}
	return &remoteAdmitter{n: b.n, identity: id, provider: c.Provider, learned: learned, grants: map[uint64]grantRef{}}, nil
}

func (b *budgets) props() *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &budgetOwner{b: b} })
}

// budgetOwner is the grain owning one credential's budget, and the
// actors.Owner of its state.
type budgetOwner struct {
	b       *budgets
	cred    *actors.CredentialState
	token   uint64
	learned providers.Learned // the union of the nodes' lessons
	sys     *actor.ActorSystem
	self    *actor.PID
}

// budgetWake is the owner's pacing timer firing; it never leaves the node.
type budgetWake struct{}

func (o *budgetOwner) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		return
	case *clusterpb.AdmitRequest:
		o.init(c)
		if m.Seen != nil {
			o.cred.Seed(fromRateLimit(m.Seen), o.b.n.fromWireTime(m.SeenUnixNano, negate(m.SeenAgoNano)))
		}
		o.cred.Admit(o, c.Sender(), actors.AdmitRequested{ID: m.Id, Cost: int(m.Cost), Deadline: o.b.n.fromWireTime(m.DeadlineUnixNano, m.DeadlineInNano)})
	case *clusterpb.AdmitCancelled:
		o.init(c)
		seq := m.Seq
		if m.Owner != o.token {
			seq = 0
		}
		o.cred.Cancel(o, actors.AdmitCancelled{ID: m.Id, Seq: seq})
	case *clusterpb.RequestFinished:
		o.init(c)
		mergeLearned(&o.learned, m.Learned) // facts, whichever activation granted
		if m.Owner == o.token {
			o.cred.Finish(o, fromFinished(m))
		}
	case *clusterpb.RequestAccepted:
		o.init(c)
		if m.Owner == o.token {
			o.cred.Accept(o, actors.RequestAccepted{Seq: m.Seq})
		}
	case *clusterpb.BudgetStatsRequest:
		o.init(c)
		st := o.cred.Snapshot()
		respond(c, &clusterpb.BudgetStats{
			Queued: int64(st.Queued), InFlight: int64(st.InFlight), Requests: st.Requests, RateLimited: st.RateLimited,
			RemainingRequests: int64(st.RemainingRequests), RemainingTokens: int64(st.RemainingTokens),
			CooldownUntilUnixNano: o.b.n.toWire(st.CooldownUntil), CooldownInNano: until(st.CooldownUntil), Owner: o.token, Node: o.b.n.addr,
		})
	case budgetWake:
		if o.cred != nil {
			o.cred.Wake(o)
		}
	case *actor.Stopped:
		if o.cred != nil {
			o.cred.Stopped()
		}
	}
}

// Reply encodes the credential's answers for the wire.
func (o *budgetOwner) Reply(to any, msg any) {
	pid, ok := to.(*actor.PID)
	if !ok || pid == nil {
		return
	}
	var pm proto.Message
	switch m := msg.(type) {
	case actors.Admitted:
		pm = &clusterpb.Admitted{Id: m.ID, Seq: m.Seq, Owner: o.token, Learned: toLearned(&o.learned)}
	case actors.AdmitRefused:
		pm = &clusterpb.AdmitRefused{Id: m.ID, Err: toFailure(m.Err), RetryAtUnixNano: o.b.n.toWire(m.RetryAt), RetryInNano: until(m.RetryAt)}
	default:
		return
	}
	send(o.sys, pid, pm)
}

// Wake is the credential's pacing timer: a local message to the owner.
func (o *budgetOwner) Wake() { actorkit.Tell(o.sys, o.self, budgetWake{}) }

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
		lim, queue = info.Limits, info.QueueSize
	}
	o.cred = actors.NewCredentialState(id, 0, lim, queue)
	if ok && info.Peers > 1 {
		// Keys of one endpoint that may turn out to share one limit:
		// each paces at its share once the reports show it.
		o.cred.ShareEndpoint(info.Peers)
	}
	o.token = randUint64()
	o.sys, o.self = c.ActorSystem(), c.Self()
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
	// learned is the learn-once state of the credential's endpoint in this
	// node's runtime (shared by its credentials there).
	learned *providers.Learned

	nextID   atomic.Uint64
	inFlight atomic.Int64
	cooldown atomic.Int64
	closed   atomic.Bool

	mu     sync.Mutex
	grants map[uint64]grantRef // by local seq
	seen   llm.RateLimit       // the latest limits a response reported
	seenAt time.Time
}

var (
	_ actors.Admitter = (*remoteAdmitter)(nil)
	_ actors.Acceptor = (*remoteAdmitter)(nil)
)

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
		req := &clusterpb.AdmitRequest{Id: id, Cost: int64(cost), DeadlineUnixNano: a.n.toWire(dl), DeadlineInNano: until(dl)}
		a.mu.Lock()
		if !a.seenAt.IsZero() {
			req.Seen, req.SeenUnixNano, req.SeenAgoNano = toRateLimit(a.seen), a.n.toWire(a.seenAt), negate(until(a.seenAt))
		}
		a.mu.Unlock()
		r, err := ask(ctx, a.n.sys, pid, req)
		switch {
		case errors.Is(err, ErrNodeLost):
			a.n.forget(a.identity, kindBudget, pid)
			if !sleepCtx(ctx, 100*time.Millisecond) {
				return 0, ctx.Err()
			}
			continue // the owner's node is gone: ask the next activation
		case err != nil && ctx.Err() != nil:
			var seq, owner uint64
			if ad, ok := r.(*clusterpb.Admitted); ok { // the grant crossed the withdrawal
				seq, owner = ad.Seq, ad.Owner
			}
			send(a.n.sys, pid, &clusterpb.AdmitCancelled{Id: id, Seq: seq, Owner: owner})
			return 0, ctx.Err()
		case err != nil:
			return 0, err
		}
		switch m := r.(type) {
		case *clusterpb.Admitted:
			mergeLearned(a.learned, m.Learned)
			a.inFlight.Add(1)
			a.mu.Lock()
			local := a.nextID.Add(1)
			a.grants[local] = grantRef{seq: m.Seq, owner: m.Owner, pid: pid}
			a.mu.Unlock()
			return local, nil
		case *clusterpb.AdmitRefused:
			if at := a.n.fromWireTime(m.RetryAtUnixNano, m.RetryInNano); !at.IsZero() {
				a.cooldown.Store(at.UnixNano())
			}
			return 0, &actors.RefusedError{Provider: a.provider, Err: orOther(fromFailure(m.Err), "refused"), RetryAt: a.n.fromWireTime(m.RetryAtUnixNano, m.RetryInNano)}
		default:
			return 0, &ProtocolError{Msg: fmt.Sprintf("unexpected admission reply %T", m)}
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

// Accepted tells the owner that grant seq's request was accepted, so a
// headerless provider's limit is inferred on the owner from every node's
// acceptances (see actors.RequestAccepted).
func (a *remoteAdmitter) Accepted(seq uint64) {
	a.mu.Lock()
	g, ok := a.grants[seq]
	a.mu.Unlock()
	if ok {
		send(a.n.sys, g.pid, &clusterpb.RequestAccepted{Seq: g.seq, Owner: g.owner})
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
	m := toFinished(f, g.owner)
	m.Learned = toLearned(a.learned)
	send(a.n.sys, g.pid, m)
}

func (a *remoteAdmitter) Load() (int, int, time.Time) {
	var cd time.Time
	if v := a.cooldown.Load(); v != 0 {
		cd = time.Unix(0, v)
	}
	return 0, int(a.inFlight.Load()), cd
}

// Stats asks the owner.
func (a *remoteAdmitter) Stats(timeout time.Duration) (actors.AdmissionStats, error) {
	s := actors.AdmissionStats{Provider: a.provider, RemainingRequests: -1, RemainingTokens: -1}
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
	s.RemainingRequests, s.RemainingTokens = int(bs.RemainingRequests), int(bs.RemainingTokens)
	s.CooldownUntil = a.n.fromWireTime(bs.CooldownUntilUnixNano, bs.CooldownInNano)
	return s, nil
}

func (a *remoteAdmitter) Close(time.Duration) error { a.closed.Store(true); return nil }
func (a *remoteAdmitter) Stop(time.Duration) error  { return nil }

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
