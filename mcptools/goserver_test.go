package mcptools

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/session"
)

const testToken = "s3cret-token-value"

// goServer is an in-process MCP server on the Go SDK behind a loopback
// httptest server that wants "Authorization: Bearer testToken". It serves
// pages of two tools, so listing takes several pages.
func goServer(t *testing.T, tools ...string) (*mcp.Server, string) {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "go-test", Version: "1"}, &mcp.ServerOptions{PageSize: 2})
	for _, name := range tools {
		addTool(srv, name)
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got := r.Header.Get("Authorization"); got != "Bearer "+testToken {
			// A careless server that echoes what it was sent.
			http.Error(w, "bad credentials: "+got+" for "+r.URL.String(), http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return srv, hs.URL + "/mcp"
}

func addTool(srv *mcp.Server, name string) {
	srv.AddTool(&mcp.Tool{Name: name, Description: "says its name", InputSchema: map[string]any{"type": "object"},
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "I am " + name}}}, nil
		})
}

// TestHTTPServerListsPagesAndRefreshes: a URL server with headers lists
// every page of tools; a tool added later (notifications/tools/list_changed)
// appears; a removed one disappears; a JSON-RPC error is a *CallError.
func TestHTTPServerListsPagesAndRefreshes(t *testing.T) {
	srv, url := goServer(t, "t1", "t2", "t3", "t4", "t5")
	set := start(t, Options{Servers: []Server{{Name: "go", URL: url, Headers: map[string]string{"Authorization": "Bearer " + testToken}, Prefix: "go_"}}})
	if got := names(set); got != "go_t1 go_t2 go_t3 go_t4 go_t5" {
		t.Fatalf("tools after start: %s", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := set.Call(ctx, "go_t3", nil)
	if err != nil || r.Text != "I am t3" {
		t.Fatalf("call go_t3: %+v %v", r, err)
	}

	addTool(srv, "t6")
	waitFor(t, func() bool { return strings.Contains(names(set), "go_t6") }, "go_t6 to appear after list_changed")
	srv.RemoveTools("t1")
	waitFor(t, func() bool { return !strings.Contains(names(set), "go_t1") }, "go_t1 to disappear after list_changed")

	// t2 removed on the server but still in our list: the call is refused
	// by the server with a JSON-RPC error.
	srv.RemoveTools("t2")
	_, err = set.server("go").call(ctx, &Tool{Name: "go_t2", RemoteName: "t2"}, nil, "")
	var ce *CallError
	if !errors.As(err, &ce) || ce.Server != "go" || !strings.Contains(err.Error(), "unknown tool") {
		t.Errorf("call of a removed tool: want a *CallError from the server, got %T %v", err, err)
	}
}

// TestSecretsStayOut: a wrong token fails Start with a *StartError whose
// text shows neither the token nor the URL's query key, even though the
// server echoes both.
func TestSecretsStayOut(t *testing.T) {
	_, url := goServer(t, "t1")
	wrong := "wrong-token-1234"
	_, err := Start(context.Background(), Options{Servers: []Server{{Name: "go", URL: url + "?key=query-key-5678",
		Headers: map[string]string{"Authorization": "Bearer " + wrong}}}})
	var se *StartError
	if !errors.As(err, &se) || se.Server != "go" {
		t.Fatalf("want a *StartError naming go, got %T %v", err, err)
	}
	for _, secret := range []string{wrong, "query-key-5678"} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("the error shows a secret: %v", err)
		}
	}
	// The redaction itself, on an error that holds the secrets.
	sv := Server{URL: "https://u:pass-word@example.test/mcp?token=tok-abcd", Headers: map[string]string{"X-Api-Key": "key-efgh"}}
	e := redactErr(fmt.Errorf("got pass-word, tok-abcd and key-efgh: %w", context.Canceled), sv.secrets())
	if s := e.Error(); strings.Contains(s, "pass-word") || strings.Contains(s, "tok-abcd") || strings.Contains(s, "key-efgh") || !errors.Is(e, context.Canceled) {
		t.Errorf("redacted: %q (is Canceled: %v)", s, errors.Is(e, context.Canceled))
	}
}

// TestConfigErrors: bad configuration is a *llm.ConfigError naming the field.
func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		srv   []Server
		field string
	}{
		{[]Server{{Command: []string{"x"}}}, "servers[0].name"},
		{[]Server{{Name: "a b", Command: []string{"x"}}}, "servers[a b].name"},
		{[]Server{{Name: "a"}}, "servers[a].command"},
		{[]Server{{Name: "a", Command: []string{"x"}, URL: "http://127.0.0.1/"}}, "servers[a].url"},
		{[]Server{{Name: "a", URL: "ftp://127.0.0.1/"}}, "servers[a].url"},
		{[]Server{{Name: "a", URL: "http://127.0.0.1/", Env: map[string]string{"K": "v"}}}, "servers[a].env"},
		{[]Server{{Name: "a", Command: []string{"x"}, Headers: map[string]string{"K": "v"}}}, "servers[a].headers"},
		{[]Server{{Name: "a", URL: "http://127.0.0.1/", Headers: map[string]string{"Bad Name": "secret-value"}}}, "servers[a].headers"},
		{[]Server{{Name: "a", Command: []string{"x"}, Prefix: "a.b"}}, "servers[a].prefix"},
		{[]Server{{Name: "a", Command: []string{"x"}}, {Name: "a", Command: []string{"y"}}}, "servers[a].name"},
	} {
		_, err := Start(context.Background(), Options{Servers: tc.srv})
		var ce *llm.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%+v: want a ConfigError on %s, got %T %v", tc.srv, tc.field, err, err)
		} else if strings.Contains(err.Error(), "secret-value") {
			t.Errorf("the error shows a header value: %v", err)
		}
	}
}

// TestCollision: two servers offering the same names without prefixes is a
// *CollisionError naming both; prefixes make them coexist.
func TestCollision(t *testing.T) {
	_, url1 := goServer(t, "same", "only1")
	_, url2 := goServer(t, "same")
	auth := map[string]string{"Authorization": "Bearer " + testToken}
	_, err := Start(context.Background(), Options{Servers: []Server{{Name: "first", URL: url1, Headers: auth}, {Name: "second", URL: url2, Headers: auth}}})
	var ce *CollisionError
	if !errors.As(err, &ce) || ce.Tool != "same" || ce.First != "first" || ce.Second != "second" ||
		!strings.Contains(err.Error(), `"first"`) || !strings.Contains(err.Error(), `"second"`) {
		t.Fatalf("want a *CollisionError naming both servers, got %T %v", err, err)
	}
	set := start(t, Options{Servers: []Server{{Name: "first", URL: url1, Headers: auth}, {Name: "second", URL: url2, Headers: auth, Prefix: "b_"}}})
	if got := names(set); got != "b_same only1 same" {
		t.Errorf("tools: %s", got)
	}
}

func names(s *Set) string {
	var out []string
	for _, t := range s.Tools() {
		out = append(out, t.Name)
	}
	return strings.Join(out, " ")
}

// waitFor polls cond until it holds, failing the test after 30s.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHTTPServerRestarted: a URL server that restarts (its sessions lost:
// the old session id gets 404) is connected to again, and calls work.
func TestHTTPServerRestarted(t *testing.T) {
	shorten(t)
	srv := mcp.NewServer(&mcp.Implementation{Name: "go-test", Version: "1"}, nil)
	addTool(srv, "t1")
	var h atomic.Pointer[mcp.StreamableHTTPHandler]
	h.Store(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.Load().ServeHTTP(w, r) }))
	t.Cleanup(func() {
		// After the Set's Close: the sessions the first handler forgot are
		// still open on the server's side.
		for ss := range srv.Sessions() {
			_ = ss.Close()
		}
		hs.Close()
	})
	set := start(t, Options{Servers: []Server{{Name: "go", URL: hs.URL}}, Logger: testLogger(t)})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if r, err := set.Call(ctx, "t1", nil); err != nil || r.Text != "I am t1" {
		t.Fatalf("before: %+v %v", r, err)
	}
	// The "restart": a new handler that knows no session.
	h.Store(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	hs.CloseClientConnections()
	var r *Result
	var err error
	for range 3 { // the first call may be the one that finds the session gone
		if r, err = set.Call(ctx, "t1", nil); err == nil {
			break
		}
		t.Logf("call: %v", err)
	}
	if err != nil || r.Text != "I am t1" {
		t.Fatalf("after the restart: %+v %v", r, err)
	}
}

// TestSessionSendsIdempotencyKey: a session's idempotent write sends its
// key <session>/<turn>/<call> in the call's _meta; other effects send none.
func TestSessionSendsIdempotencyKey(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "go-test", Version: "1"}, nil)
	for _, name := range []string{"put", "get"} {
		srv.AddTool(&mcp.Tool{Name: name, InputSchema: map[string]any{"type": "object"}},
			func(_ context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				key, _ := r.Params.Meta[IdempotencyKeyMeta].(string)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "key=" + key}}}, nil
			})
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	set := start(t, Options{Servers: []Server{{Name: "go", URL: hs.URL}}})
	m, _ := newManager(t, set.SessionTools(), map[string]session.ToolPolicy{
		"put": {Effect: session.EffectIdempotentWrite}, "get": {Effect: session.EffectRead}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.Send(ctx, "kv", llm.UserText("call put then get")); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Wait(ctx, "kv"); err != nil {
		t.Fatal(err)
	}
	s, err := m.Snapshot(ctx, "kv")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range s.Tools {
		want := "key="
		if r.Name == "put" {
			want += "kv/1/" + r.ID
		}
		if r.Status != session.StatusSucceeded || r.Result != want {
			t.Errorf("%s: %s %q, want %q", r.Name, r.Status, r.Result, want)
		}
	}
	if len(s.Tools) != 2 {
		t.Errorf("records: %+v", s.Tools)
	}
}
