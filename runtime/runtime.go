package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/chorusrt/chorus/actors"
	"github.com/chorusrt/chorus/internal/actorkit"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/telemetry"
)

// ErrClosed is returned by calls made after Close began.
var ErrClosed = actors.ErrClosed

func init() {
	// A cluster node's runtime spawns into the node's actor system.
	actorkit.SetRuntimeHook(func(s *actorkit.System) any {
		return Option(func(o *options) { o.system = s })
	})
}

// Runtime serves calls through one actor per provider credential. It is
// safe for concurrent use.
type Runtime struct {
	sys     *actors.System
	groups  map[string]*group
	order   []string
	aliases map[string][]string
	routes  map[string]*router // routed aliases (routing.go)
	opts    options
	logger  *slog.Logger

	base context.Context
	stop context.CancelFunc

	mu     sync.RWMutex
	closed bool
	calls  sync.WaitGroup

	gauges metric.Registration // telemetry.go
}

// group is one provider: its credentials in registration order.
type group struct {
	id    string
	creds []*cred
	next  atomic.Uint64
	// mu guards the pending rebalance (wakeAt).
	mu      sync.Mutex
	wake    *time.Timer
	wakeT   time.Time
	stopped bool
}

// cred is one credential: its actor and client, plus counters fed by the
// client's attempt observer on the callers' goroutines.
type cred struct {
	ref         actors.Admitter
	client      *providers.Client
	attempts    atomic.Int64
	retries     atomic.Int64
	rateLimited atomic.Int64
	costs       costBook // cost.go
	// What telemetry names it by (telemetry.go): never the key.
	provider, fp, server string
	index, port          int
	// placed counts this runtime's calls placed on the credential and not
	// finished (waiting for admission or in flight): pick's measure of
	// load, exact at once, where the actor's published counts lag a burst
	// of picks (which then all went to one key).
	placed atomic.Int64
	// shared: ref is the endpoint's one budget for a limit its keys share
	// (Limits.Shared), the same admitter as its other keys'.
	shared bool
	// joint is the budget the endpoint's keys are joined into once their
	// reports show they share one limit, undeclared (joint.go); nil for a
	// key alone on its endpoint, declared shared, or in a cluster.
	joint *joint
}

// admitters returns each credential's admitter once: keys sharing a limit
// share one.
func (rt *Runtime) admitters() []actors.Admitter {
	var out []actors.Admitter
	seen := map[actors.Admitter]bool{}
	for _, id := range rt.order {
		for _, c := range rt.groups[id].creds {
			if !seen[c.ref] {
				seen[c.ref] = true
				out = append(out, c.ref)
			}
			if c.joint != nil && !seen[c.joint.ref] {
				seen[c.joint.ref] = true
				out = append(out, c.joint.ref)
			}
		}
	}
	return out
}

// New spawns one actor per credential, in the process's shared actor
// system. Credentials of one endpoint (provider id and base URL) share its
// learn-once state (invariant 6): what one key's call learns, every key's
// next call uses.
func New(opts ...Option) (*Runtime, error) {
	o := options{queueSize: 1024, streamBuffer: providers.DefaultStreamBuffer, placements: 8, timeout: providers.DefaultTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	if o.err != nil {
		return nil, o.err
	}
	logger := o.logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	o.tel = o.tel.OrGlobal()
	rt := &Runtime{groups: map[string]*group{}, aliases: o.aliases, opts: o, logger: logger}
	peers := map[string]int{} // credentials per endpoint
	for _, cfg := range o.configs {
		if err := cfg.Validate(); err != nil {
			return nil, err
		}
		peers[endpoint(cfg)]++
	}
	rt.sys = o.system
	if rt.sys == nil {
		rt.sys = actors.NewSystem(logger)
	}
	rt.base, rt.stop = context.WithCancel(context.Background())
	learned := map[string]*providers.Learned{} // by endpoint
	shared := map[string]actors.Admitter{}     // by endpoint, for limits shared by its keys
	joints := map[string]*joint{}              // by endpoint, for limits its keys turn out to share
	for _, cfg := range o.configs {
		g := rt.groups[cfg.ID]
		if g == nil {
			g = &group{id: cfg.ID}
			rt.groups[cfg.ID] = g
			rt.order = append(rt.order, cfg.ID)
		}
		c := &cred{provider: cfg.ID, fp: fingerprint(string(cfg.APIKey)), index: len(g.creds)}
		c.server, c.port = serverOf(cfg.BaseURL)
		ep := endpoint(cfg)
		if learned[ep] == nil {
			learned[ep] = &providers.Learned{}
		}
		copts := append([]providers.Option{
			providers.WithLogger(logger),
			providers.WithStreamBuffer(o.streamBuffer),
			providers.WithLearned(learned[ep]),
		}, o.clientOpts...)
		// 429 and 529 are the runtime's: the actor cools the credential down
		// and the call moves on.
		copts = append(copts, providers.WithAttemptObserver(c.observe()), providers.WithoutRateLimitRetry())
		client, err := providers.New(cfg, copts...)
		if err != nil {
			rt.shutdown()
			return nil, err
		}
		c.client = client
		lim := o.limits[cfg.ID]
		if lim.MaxConcurrency == 0 {
			lim.MaxConcurrency = o.maxConcurrency
		}
		switch {
		case lim.Shared && shared[ep] != nil:
			// One limit for every key of the endpoint: one budget paces them.
			c.ref, c.shared = shared[ep], true
		case o.budget != nil:
			sum := sha256.Sum256([]byte(cfg.APIKey))
			if lim.Shared {
				// The budget is the endpoint's, whichever keys a node holds.
				sum = sha256.Sum256([]byte("shared limit\x00" + ep))
			}
			cr := Credential{Provider: cfg.ID, Index: len(g.creds), KeyID: hex.EncodeToString(sum[:8]), Limits: lim, QueueSize: o.queueSize, Learned: client.Learned()}
			if !lim.Shared {
				cr.Peers = peers[ep]
			}
			c.ref, err = o.budget(cr)
			if err != nil {
				rt.shutdown()
				return nil, err
			}
		default:
			st := actors.NewCredentialState(cfg.ID, len(g.creds), lim, o.queueSize)
			if !lim.Shared {
				st.ShareEndpoint(peers[endpoint(cfg)])
			}
			if peers[ep] > 1 && !lim.Shared {
				st.OnHeld(g.rebalance) // callers it holds back may go to a key with room
			}
			ref := actors.Spawn(rt.sys, st)
			c.ref = ref
			if n := peers[ep]; n > 1 && !lim.Shared && lim.RequestsPerMinute == 0 && lim.TokensPerMinute == 0 {
				// Keys that may turn out to share one limit (joint.go).
				j := joints[ep]
				if j == nil {
					jl := lim
					jl.MaxConcurrency *= n // each key's cap, together
					j = &joint{ref: actors.Spawn(rt.sys, actors.NewCredentialState(cfg.ID, len(g.creds), jl, o.queueSize)), ready: make(chan struct{})}
					joints[ep] = j
				}
				j.keys = append(j.keys, ref)
				c.joint = j
			}
		}
		if lim.Shared {
			if shared[ep] == nil {
				shared[ep] = c.ref
			}
			c.shared = true
		}
		g.creds = append(g.creds, c)
	}
	for _, p := range rt.opts.patterns {
		if rt.groups[p.provider] == nil {
			rt.shutdown()
			return nil, &llm.ConfigError{Field: "model pattern " + p.pattern, Msg: fmt.Sprintf("provider %q is not registered (registered: %s)", p.provider, strings.Join(rt.order, ", "))}
		}
	}
	for name, targets := range rt.aliases {
		for _, t := range targets {
			if _, _, err := rt.resolveOne(t); err != nil {
				rt.shutdown()
				return nil, &llm.ConfigError{Field: "alias " + name, Msg: err.Error()}
			}
		}
	}
	if err := rt.newRouters(); err != nil { // routing.go
		rt.shutdown()
		return nil, err
	}
	rt.registerGauges()
	return rt, nil
}

// endpoint names the endpoint a credential calls: its provider id and base
// URL. Learn-once state belongs to it, not to a key.
func endpoint(cfg providers.Config) string {
	return cfg.ID + " " + strings.TrimRight(cfg.BaseURL, "/")
}

// observe counts attempts.
func (c *cred) observe() providers.AttemptObserver {
	return func(ev providers.AttemptEvent) {
		c.attempts.Add(1)
		if ev.Attempt > 1 {
			c.retries.Add(1)
		}
		if ev.Status == 429 || ev.Status == 529 {
			c.rateLimited.Add(1)
		}
	}
}

// String describes the runtime without its keys (its fields hold them, and
// fmt would print them).
func (rt *Runtime) String() string { return "runtime.Runtime(" + strings.Join(rt.order, ", ") + ")" }

// GoString is String, so that %#v never prints a key either.
func (rt *Runtime) GoString() string { return rt.String() }

// Providers returns the registered provider ids, in registration order.
func (rt *Runtime) Providers() []string { return append([]string(nil), rt.order...) }

// Aliases returns the registered aliases and their targets.
func (rt *Runtime) Aliases() map[string][]string {
	out := make(map[string][]string, len(rt.aliases))
	for k, v := range rt.aliases {
		out[k] = append([]string(nil), v...)
	}
	return out
}

type target struct {
	g     *group
	model string
	name  string // provider/model
	// dropped are the request's fields this target's format leaves out
	// (support.go).
	dropped []string
	// rs is the routed alias's state of the target, nil for a plain one;
	// held: route counted the call on it already (routing.go).
	rs   *routeTarget
	held bool
}

func (rt *Runtime) resolveOne(model string) (*group, string, error) {
	id, m, ok := strings.Cut(model, "/")
	if !ok || id == "" || m == "" {
		return nil, "", fmt.Errorf("%q is not provider/model or an alias", model)
	}
	g := rt.groups[id]
	if g == nil {
		return nil, "", fmt.Errorf("provider %q is not registered (registered: %s)", id, strings.Join(rt.order, ", "))
	}
	return g, m, nil
}

// resolve turns a model name into its ordered targets.
func (rt *Runtime) resolve(model string) ([]target, error) {
	names := []string{model}
	if t, ok := rt.aliases[model]; ok {
		names = t
	} else if name, err := rt.Resolve(model, ""); err != nil {
		return nil, &llm.ConfigError{Field: "model", Msg: err.Error()}
	} else {
		names[0] = name
	}
	out := make([]target, 0, len(names))
	for _, n := range names {
		g, m, err := rt.resolveOne(n)
		if err != nil {
			return nil, &llm.ConfigError{Field: "model", Msg: err.Error()}
		}
		out = append(out, target{g: g, model: m, name: n})
	}
	rt.routeOf(model, out) // routing.go
	return out, nil
}

// enter registers a call; it fails once Close began.
func (rt *Runtime) enter() error {
	rt.mu.RLock()
	defer rt.mu.RUnlock()
	if rt.closed {
		return ErrClosed
	}
	rt.calls.Add(1)
	return nil
}

// callCtx derives a call's context: bounded by the runtime's whole-call
// budget (invariant 10: queueing included), cancelled by the caller, or by
// Close when its grace period ends.
func (rt *Runtime) callCtx(ctx context.Context) (context.Context, func()) {
	var cctx context.Context
	var cancel context.CancelFunc
	if rt.opts.timeout > 0 {
		cctx, cancel = context.WithTimeout(ctx, rt.opts.timeout)
	} else {
		cctx, cancel = context.WithCancel(ctx)
	}
	stop := context.AfterFunc(rt.base, cancel)
	return cctx, func() {
		stop()
		cancel()
		rt.calls.Done()
	}
}

// pick chooses the credential to ask: where a call waits least, once every
// key's budget knows its request limit (pickByOutlook); otherwise not
// cooling down first, then the least busy (what this runtime placed on it
// and has not finished: the admitter's published counts lag a burst of
// picks, which then all went to the key that looked less busy), rotating
// among equals.
func (g *group) pick(now time.Time) *cred {
	if len(g.creds) == 1 {
		return g.creds[0]
	}
	start := int(g.next.Add(1))
	if c := g.pickByOutlook(start); c != nil {
		return c
	}
	var best *cred
	var bestScore int64
	for i := range g.creds {
		c := g.creds[(start+i)%len(g.creds)]
		_, _, cd := c.admitter().Load()
		score := c.placed.Load()
		if cd.After(now) {
			score += int64(cd.Sub(now)/time.Millisecond) * 1_000
		}
		if best == nil || score < bestScore {
			best, bestScore = c, score
		}
	}
	return best
}

// shedder is an admitter whose queued callers can be moved (actors.Ref).
type shedder interface{ Shed(n int) int }

// rebalance moves callers queued at a key without room to one with room
// and nobody queued: up to that room of the newest callers (who would
// wait longest) are refused there and placed again, where they wait
// least, which is the key with room. Callers are placed when they
// arrive, on the shares the keys know then; a key whose share came out
// smaller than its queue (keys of one organisation learning their shares
// in one window), or the tail of a batch split unevenly, would otherwise
// leave the other key's room unused while they wait out a whole window.
// Only where every key's outlook is known, as in pickByOutlook, and never
// from a key with room of its own: its queue is about to be served.
//
// It runs when a key may have got room (a call on it succeeded) and when
// a key's budget holds its queued callers back (actors.CredentialState's
// OnHeld). If no key has room then, but a key with nobody queued will
// have some before the held key, it runs again at that moment (wakeAt):
// a key with nobody queued hears of no event when its window turns or a
// trailing slot frees.
func (g *group) rebalance() {
	if len(g.creds) < 2 {
		return
	}
	var buf [inlineOutlooks]actors.Outlook
	outs := g.outlooks(0, &buf)
	if outs == nil {
		return
	}
	var from, to *cred
	fromQ, free := 0, 0
	var fromRoom, soon time.Duration
	for i, o := range outs {
		k := g.creds[i]
		if k.joined() {
			return
		}
		switch q, _, _ := k.admitter().Load(); {
		case q > 0 && o.Free <= 0:
			if q > fromQ {
				from, fromQ, fromRoom = k, q, o.Room
			}
		case q == 0 && o.Cooling == 0 && o.Free > 0:
			if o.Free > free {
				to, free = k, o.Free
			}
		case q == 0 && o.Room > 0:
			if soon == 0 || o.Room < soon {
				soon = o.Room
			}
		}
	}
	switch {
	case from == nil:
	case to != nil:
		if s, ok := from.admitter().(shedder); ok {
			s.Shed(min(free, fromQ))
		}
	case soon > 0 && (fromRoom == 0 || soon < fromRoom):
		g.wakeAt(time.Now().Add(soon))
	}
}

// wakeAt has rebalance run at t, unless it is due to run before then; not
// once the runtime is closed (stopWake).
func (g *group) wakeAt(t time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped || (!g.wakeT.IsZero() && !t.Before(g.wakeT)) {
		return
	}
	if g.wake != nil {
		g.wake.Stop()
	}
	g.wakeT = t
	g.wake = time.AfterFunc(time.Until(t), func() {
		g.mu.Lock()
		g.wakeT = time.Time{}
		g.mu.Unlock()
		g.rebalance()
	})
}

// stopWake cancels a pending rebalance, for good.
func (g *group) stopWake() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopped = true
	if g.wake != nil {
		g.wake.Stop()
	}
}

// outlooker is an admitter that tells what its budget would make of more
// requests (actors.Ref does; a cluster's remote budget does not).
type outlooker interface{ Outlook() actors.Outlook }

// pickByOutlook chooses, when every credential's budget knows its request
// limit, the one where a call would wait least: not held back by a
// cooldown beyond its budget's refill first (the shortest such), then the
// fewest windows of backlog (what is placed on it and not yet granted,
// this call included, beyond what it could grant now, over its limit per
// window; none when it has room), then the least placed on it for its
// limit, rotating among equals. Keys with limits of their own differ in
// them (a key of a higher tier), and keys whose limits were read from 429s
// alone (Gemini) hold whatever share of a limit they share each learned:
// placed by count alone, the callers queued at the slower key waited out
// windows the faster one left unused (1.26x the minimum in the pacing
// matrix). Keys with room are spread over by their load, not by their
// room: a key whose own reading of a shared limit shows more room than
// another's took every call, so that the other's reports never showed the
// sharing (runtime/joint.go) and its refills were all refused. A cooldown
// that ends by the refill (a window's 429) is that wait, weighed with the
// backlog as every key's is: ranked by its length, keys cooling down a few
// milliseconds apart took every placement in turn. Nil when some limit is
// not known, or some key's reports showed others drawing on its budget:
// pick then weighs the counts alone. Such a key's room is its reading of
// its share, which its peers' need not share until they are joined: a
// key whose peer took every refill of one bucket met a 429 at each of its
// own, chosen for the room it read, while the peer, never refused, never
// showed the sharing that joins them (runtime/joint.go).
func (g *group) pickByOutlook(start int) *cred {
	var buf [inlineOutlooks]actors.Outlook
	outs := g.outlooks(start, &buf)
	if outs == nil {
		return nil
	}
	// The placements are read after every outlook (each takes its key's
	// lock, which can wait): read between two of them, a burst of
	// concurrent picks decided on counts the others had since changed,
	// and under load sent half the burst to a key of a quarter of the
	// limit.
	var best placing
	for i, o := range outs {
		c := g.creds[(start+i)%len(g.creds)]
		placed := c.placed.Load()
		need := max(placed-int64(o.InFlight), 0) + 1
		beyond := max(need-int64(o.Free), 0)
		p := placing{c: c, cool: o.Cooling, refills: (beyond + int64(o.Limit) - 1) / int64(o.Limit), room: o.Room,
			wait: float64(beyond) / float64(o.Limit), load: float64(placed+1) / float64(o.Limit)}
		if best.c == nil || p.before(best) {
			best = p
		}
	}
	return best.c
}

// placing is what pickByOutlook weighs of one key for a call.
type placing struct {
	c       *cred
	cool    time.Duration // a cooldown past the refill
	refills int64         // the refills the call waits for: none if it fits now
	room    time.Duration // the key's Outlook.Room: when its next request can go
	wait    float64       // the backlog beyond its room, in windows of its limit
	load    float64       // what is placed on it, for its limit
}

// before reports whether a call placed at p would wait less than at q:
// the shorter cooldown, then the fewer refills, then among keys that wait
// for one refill each the one whose room comes first (keys of one
// organisation read their windows a few milliseconds apart, and a key
// whose trailing requests leave within milliseconds beats one whose
// window turns in half a second: ranked by backlog alone they tied, and a
// last caller waited out a window at the later one), then the smaller
// backlog, then the lighter load.
func (p placing) before(q placing) bool {
	switch {
	case p.cool != q.cool:
		return p.cool < q.cool
	case p.refills != q.refills:
		return p.refills < q.refills
	case p.room > 0 && q.room > 0 && p.room != q.room:
		return p.room < q.room
	case p.wait != q.wait:
		return p.wait < q.wait
	}
	return p.load < q.load
}

// inlineOutlooks is how many keys' outlooks fit the caller's array
// (outlooks): more are put in a slice of their own.
const inlineOutlooks = 4

// outlooks returns every key's Outlook, the keys taken round from start,
// in buf when they fit; nil if some key's is not to be weighed: its
// admitter tells none (a cluster's remote budget), its request limit is
// not known, or its reports showed others drawing on its budget (see
// pickByOutlook). rebalance and pickByOutlook both act only on these.
func (g *group) outlooks(start int, buf *[inlineOutlooks]actors.Outlook) []actors.Outlook {
	outs := buf[:0]
	if len(g.creds) > inlineOutlooks {
		outs = make([]actors.Outlook, 0, len(g.creds))
	}
	for i := range g.creds {
		ol, ok := g.creds[(start+i)%len(g.creds)].admitter().(outlooker)
		if !ok {
			return nil
		}
		o := ol.Outlook()
		if o.Limit <= 0 || o.Shared {
			return nil
		}
		outs = append(outs, o)
	}
	return outs
}

// outcome is one placement's result.
type outcome struct {
	err     error
	started bool
	meta    llm.ResponseMeta
	usage   llm.Usage
}

// place runs a call on the targets in order, rotating credentials on rate
// limits and falling back to the next target on retryable failures before
// the first event.
func (rt *Runtime) place(ctx context.Context, targets []target, cost int, ct *callTrace, call func(ctx context.Context, c *cred, model string) outcome) error {
	var lastErr error
	rep := reportOf(ctx)  // report.go; nil unless asked
	var held *routeTarget // routing.go: the target the call counts on
	defer func() { held.release() }()
	for step, t := range targets {
		held.release()
		held = t.hold()
	placements:
		for n := 0; n < rt.opts.placements; n++ {
			now := time.Now()
			c := t.g.pick(now)
			ct.asking(c, now) // telemetry.go
			c.placed.Add(1)
			ref := c.admitter()
			seq, err := ref.Admit(ctx, cost)
			if err != nil {
				c.placed.Add(-1)
				switch {
				case ctx.Err() != nil:
					return firstErr(lastErr, ctx.Err())
				case actors.Shed(err):
					// Moved from a key's queue to one with room now
					// (rebalance): placed again, not counted.
					n--
					continue
				case actors.Diverted(err):
					// The key is now paced in its endpoint's joint budget
					// (joint.go): ask that, once it serves, without
					// counting a placement.
					if c.joint != nil {
						select {
						case <-c.joint.ready:
						case <-ctx.Done():
							return firstErr(lastErr, ctx.Err())
						}
					}
					n--
					continue
				case actors.ErrCoolingDown(err):
					ct.refused(c, err)
					lastErr = err
					if rt.anyAvailable(t.g) {
						continue
					}
					break placements // every credential cools down past the budget: fall back
				default:
					return err // overloaded or closed: the caller hears it at once
				}
			}
			if rep != nil {
				rep.placed(step, t, c, time.Since(now))
			}
			cctx := ctx
			var accepted time.Time // routing.go's time to first byte
			if a, ok := ref.(actors.Acceptor); ok || t.rs != nil {
				once := false
				cctx = providers.WithAcceptHook(ctx, func() {
					if !once { // retries inside the call accept again
						once = true
						accepted = time.Now()
						if a != nil {
							a.Accepted(seq)
						}
					}
				})
			}
			began := time.Now()
			o := call(cctx, c, t.model)
			if t.rs != nil {
				t.rs.observe(ctx, o, began, accepted)
			}
			rt.account(c, t, o) // cost.go
			if rep != nil {
				rep.priced(rt, t, o)
			}
			ref.Finish(finished(seq, o))
			c.placed.Add(-1)
			if o.err == nil {
				t.g.rebalance()
			}
			if c.joint != nil && ref == c.ref {
				c.joint.check()
			}
			if o.err == nil {
				return nil
			}
			if o.started {
				return o.err
			}
			lastErr = o.err
			var rl *llm.RateLimitError
			if errors.As(o.err, &rl) && !rl.QuotaExhausted {
				// This credential now cools down; try again, placed once
				// every key's could serve it (awaitRoom).
				if !awaitRoom(ctx, t.g, c, rl.RetryAfter) {
					return firstErr(lastErr, ctx.Err())
				}
				continue
			}
			if providers.Retryable(o.err) {
				break placements
			}
			return o.err
		}
	}
	return lastErr
}

// awaitRoom waits, before a call c's provider refused is placed again,
// until the earliest any key of g could take it: c's cooldown (the
// refusal's retry delay, from now) or another key's, whichever ends
// first; a key not cooling down ends the wait at once. Placed at once
// instead, the calls a first window refuses (dozens within a few
// milliseconds, while each key still learns its share from that window's
// answers) were placed on shares not yet known and queued for good at a
// key whose share came out smaller. A call whose deadline comes first does
// not wait. It returns false if ctx ends first.
func awaitRoom(ctx context.Context, g *group, c *cred, retryAfter time.Duration) bool {
	if len(g.creds) < 2 || retryAfter <= 0 {
		return true
	}
	now := time.Now()
	until := now.Add(retryAfter)
	for _, o := range g.creds {
		if o == c {
			continue
		}
		_, _, cd := o.admitter().Load()
		if !cd.After(now) {
			return true
		}
		if cd.Before(until) {
			until = cd
		}
	}
	if dl, ok := ctx.Deadline(); ok && dl.Before(until) {
		// The call cannot wait that long: its admission refuses it at
		// once (a cooldown past its deadline), and it falls back to its
		// next target, as it did before waiting here.
		return true
	}
	tm := time.NewTimer(until.Sub(now))
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func (rt *Runtime) anyAvailable(g *group) bool {
	now := time.Now()
	for _, c := range g.creds {
		if _, _, cd := c.admitter().Load(); !cd.After(now) {
			return true
		}
	}
	return false
}

func finished(seq uint64, o outcome) actors.RequestFinished {
	f := actors.RequestFinished{Seq: seq, Status: o.meta.Status, Usage: o.usage, RateLimit: o.meta.RateLimit, Failed: o.err != nil}
	var rl *llm.RateLimitError
	if errors.As(o.err, &rl) {
		f.RateLimited = !rl.QuotaExhausted
		f.RetryAfter = rl.RetryAfter
		f.QuotaWindow = rl.QuotaID != ""
		f.Status = rl.Status
	}
	return f
}

// estimateCost is a request's token cost before admission: a quarter of its
// text bytes plus its output allowance.
func estimateCost(req *llm.ChatRequest) int {
	n := 0
	for i := range req.Messages {
		m := &req.Messages[i]
		n += len(m.Content) + len(m.Reasoning)
		for _, p := range m.Parts {
			n += len(p.Text)
		}
		for _, tc := range m.ToolCalls {
			n += len(tc.Arguments) + len(tc.Name)
		}
	}
	for _, t := range req.Tools {
		n += len(t.Description) + len(t.Parameters)
	}
	out := req.MaxTokens
	if out <= 0 {
		out = 256
	}
	return n/4 + out
}

// Chat performs a buffered chat call. req.Model is provider/model or an alias.
func (rt *Runtime) Chat(ctx context.Context, req *llm.ChatRequest) (*llm.ChatResult, error) {
	if req == nil {
		return nil, &llm.ConfigError{Field: "request", Msg: "is nil"}
	}
	targets, err := rt.resolve(req.Model)
	if err != nil {
		return nil, err
	}
	// Validated once, before admission: a bad request spends no grant.
	probe := *req
	probe.Model = targets[0].model
	if err := probe.Validate(); err != nil {
		return nil, err
	}
	if targets, err = rt.supported(req, targets); err != nil {
		return nil, err
	}
	if rt.opts.cache != nil {
		return rt.cachedChat(ctx, req, targets) // cache.go
	}
	return rt.chat(ctx, req, targets)
}

// chat is Chat past validation: the call to a provider.
func (rt *Runtime) chat(ctx context.Context, req *llm.ChatRequest, targets []target) (*llm.ChatResult, error) {
	if err := rt.enter(); err != nil {
		return nil, err
	}
	rep := reportOf(ctx)
	ctx, done := rt.callCtx(ctx)
	defer done()
	ctx, tr := rt.startTrace(ctx, telemetry.OpChat, req.Model, targets, false)
	tr.tc.Request(req)
	rt.route(ctx, req, targets, tr) // routing.go
	var res *llm.ChatResult
	err := rt.place(ctx, targets, estimateCost(req), tr, tr.wrap(func(ctx context.Context, c *cred, model string) outcome {
		r := *req
		r.Model = model
		dropped := droppedFor(targets, c, model)
		if rep != nil {
			rep.Dropped = dropped
		}
		out, err := c.client.ChatValidated(ctx, &r)
		if err != nil {
			return outcome{err: err}
		}
		out.Meta.Dropped = dropped
		res = out
		return outcome{meta: out.Meta, usage: out.Usage}
	}))
	if err != nil {
		tr.end(nil, err)
		return nil, err
	}
	tr.end(res, nil)
	return res, nil
}

// Stream starts a streaming chat call. req.Model is provider/model or an
// alias. A request that cannot be resolved or validated is rejected here;
// every other failure arrives through the stream.
func (rt *Runtime) Stream(ctx context.Context, req *llm.ChatRequest) (*llm.Stream, error) {
	if req == nil {
		return nil, &llm.ConfigError{Field: "request", Msg: "is nil"}
	}
	targets, err := rt.resolve(req.Model)
	if err != nil {
		return nil, err
	}
	probe := *req
	probe.Model = targets[0].model
	if err := probe.Validate(); err != nil {
		return nil, err
	}
	if targets, err = rt.supported(req, targets); err != nil {
		return nil, err
	}
	if rt.opts.cache != nil {
		return rt.cachedStream(ctx, req, targets) // cache.go
	}
	return rt.stream(ctx, req, targets)
}

// stream is Stream past validation: the call to a provider.
func (rt *Runtime) stream(ctx context.Context, req *llm.ChatRequest, targets []target) (*llm.Stream, error) {
	if err := rt.enter(); err != nil {
		return nil, err
	}
	rep := reportOf(ctx)
	cctx, done := rt.callCtx(ctx)
	cctx, tr := rt.startTrace(cctx, telemetry.OpChat, req.Model, targets, true)
	tr.tc.Request(req)
	rt.route(cctx, req, targets, tr) // routing.go
	s, w, sctx := llm.NewStream(cctx, rt.opts.streamBuffer)
	emit := tr.tc.Emit(w.Emit)
	cost := estimateCost(req)
	go func() {
		defer done()
		var res *llm.ChatResult
		err := rt.place(sctx, targets, cost, tr, tr.wrap(func(ctx context.Context, c *cred, model string) outcome {
			r := *req
			r.Model = model
			dropped := droppedFor(targets, c, model)
			if rep != nil {
				rep.Dropped = dropped // before the first event: the gateway's headers read it
			}
			// Validated above, once; the client says whether events reached
			// the caller: a failure after the first event is a *llm.StreamError.
			out, err := c.client.StreamToValidated(ctx, &r, emit)
			if out != nil {
				out.Meta.Dropped = dropped
			}
			var se *llm.StreamError
			o := outcome{err: err, started: errors.As(err, &se)}
			if out != nil {
				o.meta, o.usage = out.Meta, out.Usage
			}
			res = out
			return o
		}))
		if err != nil {
			var se *llm.StreamError
			if errors.As(err, &se) {
				tr.end(se.Partial, err)
				w.Finish(se.Partial, err)
				return
			}
			tr.end(nil, err)
			w.Finish(nil, err)
			return
		}
		tr.end(res, nil)
		w.Finish(res, nil)
	}()
	return s, nil
}

// Stats is a snapshot of one credential.
type Stats struct {
	Provider   string
	Credential int
	// Fingerprint names the key without revealing it: the first 16 hex
	// digits of its SHA-256.
	Fingerprint string
	Queued      int
	InFlight    int
	Requests    int64
	Failed      int64
	// Attempts counts HTTP attempts; Retries those after a call's first.
	Attempts int64
	Retries  int64
	// RateLimited counts 429 and 529 answers.
	RateLimited int64
	Restarts    int64
	// RateLimit is the provider's last reported state; RemainingRequests and
	// RemainingTokens the runtime's own count since (-1: not known).
	RateLimit         llm.RateLimit
	RemainingRequests int
	RemainingTokens   int
	CooldownUntil     time.Time
	// SharedLimit: the provider's keys share one limit (Limits.Shared, or
	// recognised from the reports and joined: joint.go), and
	// Queued, InFlight, Requests, Failed, RateLimit, the remaining budget and
	// CooldownUntil are that limit's, the same for each of its keys.
	SharedLimit bool
	Learned     []string
	// Costs adds up the priced answers per model (WithPrices); a model
	// without a price has no entry, never a guessed cost.
	Costs []ModelCost
}

// Stats returns a snapshot per credential, in registration order.
func (rt *Runtime) Stats() []Stats {
	var out []Stats
	for _, id := range rt.order {
		for _, c := range rt.groups[id].creds {
			s, err := c.admitter().Stats(2 * time.Second)
			if err != nil {
				s = actors.AdmissionStats{Provider: id, RemainingRequests: -1, RemainingTokens: -1}
			}
			st := Stats{
				Provider: id, Credential: s.Credential, Fingerprint: c.fp, Queued: s.Queued, InFlight: s.InFlight,
				Requests: s.Requests, Failed: s.Failed, RateLimited: c.rateLimited.Load(), Restarts: s.Restarts,
				Attempts: c.attempts.Load(), Retries: c.retries.Load(), SharedLimit: c.shared || c.joined(),
				RateLimit: s.RateLimit, RemainingRequests: s.RemainingRequests, RemainingTokens: s.RemainingTokens, CooldownUntil: s.CooldownUntil,
			}
			for _, f := range c.client.Learned().Flags() {
				st.Learned = append(st.Learned, f.String())
			}
			sort.Strings(st.Learned)
			st.Costs = c.costs.snapshot()
			out = append(out, st)
		}
	}
	return out
}

// Close stops admitting calls (new calls and queued ones get ErrClosed),
// lets in-flight calls finish until ctx ends, then cancels them, and stops
// the actors. When it returns no goroutine of the runtime is left.
func (rt *Runtime) Close(ctx context.Context) error {
	rt.mu.Lock()
	if rt.closed {
		rt.mu.Unlock()
		return nil
	}
	rt.closed = true
	rt.mu.Unlock()
	for _, a := range rt.admitters() {
		_ = a.Close(2 * time.Second)
	}
	drained := make(chan struct{})
	go func() {
		rt.calls.Wait()
		close(drained)
	}()
	var err error
	select {
	case <-drained:
	case <-ctx.Done():
		err = ctx.Err()
		rt.stop()
		<-drained
	}
	rt.shutdown()
	return err
}

func (rt *Runtime) shutdown() {
	rt.unregisterGauges()
	rt.stop()
	for _, id := range rt.order {
		rt.groups[id].stopWake()
	}
	for _, a := range rt.admitters() {
		_ = a.Stop(2 * time.Second)
	}
	for _, id := range rt.order {
		for _, c := range rt.groups[id].creds {
			c.client.CloseIdleConnections()
		}
	}
	rt.sys.Release() // the system stays: other runtimes and managers may use it
}
