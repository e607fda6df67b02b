package console

import (
	"context"
	"errors"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/chorusrt/chorus/batch"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/runtime"
	"github.com/chorusrt/chorus/session"
	"github.com/chorusrt/chorus/store"
)

// The API's JSON shapes (the pages render the same values).

// CredentialsView is GET /api/console/credentials.
type CredentialsView struct {
	At          time.Time        `json:"at"`
	Credentials []CredentialView `json:"credentials"`
	Aliases     []AliasView      `json:"aliases"`
	// Routes are the routed aliases (runtime.WithRoutedAlias): each
	// target's share of the calls and its health.
	Routes    []RouteView `json:"routes"`
	Providers []string    `json:"providers"`
	// Cache counts the runtime's response cache (runtime.WithCache);
	// absent without one.
	Cache *CacheView `json:"cache,omitempty"`
}

// CacheView is the runtime's response cache: what it answered and
// stored (cache.Stats).
type CacheView struct {
	Hits      int64 `json:"hits"`
	Misses    int64 `json:"misses"`
	Coalesced int64 `json:"coalesced"`
	Stored    int64 `json:"stored"`
	Skipped   int64 `json:"skipped"`
	Errors    int64 `json:"errors"`
}

// CredentialView is one provider credential: named by its key's
// fingerprint, never by the key.
type CredentialView struct {
	Provider    string `json:"provider"`
	Credential  int    `json:"credential"`
	Fingerprint string `json:"fingerprint"`
	Queued      int    `json:"queued"`
	InFlight    int    `json:"in_flight"`
	Requests    int64  `json:"requests"`
	Failed      int64  `json:"failed"`
	Attempts    int64  `json:"attempts"`
	Retries     int64  `json:"retries"`
	RateLimited int64  `json:"rate_limited"`
	Restarts    int64  `json:"restarts"`
	// The limits the provider reported (0: not reported) and the runtime's
	// own remaining budget since its last report (-1: not known).
	LimitRequests     int   `json:"limit_requests"`
	LimitTokens       int   `json:"limit_tokens"`
	RemainingRequests int   `json:"remaining_requests"`
	RemainingTokens   int   `json:"remaining_tokens"`
	ResetRequestsMS   int64 `json:"reset_requests_ms"`
	ResetTokensMS     int64 `json:"reset_tokens_ms"`
	// CooldownUntil is set while the credential cools down after a 429.
	CooldownUntil *time.Time `json:"cooldown_until,omitempty"`
	// Learned are the endpoint's learned fallbacks (learn-once flags).
	Learned []string   `json:"learned"`
	Costs   []CostView `json:"costs"`
}

// CostView is what one model's priced answers cost.
type CostView struct {
	Model string  `json:"model"`
	USD   float64 `json:"usd"`
	Calls int64   `json:"calls"`
}

// AliasView is an alias and its targets, in the order they serve.
type AliasView struct {
	Name    string   `json:"name"`
	Targets []string `json:"targets"`
	// Strategy is a routed alias's strategy (its targets in Routes);
	// empty for a plain alias, an ordered fallback list.
	Strategy string `json:"strategy,omitempty"`
	// Serving is the fallback step that serves a call now: the index in
	// Targets of the first target whose provider has a credential not
	// cooling down (the runtime falls back past a target whose credentials
	// all cool down), -1 when every target's do. ServingTarget is that
	// target.
	Serving       int    `json:"serving"`
	ServingTarget string `json:"serving_target,omitempty"`
}

// RouteView is a routed alias: its strategy and what it knows of each
// target (runtime.RouteStats).
type RouteView struct {
	Alias    string            `json:"alias"`
	Strategy string            `json:"strategy"`
	Targets  []RouteTargetView `json:"targets"`
}

// RouteTargetView is one target of a routed alias.
type RouteTargetView struct {
	Model  string  `json:"model"`
	Weight float64 `json:"weight"`
	// Share is the part of the alias's calls the strategy put first on
	// it (Picked over every target's), 0 before any call.
	Share    float64 `json:"share"`
	Picked   int64   `json:"picked"`
	Served   int64   `json:"served"`
	Failed   int64   `json:"failed"`
	InFlight int64   `json:"in_flight"`
	// ErrorRate is the failed share of its recent calls.
	ErrorRate float64 `json:"error_rate"`
	// TTFTMS and PerTokenMS are fastest's estimates (0: not sampled).
	TTFTMS     float64 `json:"ttft_ms"`
	PerTokenMS float64 `json:"per_token_ms"`
	// EjectedUntil is set while the target is ejected for its errors;
	// Ejections counts its ejections.
	EjectedUntil *time.Time `json:"ejected_until,omitempty"`
	Ejections    int64      `json:"ejections"`
	// InputTokens and CachedTokens add up the input of the answers it
	// served and the part read from the provider's prompt cache.
	InputTokens  int64 `json:"input_tokens"`
	CachedTokens int64 `json:"cached_tokens"`
}

// routeViews are the runtime's routed aliases at now.
func routeViews(routes []runtime.RouteStats, now time.Time) []RouteView {
	out := make([]RouteView, 0, len(routes))
	for _, r := range routes {
		v := RouteView{Alias: r.Alias, Strategy: string(r.Strategy), Targets: make([]RouteTargetView, 0, len(r.Targets))}
		var picked int64
		for _, t := range r.Targets {
			picked += t.Picked
		}
		for _, t := range r.Targets {
			tv := RouteTargetView{Model: t.Model, Weight: t.Weight, Picked: t.Picked, Served: t.Served, Failed: t.Failed, InFlight: t.InFlight,
				ErrorRate: t.ErrorRate, TTFTMS: float64(t.TTFT.Microseconds()) / 1000, PerTokenMS: float64(t.PerToken.Microseconds()) / 1000,
				Ejections: t.Ejections, InputTokens: t.InputTokens, CachedTokens: t.CachedTokens}
			if picked > 0 {
				tv.Share = float64(t.Picked) / float64(picked)
			}
			if t.EjectedUntil.After(now) {
				u := t.EjectedUntil.UTC()
				tv.EjectedUntil = &u
			}
			v.Targets = append(v.Targets, tv)
		}
		out = append(out, v)
	}
	return out
}

// aliasViews are the aliases, sorted by name, each with the step that
// serves now by the credentials' cooldowns.
func aliasViews(aliases map[string][]string, creds []CredentialView) []AliasView {
	ready := map[string]bool{} // providers with a credential not cooling down
	for _, c := range creds {
		if c.CooldownUntil == nil {
			ready[c.Provider] = true
		}
	}
	out := make([]AliasView, 0, len(aliases))
	for name, targets := range aliases {
		a := AliasView{Name: name, Targets: targets, Serving: -1}
		for i, t := range targets {
			if p, _, _ := strings.Cut(t, "/"); ready[p] {
				a.Serving, a.ServingTarget = i, t
				break
			}
		}
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (h *Handler) credentials() CredentialsView {
	v := CredentialsView{At: h.now().UTC(), Credentials: []CredentialView{}, Aliases: []AliasView{}, Routes: []RouteView{}, Providers: []string{}}
	if h.rt == nil {
		return v
	}
	now := h.now()
	for _, s := range h.rt.Stats() {
		c := CredentialView{Provider: s.Provider, Credential: s.Credential, Fingerprint: s.Fingerprint, Queued: s.Queued, InFlight: s.InFlight,
			Requests: s.Requests, Failed: s.Failed, Attempts: s.Attempts, Retries: s.Retries, RateLimited: s.RateLimited, Restarts: s.Restarts,
			LimitRequests: s.RateLimit.LimitRequests, LimitTokens: s.RateLimit.LimitTokens,
			RemainingRequests: s.RemainingRequests, RemainingTokens: s.RemainingTokens,
			ResetRequestsMS: s.RateLimit.ResetRequests.Milliseconds(), ResetTokensMS: s.RateLimit.ResetTokens.Milliseconds(),
			Learned: append([]string{}, s.Learned...), Costs: []CostView{}}
		if s.CooldownUntil.After(now) {
			t := s.CooldownUntil.UTC()
			c.CooldownUntil = &t
		}
		for _, mc := range s.Costs {
			c.Costs = append(c.Costs, CostView{Model: mc.Model, USD: mc.USD, Calls: mc.Calls})
		}
		v.Credentials = append(v.Credentials, c)
	}
	v.Aliases = aliasViews(h.rt.Aliases(), v.Credentials)
	v.Routes = routeViews(h.rt.Routes(), now)
	for i := range v.Aliases {
		for _, r := range v.Routes {
			if r.Alias == v.Aliases[i].Name {
				v.Aliases[i].Strategy = r.Strategy
			}
		}
	}
	v.Providers = append(v.Providers, h.rt.Providers()...)
	if st, ok := h.rt.CacheStats(); ok {
		v.Cache = &CacheView{Hits: st.Hits, Misses: st.Misses, Coalesced: st.Coalesced, Stored: st.Stored, Skipped: st.Skipped, Errors: st.Errors}
	}
	return v
}

// BatchesView is GET /api/console/batches.
type BatchesView struct {
	At   time.Time   `json:"at"`
	Jobs []BatchView `json:"jobs"`
}

// BatchView is one batch job's progress.
type BatchView struct {
	ID        string  `json:"id"`
	Name      string  `json:"name"`
	Running   bool    `json:"running"`
	Total     int     `json:"total"`
	Done      int     `json:"done"`
	Succeeded int     `json:"succeeded"`
	Failed    int     `json:"failed"`
	Skipped   int     `json:"skipped"`
	Bad       int     `json:"bad"`
	Tokens    int64   `json:"tokens"`
	Percent   float64 `json:"percent"`
	// Rate is lines per second; ETASeconds is -1 when it cannot be told.
	Rate           float64 `json:"rate"`
	ETASeconds     float64 `json:"eta_seconds"`
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	// CostUSD is set when at least one item was priced.
	CostUSD  *float64           `json:"cost_usd,omitempty"`
	Models   []BatchModelView   `json:"models"`
	BadLines []BatchBadLineView `json:"bad_lines"`
	Started  time.Time          `json:"started"`
	Finished *time.Time         `json:"finished,omitempty"`
	Error    string             `json:"error,omitempty"`
}

// BatchModelView is one model's row of a job's summary.
type BatchModelView struct {
	Model    string   `json:"model"`
	Requests int      `json:"requests"`
	Failed   int      `json:"failed"`
	Tokens   int64    `json:"tokens"`
	Native   int      `json:"native"`
	CostUSD  *float64 `json:"cost_usd,omitempty"`
}

// BatchBadLineView is a bad input line.
type BatchBadLineView struct {
	Line     int    `json:"line"`
	CustomID string `json:"custom_id,omitempty"`
	Error    string `json:"error"`
}

func batchView(p batch.Progress, now time.Time) BatchView {
	v := BatchView{ID: p.ID, Name: p.Name, Running: p.Running(), Total: p.Total, Done: p.Done, Succeeded: p.Succeeded,
		Failed: p.Failed, Skipped: p.Skipped, Bad: p.Bad, Tokens: p.Tokens, Rate: p.Rate(now), ETASeconds: -1,
		ElapsedSeconds: p.Elapsed(now).Seconds(), Started: p.Started.UTC(), Error: p.Err,
		Models: []BatchModelView{}, BadLines: []BatchBadLineView{}}
	if p.Total > 0 {
		v.Percent = min(100, 100*float64(p.Done+p.Skipped)/float64(p.Total))
	} else if !p.Running() {
		v.Percent = 100
	}
	if eta, ok := p.ETA(now); ok {
		v.ETASeconds = eta.Seconds()
	}
	if p.Priced > 0 {
		c := p.Cost.USD
		v.CostUSD = &c
	}
	if !p.Running() {
		f := p.Finished.UTC()
		v.Finished = &f
	}
	for _, m := range p.Models {
		mv := BatchModelView{Model: m.Model, Requests: m.Requests, Failed: m.Failed, Tokens: m.Tokens, Native: m.Native}
		if m.Priced > 0 {
			c := m.Cost.USD
			mv.CostUSD = &c
		}
		v.Models = append(v.Models, mv)
	}
	for _, b := range p.BadLines {
		v.BadLines = append(v.BadLines, BatchBadLineView{Line: b.Line, CustomID: b.CustomID, Error: b.Error})
	}
	return v
}

func (h *Handler) batches() BatchesView {
	now := h.now()
	v := BatchesView{At: now.UTC(), Jobs: []BatchView{}}
	if h.opt.Batches == nil {
		return v
	}
	for _, p := range h.opt.Batches.Jobs() {
		v.Jobs = append(v.Jobs, batchView(p, now))
	}
	return v
}

// Session states, as the list filters them.
const (
	StateWaitingApproval = "waiting_approval"
	StateRunning         = "running"
	StateFailed          = "failed"
	StateIdle            = "idle"
)

// SessionsView is GET /api/console/sessions.
type SessionsView struct {
	Sessions []SessionSummary `json:"sessions"`
	// Counts are the sessions per state, before the filter.
	Counts map[string]int `json:"counts"`
	// Truncated says the journal holds more sessions than the list looked at.
	Truncated bool `json:"truncated,omitempty"`
}

// SessionSummary is one session in the list.
type SessionSummary struct {
	ID    string `json:"id"`
	State string `json:"state"`
	Step  string `json:"step"`
	Turn  int    `json:"turn"`
	// Pending counts the approvals waiting.
	Pending    int       `json:"pending"`
	Queued     int       `json:"queued"`
	LastStatus string    `json:"last_status,omitempty"`
	LastError  string    `json:"last_error,omitempty"`
	ModelCalls int       `json:"model_calls"`
	Usage      UsageView `json:"usage"`
	Seq        int64     `json:"seq"`
	// Passive says the state was read from the journal: no actor of this
	// process runs the session (looking at it does not activate it).
	Passive bool `json:"passive,omitempty"`
}

// UsageView is token usage (prompt: uncached input only).
type UsageView struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	CacheReadTokens  int `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int `json:"cache_write_tokens,omitempty"`
	ReasoningTokens  int `json:"reasoning_tokens,omitempty"`
}

func usageView(u llm.Usage) UsageView {
	return UsageView{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, CacheReadTokens: u.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens, ReasoningTokens: u.ReasoningTokens}
}

// stateOf classifies a session.
func stateOf(s *session.Snapshot) string {
	switch {
	case len(s.Pending) > 0:
		return StateWaitingApproval
	case s.Step != session.StepAwaitUserMessage || len(s.Queued) > 0:
		return StateRunning
	case s.Last.Status == session.TurnFailed:
		return StateFailed
	}
	return StateIdle
}

func summaryOf(s *session.Snapshot) SessionSummary {
	return SessionSummary{ID: s.ID, State: stateOf(s), Step: string(s.Step), Turn: s.Turn, Pending: len(s.Pending), Queued: len(s.Queued),
		LastStatus: string(s.Last.Status), LastError: s.Last.Error, ModelCalls: s.ModelCalls, Usage: usageView(s.Usage), Seq: s.Seq, Passive: s.Passive}
}

var errNoSessions = errors.New("console: no session manager")

// snapshots reads the listed sessions (the last ListLimit ids, and the
// live ones past them) without activating them: a session that vanished or
// fails is left out.
func (h *Handler) snapshots(ctx context.Context) ([]*session.Snapshot, bool, error) {
	if h.sess == nil {
		return nil, false, errNoSessions
	}
	ids, err := h.sess.list(ctx)
	if err != nil {
		return nil, false, err
	}
	truncated := false
	if len(ids) > h.opt.ListLimit {
		// The last ids, and every session that may be running or waiting
		// for approval, wherever it sorts.
		last := ids[len(ids)-h.opt.ListLimit:]
		kept := slices.Clone(last)
		for _, id := range h.sess.live() {
			if _, found := slices.BinarySearch(last, id); !found {
				kept = append(kept, id)
			}
		}
		slices.Sort(kept)
		ids, truncated = kept, true
	}
	out := make([]*session.Snapshot, 0, len(ids))
	for _, id := range ids {
		s, err := h.sess.snapshot(ctx, id)
		if err != nil {
			if ctx.Err() != nil {
				return nil, false, ctx.Err()
			}
			h.log.Debug("console: session snapshot", "session", id, "error", err.Error())
			continue
		}
		out = append(out, s)
	}
	return out, truncated, nil
}

func (h *Handler) sessionsView(ctx context.Context, state string) (SessionsView, error) {
	snaps, truncated, err := h.snapshots(ctx)
	if err != nil {
		return SessionsView{}, err
	}
	v := SessionsView{Sessions: []SessionSummary{}, Counts: map[string]int{StateWaitingApproval: 0, StateRunning: 0, StateFailed: 0, StateIdle: 0}, Truncated: truncated}
	for _, s := range snaps {
		sum := summaryOf(s)
		v.Counts[sum.State]++
		if state == "" || state == sum.State {
			v.Sessions = append(v.Sessions, sum)
		}
	}
	return v, nil
}

// ApprovalView is a pending approval.
type ApprovalView struct {
	Session   string     `json:"session"`
	Interrupt string     `json:"interrupt"`
	Turn      int        `json:"turn"`
	CallID    string     `json:"call_id"`
	Tool      string     `json:"tool"`
	Effect    string     `json:"effect"`
	Arguments string     `json:"arguments"`
	Deadline  *time.Time `json:"deadline,omitempty"`
}

func approvalsOf(s *session.Snapshot) []ApprovalView {
	out := []ApprovalView{}
	for _, p := range s.Pending {
		a := ApprovalView{Session: s.ID, Interrupt: p.ID, Turn: p.Turn, CallID: p.Call.ID, Tool: p.Call.Name, Effect: string(p.Call.Effect), Arguments: p.Call.Arguments}
		if !p.Deadline.IsZero() {
			d := p.Deadline.UTC()
			a.Deadline = &d
		}
		out = append(out, a)
	}
	return out
}

// ApprovalsView is GET /api/console/approvals.
type ApprovalsView struct {
	Approvals []ApprovalView `json:"approvals"`
}

func (h *Handler) approvals(ctx context.Context) (ApprovalsView, error) {
	snaps, _, err := h.snapshots(ctx)
	if err != nil {
		return ApprovalsView{}, err
	}
	v := ApprovalsView{Approvals: []ApprovalView{}}
	for _, s := range snaps {
		v.Approvals = append(v.Approvals, approvalsOf(s)...)
	}
	return v, nil
}

// SessionView is GET /api/console/sessions/{id}.
type SessionView struct {
	SessionSummary
	Approvals []ApprovalView   `json:"approvals"`
	Tools     []ToolRecordView `json:"tools"`
	Messages  []MessageView    `json:"messages"`
	Timeline  []TimelineView   `json:"timeline"`
	// Answer is the last finished turn's answer.
	Answer string `json:"answer,omitempty"`
}

// ToolRecordView is one tool call: effect class, attempts, outcome.
type ToolRecordView struct {
	Turn          int      `json:"turn"`
	ID            string   `json:"id"`
	Name          string   `json:"name"`
	Effect        string   `json:"effect"`
	Agent         string   `json:"agent,omitempty"`
	Arguments     string   `json:"arguments"`
	Step          int      `json:"step"`
	Approval      bool     `json:"approval"`
	Interrupt     string   `json:"interrupt,omitempty"`
	Attempts      int      `json:"attempts"`
	Status        string   `json:"status"`
	Result        string   `json:"result,omitempty"`
	Error         string   `json:"error,omitempty"`
	AttemptErrors []string `json:"attempt_errors,omitempty"`
}

// MessageView is one stored message of the history.
type MessageView struct {
	Role      string   `json:"role"`
	Text      string   `json:"text"`
	ToolCalls []string `json:"tool_calls,omitempty"`
}

// TimelineView is one journal record of the session, decoded.
type TimelineView struct {
	Seq       int64         `json:"seq"`
	At        time.Time     `json:"at"`
	Kind      string        `json:"kind"`
	Turn      int           `json:"turn"`
	Step      int           `json:"step,omitempty"`
	Attempt   int           `json:"attempt,omitempty"`
	Call      string        `json:"call,omitempty"`
	Tool      string        `json:"tool,omitempty"`
	Effect    string        `json:"effect,omitempty"`
	Status    string        `json:"status,omitempty"`
	Text      string        `json:"text,omitempty"`
	Usage     *UsageView    `json:"usage,omitempty"`
	Calls     []PlannedView `json:"calls,omitempty"`
	Interrupt string        `json:"interrupt,omitempty"`
	Approved  *bool         `json:"approved,omitempty"`
	Expired   bool          `json:"expired,omitempty"`
}

// PlannedView is a tool call a model output planned.
type PlannedView struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Effect    string `json:"effect"`
	Agent     string `json:"agent,omitempty"`
	Approval  bool   `json:"approval"`
}

func (h *Handler) sessionView(ctx context.Context, id string) (SessionView, error) {
	if h.sess == nil {
		return SessionView{}, errNoSessions
	}
	s, err := h.sess.snapshot(ctx, id)
	if err != nil {
		return SessionView{}, err
	}
	v := SessionView{SessionSummary: summaryOf(s), Approvals: approvalsOf(s), Tools: []ToolRecordView{}, Messages: []MessageView{}, Timeline: []TimelineView{}, Answer: s.Last.Answer}
	for _, r := range s.Tools {
		v.Tools = append(v.Tools, ToolRecordView{Turn: r.Turn, ID: r.ID, Name: r.Name, Effect: string(r.Effect), Agent: r.Agent, Arguments: r.Arguments, Step: r.Step,
			Approval: r.Approval, Interrupt: r.Interrupt, Attempts: r.Attempts, Status: string(r.Status), Result: r.Result, Error: r.Error,
			AttemptErrors: slices.Clone(r.AttemptErrors)})
	}
	for _, m := range s.History {
		mv := MessageView{Role: string(m.Role), Text: m.Content}
		for _, p := range m.Parts {
			if p.Type == llm.PartText {
				mv.Text += p.Text
			}
		}
		for _, c := range m.ToolCalls {
			mv.ToolCalls = append(mv.ToolCalls, c.Name)
		}
		v.Messages = append(v.Messages, mv)
	}
	tl, err := h.sess.timeline(ctx, id)
	if err != nil && !errors.Is(err, errNoJournal) {
		return SessionView{}, err
	}
	for _, e := range tl {
		t := TimelineView{Seq: e.Seq, At: e.At.UTC(), Kind: e.Kind, Turn: e.Turn, Step: e.Step, Attempt: e.Attempt, Call: e.Call, Tool: e.Tool,
			Effect: string(e.Effect), Status: e.Status, Text: e.Text, Interrupt: e.Interrupt, Expired: e.Expired}
		if e.Usage != nil {
			u := usageView(*e.Usage)
			t.Usage = &u
		}
		if e.Kind == "approval_resolved" {
			ok := e.Approved
			t.Approved = &ok
		}
		for _, c := range e.Calls {
			t.Calls = append(t.Calls, PlannedView{ID: c.ID, Name: c.Name, Arguments: c.Arguments, Effect: string(c.Effect), Agent: c.Agent, Approval: c.Approval})
		}
		v.Timeline = append(v.Timeline, t)
	}
	return v, nil
}

// ClusterView is GET /api/console/cluster.
type ClusterView struct {
	// Enabled is false when the console does not run on a cluster member.
	Enabled bool     `json:"enabled"`
	Address string   `json:"address,omitempty"`
	Members []string `json:"members"`
	// Sessions are the sessions of the cluster's journal.
	Sessions []string `json:"sessions"`
	// Placement says where each session lives: the member whose activation
	// holds its lease (when the journal lists leases; released leases, of
	// passivated sessions, are not listed).
	Placement []PlacementView `json:"placement"`
	// BudgetOwners says which member owns each key's budget.
	BudgetOwners []BudgetOwner `json:"budget_owners"`
}

// BudgetOwner is the member that owns a provider key's budget (the one
// admitter of that key in the cluster), the key named by its fingerprint.
type BudgetOwner struct {
	Provider    string `json:"provider"`
	Fingerprint string `json:"fingerprint"`
	Member      string `json:"member"`
}

// PlacementView is a session's lease: the member running it.
type PlacementView struct {
	Session string `json:"session"`
	// Member is the member's actor address; Holder the whole lease holder
	// ("<member>/<activation>").
	Member  string    `json:"member"`
	Holder  string    `json:"holder"`
	Epoch   int64     `json:"epoch"`
	Expires time.Time `json:"expires"`
	// Expired: the holder stopped renewing (a member lost) and no other
	// took the session yet.
	Expired bool `json:"expired"`
}

func (h *Handler) clusterView(ctx context.Context) ClusterView {
	v := ClusterView{Members: []string{}, Sessions: []string{}, Placement: []PlacementView{}, BudgetOwners: []BudgetOwner{}}
	n := h.opt.Cluster
	if n == nil {
		return v
	}
	v.Enabled, v.Address = true, n.Address()
	v.Members = append(v.Members, n.Members()...)
	if h.opt.BudgetOwners != nil {
		v.BudgetOwners = append(v.BudgetOwners, h.opt.BudgetOwners()...)
	}
	if h.opt.Journal != nil {
		if ids, err := h.opt.Journal.Sessions(ctx); err == nil {
			v.Sessions = append(v.Sessions, ids...)
		}
		if ll, ok := h.opt.Journal.(store.LeaseLister); ok {
			leases, err := ll.Leases(ctx, h.opt.ListLimit)
			if err != nil {
				h.log.Debug("console: leases", "error", err.Error())
			}
			now := h.now()
			for _, l := range leases {
				member := l.Holder
				if i := strings.LastIndexByte(member, '/'); i > 0 {
					member = member[:i]
				}
				v.Placement = append(v.Placement, PlacementView{Session: l.Session, Member: member, Holder: l.Holder, Epoch: l.Epoch,
					Expires: l.Expires, Expired: !l.Expires.After(now)})
			}
		}
	}
	return v
}
