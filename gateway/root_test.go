package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/gateway"
)

// raw sends method path with headers (pairs) and does not follow redirects.
func (f *fixture) raw(t *testing.T, method, path string, header ...string) answer {
	t.Helper()
	req, err := http.NewRequest(method, f.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	c := *f.gw.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := answer{status: resp.StatusCode, header: resp.Header, body: b}
	assertNoKey(t, a)
	return a
}

const browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"

// TestRootSendsBrowsersToTheConsole: a browser opening / is sent to the
// console when one is mounted; an API client (or curl's */*) gets the JSON
// listing of the version and the endpoint families; without a console the
// browser gets the listing too.
func TestRootSendsBrowsersToTheConsole(t *testing.T) {
	fx := newFixture(t, gateway.Options{Console: "/console/"})
	a := fx.raw(t, "GET", "/", "Accept", browserAccept)
	if a.status != http.StatusFound || a.header.Get("Location") != "/console/" {
		t.Fatalf("browser at /: %d Location %q; want 302 to /console/", a.status, a.header.Get("Location"))
	}
	for _, accept := range []string{"", "*/*", "application/json", "application/json, text/html;q=0.5"} {
		a := fx.raw(t, "GET", "/", "Accept", accept)
		if a.status != http.StatusOK || !strings.HasPrefix(a.header.Get("Content-Type"), "application/json") {
			t.Fatalf("Accept %q at /: %d %s", accept, a.status, a.body)
		}
		var root gateway.Root
		decode(t, a.body, &root)
		if root.Version.Version == "" || root.Console != "/console/" || len(root.Families) != 3 {
			t.Fatalf("Accept %q: root %+v", accept, root)
		}
		var names []string
		for _, f := range root.Families {
			names = append(names, f.Name)
		}
		if got := strings.Join(names, " "); got != "openai anthropic gemini" {
			t.Fatalf("families %q", got)
		}
	}

	plain := newFixture(t, gateway.Options{})
	a = plain.raw(t, "GET", "/", "Accept", browserAccept)
	if a.status != http.StatusOK || !json.Valid(a.body) {
		t.Fatalf("browser at / without a console: %d %s", a.status, a.body)
	}
}

// TestRootVersion: GET /version is the build's version as JSON.
func TestRootVersion(t *testing.T) {
	fx := newFixture(t, gateway.Options{})
	a := fx.raw(t, "GET", "/version")
	var v struct {
		Version string `json:"version"`
		Go      string `json:"go"`
	}
	decode(t, a.body, &v)
	if a.status != http.StatusOK || v.Version == "" || !strings.HasPrefix(v.Go, "go") {
		t.Fatalf("/version: %d %s", a.status, a.body)
	}
}

// TestRootUnknownEndpoint: a path no route serves is a 404 in the client's
// own format that names the method and path and says it is not an
// endpoint, never model_not_found.
func TestRootUnknownEndpoint(t *testing.T) {
	fx := newFixture(t, gateway.Options{})
	for _, c := range []struct {
		name, method, path string
		header             []string
		check              func(t *testing.T, b []byte)
	}{
		{"openai", "POST", "/v1/chat/complete", nil, func(t *testing.T, b []byte) {
			var e struct {
				Error struct{ Message, Type, Code string }
			}
			decode(t, b, &e)
			if e.Error.Code != gateway.UnknownEndpoint || e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, "POST /v1/chat/complete is not an endpoint") {
				t.Errorf("OpenAI error %+v", e.Error)
			}
		}},
		{"openai, wrong method", "GET", "/v1/chat/completions", nil, func(t *testing.T, b []byte) {
			var e struct {
				Error struct{ Message, Code string }
			}
			decode(t, b, &e)
			if e.Error.Code != gateway.UnknownEndpoint || !strings.Contains(e.Error.Message, "GET /v1/chat/completions is not an endpoint") {
				t.Errorf("OpenAI error %+v", e.Error)
			}
		}},
		{"anthropic by header", "POST", "/v1/complete", []string{"anthropic-version", "2023-06-01", "x-api-key", "gw-key"}, func(t *testing.T, b []byte) {
			var e struct {
				Type  string
				Error struct{ Type, Message string }
			}
			decode(t, b, &e)
			if e.Type != "error" || e.Error.Type != "not_found_error" || !strings.Contains(e.Error.Message, "POST /v1/complete is not an endpoint") {
				t.Errorf("Anthropic error %+v", e)
			}
		}},
		{"gemini", "GET", "/v1beta/cachedContents", nil, func(t *testing.T, b []byte) {
			var e struct {
				Error struct {
					Code            int
					Message, Status string
				}
			}
			decode(t, b, &e)
			if e.Error.Code != 404 || e.Error.Status != "NOT_FOUND" || !strings.Contains(e.Error.Message, "GET /v1beta/cachedContents is not an endpoint") {
				t.Errorf("Gemini error %+v", e.Error)
			}
		}},
		{"a browser's favicon", "GET", "/favicon.ico", []string{"Accept", "image/*"}, func(t *testing.T, b []byte) {
			if !strings.Contains(string(b), "is not an endpoint") {
				t.Errorf("favicon: %s", b)
			}
		}},
	} {
		a := fx.raw(t, c.method, c.path, c.header...)
		if a.status != http.StatusNotFound {
			t.Errorf("%s: status %d %s", c.name, a.status, a.body)
			continue
		}
		if strings.Contains(string(a.body), "model_not_found") {
			t.Errorf("%s: %s reads as a missing model", c.name, a.body)
		}
		c.check(t, a.body)
	}
}

// TestRootFamiliesAreRouted: every endpoint GET / lists is served by a
// route (its answer, whatever it is, is not the unknown-endpoint 404).
func TestRootFamiliesAreRouted(t *testing.T) {
	fx := newFixture(t, gateway.Options{})
	r := strings.NewReplacer("{id}", "file-x", "{model}", "gemini-2.5-flash")
	n := 0
	for _, f := range gateway.Families {
		for _, ep := range f.Endpoints {
			method, path, _ := strings.Cut(r.Replace(ep), " ")
			a := fx.raw(t, method, path)
			if strings.Contains(string(a.body), "is not an endpoint") {
				t.Errorf("%s (%s): %d %s", ep, f.Name, a.status, a.body)
			}
			n++
		}
	}
	if n < 20 {
		t.Fatalf("only %d endpoints listed", n)
	}
}
