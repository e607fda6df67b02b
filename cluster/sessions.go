package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/trace"

	"github.com/chorusrt/chorus/cluster/clusterpb"
	"github.com/chorusrt/chorus/internal/actorkit"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/session"
	"github.com/chorusrt/chorus/store"
	"github.com/chorusrt/chorus/telemetry"
)

// Sessions in a cluster are grains of kind chorus-session keyed by session
// id. The grain's node runs the session in its session.Manager, whose
// journal is the shared PostgreSQL journal seen through a store.Leased: a
// grain takes the session's lease before the session recovers, renews it
// every LeaseTTL/3, and every append is fenced by it (the lease's holder
// and epoch are checked in the append's transaction, with the
// compare-and-swap on the last sequence number). So when the cluster
// briefly runs two activations of one session (a node joining moves it,
// or a node stalls and comes back) only the lease holder writes, and a
// tool never starts without its tool_started record.
//
// A node that dies stops renewing; once its leases expire (LeaseTTL), any
// node's sweep (every LeaseTTL/2) finds the sessions whose lease expired
// with work in progress and touches them, which activates each on its new
// owner, which recovers it from the journal under the crash rules of one
// machine. A session passivated on purpose (node closing, session moved)
// releases its lease at once when idle; with work in progress its lease is
// left to expire, so that the sweep resumes it on a survivor.

type sessionHost struct {
	n       *Node
	m       *session.Manager
	leased  *store.Leased
	journal store.LeasingJournal
	ttl     time.Duration

	mu     sync.Mutex
	grains map[string]*actor.PID // session id -> grain on this node
	closed bool
}

func newSessionHost(n *Node, opt session.Options) (*sessionHost, error) {
	j, ok := opt.Journal.(store.LeasingJournal)
	if !ok {
		return nil, &llm.ConfigError{Field: "cluster.Sessions.Journal", Msg: "must implement store.LeasingJournal (store.Postgres, shared by the nodes)"}
	}
	if opt.Model == nil {
		opt.Model = n.rt
	}
	h := &sessionHost{n: n, journal: j, ttl: n.cfg.LeaseTTL, grains: map[string]*actor.PID{}}
	h.leased = store.NewLeased(j, n.cfg.Bind+"/"+newToken(), h.ttl)
	opt.Journal = h.leased
	m, err := actorkit.NewSessionManager[*session.Manager](opt, actorkit.Borrow(n.sys))
	if err != nil {
		return nil, err
	}
	h.m = m
	return h, nil
}

func (h *sessionHost) props() *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &sessionGrain{h: h} })
}

// start runs the lease renewal and the sweep.
func (h *sessionHost) start() {
	h.n.wg.Add(2)
	go func() {
		defer h.n.wg.Done()
		h.every(h.ttl/3, h.renew)
	}()
	go func() {
		defer h.n.wg.Done()
		h.every(h.ttl/2, h.sweep)
	}()
}

func (h *sessionHost) every(d time.Duration, f func(context.Context)) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-h.n.base.Done():
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(h.n.base, d*2)
			f(ctx)
			cancel()
		}
	}
}

// renew extends every lease held here; a session whose lease was lost
// stops here at once (its appends already fail).
func (h *sessionHost) renew(ctx context.Context) {
	lost, err := h.leased.Renew(ctx)
	if err != nil {
		h.n.log.Warn("chorus cluster: lease renewal failed", "err", err)
		return
	}
	for _, id := range lost {
		h.n.log.Warn("chorus cluster: session lease lost", "session", id)
		stop, cancel := context.WithCancel(ctx)
		cancel()
		_, _ = h.m.Passivate(stop, id)
		h.mu.Lock()
		pid := h.grains[id]
		delete(h.grains, id)
		h.mu.Unlock()
		if pid != nil {
			h.n.sys.Root.Poison(pid)
		}
	}
}

// sweep touches the sessions whose holder stopped renewing.
func (h *sessionHost) sweep(ctx context.Context) {
	exp, err := h.journal.Expired(ctx, 64)
	if err != nil {
		if ctx.Err() == nil {
			h.n.log.Warn("chorus cluster: lease sweep failed", "err", err)
		}
		return
	}
	for _, l := range exp {
		if h.leased.Holds(l.Session) {
			continue
		}
		// Activates the session on its owner, which takes the lease.
		if _, err := h.n.sessionCall(ctx, l.Session, &clusterpb.SessionRequest{Session: l.Session, Op: "touch"}, true); err != nil && ctx.Err() == nil {
			h.n.log.Debug("chorus cluster: touching session failed", "session", l.Session, "err", err)
		}
	}
}

// close passivates every session hosted here.
func (h *sessionHost) close(ctx context.Context) {
	h.mu.Lock()
	h.closed = true
	ids := make([]string, 0, len(h.grains))
	for id := range h.grains {
		ids = append(ids, id)
	}
	h.mu.Unlock()
	for _, id := range ids {
		h.passivate(ctx, id)
	}
	_ = h.m.Close(ctx)
}

func (h *sessionHost) shutdown() {
	_ = h.m.Close(context.Background())
}

// passivate stops a session here: its lease is released when it was idle,
// else left to expire so that the sweep resumes it elsewhere.
func (h *sessionHost) passivate(ctx context.Context, id string) {
	idle, err := h.m.Passivate(ctx, id)
	if err != nil {
		h.n.log.Debug("chorus cluster: passivate", "session", id, "err", err)
	}
	if idle {
		_ = h.leased.Release(context.WithoutCancel(ctx), id)
	} else {
		h.leased.Drop(id)
	}
}

// acquire takes the session's lease, waiting (up to twice the lease
// time) for another holder's to expire.
func (h *sessionHost) acquire(ctx context.Context, id string) error {
	if h.leased.Holds(id) {
		return nil
	}
	deadline := h.n.now().Add(2*h.ttl + time.Second)
	for {
		_, err := h.leased.Acquire(ctx, id)
		if err == nil {
			return nil
		}
		var held *store.LeaseHeldError
		if !errors.As(err, &held) || h.n.now().After(deadline) {
			return err
		}
		// Expires is PostgreSQL's clock, read on the node's: a skewed
		// clock waits too long or too little, within the bounds below.
		wait := held.Expires.Sub(h.n.now()) + 20*time.Millisecond
		if wait < 20*time.Millisecond || wait > h.ttl {
			wait = 100 * time.Millisecond
		}
		if !sleepCtx(ctx, wait) {
			return ctx.Err()
		}
	}
}

// sessionGrain is one session's activation on this node.
type sessionGrain struct {
	h  *sessionHost
	id string
}

func (g *sessionGrain) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		g.id = clusterIdentity(c)
	case *actor.Stopping:
		if g.id == "" {
			return
		}
		g.h.mu.Lock()
		mine := g.h.grains[g.id] != nil && g.h.grains[g.id].Equal(c.Self())
		if mine {
			delete(g.h.grains, g.id)
		}
		g.h.mu.Unlock()
		if mine {
			ctx, cancel := context.WithTimeout(g.h.n.base, 5*time.Second)
			g.h.passivate(ctx, g.id)
			cancel()
		}
	case *clusterpb.SessionRequest:
		g.handle(c, m)
	}
}

func (g *sessionGrain) handle(c actor.Context, m *clusterpb.SessionRequest) {
	h, sender := g.h, c.Sender()
	// The request runs under its SERVER span, in the caller's trace
	// (sessiontrace.go); lease touches are not traced.
	pctx, span := telemetry.Extract(h.n.base, m.TraceContext), trace.SpanFromContext(context.Background())
	if m.Op != "touch" {
		pctx, span = h.n.startSessionSpan(pctx, trace.SpanKindServer, m.Session, m.Op)
	}
	reply := func(v any, err error) {
		r := &clusterpb.SessionReply{Err: toFailure(err)}
		if err == nil && v != nil {
			r.Json, _ = json.Marshal(v)
		}
		if sender != nil {
			send(c.ActorSystem(), sender, r)
		}
		endSessionSpan(span, err)
	}
	if g.id == "" || m.Session != g.id {
		reply(nil, &llm.ConfigError{Field: "session", Msg: "does not match the grain"})
		return
	}
	ctx, cancel := context.WithTimeout(pctx, 30*time.Second)
	defer cancel()
	if err := h.acquire(ctx, g.id); err != nil {
		reply(nil, fmt.Errorf("cluster: session %q: %w", g.id, err))
		return
	}
	h.mu.Lock()
	h.grains[g.id] = c.Self()
	h.mu.Unlock()
	switch m.Op {
	case "send":
		var msg llm.Message
		if err := json.Unmarshal(m.MessageJson, &msg); err != nil {
			reply(nil, &llm.ConfigError{Field: "message", Msg: "undecodable: " + err.Error()})
			return
		}
		reply(nil, h.m.Send(ctx, g.id, msg))
	case "resolve":
		reply(nil, h.m.Resolve(ctx, g.id, m.Interrupt, m.Approved, m.Reason))
	case "cancel":
		reply(nil, h.m.CancelTurn(ctx, g.id))
	case "snapshot":
		reply(h.m.Snapshot(ctx, g.id))
	case "touch":
		_, err := h.m.Snapshot(ctx, g.id)
		if errors.Is(err, session.ErrUnknownSession) {
			err = nil
		}
		reply(nil, err)
	case "wait":
		// A turn can take long: wait off the grain's mailbox.
		if !h.n.enter() {
			reply(nil, session.ErrClosed)
			return
		}
		go func() {
			defer h.n.wg.Done()
			reply(h.m.Wait(pctx, g.id))
		}()
	case "follow":
		recv := fromRef(m.Receiver)
		if recv == nil {
			reply(nil, &llm.ConfigError{Field: "receiver", Msg: "missing"})
			return
		}
		p := newProducer(pctx, m.Stream, recv, int(m.Window), h.followBody(g.id, m.After))
		c.Spawn(actor.PropsFromProducer(func() actor.Actor { return p }))
		endSessionSpan(span, nil) // the follow is set up; its events flow on
	default:
		reply(nil, &llm.ConfigError{Field: "op", Msg: fmt.Sprintf("unknown session operation %q", m.Op)})
	}
}

// followBody relays a session's events as JSON items.
func (h *sessionHost) followBody(id string, after uint64) func(context.Context, *flowOut) bool {
	return func(ctx context.Context, out *flowOut) bool {
		ch, stop := h.m.Events(id, after)
		defer stop()
		for {
			items, ok := gather(ctx, ch, func(ev *session.Event) []byte {
				b, _ := json.Marshal(ev)
				return b
			})
			if !ok {
				if ctx.Err() != nil {
					return false
				}
				out.end(nil, session.ErrClosed)
				return true
			}
			if !out.batch(ctx, nil, items) {
				return false
			}
		}
	}
}

// Sessions reaches the cluster's sessions from any node, a client too.
type Sessions struct{ n *Node }

// Sessions returns the node's handle on the cluster's sessions.
func (n *Node) Sessions() *Sessions { return &Sessions{n: n} }

// sessionCall sends a request to the session's grain and waits for its
// reply. retry: the request may be asked again of the next activation
// when the grain's node is lost (it is idempotent); otherwise ErrNodeLost
// is returned and the outcome is unknown.
func (n *Node) sessionCall(ctx context.Context, id string, req *clusterpb.SessionRequest, retry bool) (_ []byte, err error) {
	if req.Op != "touch" {
		var span trace.Span
		ctx, span = n.startSessionSpan(ctx, trace.SpanKindClient, id, req.Op)
		defer func() { endSessionSpan(span, err) }()
		req.TraceContext = telemetry.Inject(ctx)
	}
	for try := 0; ; try++ {
		pid := n.grain(id, kindSession)
		if pid == nil {
			if try >= 20 || !sleepCtx(ctx, 200*time.Millisecond) {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				return nil, errNoMembers
			}
			continue
		}
		r, err := ask(ctx, n.sys, pid, req)
		switch {
		case errors.Is(err, ErrNodeLost):
			n.forget(id, kindSession, pid)
			if !retry || try >= 20 {
				return nil, ErrNodeLost
			}
			if !sleepCtx(ctx, 200*time.Millisecond) {
				return nil, ctx.Err()
			}
			continue
		case err != nil:
			return nil, err
		}
		m, ok := r.(*clusterpb.SessionReply)
		if !ok {
			return nil, &ProtocolError{Msg: fmt.Sprintf("unexpected session reply %T", r)}
		}
		err = fromFailure(m.Err)
		if (errors.Is(err, session.ErrClosed) || errors.Is(err, store.ErrLeaseHeld)) && try < 20 {
			// The session's node is leaving, or could not take the lease
			// another member still holds (the members disagree on the
			// session's owner while membership changes: a member joined,
			// or a partition split the cluster), and refused before doing
			// anything: ask its next activation.
			n.forget(id, kindSession, pid)
			if !sleepCtx(ctx, 200*time.Millisecond) {
				return nil, ctx.Err()
			}
			continue
		}
		return m.Json, err
	}
}

// Send gives the session a user message (see session.Manager.Send). It is
// not retried on another node: if the session's node is lost before the
// reply, Send returns ErrNodeLost and the message may or may not be in the
// journal (Snapshot tells).
func (s *Sessions) Send(ctx context.Context, id string, msg llm.Message) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return &llm.ConfigError{Field: "message", Msg: err.Error()}
	}
	_, err = s.n.sessionCall(ctx, id, &clusterpb.SessionRequest{Session: id, Op: "send", MessageJson: b}, false)
	return err
}

// Resolve resolves an approval interrupt (see session.Manager.Resolve).
// A resolution retried after a lost node that had taken it is refused
// with ErrAlreadyResolved, as a duplicate is.
func (s *Sessions) Resolve(ctx context.Context, id, interrupt string, approved bool, reason string) error {
	_, err := s.n.sessionCall(ctx, id, &clusterpb.SessionRequest{Session: id, Op: "resolve", Interrupt: interrupt, Approved: approved, Reason: reason}, true)
	return err
}

// CancelTurn cancels the session's turn (see session.Manager.CancelTurn).
func (s *Sessions) CancelTurn(ctx context.Context, id string) error {
	_, err := s.n.sessionCall(ctx, id, &clusterpb.SessionRequest{Session: id, Op: "cancel"}, true)
	return err
}

// Snapshot returns the session's state (see session.Manager.Snapshot).
func (s *Sessions) Snapshot(ctx context.Context, id string) (*session.Snapshot, error) {
	b, err := s.n.sessionCall(ctx, id, &clusterpb.SessionRequest{Session: id, Op: "snapshot"}, true)
	if err != nil {
		return nil, err
	}
	var snap session.Snapshot
	if err := json.Unmarshal(b, &snap); err != nil {
		return nil, &ProtocolError{Msg: "undecodable snapshot: " + err.Error()}
	}
	return &snap, nil
}

// Wait waits for the session's current turn to end (see
// session.Manager.Wait), following the session to another node if its
// node is lost meanwhile.
func (s *Sessions) Wait(ctx context.Context, id string) (session.TurnResult, error) {
	var tr session.TurnResult
	b, err := s.n.sessionCall(ctx, id, &clusterpb.SessionRequest{Session: id, Op: "wait"}, true)
	if err != nil {
		return tr, err
	}
	if err := json.Unmarshal(b, &tr); err != nil {
		return tr, &ProtocolError{Msg: "undecodable turn result: " + err.Error()}
	}
	return tr, nil
}

// Events follows the session's events with Seq > after, from the node
// that runs it, in ordered batches with the same bound as locally. The
// channel closes when ctx ends, cancel is called, or the session's node is
// lost (events are not durable; follow again after the last Seq received
// to continue on the next node, which numbers above it and starts with a
// gap: see session.Manager.Events).
func (s *Sessions) Events(ctx context.Context, id string, after uint64) (<-chan session.Event, func()) {
	out := make(chan session.Event)
	fctx, cancel := s.n.bound(ctx)
	done := make(chan struct{})
	if !s.n.enter() {
		cancel()
		close(out)
		return out, func() {}
	}
	go func() {
		defer s.n.wg.Done()
		defer close(done)
		defer close(out)
		defer cancel()
		sctx, span := s.n.startSessionSpan(ctx, trace.SpanKindClient, id, "follow")
		var err error
		defer func() {
			if errors.Is(err, context.Canceled) { // the follower stopped
				err = nil
			}
			endSessionSpan(span, err)
		}()
		pid := s.n.grain(id, kindSession)
		if pid == nil {
			err = errNoMembers
			return
		}
		tc := telemetry.Inject(sctx)
		_, err = s.n.runFlow(fctx, pid, func(sid uint64, recv *actor.PID) {
			sendAs(s.n.sys, pid, &clusterpb.SessionRequest{Session: id, Op: "follow", After: after, Receiver: toRef(recv), Window: defaultWindow, Stream: sid, TraceContext: tc}, recv)
		}, func(b *clusterpb.DeltaBatch) bool {
			for _, it := range b.Items {
				var ev session.Event
				if json.Unmarshal(it, &ev) != nil {
					continue
				}
				select {
				case out <- ev:
				case <-fctx.Done():
					return false
				}
			}
			return true
		})
		if errors.Is(err, ErrNodeLost) {
			s.n.forget(id, kindSession, pid)
		}
	}()
	return out, func() { cancel(); <-done }
}
