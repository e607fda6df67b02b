package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/chorusrt/chorus/actors"
	"github.com/chorusrt/chorus/cluster/clusterpb"
	"github.com/chorusrt/chorus/internal/actorkit"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/session"
	"github.com/chorusrt/chorus/store"
)

// Every message that leaves a node goes through these helpers, typed
// proto.Message: a plain struct does not compile here, and
// TestOnlyProtoCrossesNodes checks that nothing in this package sends any
// other way. (A budget owner's pacing timer wakes it with a local message,
// through actorkit.Tell: it never leaves the node.)

// send delivers m to pid from the root context.
func send(sys *actor.ActorSystem, pid *actor.PID, m proto.Message) { sys.Root.Send(pid, m) }

// sendAs delivers m to pid with from as its sender (the address replies go to).
func sendAs(sys *actor.ActorSystem, pid *actor.PID, m proto.Message, from *actor.PID) {
	sys.Root.RequestWithCustomSender(pid, m, from)
}

// ask sends m to pid and waits for its one proto reply, watching pid:
// ErrNodeLost when pid's actor or node goes away first (or m reached no
// actor), ctx's error when ctx ends first, with a reply that crossed the
// cancellation if one is there.
func ask(ctx context.Context, sys *actor.ActorSystem, pid *actor.PID, m proto.Message) (proto.Message, error) {
	r, err := actorkit.Ask[proto.Message](ctx, sys, pid, m, actorkit.AskOptions{Watch: true})
	if errors.Is(err, actorkit.ErrTerminated) || errors.Is(err, actorkit.ErrNotDelivered) {
		return nil, ErrNodeLost
	}
	return r, err
}

// respond answers the message being handled.
func respond(ctx actor.Context, m proto.Message) { ctx.Respond(m) }

// request sends m and waits for the proto reply.
func request(sys *actor.ActorSystem, pid *actor.PID, m proto.Message, timeout time.Duration) (proto.Message, error) {
	r, err := sys.Root.RequestFuture(pid, m, timeout).Result()
	if err != nil {
		return nil, err
	}
	pm, ok := r.(proto.Message)
	if !ok {
		return nil, &ProtocolError{Msg: "reply is not a protobuf message"}
	}
	return pm, nil
}

// ProtocolError is a message from another node that breaks the protocol
// (out of order, of the wrong type, undecodable).
type ProtocolError struct{ Msg string }

func (e *ProtocolError) Error() string { return "cluster: protocol: " + e.Msg }

// ErrNodeLost is the error of a call whose remote side went away (its node
// died or left) before the call ended. Before the first event it is
// retried on another node; after, the partial result comes with it.
var ErrNodeLost = errors.New("cluster: node lost")

func toRef(p *actor.PID) *clusterpb.Ref {
	if p == nil {
		return nil
	}
	return &clusterpb.Ref{Address: p.Address, Id: p.Id}
}

func fromRef(r *clusterpb.Ref) *actor.PID {
	if r == nil || r.Id == "" {
		return nil
	}
	return actor.NewPID(r.Address, r.Id)
}

// ---- events ----

// toDeltas packs evs into b's event columns (see DeltaBatch in
// chorus_cluster.proto): a batch costs a few allocations whatever its
// length, on both sides.
func toDeltas(evs []llm.Event, b *clusterpb.DeltaBatch) {
	size, tools, extras := 0, false, 0
	for i := range evs {
		ev := &evs[i]
		size += len(ev.Text)
		tools = tools || ev.ToolIndex != 0
		if hasExtra(ev) {
			extras++
		}
	}
	b.Types = make([]int32, len(evs))
	b.TextLens = make([]uint32, len(evs))
	b.Texts = make([]byte, 0, size)
	if tools {
		b.ToolIndexes = make([]int32, len(evs))
	}
	if extras > 0 {
		b.Extras = make([]*clusterpb.DeltaExtra, 0, extras)
	}
	for i := range evs {
		ev := &evs[i]
		b.Types[i] = int32(ev.Type)
		b.TextLens[i] = uint32(len(ev.Text))
		b.Texts = append(b.Texts, ev.Text...)
		if tools {
			b.ToolIndexes[i] = int32(ev.ToolIndex)
		}
		if hasExtra(ev) {
			x := &clusterpb.DeltaExtra{At: uint32(i), ToolCallId: ev.ToolCallID, ToolName: ev.ToolName, Signature: ev.Signature, Finish: string(ev.Finish)}
			if ev.Usage != nil {
				x.Usage = toUsage(ev.Usage)
			}
			b.Extras = append(b.Extras, x)
		}
	}
}

// hasExtra reports whether ev has a field beyond type, text and tool index.
func hasExtra(ev *llm.Event) bool {
	return ev.ToolCallID != "" || ev.ToolName != "" || ev.Signature != "" || ev.Usage != nil || ev.Finish != ""
}

// checkDeltas reports whether b's event columns are consistent, as a
// *ProtocolError when they are not.
func checkDeltas(b *clusterpb.DeltaBatch) error {
	n := len(b.Types)
	if len(b.TextLens) != n {
		return &ProtocolError{Msg: "batch: text lengths do not match the events"}
	}
	if len(b.ToolIndexes) != 0 && len(b.ToolIndexes) != n {
		return &ProtocolError{Msg: "batch: tool indexes do not match the events"}
	}
	size := uint64(0)
	for _, l := range b.TextLens {
		size += uint64(l)
	}
	if size != uint64(len(b.Texts)) {
		return &ProtocolError{Msg: "batch: text lengths do not match the texts"}
	}
	next := uint64(0)
	for _, x := range b.Extras {
		if x == nil || uint64(x.At) < next || uint64(x.At) >= uint64(n) {
			return &ProtocolError{Msg: "batch: extras out of order or out of range"}
		}
		next = uint64(x.At) + 1
	}
	return nil
}

// fromDeltas hands b's events to yield in order, until yield returns
// false; it reports whether yield took them all. A batch whose columns are
// inconsistent is a *ProtocolError before any event. The events' texts
// share one string per batch.
func fromDeltas(b *clusterpb.DeltaBatch, yield func(llm.Event) bool) (bool, error) {
	if err := checkDeltas(b); err != nil {
		return false, err
	}
	texts := string(b.Texts)
	off, x := 0, 0
	for i, t := range b.Types {
		l := int(b.TextLens[i])
		ev := llm.Event{Type: llm.EventType(t), Text: texts[off : off+l]}
		off += l
		if len(b.ToolIndexes) != 0 {
			ev.ToolIndex = int(b.ToolIndexes[i])
		}
		if x < len(b.Extras) && int(b.Extras[x].At) == i {
			e := b.Extras[x]
			x++
			ev.ToolCallID, ev.ToolName, ev.Signature, ev.Finish = e.ToolCallId, e.ToolName, e.Signature, llm.FinishReason(e.Finish)
			if e.Usage != nil {
				u := fromUsage(e.Usage)
				ev.Usage = &u
			}
		}
		if !yield(ev) {
			return false, nil
		}
	}
	return true, nil
}

func toUsage(u *llm.Usage) *clusterpb.Usage {
	return &clusterpb.Usage{
		PromptTokens: int64(u.PromptTokens), CompletionTokens: int64(u.CompletionTokens),
		CacheReadTokens: int64(u.CacheReadTokens), CacheWriteTokens: int64(u.CacheWriteTokens),
		ReasoningTokens: int64(u.ReasoningTokens),
	}
}

func fromUsage(u *clusterpb.Usage) llm.Usage {
	return llm.Usage{
		PromptTokens: int(u.PromptTokens), CompletionTokens: int(u.CompletionTokens),
		CacheReadTokens: int(u.CacheReadTokens), CacheWriteTokens: int(u.CacheWriteTokens),
		ReasoningTokens: int(u.ReasoningTokens),
	}
}

// ---- rate limits and admissions ----

func toRateLimit(rl llm.RateLimit) *clusterpb.RateLimit {
	return &clusterpb.RateLimit{
		HasRequests: rl.HasRequests, LimitRequests: int64(rl.LimitRequests), RemainingRequests: int64(rl.RemainingRequests), ResetRequestsNano: int64(rl.ResetRequests),
		HasTokens: rl.HasTokens, LimitTokens: int64(rl.LimitTokens), RemainingTokens: int64(rl.RemainingTokens), ResetTokensNano: int64(rl.ResetTokens),
	}
}

func fromRateLimit(p *clusterpb.RateLimit) llm.RateLimit {
	if p == nil {
		return llm.RateLimit{}
	}
	return llm.RateLimit{
		HasRequests: p.HasRequests, LimitRequests: int(p.LimitRequests), RemainingRequests: int(p.RemainingRequests), ResetRequests: time.Duration(p.ResetRequestsNano),
		HasTokens: p.HasTokens, LimitTokens: int(p.LimitTokens), RemainingTokens: int(p.RemainingTokens), ResetTokens: time.Duration(p.ResetTokensNano),
	}
}

func toFinished(f actors.RequestFinished, owner uint64) *clusterpb.RequestFinished {
	return &clusterpb.RequestFinished{
		Seq: f.Seq, Owner: owner, Status: int32(f.Status), RateLimited: f.RateLimited, RetryAfterNano: int64(f.RetryAfter),
		Failed: f.Failed, RateLimit: toRateLimit(f.RateLimit), QuotaWindow: f.QuotaWindow,
		PromptTokens: int64(f.Usage.PromptTokens), CompletionTokens: int64(f.Usage.CompletionTokens),
	}
}

func fromFinished(p *clusterpb.RequestFinished) actors.RequestFinished {
	return actors.RequestFinished{
		Seq: p.Seq, Status: int(p.Status), RateLimited: p.RateLimited, RetryAfter: time.Duration(p.RetryAfterNano), Failed: p.Failed, QuotaWindow: p.QuotaWindow,
		RateLimit: fromRateLimit(p.RateLimit),
		Usage:     llm.Usage{PromptTokens: int(p.PromptTokens), CompletionTokens: int(p.CompletionTokens)},
	}
}

// ---- learn-once state ----

// toLearned is l on the wire; nil when nothing was learned.
func toLearned(l *providers.Learned) *clusterpb.Learned {
	flags := l.Flags()
	if len(flags) == 0 {
		return nil
	}
	p := &clusterpb.Learned{}
	for _, f := range flags {
		p.Flags |= uint32(f)
		for _, m := range l.Models(f) {
			p.Models = append(p.Models, &clusterpb.ModelLesson{Flag: uint32(f), Model: m})
		}
	}
	return p
}

// mergeLearned adds p's facts to l (learn-once state only grows).
func mergeLearned(l *providers.Learned, p *clusterpb.Learned) {
	if p == nil {
		return
	}
	for _, m := range p.Models {
		if f := providers.LearnFlag(m.Flag); !l.HasModel(f, m.Model) {
			l.SetModel(f, m.Model)
		}
	}
	for f := providers.LearnFlag(1); f != 0 && uint32(f) <= p.Flags; f <<= 1 {
		if p.Flags&uint32(f) != 0 && !l.Has(f) {
			l.Set(f)
		}
	}
}

// toWire is the wire form of a time of this node's (its clock's Unix
// nanoseconds: another node reads it on its own clock), fromWire a time
// from the wire on this node's clock. A node's clock is the real one but
// for a test's skew (Config.clock): each process compares its own times
// with its own clock, so a clock that is off matters only where a time
// crosses to another node's clock, here, and where a lease's expiry
// (PostgreSQL's clock) is compared with the node's (sessionHost.acquire).
func (n *Node) toWire(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return unixNano(t.Add(n.skew()))
}

func (n *Node) fromWire(ns int64) time.Time {
	t := fromUnixNano(ns)
	if t.IsZero() {
		return t
	}
	return t.Add(-n.skew())
}

// until is t as a duration from now, for the wire (nil for no time):
// durations mean the same on every node's clock.
func until(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	d := int64(time.Until(t))
	return &d
}

// fromWireTime is a time from the wire: from its duration when the sender
// sent one (rel, as until made it), else from its Unix time.
func (n *Node) fromWireTime(abs int64, rel *int64) time.Time {
	if rel != nil {
		return time.Now().Add(time.Duration(*rel))
	}
	return n.fromWire(abs)
}

// now is the node's clock: the real one unless a test skewed it.
func (n *Node) now() time.Time {
	if n.cfg.clock != nil {
		return n.cfg.clock()
	}
	return time.Now()
}

// skew is how far the node's clock is ahead of the real one.
func (n *Node) skew() time.Duration {
	if n.cfg.clock == nil {
		return 0
	}
	return time.Until(n.cfg.clock())
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// ---- errors ----

// wireErr is the JSON of a Failure: the fields of the llm error types, so
// that the caller gets the same typed error it would get locally.
type wireErr struct {
	Kind        string                `json:"kind"`
	Msg         string                `json:"msg,omitempty"`
	Config      *llm.ConfigError      `json:"config,omitempty"`
	API         *llm.APIError         `json:"api,omitempty"`
	RateLimit   *llm.RateLimitError   `json:"rate_limit,omitempty"`
	Unsupported *llm.UnsupportedError `json:"unsupported,omitempty"`
	Provider    string                `json:"provider,omitempty"`
	Partial     *llm.ChatResult       `json:"partial,omitempty"`
	Inner       *wireErr              `json:"inner,omitempty"`
	Resolve     *resolveErr           `json:"resolve,omitempty"`
	RetryAt     time.Time             `json:"retry_at,omitzero"`
}

// resolveErr is a session.ResolveError on the wire.
type resolveErr struct {
	Session, Interrupt, Reason string
	Approved, Expired          bool
	Err                        *wireErr
}

// sentinels are errors that cross a node by name.
var sentinels = map[string]error{
	"idle_timeout":      llm.ErrIdleTimeout,
	"premature_close":   llm.ErrPrematureClose,
	"overloaded":        llm.ErrOverloaded,
	"rate_limited":      llm.ErrRateLimited,
	"unsupported":       llm.ErrUnsupported,
	"canceled":          context.Canceled,
	"deadline":          context.DeadlineExceeded,
	"node_lost":         ErrNodeLost,
	"closed":            actors.ErrClosed,
	"node_closed":       ErrClosed,
	"session_closed":    session.ErrClosed,
	"session_unknown":   session.ErrUnknownSession,
	"no_active_turn":    session.ErrNoActiveTurn,
	"unknown_interrupt": session.ErrUnknownInterrupt,
	"already_resolved":  session.ErrAlreadyResolved,
	"stale_interrupt":   session.ErrStaleInterrupt,
	"lease_held":        store.ErrLeaseHeld,
	"lease_lost":        store.ErrLeaseLost,
}

func encodeErr(err error) *wireErr {
	if err == nil {
		return nil
	}
	w := &wireErr{Kind: "other", Msg: err.Error()}
	var (
		se  *llm.StreamError
		rl  *llm.RateLimitError
		ae  *llm.APIError
		ce  *llm.ConfigError
		ue  *llm.UnsupportedError
		te  *llm.TransportError
		de  *llm.DecodeError
		ref *actors.RefusedError
		re  *session.ResolveError
	)
	switch {
	case errors.As(err, &se):
		w.Kind, w.Partial, w.Inner = "stream", se.Partial, encodeErr(se.Err)
	case errors.As(err, &ref):
		w.Kind, w.Provider, w.Inner, w.RetryAt = "refused", ref.Provider, encodeErr(ref.Err), ref.RetryAt
	case errors.As(err, &rl):
		w.Kind, w.RateLimit = "rate_limit", rl
	case errors.As(err, &ae):
		w.Kind, w.API = "api", ae
	case errors.As(err, &ce):
		w.Kind, w.Config = "config", ce
	case errors.As(err, &ue):
		w.Kind, w.Unsupported = "unsupported_op", ue
	case errors.As(err, &te):
		w.Kind, w.Provider, w.Inner = "transport", te.Provider, encodeErr(te.Err)
	case errors.As(err, &de):
		w.Kind, w.Provider, w.Inner = "decode", de.Provider, encodeErr(de.Err)
	case actors.ErrCoolingDown(err):
		w.Kind = "cooling_down"
	case errors.As(err, &re):
		w.Kind = "resolve"
		w.Resolve = &resolveErr{Session: re.Session, Interrupt: re.Interrupt, Approved: re.Approved, Expired: re.Expired, Reason: re.Reason, Err: encodeErr(re.Err)}
	default:
		for name, s := range sentinels {
			if errors.Is(err, s) {
				w.Kind = name
				break
			}
		}
	}
	return w
}

func (w *wireErr) decode() error {
	if w == nil {
		return nil
	}
	switch w.Kind {
	case "stream":
		return &llm.StreamError{Partial: w.Partial, Err: orOther(w.Inner.decode(), w.Msg)}
	case "refused":
		return &actors.RefusedError{Provider: w.Provider, Err: orOther(w.Inner.decode(), w.Msg), RetryAt: w.RetryAt}
	case "rate_limit":
		if w.RateLimit != nil {
			return w.RateLimit
		}
	case "api":
		if w.API != nil {
			return w.API
		}
	case "config":
		if w.Config != nil {
			return w.Config
		}
	case "unsupported_op":
		if w.Unsupported != nil {
			return w.Unsupported
		}
	case "transport":
		return &llm.TransportError{Provider: w.Provider, Err: orOther(w.Inner.decode(), w.Msg)}
	case "decode":
		return &llm.DecodeError{Provider: w.Provider, Err: orOther(w.Inner.decode(), w.Msg)}
	case "cooling_down":
		return actors.CoolingDown()
	case "resolve":
		if r := w.Resolve; r != nil {
			return &session.ResolveError{Session: r.Session, Interrupt: r.Interrupt, Approved: r.Approved, Expired: r.Expired, Reason: r.Reason, Err: orOther(r.Err.decode(), w.Msg)}
		}
	}
	if s, ok := sentinels[w.Kind]; ok {
		return s
	}
	return &RemoteError{Msg: w.Msg}
}

func orOther(err error, msg string) error {
	if err != nil {
		return err
	}
	return &RemoteError{Msg: msg}
}

// RemoteError is an error from another node whose type does not cross:
// its text only.
type RemoteError struct{ Msg string }

func (e *RemoteError) Error() string { return e.Msg }

func toFailure(err error) *clusterpb.Failure {
	if err == nil {
		return nil
	}
	w := encodeErr(err)
	b, jerr := json.Marshal(w)
	if jerr != nil {
		b = nil
	}
	return &clusterpb.Failure{Kind: w.Kind, Json: b, Message: err.Error()}
}

func fromFailure(f *clusterpb.Failure) error {
	if f == nil {
		return nil
	}
	var w wireErr
	if len(f.Json) == 0 || json.Unmarshal(f.Json, &w) != nil {
		return &RemoteError{Msg: f.Message}
	}
	return w.decode()
}

// negate turns a duration until a past time into its age, and back.
func negate(d *int64) *int64 {
	if d == nil {
		return nil
	}
	v := -*d
	return &v
}
