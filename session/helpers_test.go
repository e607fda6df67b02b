package session

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/store"
)

// harness is one Manager on a SQLite journal, talking to an llmtest server
// through a providers.Client.
type harness struct {
	t    *testing.T
	srv  *llmtest.Server
	j    *faultJournal
	path string
	dir  string
	opt  Options
	m    *Manager
}

func newClient(t testing.TB, baseURL string) *providers.Client {
	t.Helper()
	c, err := clientFor(baseURL)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// clientFor is an OpenAI-format client without retries of its own, so
// that model failures reach the session.
func clientFor(baseURL string) (*providers.Client, error) {
	return providers.New(providers.Config{ID: "openai", Format: providers.FormatOpenAI, BaseURL: baseURL, APIKey: "sk-test"},
		providers.WithRetryPolicy(providers.RetryPolicy{MaxAttempts: 1}),
		providers.WithTimeout(20*time.Second), providers.WithIdleTimeout(10*time.Second))
}

// newHarness starts a server and a Manager with opt (Journal, Model,
// ModelName and Media filled in when unset).
func newHarness(t *testing.T, opt Options) *harness {
	t.Helper()
	h := &harness{t: t, srv: llmtest.NewServer(), dir: t.TempDir()}
	t.Cleanup(h.srv.Close)
	h.path = filepath.Join(h.dir, "journal.db")
	sq, err := store.OpenSQLite(h.path)
	if err != nil {
		t.Fatal(err)
	}
	h.j = &faultJournal{Journal: sq}
	t.Cleanup(func() { _ = sq.Close() })
	if opt.Model == nil {
		opt.Model = newClient(t, h.srv.OpenAIBaseURL())
	}
	if opt.ModelName == "" {
		opt.ModelName = "test-model"
	}
	if opt.Media == nil {
		opt.Media = NewLocalMedia(filepath.Join(h.dir, "media"))
	}
	if opt.RetryBackoff == 0 {
		opt.RetryBackoff = time.Millisecond
	}
	opt.Journal = h.j
	h.opt = opt
	h.start()
	return h
}

// start (re)starts the Manager on the same journal.
func (h *harness) start() {
	h.t.Helper()
	m, err := New(h.opt)
	if err != nil {
		h.t.Fatal(err)
	}
	h.m = m
	h.t.Cleanup(func() { _ = m.Close(context.Background()) })
}

// restart closes the Manager and starts a new one, as a process restart
// would (minus the crash: the crash suite does that).
func (h *harness) restart() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.m.Close(ctx); err != nil {
		h.t.Fatal(err)
	}
	h.start()
}

func ctx10(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (h *harness) send(id, text string) {
	h.t.Helper()
	if err := h.m.Send(ctx10(h.t), id, llm.UserText(text)); err != nil {
		h.t.Fatalf("Send: %v", err)
	}
}

func (h *harness) wait(id string) TurnResult {
	h.t.Helper()
	r, err := h.m.Wait(ctx10(h.t), id)
	if err != nil {
		h.t.Fatalf("Wait: %v", err)
	}
	return r
}

func (h *harness) snap(id string) *Snapshot {
	h.t.Helper()
	s, err := h.m.Snapshot(ctx10(h.t), id)
	if err != nil {
		h.t.Fatalf("Snapshot: %v", err)
	}
	return s
}

// until polls cond every millisecond for up to 10 seconds.
func until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// pending waits until the session has n pending interrupts and returns them.
func (h *harness) pending(id string, n int) []Interrupt {
	h.t.Helper()
	var got []Interrupt
	until(h.t, "pending interrupts", func() bool {
		s, err := h.m.Snapshot(ctx10(h.t), id)
		if err != nil {
			return false
		}
		got = s.Pending
		return len(got) == n
	})
	return got
}

// records reads the session's journal.
func (h *harness) records(id string) []store.Record {
	h.t.Helper()
	recs, err := h.j.Read(ctx10(h.t), id, 1)
	if err != nil {
		h.t.Fatal(err)
	}
	return recs
}

func kinds(recs []store.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Kind
	}
	return out
}

// wireMessage is a message of an OpenAI-format request body.
type wireMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// text is the message's text (a string content, or its text parts).
func (w wireMessage) text() string {
	var s string
	if json.Unmarshal(w.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(w.Content, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

type wireRequest struct {
	Model    string        `json:"model"`
	Messages []wireMessage `json:"messages"`
	Tools    []any         `json:"tools"`
}

func parseRequest(t testing.TB, body []byte) wireRequest {
	t.Helper()
	var r wireRequest
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("request body: %v", err)
	}
	return r
}

// lastRequest is the last request the server received.
func (h *harness) lastRequest() wireRequest {
	h.t.Helper()
	reqs := h.srv.Requests()
	if len(reqs) == 0 {
		h.t.Fatal("no request")
	}
	return parseRequest(h.t, reqs[len(reqs)-1].Body)
}

// toolResponse finds the function response to a call in a request.
func toolResponse(r wireRequest, callID string) (string, bool) {
	for _, m := range r.Messages {
		if m.Role == "tool" && m.ToolCallID == callID {
			return m.text(), true
		}
	}
	return "", false
}

func call(id, name, args string) llm.ToolCall {
	return llm.ToolCall{ID: id, Name: name, Arguments: args}
}

// invocation is one handler attempt, as a tool saw it.
type invocation struct {
	Call    string
	Attempt int
	Key     string
	Effect  Effect
}

// ledger records handler attempts.
type ledger struct {
	mu  sync.Mutex
	inv []invocation
}

func (l *ledger) add(c Call) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inv = append(l.inv, invocation{Call: c.ID, Attempt: c.Attempt, Key: c.IdempotencyKey, Effect: c.Effect})
}

func (l *ledger) of(call string) []invocation {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []invocation
	for _, i := range l.inv {
		if i.Call == call {
			out = append(out, i)
		}
	}
	return out
}

// tool builds a Tool around fn, recording every attempt in l.
func tool(l *ledger, name string, effect Effect, fn func(ctx context.Context, c Call) (Result, error)) Tool {
	return Tool{
		Def:    llm.Tool{Name: name, Description: name, Parameters: json.RawMessage(`{"type":"object"}`)},
		Effect: effect,
		Handler: func(ctx context.Context, c Call) (Result, error) {
			if l != nil {
				l.add(c)
			}
			return fn(ctx, c)
		},
	}
}

func ok(content string) func(context.Context, Call) (Result, error) {
	return func(context.Context, Call) (Result, error) { return Result{Content: content}, nil }
}

// collector gathers a session's events.
type collector struct {
	mu   sync.Mutex
	evs  []Event
	stop func()
	done chan struct{}
}

func collect(m *Manager, id string) *collector {
	ch, stop := m.Events(id, 0)
	c := &collector{stop: stop, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for ev := range ch {
			c.mu.Lock()
			c.evs = append(c.evs, ev)
			c.mu.Unlock()
		}
	}()
	return c
}

func (c *collector) events() []Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Event(nil), c.evs...)
}

func (c *collector) close() []Event {
	c.stop()
	<-c.done
	return c.events()
}

// faultJournal wraps a journal and fails appends on demand.
type faultJournal struct {
	store.Journal
	mu       sync.Mutex
	failNext int // appends to fail
}

var errInjected = errors.New("injected journal failure")

func (f *faultJournal) Append(ctx context.Context, session string, expectedSeq int64, recs ...store.Record) (int64, error) {
	f.mu.Lock()
	if f.failNext > 0 {
		f.failNext--
		f.mu.Unlock()
		return 0, errInjected
	}
	f.mu.Unlock()
	return f.Journal.Append(ctx, session, expectedSeq, recs...)
}
