package console

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/chorusrt/chorus/internal/version"
)

//go:embed web
var webFS embed.FS

// pages holds one template set per page, each the layout plus the page.
type pages struct {
	sets map[string]*template.Template
}

var pageNames = []string{"login", "credentials", "batches", "sessions", "session", "approvals", "cluster", "requests", "usage", "keys", "key"}

func newPages() (*pages, error) {
	funcs := template.FuncMap{
		"prefix": func() string { return PagePrefix },
		"api":    func() string { return APIPrefix },
		// The build's version (module version, VCS revision), in the footer.
		"version": func() string { return version.Get().String() },
		"ts": func(t time.Time) string {
			if t.IsZero() {
				return "-"
			}
			return t.UTC().Format(time.RFC3339)
		},
		"clock": func(t time.Time) string { return t.UTC().Format("15:04:05.000") },
		"ptime": func(t *time.Time) string {
			if t == nil {
				return ""
			}
			return t.UTC().Format(time.RFC3339)
		},
		"usd": func(v *float64) string {
			if v == nil {
				return "-"
			}
			return fmt.Sprintf("$%.6f", *v)
		},
		"secs": func(v float64) string {
			if v < 0 {
				return "-"
			}
			return (time.Duration(v) * time.Second).Round(time.Second).String()
		},
		"f1":  func(v float64) string { return fmt.Sprintf("%.1f", v) },
		"pct": func(v float64) string { return fmt.Sprintf("%.1f%%", v*100) },
		// cachedShare is the part of a target's input read from the
		// provider's prompt cache, "-" before any input.
		"cachedShare": func(cached, input int64) string {
			if input <= 0 {
				return "-"
			}
			return fmt.Sprintf("%.1f%%", float64(cached)*100/float64(input))
		},
		"estimate": func(ms float64) string {
			if ms <= 0 {
				return "-"
			}
			return fmt.Sprintf("%.1f ms", ms)
		},
		"join":     strings.Join,
		"dollars":  dollars,
		"spendpct": spendPct,
		"pathesc":  url.PathEscape,
		"budget": func(remaining, limit int) string {
			if remaining < 0 {
				return "-"
			}
			if limit > 0 {
				return fmt.Sprintf("%d / %d", remaining, limit)
			}
			return fmt.Sprint(remaining)
		},
		"approvedText": func(b *bool) string {
			if b == nil {
				return ""
			}
			if *b {
				return "approved"
			}
			return "rejected"
		},
	}
	p := &pages{sets: map[string]*template.Template{}}
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(webFS, "web/templates/layout.html", "web/templates/keyparts.html", "web/templates/"+name+".html")
		if err != nil {
			return nil, err
		}
		p.sets[name] = t
	}
	return p, nil
}

// pageData is what every page gets.
type pageData struct {
	Title  string
	Active string
	// Authed: the viewer is logged in (or presents the token); CSRF is the
	// login's CSRF token for state changes; CanWrite: the console has a
	// token at all.
	Authed   bool
	CSRF     string
	CanWrite bool
	Data     any
	// Status is the HTTP status (default 200).
	Status int
}

func (p *pages) render(w http.ResponseWriter, r *http.Request, name string, d pageData) {
	v := viewerOf(r.Context())
	d.Authed, d.CSRF, d.CanWrite = v.authed, v.csrf, v.canWrite
	if d.Active == "" {
		d.Active = name
	}
	var buf bytes.Buffer
	if err := p.sets[name].Execute(&buf, d); err != nil {
		http.Error(w, "console: rendering "+name+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
	h.Set("X-Frame-Options", "DENY")
	if d.Status != 0 {
		w.WriteHeader(d.Status)
	}
	_, _ = w.Write(buf.Bytes())
}

func (h *Handler) pageCredentials(w http.ResponseWriter, r *http.Request) {
	h.pages.render(w, r, "credentials", pageData{Title: "Credentials", Data: h.credentials()})
}

func (h *Handler) pageBatches(w http.ResponseWriter, r *http.Request) {
	h.pages.render(w, r, "batches", pageData{Title: "Batches", Data: h.batches()})
}

type sessionsPage struct {
	State  string
	States []string
	View   SessionsView
	Err    string
}

func (h *Handler) pageSessions(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
	defer cancel()
	state := r.URL.Query().Get("state")
	d := sessionsPage{State: state, States: []string{StateWaitingApproval, StateRunning, StateFailed, StateIdle}}
	switch state {
	case "", StateWaitingApproval, StateRunning, StateFailed, StateIdle:
		v, err := h.sessionsView(ctx, state)
		if err != nil {
			d.Err = err.Error()
		}
		d.View = v
	default:
		d.Err = "unknown state " + state
	}
	h.pages.render(w, r, "sessions", pageData{Title: "Sessions", Data: d})
}

type sessionPage struct {
	ID   string
	View SessionView
	Err  string
}

func (h *Handler) pageSession(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
	defer cancel()
	id := r.PathValue("id")
	v, err := h.sessionView(ctx, id)
	d := sessionPage{ID: id, View: v}
	status := 0
	if err != nil {
		d.Err = err.Error()
		status, _ = statusOf(err)
		if err == errNoSessions {
			status = http.StatusNotFound
		}
	}
	h.pages.render(w, r, "session", pageData{Title: "Session " + id, Active: "sessions", Data: d, Status: status})
}

type approvalsPage struct {
	View ApprovalsView
	Err  string
}

func (h *Handler) pageApprovals(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
	defer cancel()
	v, err := h.approvals(ctx)
	d := approvalsPage{View: v}
	if err != nil {
		d.Err = err.Error()
	}
	h.pages.render(w, r, "approvals", pageData{Title: "Approvals", Data: d})
}

func (h *Handler) pageCluster(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
	defer cancel()
	h.pages.render(w, r, "cluster", pageData{Title: "Cluster", Data: h.clusterView(ctx)})
}
