package console

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chorusrt/chorus/batch"
	"github.com/chorusrt/chorus/cache"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/runtime"
	"github.com/chorusrt/chorus/session"
	"github.com/chorusrt/chorus/sim"
	"github.com/chorusrt/chorus/store"
)

// testPrices price the simulator's echo model (made-up numbers).
var testPrices = llm.Prices{"sim/echo": {Input: 0.15, Output: 0.6}}

const testToken = "operator-token-for-tests"

// hostile is what the refund tool returns: markup that must stay text.
const hostile = `<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">`

// kit is a console over a runtime on the simulator, a session manager
// journaled in SQLite with an approval-gated refund tool, and a batch
// registry, served on loopback.
type kit struct {
	t     *testing.T
	sim   *sim.Simulator
	rt    *runtime.Runtime
	j     *store.SQLite
	m     *session.Manager
	reg   *batch.Registry
	h     *Handler
	srv   *httptest.Server
	mopt  session.Options
	hopt  Options
	cur   atomic.Pointer[http.ServeMux] // what srv serves (restart swaps it)
	mu    sync.Mutex
	calls map[string]int // refund calls per session
}

type kitOpts struct {
	sim      sim.Options
	loopback bool
	noToken  bool
	tick     time.Duration
	limit    int           // Options.ListLimit
	idle     time.Duration // session.Options.IdleTimeout
	cache    bool          // the runtime has a response cache
}

func newKit(t *testing.T, o kitOpts) *kit {
	t.Helper()
	k := &kit{t: t, calls: map[string]int{}}
	s, err := sim.Start(o.sim)
	if err != nil {
		t.Fatal(err)
	}
	k.sim = s
	t.Cleanup(func() { s.Close() })
	ropts := []runtime.Option{runtime.WithProvider(s.Config()), runtime.WithAlias("fast", "sim/echo", "sim/quick"), runtime.WithPrices(testPrices)}
	if o.cache {
		ms, _ := cache.NewMemory(cache.Limits{})
		c, _ := cache.New(ms, cache.Options{})
		t.Cleanup(func() { c.Close() })
		ropts = append(ropts, runtime.WithCache(c, runtime.CacheOptions{}))
	}
	rt, err := runtime.New(ropts...)
	if err != nil {
		t.Fatal(err)
	}
	k.rt = rt
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = rt.Close(ctx)
	})
	dir := t.TempDir()
	j, err := store.OpenSQLite(filepath.Join(dir, "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	k.j = j
	t.Cleanup(func() { _ = j.Close() })
	schema := json.RawMessage(`{"type":"object","properties":{"order":{"type":"integer"}}}`)
	k.mopt = session.Options{
		Journal: j, Model: rt, ModelName: "sim/echo", Media: session.NewLocalMedia(filepath.Join(dir, "media")),
		ApprovalTimeout: 30 * time.Minute, IdleTimeout: o.idle,
		Tools: []session.Tool{
			{Def: llm.Tool{Name: "refund", Description: "refund an order", Parameters: schema}, Effect: session.EffectNonIdempotentWrite,
				Handler: func(ctx context.Context, c session.Call) (session.Result, error) {
					k.mu.Lock()
					k.calls[c.Session]++
					k.mu.Unlock()
					return session.Result{Content: hostile}, nil
				}},
			{Def: llm.Tool{Name: "lookup", Description: "look an order up", Parameters: schema}, Effect: session.EffectRead,
				Handler: func(ctx context.Context, c session.Call) (session.Result, error) {
					return session.Result{Content: `{"order":7,"status":"shipped"}`}, nil
				}},
		},
	}
	m, err := session.New(k.mopt)
	if err != nil {
		t.Fatal(err)
	}
	k.m = m
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = k.m.Close(ctx)
	})
	k.reg = batch.NewRegistry(5)
	token := testToken
	if o.noToken {
		token = ""
	}
	tick := o.tick
	if tick == 0 {
		tick = 100 * time.Millisecond
	}
	k.hopt = Options{Runtime: rt, Sessions: m, Batches: k.reg, Token: token, Loopback: o.loopback, Tick: tick, ListLimit: o.limit}
	k.serve()
	k.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { k.cur.Load().ServeHTTP(w, r) }))
	t.Cleanup(k.srv.Close)
	return k
}

// serve makes the console over k.m and serves it.
func (k *kit) serve() {
	k.t.Helper()
	k.hopt.Sessions = k.m
	h, err := New(k.hopt)
	if err != nil {
		k.t.Fatal(err)
	}
	k.h = h
	mux := http.NewServeMux()
	h.Register(mux)
	k.cur.Store(mux)
}

// restart closes the session manager and serves a new one over the same
// journal, as a restarted process does.
func (k *kit) restart() {
	k.t.Helper()
	if err := k.m.Close(ctxT(k.t, 10*time.Second)); err != nil {
		k.t.Fatal(err)
	}
	m, err := session.New(k.mopt)
	if err != nil {
		k.t.Fatal(err)
	}
	k.m = m
	k.serve()
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// refundSession starts a session whose turn waits for the refund's
// approval, and returns the pending interrupt.
func (k *kit) refundSession(id string) session.Interrupt {
	k.t.Helper()
	if err := k.m.Send(ctxT(k.t, 10*time.Second), id, llm.UserText(`please refund {"order": 7}`)); err != nil {
		k.t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		s, err := k.m.Snapshot(ctxT(k.t, 10*time.Second), id)
		if err != nil {
			k.t.Fatal(err)
		}
		if len(s.Pending) == 1 {
			return s.Pending[0]
		}
		time.Sleep(20 * time.Millisecond)
	}
	k.t.Fatalf("session %s: no approval pending", id)
	return session.Interrupt{}
}

func (k *kit) refunds(id string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.calls[id]
}

// do sends a request to the console; auth is "bearer", "" or a cookie
// header value.
type req struct {
	method, path string
	body         any
	bearer       string
	cookie       *http.Cookie
	header       map[string]string
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) json(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decoding %s: %v", r.body, err)
	}
}

func (r resp) errCode(t testing.TB) string {
	var e ErrorBody
	r.json(t, &e)
	return e.Error.Code
}

func (k *kit) do(q req) resp {
	k.t.Helper()
	var body io.Reader
	if q.body != nil {
		b, _ := json.Marshal(q.body)
		body = bytes.NewReader(b)
	}
	method := q.method
	if method == "" {
		method = http.MethodGet
	}
	r, err := http.NewRequestWithContext(ctxT(k.t, 20*time.Second), method, k.srv.URL+q.path, body)
	if err != nil {
		k.t.Fatal(err)
	}
	if q.bearer != "" {
		r.Header.Set("Authorization", "Bearer "+q.bearer)
	}
	if q.cookie != nil {
		r.AddCookie(q.cookie)
	}
	for h, v := range q.header {
		r.Header.Set(h, v)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Do(r)
	if err != nil {
		k.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{status: res.StatusCode, header: res.Header, body: b}
}

// login logs in with the form and returns the cookie and the CSRF token
// of the pages.
func (k *kit) login() (*http.Cookie, string) {
	k.t.Helper()
	r, _ := http.NewRequest(http.MethodPost, k.srv.URL+PagePrefix+"login", strings.NewReader("token="+testToken+"&next=/console/approvals"))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Do(r)
	if err != nil {
		k.t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/console/approvals" {
		k.t.Fatalf("login: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	var cookie *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == CookieName {
			cookie = c
		}
	}
	if cookie == nil || cookie.Value == "" || strings.Contains(cookie.Value, testToken) || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode {
		k.t.Fatalf("login cookie: %+v", cookie)
	}
	page := k.do(req{path: PagePrefix + "approvals", cookie: cookie})
	const marker = `<meta name="csrf-token" content="`
	i := bytes.Index(page.body, []byte(marker))
	if i < 0 {
		k.t.Fatalf("no csrf meta in %s", page.body)
	}
	rest := page.body[i+len(marker):]
	csrf := string(rest[:bytes.IndexByte(rest, '"')])
	if len(csrf) != 64 {
		k.t.Fatalf("csrf token %q", csrf)
	}
	return cookie, csrf
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// resumeUntilTurnEnds follows session id's events from Last-Event-ID
// lastID until its turn finishes, each event numbered above lastID and
// above the one before it, and returns their types.
func (k *kit) resumeUntilTurnEnds(t *testing.T, id, lastID string) []string {
	t.Helper()
	s := k.openSSE(APIPrefix+"sessions/"+id+"/events", map[string]string{"Last-Event-ID": lastID})
	defer s.close()
	var types []string
	prev := uint64(0)
	for {
		e := s.next(t)
		var ev EventView
		if err := jsonUnmarshal(e.data, &ev); err != nil {
			t.Fatal(err)
		}
		if n := uint64(mustAtoi(e.id)); n <= uint64(mustAtoi(lastID)) || n <= prev {
			t.Fatalf("resumed: id %s, the last before it %s, the previous %d", e.id, lastID, prev)
		}
		prev = ev.Seq
		types = append(types, ev.Type)
		if ev.Type == "turn_finished" {
			return types
		}
	}
}
