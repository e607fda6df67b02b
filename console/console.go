package console

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"github.com/chorusrt/chorus/batch"
	"github.com/chorusrt/chorus/keystore"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/requestlog"
	"github.com/chorusrt/chorus/runtime"
	"github.com/chorusrt/chorus/session"
	"github.com/chorusrt/chorus/store"
)

// The console's paths: its pages under PagePrefix, its JSON and SSE API
// under APIPrefix. Mount the Handler on both (Register does).
const (
	PagePrefix = "/console/"
	APIPrefix  = "/api/console/"
)

// Options configures a console. Every field is optional: a page whose
// source is missing says so.
type Options struct {
	// Runtime is the runtime whose credentials the console shows (on a
	// cluster member, the node's: Node.Runtime()).
	Runtime *runtime.Runtime
	// Sessions is the local session manager whose sessions the console
	// lists, shows and resolves.
	Sessions *session.Manager
	// Cluster, on a cluster member (a *cluster.Node), fills the Cluster
	// page; BudgetOwners, when set, says which member owns each key's
	// budget (chorus node adapts Node.BudgetOwners).
	Cluster      Cluster
	BudgetOwners func() []BudgetOwner
	// ClusterSessions, when Sessions is nil, are the sessions the console
	// reaches through the cluster (Node.Sessions()); Journal is then the
	// cluster's session journal, which lists them and gives their
	// timelines.
	ClusterSessions RemoteSessions
	Journal         store.Journal
	// Batches is the registry of the process's batch jobs.
	Batches *batch.Registry
	// Token is the operator token. Every state change (approve, reject,
	// cancel, send) needs it, as "Authorization: Bearer <token>" or the
	// cookie a login with it sets (then with the CSRF token too). Without
	// a token the console is read-only.
	Token string
	// Loopback says the console is served on a loopback address only:
	// then reading (pages, the API's GETs, the streams) needs no token,
	// from a request whose Host is a loopback name. Otherwise reading
	// needs the token too.
	Loopback bool
	// Tick is the period of the live tables' streams (default 1s).
	Tick time.Duration
	// ListLimit bounds the sessions a list looks at: the last ids in the
	// journal's order (sorted by id), plus, with a local Manager, every
	// session it runs or holds with approvals pending (Manager.Live), so
	// that the Approvals page misses none of this process's (default 500).
	ListLimit int
	// RequestLog, when set, is the gateway's request log, read by GET
	// /api/console/requests and /api/console/usage (requests.go).
	RequestLog *requestlog.Logger
	// KeyStore, when set, is the gateway's key store: the Keys page and
	// the admin API under /api/console/keys (keys.go) list, create,
	// update, rotate and revoke its keys, reads with the read access,
	// changes with the operator token.
	KeyStore *keystore.Store
	// Logger receives the console's log lines (default: discarded).
	Logger *slog.Logger
}

// Handler is the console: an http.Handler serving the pages under
// PagePrefix and the API under APIPrefix. It is safe for concurrent use.
type Handler struct {
	opt    Options
	rt     *runtime.Runtime
	sess   sessions
	log    *slog.Logger
	mux    *http.ServeMux
	auth   *authenticator
	pages  *pages
	static http.Handler
	now    func() time.Time
	// sseWrite bounds one write to a stream's client: a slower client is
	// dropped.
	sseWrite time.Duration
}

// New returns a console over the given sources.
func New(opt Options) (*Handler, error) {
	if opt.Tick < 0 || opt.ListLimit < 0 {
		return nil, &llm.ConfigError{Field: "console.Options", Msg: "Tick and ListLimit must not be negative"}
	}
	if opt.Tick == 0 {
		opt.Tick = time.Second
	}
	if opt.ListLimit == 0 {
		opt.ListLimit = 500
	}
	if opt.Journal != nil && opt.ClusterSessions == nil {
		return nil, &llm.ConfigError{Field: "console.Options.Journal", Msg: "is for a cluster's sessions: give ClusterSessions too (a local Manager lists its own)"}
	}
	h := &Handler{opt: opt, rt: opt.Runtime, log: opt.Logger, now: time.Now, sseWrite: 5 * time.Second}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	switch {
	case opt.Sessions != nil:
		h.sess = managerSessions{opt.Sessions}
	case opt.ClusterSessions != nil:
		h.sess = clusterSessions{s: opt.ClusterSessions, j: opt.Journal}
	}
	h.auth = newAuthenticator(opt.Token, opt.Loopback)
	p, err := newPages()
	if err != nil {
		return nil, fmt.Errorf("console: templates: %w", err)
	}
	h.pages = p
	sub, err := fs.Sub(webFS, "web/static")
	if err != nil {
		return nil, err
	}
	h.static = http.StripPrefix(PagePrefix+"static/", http.FileServerFS(sub))
	h.routes()
	return h, nil
}

// Register mounts the console on mux, under PagePrefix and APIPrefix.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.Handle(PagePrefix, h)
	mux.Handle(APIPrefix, h)
}

// ServeHTTP serves the console's pages and API.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "same-origin")
	h.mux.ServeHTTP(w, r)
}

func (h *Handler) routes() {
	m := http.NewServeMux()
	read := func(f http.HandlerFunc) http.Handler { return h.auth.read(f) }
	write := func(f http.HandlerFunc) http.Handler { return h.auth.write(f) }
	// API: reads.
	m.Handle("GET "+APIPrefix+"credentials", read(h.apiCredentials))
	m.Handle("GET "+APIPrefix+"credentials/stream", read(h.streamCredentials))
	m.Handle("GET "+APIPrefix+"batches", read(h.apiBatches))
	m.Handle("GET "+APIPrefix+"batches/stream", read(h.streamBatches))
	m.Handle("GET "+APIPrefix+"batches/{job}", read(h.apiBatch))
	m.Handle("GET "+APIPrefix+"sessions", read(h.apiSessions))
	m.Handle("GET "+APIPrefix+"sessions/{id}", read(h.apiSession))
	m.Handle("GET "+APIPrefix+"sessions/{id}/events", read(h.streamSession))
	m.Handle("GET "+APIPrefix+"approvals", read(h.apiApprovals))
	m.Handle("GET "+APIPrefix+"cluster", read(h.apiCluster))
	m.Handle("GET "+APIPrefix+"requests", read(h.apiRequests)) // requests.go
	m.Handle("GET "+APIPrefix+"usage", read(h.apiUsage))
	// API: state changes.
	m.Handle("POST "+APIPrefix+"sessions/{id}/approve", write(h.apiResolve(true)))
	m.Handle("POST "+APIPrefix+"sessions/{id}/reject", write(h.apiResolve(false)))
	m.Handle("POST "+APIPrefix+"sessions/{id}/cancel", write(h.apiCancel))
	m.Handle("POST "+APIPrefix+"sessions/{id}/messages", write(h.apiSend))
	h.keyRoutes(m, read, write) // keys.go
	m.Handle(APIPrefix, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no such console endpoint: "+r.Method+" "+r.URL.Path)
	}))
	// Pages.
	m.Handle("GET "+PagePrefix+"static/", h.static)
	m.HandleFunc("GET "+PagePrefix+"login", h.loginPage)
	m.HandleFunc("POST "+PagePrefix+"login", h.login)
	m.HandleFunc("POST "+PagePrefix+"logout", h.logout)
	m.Handle("GET "+PagePrefix+"{$}", http.RedirectHandler(PagePrefix+"credentials", http.StatusSeeOther))
	m.Handle("GET "+PagePrefix+"credentials", h.auth.page(h.pageCredentials))
	m.Handle("GET "+PagePrefix+"batches", h.auth.page(h.pageBatches))
	m.Handle("GET "+PagePrefix+"sessions", h.auth.page(h.pageSessions))
	m.Handle("GET "+PagePrefix+"sessions/{id}", h.auth.page(h.pageSession))
	m.Handle("GET "+PagePrefix+"approvals", h.auth.page(h.pageApprovals))
	m.Handle("GET "+PagePrefix+"cluster", h.auth.page(h.pageCluster))
	m.Handle("GET "+PagePrefix+"requests", h.auth.page(h.pageRequests)) // requests_pages.go
	m.Handle("GET "+PagePrefix+"usage", h.auth.page(h.pageUsage))
	m.Handle("GET "+PagePrefix+"keys", h.auth.page(h.pageKeys)) // keys_pages.go
	m.Handle("GET "+PagePrefix+"keys/{id}", h.auth.page(h.pageKey))
	h.mux = m
}

// statusOf maps an error of the session layer to an HTTP status and a
// code the API names.
func statusOf(err error) (int, string) {
	var re *session.ResolveError
	var ce *llm.ConfigError
	switch {
	case errors.As(err, &re) && errors.Is(err, session.ErrAlreadyResolved):
		return http.StatusConflict, "already_resolved"
	case errors.Is(err, session.ErrStaleInterrupt):
		return http.StatusConflict, "stale_interrupt"
	case errors.Is(err, session.ErrUnknownInterrupt):
		return http.StatusNotFound, "unknown_interrupt"
	case errors.Is(err, session.ErrUnknownSession):
		return http.StatusNotFound, "unknown_session"
	case errors.Is(err, session.ErrNoActiveTurn):
		return http.StatusConflict, "no_active_turn"
	case errors.Is(err, session.ErrClosed):
		return http.StatusServiceUnavailable, "closed"
	case errors.As(err, &ce):
		return http.StatusBadRequest, "bad_request"
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout, "timeout"
	case errors.Is(err, errNoJournal):
		return http.StatusNotImplemented, "no_journal"
	}
	return http.StatusInternalServerError, "internal"
}
