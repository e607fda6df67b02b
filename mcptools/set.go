package mcptools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/session"
	"github.com/chorusrt/chorus/telemetry"
)

// DefaultCallTimeout bounds one tool call when neither Server.Timeout nor
// Options.CallTimeout is set.
const DefaultCallTimeout = 60 * time.Second

// Timing knobs; tests shorten them through a helper.
var (
	// connectTimeout bounds starting (or reaching) a server and its first
	// tools/list.
	connectTimeout = 30 * time.Second
	// restartBackoff is the wait before the first restart of a server that
	// died; it doubles after each restart that follows quickly, up to
	// restartBackoffMax, and starts over once a server stayed up that long.
	restartBackoff    = 100 * time.Millisecond
	restartBackoffMax = 10 * time.Second
	// deathGrace is how long a call that failed outside the protocol waits
	// for its connection to end before returning.
	deathGrace = time.Second
	// defaultStopTimeout is how long Close waits for a command to exit after
	// closing its stdin, before SIGTERM and then SIGKILL.
	defaultStopTimeout = 2 * time.Second
)

// Options configures a Set.
type Options struct {
	// Servers are the MCP servers whose tools the Set offers.
	Servers []Server
	// CallTimeout bounds one tool call (DefaultCallTimeout when zero);
	// Server.Timeout overrides it per server.
	CallTimeout time.Duration
	// StopTimeout is how long Close waits for a command to exit once its
	// stdin is closed, before SIGTERM, then as long again before SIGKILL.
	// Zero means 2s.
	StopTimeout time.Duration
	// HTTPClient makes the requests to URL servers (http.DefaultClient's
	// transport when nil). Server.Headers are added to every request.
	HTTPClient *http.Client
	// Logger gets restarts, list refreshes, dropped tools and the servers'
	// stderr (at debug). Nil discards.
	Logger *slog.Logger
	// Telemetry is where each call's spans go (telemetry.go): its
	// tools/call CLIENT span, and Call's execute_tool span. Nil: the
	// global OpenTelemetry providers of the moment Start runs.
	Telemetry *telemetry.Telemetry

	// wrap, set by tests, wraps each transport (to watch the messages).
	wrap func(server string, t mcp.Transport) mcp.Transport
}

// Annotations are a tool's MCP annotations, with the specification's
// defaults filled in where the server left a hint out.
type Annotations struct {
	Title       string
	ReadOnly    bool // readOnlyHint, default false
	Destructive bool // destructiveHint, default true
	Idempotent  bool // idempotentHint, default false
	OpenWorld   bool // openWorldHint, default true
}

// Tool is one tool of a Set.
type Tool struct {
	// Name is the tool's name as the model sees it: the server's Prefix and
	// the server's own name for it (RemoteName).
	Name       string
	Server     string
	RemoteName string
	// Definition is sent to the model (named Name).
	Definition llm.Tool
	// Annotations are nil when the server sent none.
	Annotations *Annotations
	// Effect is the tool's own declaration for a session (session.Tool.Effect):
	// what its annotations say when the server is trusted (EffectFor), empty
	// otherwise, so that the policy, else the default, decides.
	Effect session.Effect
}

// Set is a running group of MCP servers and their tools. Its methods are
// safe for concurrent use.
type Set struct {
	opts    Options
	log     *slog.Logger
	tel     *telemetry.Telemetry
	servers []*serverConn

	mu    sync.RWMutex
	tools map[string]*Tool // by Name

	closeOnce sync.Once
	closing   chan struct{}
	// life ends with Close: it bounds restarts and list refreshes.
	life    context.Context
	endLife context.CancelFunc
	wg      sync.WaitGroup
}

// Start starts every command server, connects to every URL server, lists
// their tools (all pages) and checks that no two tools share a name. Any
// failure stops what was started and returns the error: a *llm.ConfigError
// naming the field at fault, a *CollisionError naming both servers, or a
// *StartError naming the server that failed. ctx bounds the start only.
func Start(ctx context.Context, opts Options) (*Set, error) {
	names := map[string]bool{}
	for i := range opts.Servers {
		sv := &opts.Servers[i]
		if err := sv.validate(i); err != nil {
			return nil, err
		}
		if names[sv.Name] {
			return nil, &llm.ConfigError{Field: field(i, sv, "name"), Msg: "appears twice"}
		}
		names[sv.Name] = true
	}
	if opts.CallTimeout < 0 {
		return nil, &llm.ConfigError{Field: "CallTimeout", Msg: "must not be negative"}
	}
	if opts.StopTimeout <= 0 {
		opts.StopTimeout = defaultStopTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Set{opts: opts, log: log, tel: opts.Telemetry.OrGlobal(), tools: map[string]*Tool{}, closing: make(chan struct{})}
	s.life, s.endLife = context.WithCancel(context.Background())
	for i := range opts.Servers {
		s.servers = append(s.servers, newServerConn(s, opts.Servers[i]))
	}

	// Start every server at once; their first lists are checked together.
	type started struct {
		cs    *mcp.ClientSession
		proc  *process
		tools []*Tool
		err   error
	}
	res := make([]started, len(s.servers))
	var wg sync.WaitGroup
	for i, c := range s.servers {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, connectTimeout)
			defer cancel()
			r := &res[i]
			r.cs, r.proc, r.err = c.connect(cctx)
			if r.err == nil {
				if r.tools, r.err = c.list(cctx, r.cs); r.err != nil {
					c.stop(r.cs, r.proc)
				}
			}
		})
	}
	wg.Wait()
	var errs []error
	for i, r := range res {
		if r.err != nil {
			errs = append(errs, &StartError{Server: s.servers[i].cfg.Name, Err: r.err})
		}
	}
	if len(errs) == 0 {
		owner := map[string]string{}
		for i, r := range res {
			for _, t := range r.tools {
				if first, ok := owner[t.Name]; ok {
					errs = append(errs, &CollisionError{Tool: t.Name, First: first, Second: s.servers[i].cfg.Name})
					break
				}
				owner[t.Name] = s.servers[i].cfg.Name
				s.tools[t.Name] = t
			}
		}
	}
	if len(errs) > 0 {
		s.endLife()
		for i, r := range res {
			if r.err == nil {
				s.servers[i].stop(r.cs, r.proc)
			}
		}
		return nil, errs[0]
	}
	for i, c := range s.servers {
		dead := c.up(res[i].cs, res[i].proc)
		s.wg.Go(func() { c.supervise(res[i].cs, res[i].proc, dead) })
	}
	return s, nil
}

// Close stops every server: a command's stdin is closed, then SIGTERM after
// StopTimeout, then SIGKILL; URL sessions are closed. It waits for every
// child process and goroutine, or until ctx ends. Calls after Close fail
// with ErrClosed.
func (s *Set) Close(ctx context.Context) error {
	s.closeOnce.Do(func() { close(s.closing); s.endLife() })
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("mcptools: close: %w", ctx.Err())
	}
}

// Tools returns the current tools, sorted by name. A server's list changes
// when it announces a change (notifications/tools/list_changed) or after
// it was restarted.
func (s *Set) Tools() []Tool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]Tool, 0, len(s.tools))
	for _, t := range s.tools {
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b Tool) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}

// Call runs the tool named name (as the model sees it) with JSON arguments
// ("{}" when empty), within the caller's ctx and the server's timeout;
// cancelling ctx sends notifications/cancelled to the server. A call that
// finds its server restarting waits for it. It returns the result, with
// IsError set when the server marked it so, or a *CallError. The call is
// an execute_tool span (the tools of ToolSet and SessionTools run under
// the tool loop's or the session's own).
func (s *Set) Call(ctx context.Context, name string, args json.RawMessage) (*Result, error) {
	ctx, ts := s.tel.StartTool(ctx, name, "")
	ts.Arguments(string(args))
	r, err := s.call(ctx, name, args, "")
	switch {
	case err != nil:
		ts.End("failed", toolErrorType(err), "")
	case r.IsError:
		ts.End("failed", "tool_error", r.modelText())
	default:
		ts.End("succeeded", "", r.modelText())
	}
	return r, err
}

// IdempotencyKeyMeta is the _meta key under which a session's idempotent
// write sends its idempotency key (<session>/<turn>/<call>, the same on
// every attempt), for servers that can deduplicate.
const IdempotencyKeyMeta = "chorus/idempotencyKey"

func (s *Set) call(ctx context.Context, name string, args json.RawMessage, key string) (*Result, error) {
	select {
	case <-s.closing:
		return nil, ErrClosed
	default:
	}
	s.mu.RLock()
	t := s.tools[name]
	s.mu.RUnlock()
	if t == nil {
		return nil, &CallError{Tool: name, Err: errors.New("no such tool (the server may have removed it)")}
	}
	return s.server(t.Server).call(ctx, t, args, key)
}

func (s *Set) server(name string) *serverConn {
	for _, c := range s.servers {
		if c.cfg.Name == name {
			return c
		}
	}
	return nil
}

// replace swaps server's tools for list, dropping (and logging) any that
// would collide with another server's. It reports the dropped names.
func (s *Set) replace(server string, list []*Tool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, t := range s.tools {
		if t.Server == server {
			delete(s.tools, name)
		}
	}
	for _, t := range list {
		if other, ok := s.tools[t.Name]; ok {
			err := &CollisionError{Tool: t.Name, First: other.Server, Second: server}
			s.log.Error("mcptools: tool dropped", "server", server, "tool", t.Name, "err", err)
			continue
		}
		s.tools[t.Name] = t
	}
}
