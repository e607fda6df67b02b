package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/chorusrt/chorus/internal/actorkit"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/store"
	"github.com/chorusrt/chorus/telemetry"
)

func init() {
	// A cluster node's Manager spawns its sessions into the node's actor
	// system.
	actorkit.SetSessionHook(func(opt any, s *actorkit.System) (any, error) {
		return newManager(opt.(Options), s)
	})
}

// Defaults of Options.
const (
	DefaultToolTimeout      = time.Minute
	DefaultModelTimeout     = 10 * time.Minute
	DefaultRetryBackoff     = 200 * time.Millisecond
	DefaultModelAttempts    = 3
	DefaultToolAttempts     = 3
	DefaultMaxModelCalls    = 50
	DefaultEventBuffer      = 1024
	DefaultEventBufferBytes = 10 << 20
	DefaultIdleTimeout      = 5 * time.Minute
	DefaultTriggerRatio     = 0.8
	DefaultKeepTurns        = 2
	maxSessionIDLen         = 256
	defaultSummaryMaxBytes  = 200_000
)

// CompactionPolicy turns compaction on: before a turn's first model call,
// when the estimated input reaches TriggerRatio of ContextWindowTokens, a
// summary of the turns before the last KeepTurns is written to the journal,
// and from then on the model gets the summary instead of those turns.
type CompactionPolicy struct {
	// ContextWindowTokens is the model's context window.
	ContextWindowTokens int
	// TriggerRatio is the share of the window at which compaction runs
	// (default 0.8).
	TriggerRatio float64
	// KeepTurns is how many recent turns stay verbatim (default 2).
	KeepTurns int
	// ReservedTokens is added to the estimate for input the session cannot
	// see.
	ReservedTokens int
	// SummaryModel is the model of the summary call (default ModelName).
	SummaryModel string
}

// Options configures a Manager.
type Options struct {
	// Journal holds every session's records (required). The Manager does
	// not close it.
	Journal store.Journal
	// Model serves model steps and summaries (required), under ModelName
	// ("provider/model" for a runtime; required).
	Model     Model
	ModelName string
	// ModelStep, when set, runs the RunModel steps instead of Model (which
	// then serves compaction summaries only, and may be nil without
	// Compaction; ModelName may then be empty).
	ModelStep ModelStep
	// Instructions is the system message of every model call.
	Instructions string
	// Tools are the tools the model may call.
	Tools []Tool
	// Policy is the caller's policy per tool name.
	Policy map[string]ToolPolicy
	// DefaultEffect is the effect of a tool with neither a policy effect
	// nor its own declaration (default unclassified).
	DefaultEffect Effect
	// ParallelWrites runs every call of a model response at once, writes
	// included, as sessions did before writes were ordered. By default
	// (false) the reads of a response run in parallel while its writes
	// (idempotent_write, non_idempotent_write, unclassified) run one at a
	// time in the model's order, and once one of them ends failed,
	// rejected or outcome_unknown the later ones end failed, skipped,
	// without running. A batch keeps the order it began with across
	// restarts.
	ParallelWrites bool
	// ToolTimeout bounds one tool attempt (default 1 minute).
	ToolTimeout time.Duration
	// ModelTimeout bounds one model attempt (default 10 minutes).
	ModelTimeout time.Duration
	// RetryBackoff is the delay before a second attempt of a tool or model
	// step, doubling after each failure (default 200ms).
	RetryBackoff time.Duration
	// ModelAttempts is how many attempts a RunModel step gets before the
	// turn fails (default 3). A crash during the call counts as one.
	ModelAttempts int
	// MaxModelCalls caps the RunModel steps of one turn (default 50).
	MaxModelCalls int
	// ApprovalTimeout, when positive, gives every approval a deadline;
	// a call whose approval is still pending then is rejected.
	ApprovalTimeout time.Duration
	// Compaction, when set, turns compaction on.
	Compaction *CompactionPolicy
	// Media holds image and document bytes (default: a LocalMedia in the
	// user cache directory, chorus/media).
	Media MediaStore
	// EventBuffer bounds each session's event stream, in events (default
	// 1024).
	EventBuffer int
	// EventBufferBytes bounds each session's event stream in bytes too
	// (default 10 MiB): past either bound the oldest events are dropped.
	// An event counts its text fields plus a fixed overhead; the newest
	// event is always held.
	EventBufferBytes int
	// IdleTimeout passivates a session that has had no work for that long
	// (default 5 minutes; negative: never): its actor stops, its state
	// leaves memory, and the next call naming it activates it again from
	// the journal. No work means no step running or waiting for a retry,
	// no queued message and no caller in Wait; a turn that waits only for
	// approvals has none, and activates again on Resolve or at its
	// earliest approval deadline.
	IdleTimeout time.Duration
	// Logger receives the Manager's log lines, protoactor's included
	// (default: discarded).
	Logger *slog.Logger
	// Telemetry, when set, is where each turn's invoke_agent span, its
	// tool calls' execute_tool spans and the approvals metric go (see
	// telemetry.go); nil: the global OpenTelemetry providers.
	Telemetry *telemetry.Telemetry
}

// Manager runs sessions: one actor per session, the single writer of its
// journal. It is safe for concurrent use.
type Manager struct {
	opt     Options
	tel     *telemetry.Telemetry
	tools   map[string]*Tool
	defs    []llm.Tool
	log     *slog.Logger
	kit     *actorkit.System // the system the sessions' actors run in
	sys     *actor.ActorSystem
	base    context.Context // ends when Close gives up waiting
	cancel  context.CancelFunc
	work    sync.WaitGroup // model and tool goroutines
	subs    sync.WaitGroup // event subscriptions
	closing atomic.Bool

	mu      sync.Mutex
	actors  map[string]*entry
	logs    map[string]*eventLog
	seqs    map[string]numbering   // the event numbering of a session whose stream was dropped
	parked  map[string]*time.Timer // passivated sessions whose turn waits for approvals; a timer wakes one at its deadline
	leaving map[*entry]string      // actors passivated for idleness that have not stopped yet
	closed  bool

	// carried holds the pending approvals of parked sessions, by call,
	// with when they were asked (telemetry.go). m.mu guards it.
	carried map[string]map[string]time.Time

	// hook, when set (tests only), is called at crash points.
	hook func(point string)
}

// entry is the Manager's handle on a session actor.
type entry struct {
	pid     *actor.PID
	stopped chan struct{}
	calls   int // callers holding the entry, guarded by Manager.mu: no idle passivation meanwhile
	mu      sync.Mutex
	err     error // why it stopped, when it stopped on its own
}

func (e *entry) setErr(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.err = err
}

func (e *entry) getErr() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// New returns a Manager. It starts no session: sessions are activated by
// the first call naming them, and Recover resumes those a crash
// interrupted. Their actors run in the process's shared actor system.
func New(opt Options) (*Manager, error) { return newManager(opt, nil) }

// newManager returns a Manager whose actors run in kit (nil: the shared
// system).
func newManager(opt Options, kit *actorkit.System) (*Manager, error) {
	if opt.Journal == nil {
		return nil, &llm.ConfigError{Field: "Journal", Msg: "is nil"}
	}
	if opt.Model == nil && (opt.ModelStep == nil || opt.Compaction != nil) {
		return nil, &llm.ConfigError{Field: "Model", Msg: "is nil"}
	}
	if opt.ModelName == "" && opt.ModelStep == nil {
		return nil, &llm.ConfigError{Field: "ModelName", Msg: "is empty"}
	}
	if opt.DefaultEffect == "" {
		opt.DefaultEffect = EffectUnclassified
	}
	if !opt.DefaultEffect.Valid() {
		return nil, &llm.ConfigError{Field: "DefaultEffect", Msg: fmt.Sprintf("unknown effect %q", opt.DefaultEffect)}
	}
	orDefault(&opt.ToolTimeout, DefaultToolTimeout)
	orDefault(&opt.ModelTimeout, DefaultModelTimeout)
	orDefault(&opt.RetryBackoff, DefaultRetryBackoff)
	orDefault(&opt.ModelAttempts, DefaultModelAttempts)
	orDefault(&opt.MaxModelCalls, DefaultMaxModelCalls)
	orDefault(&opt.EventBuffer, DefaultEventBuffer)
	orDefault(&opt.EventBufferBytes, DefaultEventBufferBytes)
	if opt.IdleTimeout == 0 { // negative: never
		opt.IdleTimeout = DefaultIdleTimeout
	}
	if opt.Media == nil {
		opt.Media = NewLocalMedia(defaultMediaDir())
	}
	if c := opt.Compaction; c != nil {
		cp := *c
		if cp.ContextWindowTokens <= 0 {
			return nil, &llm.ConfigError{Field: "Compaction.ContextWindowTokens", Msg: "must be positive"}
		}
		if cp.TriggerRatio <= 0 || cp.TriggerRatio > 1 {
			cp.TriggerRatio = DefaultTriggerRatio
		}
		if cp.KeepTurns <= 0 {
			cp.KeepTurns = DefaultKeepTurns
		}
		if cp.SummaryModel == "" {
			cp.SummaryModel = opt.ModelName
		}
		opt.Compaction = &cp
	}
	m := &Manager{opt: opt, tel: opt.Telemetry.OrGlobal(), tools: map[string]*Tool{}, actors: map[string]*entry{}, logs: map[string]*eventLog{},
		seqs: map[string]numbering{}, parked: map[string]*time.Timer{}, leaving: map[*entry]string{}}
	for i := range opt.Tools {
		t := &opt.Tools[i]
		f := fmt.Sprintf("Tools[%d]", i)
		if t.Def.Name == "" {
			return nil, &llm.ConfigError{Field: f + ".Def.Name", Msg: "is empty"}
		}
		if t.Handler == nil {
			return nil, &llm.ConfigError{Field: f + ".Handler", Msg: "is nil"}
		}
		if t.Effect != "" && !t.Effect.Valid() {
			return nil, &llm.ConfigError{Field: f + ".Effect", Msg: fmt.Sprintf("unknown effect %q", t.Effect)}
		}
		if _, dup := m.tools[t.Def.Name]; dup {
			return nil, &llm.ConfigError{Field: f + ".Def.Name", Msg: fmt.Sprintf("tool %q is defined twice", t.Def.Name)}
		}
		m.tools[t.Def.Name] = t
		m.defs = append(m.defs, t.Def)
	}
	for name, p := range opt.Policy {
		if p.Effect != "" && !p.Effect.Valid() {
			return nil, &llm.ConfigError{Field: "Policy[" + name + "].Effect", Msg: fmt.Sprintf("unknown effect %q", p.Effect)}
		}
	}
	m.log = opt.Logger
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if kit == nil {
		kit = actorkit.Shared(opt.Logger)
	}
	m.kit, m.sys = kit, kit.Sys
	m.base, m.cancel = context.WithCancel(context.Background())
	return m, nil
}

// orDefault sets *v to def when it is zero or negative.
func orDefault[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Media returns the Manager's media store, for uploading images ahead of
// a message (MediaRef.Part references them).
func (m *Manager) Media() MediaStore { return m.opt.Media }

// resolved is a tool's effective policy.
type resolved struct {
	tool        *Tool
	effect      Effect
	approval    bool
	maxAttempts int
	backoff     time.Duration
	timeout     time.Duration
}

// policyFor resolves a tool's effect (the caller's policy, else the tool's
// declaration, else the default), approval (the policy's, else the
// effect's default; always when the tool requires it), attempts, backoff
// and timeout.
func (m *Manager) policyFor(name string) (resolved, bool) {
	t, ok := m.tools[name]
	if !ok {
		return resolved{}, false
	}
	p := m.opt.Policy[name]
	r := resolved{tool: t, effect: m.opt.DefaultEffect, backoff: m.opt.RetryBackoff, timeout: m.opt.ToolTimeout}
	switch {
	case p.Effect != "":
		r.effect = p.Effect
	case t.Effect != "":
		r.effect = t.Effect
	}
	r.approval = r.effect.approvalByDefault()
	if p.RequireApproval != nil {
		r.approval = *p.RequireApproval
	}
	if t.RequireApproval {
		r.approval = true
	}
	r.maxAttempts = 1
	if r.effect.retryable() {
		r.maxAttempts = DefaultToolAttempts
		if p.MaxAttempts > 0 {
			r.maxAttempts = p.MaxAttempts
		}
	}
	if p.Backoff > 0 {
		r.backoff = p.Backoff
	}
	if t.Timeout > 0 {
		r.timeout = t.Timeout
	}
	if p.Timeout > 0 {
		r.timeout = p.Timeout
	}
	return r, true
}

func checkID(id string) error {
	if id == "" {
		return &llm.ConfigError{Field: "session", Msg: "is empty"}
	}
	if len(id) > maxSessionIDLen || !utf8.ValidString(id) || strings.IndexByte(id, 0) >= 0 {
		return &llm.ConfigError{Field: "session", Msg: "must be valid UTF-8 without NUL bytes, at most 256 bytes"}
	}
	return nil
}

// numbering is where a session's event numbers began in this process and
// the next one.
type numbering struct{ origin, next uint64 }

// eventLogLocked returns the event stream of a session, creating it; a
// new one numbers its events on from where a dropped one stopped, or else
// from eventOrigin. m.mu is held.
func (m *Manager) eventLogLocked(id string) *eventLog {
	l, ok := m.logs[id]
	if !ok {
		n, kept := m.seqs[id]
		if !kept {
			o := eventOrigin()
			n = numbering{o, o}
		}
		l = newEventLog(m.opt.EventBuffer, m.opt.EventBufferBytes, n.origin, n.next)
		delete(m.seqs, id)
		if m.closed {
			l.close()
		}
		m.logs[id] = l
	}
	return l
}

// actorFor returns the actor of a session, spawning (and so recovering) it.
// The caller holds the entry until it calls done.
func (m *Manager) actorFor(id string) (*entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for {
		if m.closed || m.closing.Load() {
			return nil, ErrClosed
		}
		e, ok := m.actors[id]
		if !ok {
			break
		}
		select {
		case <-e.stopped:
		default:
			if e.getErr() == nil {
				e.calls++
				return e, nil
			}
			// A session stopped by a journal failure is stopping: wait for
			// it, so that the next actor recovers from the journal.
			m.mu.Unlock()
			<-e.stopped
			m.mu.Lock()
			continue
		}
		break
	}
	m.unparkLocked(id)
	l := m.eventLogLocked(id)
	e := &entry{stopped: make(chan struct{}), calls: 1}
	props := actor.PropsFromProducer(func() actor.Actor { return newSessionActor(m, id, e, l) })
	e.pid = m.sys.Root.SpawnPrefix(props, "session-")
	m.actors[id] = e
	return e, nil
}

// reply is every actor answer.
type reply struct {
	v   any
	err error
}

// call sends msg to the session's actor and waits for its reply.
func (m *Manager) call(ctx context.Context, id string, msg any) (any, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	for try := 0; ; try++ {
		e, err := m.actorFor(id)
		if err != nil {
			return nil, err
		}
		v, err := m.ask(ctx, e, msg)
		m.done(e)
		if errors.Is(err, errRestarted) && try < 3 {
			continue
		}
		if errors.Is(err, errNotDelivered) {
			// The actor stopped before it handled the message: nothing was
			// done, so a new actor can take it.
			<-e.stopped
			if try < 3 {
				continue
			}
			if err := e.getErr(); err != nil {
				return nil, err
			}
			return nil, ErrClosed
		}
		return v, err
	}
}

// errNotDelivered: the message went to a stopped actor; errRestarted: the
// actor restarted (after a panic) while the request waited.
var (
	errNotDelivered = errors.New("session: message not delivered")
	errRestarted    = errors.New("session: actor restarted")
)

// ask sends msg to the session's actor and waits for its reply. A reply
// sent before the actor stopped wins over its stop; otherwise, since every
// request is answered when it is handled (waiters too, when the actor
// stops), a request the stopped actor did not answer was not handled.
func (m *Manager) ask(ctx context.Context, e *entry, msg any) (any, error) {
	r, err := actorkit.Ask[reply](ctx, m.sys, e.pid, msg, actorkit.AskOptions{Until: e.stopped})
	switch {
	case errors.Is(err, actorkit.ErrStopped), errors.Is(err, actorkit.ErrNotDelivered):
		return nil, errNotDelivered
	case err != nil && ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		return nil, fmt.Errorf("session: %w", err)
	}
	return r.v, r.err
}

// Send gives the session a user message, durably: on a nil return it is
// in the journal. An idle session starts a turn with it; during a turn it
// is queued and taken at the next step boundary (before the next model
// call). Inline image and document bytes go to the media store first; the
// journal holds references. The first Send creates the session.
func (m *Manager) Send(ctx context.Context, id string, msg llm.Message) error {
	if msg.Role == "" {
		msg.Role = llm.RoleUser
	}
	if msg.Role != llm.RoleUser {
		return &llm.ConfigError{Field: "message.role", Msg: "a session takes user messages"}
	}
	if msg.Content == "" && len(msg.Parts) == 0 {
		return &llm.ConfigError{Field: "message.content", Msg: "is empty"}
	}
	if len(msg.ToolCalls) > 0 || msg.ToolCallID != "" {
		return &llm.ConfigError{Field: "message", Msg: "a user message carries no tool calls or results"}
	}
	if err := checkID(id); err != nil {
		return err
	}
	parts, _, err := storeParts(ctx, m.opt.Media, msg.Parts)
	if err != nil {
		return fmt.Errorf("session %q: storing media: %w", id, err)
	}
	msg.Parts = parts
	_, err = m.call(ctx, id, msgSend{Msg: toWire(msg), From: sentFrom(ctx)})
	return err
}

// Resolve answers the approval interrupt of a session. It is accepted
// once: a later resolution of the same interrupt gets a *ResolveError
// wrapping ErrAlreadyResolved, one after the deadline or the end of its
// turn ErrStaleInterrupt, an unknown id ErrUnknownInterrupt. An approved
// call then runs; a rejected one ends rejected with reason, which the
// model sees.
func (m *Manager) Resolve(ctx context.Context, id, interrupt string, approved bool, reason string) error {
	_, err := m.call(ctx, id, msgResolve{Interrupt: interrupt, Approved: approved, Reason: reason, From: sentFrom(ctx)})
	return err
}

// CancelTurn stops the session's turn between steps: running tool calls
// and approvals are not started anew, a running model call is cancelled,
// and once the running tool attempts end the turn ends cancelled with a
// note of what ran. It returns once the request is durable, or
// ErrNoActiveTurn.
func (m *Manager) CancelTurn(ctx context.Context, id string) error {
	_, err := m.call(ctx, id, msgCancel{})
	return err
}

// Snapshot is a session's state.
type Snapshot struct {
	ID string
	// Step is the current step: AwaitUserMessage between turns.
	Step StepKind
	// Turn is the current (or last) turn, StepNum the last step number in it.
	Turn    int
	StepNum int
	// History is every stored message, as stored: media parts are
	// references (URL with MediaScheme), failed turns are their user
	// messages and note.
	History []llm.Message
	// Queued are user messages not yet taken by a turn.
	Queued []llm.Message
	// Pending are the approval interrupts waiting for a resolution.
	Pending []Interrupt
	// Tools are the records of every tool call, oldest first.
	Tools []ToolRecord
	// Usage sums every model call; ModelCalls counts them.
	Usage      llm.Usage
	ModelCalls int
	// Summary is the latest compaction summary, covering turns up to
	// SummaryThrough.
	Summary        string
	SummaryThrough int
	// Last is how the last finished turn ended.
	Last TurnResult
	// Seq is the session's last journal sequence number.
	Seq int64
	// Passive says the snapshot was read from the journal (Peek,
	// ReadSnapshot): no actor of this Manager runs the session, and Step
	// is the journal's (a turn in progress there resumes, with ResumeTurn
	// or CallTool, once the session is activated).
	Passive bool
}

// Interrupt is a pending approval.
type Interrupt struct {
	ID   string
	Turn int
	// Call is the call waiting for approval.
	Call ToolRecord
	// Deadline is zero when the approval has none.
	Deadline time.Time
}

// Snapshot returns the session's history, pending interrupts, tool
// records, usage and current step.
func (m *Manager) Snapshot(ctx context.Context, id string) (*Snapshot, error) {
	v, err := m.call(ctx, id, msgSnapshot{})
	if err != nil {
		return nil, err
	}
	s, _ := v.(*Snapshot)
	return s, nil
}

// Wait returns once the session has no turn in progress and no queued
// message, with how its last turn ended. A turn waiting for approval keeps
// Wait waiting.
func (m *Manager) Wait(ctx context.Context, id string) (TurnResult, error) {
	v, err := m.call(ctx, id, msgWait{})
	if err != nil {
		return TurnResult{}, err
	}
	r, _ := v.(TurnResult)
	return r, nil
}

// Events streams the session's events with Seq > after: from 0 for every
// event still held. The stream is bounded (Options.EventBuffer): a reader
// that falls behind gets an EventGap and continues with the oldest event
// held; the session never waits for a reader. Call cancel when done; the
// channel closes then, or when the Manager closes. Events are not durable:
// a restarted process (or another cluster node) numbers the session's
// events on from its clock (see Event.Seq), so a number from an earlier
// process is below its numbering, and a reader resuming after it (or
// after a number this process never gave) gets an EventGap first and every
// event held, never skipping any. A passivated session's stream is dropped
// unless someone reads it (its numbers go on when it is activated again):
// a later reader gets a gap for the events it held.
func (m *Manager) Events(id string, after uint64) (<-chan Event, func()) {
	out := make(chan Event)
	m.mu.Lock()
	l := m.eventLogLocked(id)
	l.subs++
	m.mu.Unlock()
	stop := make(chan struct{})
	var once sync.Once
	done := make(chan struct{})
	m.subs.Add(1)
	go func() {
		defer m.subs.Done()
		defer close(done)
		l.subscribe(id, after, out, stop)
		m.mu.Lock()
		l.subs--
		m.releaseLogLocked(id)
		m.mu.Unlock()
	}()
	return out, func() {
		once.Do(func() { close(stop) })
		<-done
	}
}

// Close stops the Manager: sessions start no new step, running model calls
// are cancelled, and Close waits (until ctx ends) for running tool attempts
// to end and be recorded. An attempt still running when ctx ends has its
// context cancelled and is left unrecorded: the next process treats it as
// interrupted by a crash. Close does not close the journal.
func (m *Manager) Close(ctx context.Context) error {
	if !m.closing.CompareAndSwap(false, true) {
		return nil
	}
	m.mu.Lock()
	entries := make([]*entry, 0, len(m.actors)+len(m.leaving))
	for _, e := range m.actors {
		entries = append(entries, e)
	}
	for e := range m.leaving {
		entries = append(entries, e)
	}
	for id := range m.parked {
		m.unparkLocked(id)
	}
	m.mu.Unlock()
	var firstErr error
	for _, e := range entries {
		if _, err := m.ask(ctx, e, msgClose{}); err != nil && !errors.Is(err, ErrClosed) && firstErr == nil && ctx.Err() != nil {
			firstErr = err
		}
	}
	m.cancel()
	waited := make(chan struct{})
	go func() { m.work.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-ctx.Done():
		if firstErr == nil {
			firstErr = ctx.Err()
		}
	}
	for _, e := range entries {
		select {
		case <-e.stopped:
		default:
			_ = m.sys.Root.StopFuture(e.pid).Wait()
		}
	}
	m.releaseCarried() // telemetry.go
	m.mu.Lock()
	m.closed = true
	for _, l := range m.logs {
		l.close()
	}
	m.mu.Unlock()
	m.subs.Wait()
	m.kit.Release() // the system stays: runtimes and other managers may use it
	return firstErr
}

// hookAt calls the test hook.
func (m *Manager) hookAt(point string) {
	if m.hook != nil {
		m.hook(point)
	}
}
