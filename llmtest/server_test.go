package llmtest_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

func TestRequestsRecorded(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	c := newClient(t)
	calls := []struct {
		url, body string
		format    llmtest.Format
		path      string
		stream    bool
		model     string
	}{
		{openaiEP.url(srv, false), openaiEP.body(false), llmtest.FormatOpenAI, "/v1/chat/completions", false, model},
		{openaiEP.url(srv, true), openaiEP.body(true), llmtest.FormatOpenAI, "/v1/chat/completions", true, model},
		{anthropicEP.url(srv, true), anthropicEP.body(true), llmtest.FormatAnthropic, "/v1/messages", true, model},
		{geminiEP.url(srv, true), geminiEP.body(true), llmtest.FormatGemini, "/v1beta/models/" + model + ":streamGenerateContent", true, model},
		{geminiEP.url(srv, false), geminiEP.body(false), llmtest.FormatGemini, "/v1beta/models/" + model + ":generateContent", false, model},
		{srv.URL + "/v1/files", `{}`, llmtest.FormatUnknown, "/v1/files", false, ""},
	}
	for _, call := range calls {
		req, _ := http.NewRequest(http.MethodPost, call.url, strings.NewReader(call.body))
		req.Header.Set("Authorization", "Bearer sk-test")
		req.Header.Set("X-Custom", "v1")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if call.format == llmtest.FormatUnknown && resp.StatusCode != http.StatusNotFound {
			t.Errorf("unknown path: status %d, want 404", resp.StatusCode)
		}
	}
	recs := srv.Requests()
	if len(recs) != len(calls) || srv.Count() != len(calls) {
		t.Fatalf("recorded %d (Count %d), want %d", len(recs), srv.Count(), len(calls))
	}
	for i, call := range calls {
		r := recs[i]
		if r.Format != call.format || r.Method != http.MethodPost || r.Path != call.path || r.Stream != call.stream ||
			r.Model != call.model || string(r.Body) != call.body || r.Header.Get("X-Custom") != "v1" {
			t.Errorf("record %d = %+v", i, r)
		}
	}
	if recs[3].Query.Get("alt") != "sse" || recs[4].Query.Get("alt") != "" {
		t.Errorf("queries %v %v", recs[3].Query, recs[4].Query)
	}
	// Records are copies.
	recs[0].Body[0] = 'X'
	recs[0].Header.Set("X-Custom", "changed")
	if again := srv.Requests(); again[0].Body[0] != '{' || again[0].Header.Get("X-Custom") != "v1" {
		t.Error("Requests() returned shared memory")
	}
}

func TestBadRequests(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	srv.Push(llmtest.Text("kept"))
	c := newClient(t)
	r := post(t, c, srv.OpenAIBaseURL()+"/chat/completions", `{"model":`)
	if r.resp.StatusCode != 400 || str(get(obj(t, string(r.body)), "error", "type")) != "invalid_request_error" {
		t.Errorf("invalid JSON: status %d body %s", r.resp.StatusCode, r.body)
	}
	resp, err := c.Get(srv.AnthropicBaseURL() + "/v1/messages")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: status %d", resp.StatusCode)
	}
	if srv.Pending() != 1 {
		t.Error("a rejected request consumed a script step")
	}
}

func TestScriptOrderAndDefault(t *testing.T) {
	srv := llmtest.NewServer(llmtest.WithDefault(llmtest.Reply{Text: "fallback"}))
	defer srv.Close()
	srv.Push(llmtest.Text("first"), llmtest.Step{})
	srv.Push(llmtest.Text("second"))
	c := newClient(t)
	var got []string
	for range 4 {
		r := post(t, c, openaiEP.url(srv, false), openaiEP.body(false))
		got = append(got, str(get(obj(t, string(r.body)), "choices", 0, "message", "content")))
	}
	if strings.Join(got, ",") != "first,fallback,second,fallback" {
		t.Errorf("replies %v", got)
	}

	plain := llmtest.NewServer()
	defer plain.Close()
	r := post(t, c, openaiEP.url(plain, false), openaiEP.body(false))
	if s := str(get(obj(t, string(r.body)), "choices", 0, "message", "content")); s != "simulated reply" {
		t.Errorf("default reply %q", s)
	}
}

func TestExplicitUsageAndFinish(t *testing.T) {
	u := &llm.Usage{PromptTokens: 10, CacheReadTokens: 5, CacheWriteTokens: 2, CompletionTokens: 7, ReasoningTokens: 3}
	srv := llmtest.NewServer(llmtest.WithDefault(llmtest.Reply{Text: "x", Usage: u, Finish: llm.FinishLength, Model: "served-model"}))
	defer srv.Close()
	c := newClient(t)

	m := obj(t, string(post(t, c, openaiEP.url(srv, false), openaiEP.body(false)).body))
	if num(get(m, "usage", "prompt_tokens")) != 17 || num(get(m, "usage", "prompt_tokens_details", "cached_tokens")) != 5 ||
		num(get(m, "usage", "completion_tokens")) != 7 || num(get(m, "usage", "completion_tokens_details", "reasoning_tokens")) != 3 ||
		num(get(m, "usage", "total_tokens")) != 24 {
		t.Errorf("openai usage %v", m["usage"])
	}
	if str(get(m, "choices", 0, "finish_reason")) != "length" || str(m["model"]) != "served-model" {
		t.Errorf("openai finish %v model %v", get(m, "choices", 0, "finish_reason"), m["model"])
	}

	m = obj(t, string(post(t, c, anthropicEP.url(srv, false), anthropicEP.body(false)).body))
	if num(get(m, "usage", "input_tokens")) != 10 || num(get(m, "usage", "cache_read_input_tokens")) != 5 ||
		num(get(m, "usage", "cache_creation_input_tokens")) != 2 || num(get(m, "usage", "output_tokens")) != 7 {
		t.Errorf("anthropic usage %v", m["usage"])
	}
	if str(m["stop_reason"]) != "max_tokens" {
		t.Errorf("anthropic stop_reason %v", m["stop_reason"])
	}

	m = obj(t, string(post(t, c, geminiEP.url(srv, false), geminiEP.body(false)).body))
	g := m["usageMetadata"].(map[string]any)
	if num(g["promptTokenCount"]) != 17 || num(g["cachedContentTokenCount"]) != 5 || num(g["candidatesTokenCount"]) != 4 ||
		num(g["thoughtsTokenCount"]) != 3 || num(g["totalTokenCount"]) != 24 {
		t.Errorf("gemini usage %v", g)
	}
	if str(get(m, "candidates", 0, "finishReason")) != "MAX_TOKENS" {
		t.Errorf("gemini finishReason %v", get(m, "candidates", 0, "finishReason"))
	}
}

func TestReplyHeadersAndLatency(t *testing.T) {
	srv := llmtest.NewServer(llmtest.WithLatency(60*time.Millisecond, 10*time.Millisecond))
	defer srv.Close()
	srv.Push(llmtest.Respond(llmtest.Reply{Deltas: []string{"a", "b", "c", "d"}, Header: map[string]string{"X-Served-By": "llmtest"}}))
	c := newClient(t)
	start := time.Now()
	req, _ := http.NewRequest(http.MethodPost, openaiEP.url(srv, true), strings.NewReader(openaiEP.body(true)))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ttfb := time.Since(start); ttfb < 60*time.Millisecond {
		t.Errorf("headers after %v, want >= 60ms", ttfb)
	}
	if resp.Header.Get("X-Served-By") != "llmtest" {
		t.Errorf("extra header missing: %v", resp.Header)
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	if total := time.Since(start); total < 100*time.Millisecond {
		t.Errorf("stream took %v, want >= 60ms + 4 x 10ms", total)
	}
}

func TestOpenConnsAndCloseClientConnections(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	// Count the connections the client dials: on a loaded machine a
	// request may start after another ended and reuse its connection, so
	// the server must hold as many as were dialed, whatever the timing.
	var dials atomic.Int64
	var d net.Dialer
	// MaxIdleConnsPerHost above three: the default (2) makes the client
	// close its third connection when the requests end, and the server may
	// see that close before it is counted.
	tr := &http.Transport{MaxIdleConnsPerHost: 8, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return d.DialContext(ctx, network, addr)
	}}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	var wg sync.WaitGroup
	// Each answer stalls long enough for all three requests to be in
	// flight at once (a request that started after another ended would
	// reuse its connection), even on a loaded machine.
	for range 3 {
		srv.Push(llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultStall, Stall: 500 * time.Millisecond}))
	}
	start := make(chan struct{})
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if r := post(t, c, openaiEP.url(srv, false), openaiEP.body(false)); r.resp.StatusCode != 200 {
				t.Errorf("status %d", r.resp.StatusCode)
			}
		}()
	}
	close(start)
	wg.Wait()
	if n, want := srv.OpenConns(), int(dials.Load()); n != want || want == 0 {
		t.Errorf("OpenConns() = %d with %d idle keep-alive connections dialed", n, want)
	}
	tr.CloseIdleConnections()
	waitFor(t, func() bool { return srv.OpenConns() == 0 }, "OpenConns() == 0 after the client closed")

	post(t, c, openaiEP.url(srv, false), openaiEP.body(false))
	if srv.OpenConns() != 1 {
		t.Fatalf("OpenConns() = %d, want 1", srv.OpenConns())
	}
	srv.CloseClientConnections()
	waitFor(t, func() bool { return srv.OpenConns() == 0 }, "OpenConns() == 0 after CloseClientConnections")
	// A new connection is served normally.
	if r := post(t, newClient(t), openaiEP.url(srv, false), openaiEP.body(false)); r.resp.StatusCode != 200 {
		t.Errorf("after CloseClientConnections: status %d", r.resp.StatusCode)
	}
}

func TestCloseEndsStalledStreams(t *testing.T) {
	srv := llmtest.NewServer()
	srv.Push(llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultStall, After: 1, Stall: time.Hour}))
	c := newClient(t)
	errc := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, openaiEP.url(srv, true), strings.NewReader(openaiEP.body(true)))
		resp, err := c.Do(req)
		if err != nil {
			close(started)
			errc <- err
			return
		}
		defer resp.Body.Close()
		close(started)
		var buf bytes.Buffer
		_, err = buf.ReadFrom(resp.Body)
		errc <- err
	}()
	<-started
	start := time.Now()
	srv.Close()
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("Close took %v with a stalled stream", el)
	}
	select {
	case err := <-errc:
		if err == nil {
			t.Error("stalled stream ended cleanly, want an error after Close")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("client still blocked after Close")
	}
	if srv.OpenConns() != 0 {
		t.Errorf("OpenConns() = %d after Close", srv.OpenConns())
	}
	srv.Close() // idempotent
	if _, err := c.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{}`)); err == nil {
		t.Error("server still answers after Close")
	}
}

func TestConcurrentScript(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	const n = 20
	for i := range n {
		srv.Push(llmtest.Text(strings.Repeat("x", i+1)))
	}
	c := newClient(t)
	var wg sync.WaitGroup
	seen := make(chan int, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := post(t, c, openaiEP.url(srv, false), openaiEP.body(false))
			seen <- len(str(get(obj(t, string(r.body)), "choices", 0, "message", "content")))
		}()
	}
	wg.Wait()
	close(seen)
	got := map[int]bool{}
	for l := range seen {
		got[l] = true
	}
	if len(got) != n || srv.Pending() != 0 {
		t.Errorf("each step should be served exactly once: %d distinct, %d pending", len(got), srv.Pending())
	}
}

func TestFaultDefaults(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	// A zero Kind is FaultStatus; a fault without its own Reply interrupts
	// the Step's Reply.
	srv.Push(llmtest.Fail(llmtest.Fault{Status: 502}),
		llmtest.Step{Reply: &llmtest.Reply{Text: "from the step"}, Fault: &llmtest.Fault{Kind: llmtest.FaultNonSSE200}})
	c := newClient(t)
	if r := post(t, c, openaiEP.url(srv, true), openaiEP.body(true)); r.resp.StatusCode != 502 {
		t.Errorf("zero-kind fault: status %d, want 502", r.resp.StatusCode)
	}
	r := post(t, c, openaiEP.url(srv, true), openaiEP.body(true))
	if got := str(get(obj(t, string(r.body)), "choices", 0, "message", "content")); got != "from the step" {
		t.Errorf("content %q", got)
	}
	if llmtest.FaultSlowDrip.String() != "slow-drip" || llmtest.FaultKind(99).String() != "unknown" {
		t.Error("FaultKind.String")
	}
}
