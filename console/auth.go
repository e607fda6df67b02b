package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Cookie and header names.
const (
	// CookieName is the console's login cookie: a random id of a login,
	// never the token.
	CookieName = "chorus_console"
	// CSRFHeader carries the login's CSRF token on state changes made with
	// the cookie (the pages put it in <meta name="csrf-token">).
	CSRFHeader = "X-CSRF-Token"
)

// loginTTL is how long a login lasts; maxLogins bounds the logins held.
const (
	loginTTL  = 12 * time.Hour
	maxLogins = 1024
)

type login struct {
	csrf    string
	expires time.Time
}

// authenticator decides who may read and who may change state.
type authenticator struct {
	token    [32]byte // SHA-256 of the token: compared in constant time
	hasToken bool
	loopback bool

	mu     sync.Mutex
	logins map[string]login
}

func newAuthenticator(token string, loopback bool) *authenticator {
	a := &authenticator{hasToken: token != "", loopback: loopback, logins: map[string]login{}}
	a.token = sha256.Sum256([]byte(token))
	return a
}

// viewer is who makes a request.
type viewer struct {
	// authed: the request carries the token (bearer) or a login cookie.
	authed bool
	// cookie: authenticated by the login cookie (CSRF applies); csrf is
	// then its CSRF token.
	cookie bool
	csrf   string
	// canWrite: the console has a token at all.
	canWrite bool
}

type viewerKey struct{}

func viewerOf(ctx context.Context) viewer {
	v, _ := ctx.Value(viewerKey{}).(viewer)
	return v
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// tokenOK compares a presented token with the operator token.
func (a *authenticator) tokenOK(t string) bool {
	if !a.hasToken || t == "" {
		return false
	}
	sum := sha256.Sum256([]byte(t))
	return subtle.ConstantTimeCompare(sum[:], a.token[:]) == 1
}

// identify says who r comes from.
func (a *authenticator) identify(r *http.Request) viewer {
	v := viewer{canWrite: a.hasToken}
	if h := r.Header.Get("Authorization"); h != "" {
		if t, ok := strings.CutPrefix(h, "Bearer "); ok && a.tokenOK(strings.TrimSpace(t)) {
			v.authed = true
			return v
		}
		return v // a wrong Authorization is not rescued by a cookie
	}
	if c, err := r.Cookie(CookieName); err == nil && a.hasToken {
		a.mu.Lock()
		l, ok := a.logins[c.Value]
		if ok && time.Now().After(l.expires) {
			delete(a.logins, c.Value)
			ok = false
		}
		a.mu.Unlock()
		if ok {
			v.authed, v.cookie, v.csrf = true, true, l.csrf
		}
	}
	return v
}

// loopbackHost reports whether the request names the server by a loopback
// name (a page of another site rebinding its DNS name to 127.0.0.1 does
// not).
func loopbackHost(r *http.Request) bool {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// mayRead: authenticated, or a loopback console asked by a loopback name.
func (a *authenticator) mayRead(r *http.Request, v viewer) bool {
	return v.authed || (a.loopback && loopbackHost(r))
}

// read guards an API read.
func (a *authenticator) read(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := a.identify(r)
		if !a.mayRead(r, v) {
			writeError(w, http.StatusUnauthorized, "unauthorized", "the console needs the operator token: Authorization: Bearer <token>, or log in at "+PagePrefix+"login")
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), viewerKey{}, v)))
	})
}

// page guards a page: a reader who may not read is sent to the login page.
func (a *authenticator) page(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := a.identify(r)
		if !a.mayRead(r, v) {
			http.Redirect(w, r, PagePrefix+"login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), viewerKey{}, v)))
	})
}

// crossSite reports a request a browser made from another site: its
// Sec-Fetch-Site says so, or its Origin is not this host.
func crossSite(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return true
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return true
		}
	}
	return false
}

// write guards a state change: the token (bearer or login cookie), and
// the CSRF checks: no cross-site request, and with the cookie the login's
// CSRF token in the X-CSRF-Token header.
func (a *authenticator) write(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := a.identify(r)
		switch {
		case !a.hasToken:
			writeError(w, http.StatusForbidden, "read_only", "the console has no operator token (--token or CHORUS_CONSOLE_TOKEN): it is read-only")
			return
		case !v.authed:
			writeError(w, http.StatusUnauthorized, "unauthorized", "a state change needs the operator token: Authorization: Bearer <token>, or log in at "+PagePrefix+"login")
			return
		case crossSite(r):
			writeError(w, http.StatusForbidden, "csrf", "cross-site request refused")
			return
		case v.cookie && subtle.ConstantTimeCompare([]byte(r.Header.Get(CSRFHeader)), []byte(v.csrf)) != 1:
			writeError(w, http.StatusForbidden, "csrf", "missing or wrong "+CSRFHeader+" header")
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), viewerKey{}, v)))
	})
}

// newLogin records a login and returns its cookie value.
func (a *authenticator) newLogin() string {
	id := randomHex(32)
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.logins) >= maxLogins {
		var oldest string
		var at time.Time
		for k, l := range a.logins {
			if now.After(l.expires) {
				delete(a.logins, k)
				continue
			}
			if oldest == "" || l.expires.Before(at) {
				oldest, at = k, l.expires
			}
		}
		if len(a.logins) >= maxLogins {
			delete(a.logins, oldest)
		}
	}
	a.logins[id] = login{csrf: randomHex(32), expires: now.Add(loginTTL)}
	return id
}

func (a *authenticator) logout(id string) {
	a.mu.Lock()
	delete(a.logins, id)
	a.mu.Unlock()
}

// safeNext keeps a login's redirect inside the console.
func safeNext(next string) string {
	if !strings.HasPrefix(next, PagePrefix) || strings.HasPrefix(next, "//") || strings.Contains(next, "\\") {
		return PagePrefix + "credentials"
	}
	return next
}

// login checks the token of the login form and sets the cookie.
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	if crossSite(r) {
		writeError(w, http.StatusForbidden, "csrf", "cross-site request refused")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 1<<16)
	if err := r.ParseForm(); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", "unreadable form")
		return
	}
	next := safeNext(r.PostForm.Get("next"))
	if !h.auth.tokenOK(r.PostForm.Get("token")) {
		h.pages.render(w, r, "login", pageData{Title: "Log in", Data: loginData{Next: next, Failed: true, HasToken: h.auth.hasToken}, Status: http.StatusUnauthorized})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: h.auth.newLogin(), Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: int(loginTTL / time.Second)})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout forgets the login.
func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	if crossSite(r) {
		writeError(w, http.StatusForbidden, "csrf", "cross-site request refused")
		return
	}
	if c, err := r.Cookie(CookieName); err == nil {
		h.auth.logout(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, PagePrefix+"login", http.StatusSeeOther)
}

type loginData struct {
	Next     string
	Failed   bool
	HasToken bool
}

func (h *Handler) loginPage(w http.ResponseWriter, r *http.Request) {
	h.pages.render(w, r, "login", pageData{Title: "Log in", Data: loginData{Next: safeNext(r.URL.Query().Get("next")), HasToken: h.auth.hasToken}})
}
