package mcptools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/chorusrt/chorus/llm"
)

// serverConn is one server: its configuration, its current client session
// (nil while it is down) and, for a command, its current process.
type serverConn struct {
	set          *Set
	cfg          Server
	secrets      []string
	client       *mcp.Client
	calls        atomic.Int64 // progress tokens
	pendingSpans              // calls whose span records (telemetry.go)

	mu      sync.Mutex
	cs      *mcp.ClientSession
	proc    *process
	dead    chan struct{} // closed once cs's connection ended
	changed chan struct{} // closed (and replaced) when cs changes
	refresh chan struct{} // a list change to fetch (buffered 1)
}

// process is a command server's child process.
type process struct {
	cmd *exec.Cmd
}

func (p *process) pid() int {
	if p == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

func newServerConn(s *Set, cfg Server) *serverConn {
	c := &serverConn{set: s, cfg: cfg, secrets: cfg.secrets(), changed: make(chan struct{}), refresh: make(chan struct{}, 1)}
	c.client = mcp.NewClient(&mcp.Implementation{Name: "chorus", Version: "1"}, &mcp.ClientOptions{
		// No roots capability: Chorus offers none.
		Capabilities: &mcp.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case c.refresh <- struct{}{}:
			default:
			}
		},
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			s.log.Debug("mcptools: progress", "server", cfg.Name, "token", r.Params.ProgressToken, "progress", r.Params.Progress, "total", r.Params.Total)
		},
	})
	return c
}

// connect starts the command (or reaches the URL) and initializes a client
// session.
func (c *serverConn) connect(ctx context.Context) (*mcp.ClientSession, *process, error) {
	var (
		t    mcp.Transport
		proc *process
	)
	if len(c.cfg.Command) > 0 {
		cmd := exec.Command(c.cfg.Command[0], c.cfg.Command[1:]...)
		cmd.Dir = c.cfg.Dir
		cmd.Env = os.Environ()
		keys := make([]string, 0, len(c.cfg.Env))
		for k := range c.cfg.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			cmd.Env = append(cmd.Env, k+"="+c.cfg.Env[k])
		}
		cmd.Stderr = &stderrLog{c: c}
		cmd.WaitDelay = c.set.opts.StopTimeout
		childOfThisProcess(cmd)
		proc = &process{cmd: cmd}
		t = &idTransport{Transport: &mcp.CommandTransport{Command: cmd, TerminateDuration: c.set.opts.StopTimeout}, c: c}
	} else {
		base := http.DefaultTransport
		if hc := c.set.opts.HTTPClient; hc != nil && hc.Transport != nil {
			base = hc.Transport
		}
		client := &http.Client{Transport: &headerTransport{base: base, headers: c.cfg.Headers, c: c}}
		if hc := c.set.opts.HTTPClient; hc != nil {
			client.Timeout, client.Jar, client.CheckRedirect = hc.Timeout, hc.Jar, hc.CheckRedirect
		}
		t = &mcp.StreamableClientTransport{Endpoint: c.cfg.URL, HTTPClient: client}
	}
	if c.set.opts.wrap != nil {
		t = c.set.opts.wrap(c.cfg.Name, t)
	}
	cs, err := c.client.Connect(ctx, t, nil)
	if err != nil {
		if proc != nil && proc.cmd.Process != nil && proc.cmd.ProcessState == nil {
			// Started but never initialized: the SDK closed stdin and waited,
			// unless the failure came before; make sure it is gone.
			_ = proc.cmd.Process.Kill()
			_ = proc.cmd.Wait()
		}
		return nil, nil, c.wrapErr(fmt.Errorf("connecting to %s: %w", c.cfg.where(), err))
	}
	return cs, proc, nil
}

// list fetches every page of the server's tools.
func (c *serverConn) list(ctx context.Context, cs *mcp.ClientSession) ([]*Tool, error) {
	var out []*Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, c.wrapErr(fmt.Errorf("tools/list: %w", err))
		}
		name := c.cfg.Prefix + t.Name
		if !toolNamePattern.MatchString(name) {
			c.set.log.Warn("mcptools: tool skipped: its name is not a valid function name (letters, digits, '_' or '-', at most 64)", "server", c.cfg.Name, "tool", name)
			continue
		}
		out = append(out, c.toTool(name, t))
	}
	return out, nil
}

func (c *serverConn) toTool(name string, t *mcp.Tool) *Tool {
	tool := &Tool{Name: name, Server: c.cfg.Name, RemoteName: t.Name,
		Definition: llm.Tool{Name: name, Description: t.Description}}
	if t.InputSchema != nil {
		if b, err := json.Marshal(t.InputSchema); err == nil {
			tool.Definition.Parameters = b
		}
	}
	if a := t.Annotations; a != nil {
		tool.Annotations = &Annotations{Title: a.Title, ReadOnly: a.ReadOnlyHint, Destructive: true,
			Idempotent: a.IdempotentHint, OpenWorld: true}
		if a.DestructiveHint != nil {
			tool.Annotations.Destructive = *a.DestructiveHint
		}
		if a.OpenWorldHint != nil {
			tool.Annotations.OpenWorld = *a.OpenWorldHint
		}
	}
	if c.cfg.Trusted {
		tool.Effect = EffectFor(tool.Annotations)
	}
	return tool
}

// up publishes a live session; the returned channel closes when its
// connection ends (the server died, or it was closed).
func (c *serverConn) up(cs *mcp.ClientSession, proc *process) <-chan struct{} {
	dead := make(chan struct{})
	go func() { _ = cs.Wait(); close(dead) }()
	c.mu.Lock()
	c.cs, c.proc, c.dead = cs, proc, dead
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
	return dead
}

// down withdraws the session: calls from now on wait for the next one.
func (c *serverConn) down() {
	c.mu.Lock()
	c.cs, c.proc, c.dead = nil, nil, nil
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// pid is the current process's id (0 for a URL server or while down).
func (c *serverConn) pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.proc.pid()
}

// stop closes a session and waits for its process.
func (c *serverConn) stop(cs *mcp.ClientSession, proc *process) {
	if err := cs.Close(); err != nil && proc == nil {
		c.set.log.Debug("mcptools: closing the session", "server", c.cfg.Name, "err", c.wrapErr(err))
	}
	if proc != nil && proc.cmd.ProcessState == nil && proc.cmd.Process != nil {
		// The SDK waits for the process in Close; this covers a Close that
		// returned early.
		_ = proc.cmd.Process.Kill()
		_ = proc.cmd.Wait()
	}
}

// supervise watches the live session: it refetches the list on a change
// notification, restarts the server (with backoff) when it dies, and stops
// it when the Set closes.
func (c *serverConn) supervise(cs *mcp.ClientSession, proc *process, dead <-chan struct{}) {
	backoff := restartBackoff
	for {
		since := time.Now()
	watch:
		for {
			select {
			case <-c.set.closing:
				c.down()
				c.stop(cs, proc)
				<-dead
				return
			case <-c.refresh:
				ctx, cancel := context.WithTimeout(c.set.life, connectTimeout)
				list, err := c.list(ctx, cs)
				cancel()
				if err != nil {
					c.set.log.Warn("mcptools: refreshing the tool list failed", "server", c.cfg.Name, "err", err)
					continue
				}
				c.set.replace(c.cfg.Name, list)
				c.set.log.Info("mcptools: tool list refreshed", "server", c.cfg.Name, "tools", len(list))
			case <-dead:
				break watch
			}
		}
		c.down()
		c.stop(cs, proc)
		if time.Since(since) > restartBackoffMax {
			backoff = restartBackoff
		}
		for {
			c.set.log.Warn("mcptools: server lost; restarting", "server", c.cfg.Name, "in", backoff)
			select {
			case <-c.set.closing:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, restartBackoffMax)
			ctx, cancel := context.WithTimeout(c.set.life, connectTimeout)
			var err error
			var list []*Tool
			cs, proc, err = c.connect(ctx)
			if err == nil {
				if list, err = c.list(ctx, cs); err != nil {
					c.stop(cs, proc)
				}
			}
			cancel()
			if err != nil {
				c.set.log.Warn("mcptools: restart failed", "server", c.cfg.Name, "err", err)
				continue
			}
			c.set.replace(c.cfg.Name, list)
			dead = c.up(cs, proc)
			if proc != nil {
				c.set.log.Info("mcptools: server restarted", "server", c.cfg.Name, "pid", proc.pid())
			} else {
				c.set.log.Info("mcptools: reconnected", "server", c.cfg.Name)
			}
			break
		}
	}
}

// session waits for a live session: one whose connection has not ended.
func (c *serverConn) session(ctx context.Context) (*mcp.ClientSession, <-chan struct{}, error) {
	for {
		c.mu.Lock()
		cs, dead, changed := c.cs, c.dead, c.changed
		c.mu.Unlock()
		if cs != nil && !isClosed(dead) {
			return cs, dead, nil
		}
		select {
		case <-changed:
		case <-c.set.closing:
			return nil, nil, ErrClosed
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("waiting for the server to restart: %w", context.Cause(ctx))
		}
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// call runs one tools/call.
func (c *serverConn) call(ctx context.Context, t *Tool, args json.RawMessage, key string) (*Result, error) {
	timeout := c.cfg.Timeout
	if timeout == 0 {
		timeout = c.set.opts.CallTimeout
	}
	if timeout == 0 {
		timeout = DefaultCallTimeout
	}
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("the call took longer than its %v timeout", timeout))
	defer cancel()
	if len(args) == 0 {
		args = json.RawMessage("{}")
	} else if !json.Valid(args) {
		return nil, &CallError{Server: c.cfg.Name, Tool: t.Name, Err: errors.New("arguments are not valid JSON")}
	}
	cs, dead, err := c.session(ctx)
	if err != nil {
		return nil, &CallError{Server: c.cfg.Name, Tool: t.Name, Err: err}
	}
	p := &mcp.CallToolParams{Name: t.RemoteName, Arguments: args}
	token := fmt.Sprintf("chorus-%d", c.calls.Add(1))
	p.SetProgressToken(token)
	if key != "" {
		p.Meta[IdempotencyKeyMeta] = key
	}
	ctx, span := c.startCallSpan(ctx, t, cs, token)
	res, err := c.callOn(ctx, cs, dead, t, p)
	c.endCallSpan(span, token, res, err)
	return res, err
}

// callOn sends p on cs and waits for its answer.
func (c *serverConn) callOn(ctx context.Context, cs *mcp.ClientSession, dead <-chan struct{}, t *Tool, p *mcp.CallToolParams) (*Result, error) {
	r, err := cs.CallTool(ctx, p)
	var werr *jsonrpc.Error
	if err != nil && ctx.Err() == nil && !errors.As(err, &werr) {
		// Not the server's answer: the connection may be failing (a dead
		// process's EOF). Give it a moment to end, so that the next call
		// waits for the restart instead of reaching the dying session.
		t := time.NewTimer(deathGrace)
		select {
		case <-dead:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	if err != nil {
		if cerr := context.Cause(ctx); cerr != nil && ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", cerr, ctx.Err())
		}
		return nil, &CallError{Server: c.cfg.Name, Tool: t.Name, Err: c.wrapErr(err)}
	}
	return convert(c.cfg.Name, t.Name, r), nil
}

func (c *serverConn) wrapErr(err error) error { return redactErr(err, c.secrets) }

// headerTransport adds a server's headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
	c       *serverConn // its tools/call requests' ids go on their spans
}

func (h *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = h.c.peekRequest(r)
	if len(h.headers) > 0 {
		r = r.Clone(r.Context())
		for k, v := range h.headers {
			r.Header.Set(k, v)
		}
	}
	return h.base.RoundTrip(r)
}

// stderrLog sends a command's stderr, line by line, to the logger at debug
// level, with the server's secrets redacted.
type stderrLog struct {
	c   *serverConn
	mu  sync.Mutex
	buf []byte
}

func (w *stderrLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		line := string(w.buf[:i])
		w.buf = w.buf[i+1:]
		w.c.set.log.Debug("mcptools: server stderr", "server", w.c.cfg.Name, "line", redact(line, w.c.secrets))
	}
	if len(w.buf) > 64<<10 {
		w.buf = w.buf[:0]
	}
	return len(p), nil
}

var _ io.Writer = (*stderrLog)(nil)
