package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chorusrt/chorus/gateway"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
)

// providerKey is the runtime's own key: it must never reach a client.
const providerKey = "sk-provider-SECRET-0123456789"

var fast = providers.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}

type fixture struct {
	up  *llmtest.Server
	rt  *runtime.Runtime
	h   *gateway.Handler
	cur atomic.Pointer[gateway.Handler] // what the server serves
	gw  *httptest.Server
	url string
}

// newFixture runs a gateway over a runtime whose provider "openai" is an
// llmtest fake (OpenAI format), "anthropic" one in the Anthropic format and
// "gemini" one in the Gemini format (the same server).
func newFixture(t *testing.T, opts gateway.Options, rtOpts ...runtime.Option) *fixture {
	t.Helper()
	up := llmtest.NewServer()
	base := []runtime.Option{
		runtime.WithProvider(providers.Config{ID: "openai", Format: providers.FormatOpenAI, BaseURL: up.OpenAIBaseURL(), APIKey: providerKey}),
		runtime.WithProvider(providers.Config{ID: "anthropic", Format: providers.FormatAnthropic, BaseURL: up.AnthropicBaseURL(), APIKey: providerKey}),
		runtime.WithProvider(providers.Config{ID: "gemini", Format: providers.FormatGemini, BaseURL: up.GeminiBaseURL(), APIKey: providerKey}),
		runtime.WithClientOptions(providers.WithRetryPolicy(fast), providers.WithTimeout(3*time.Minute), providers.WithIdleTimeout(2*time.Minute)),
		runtime.WithAlias("fast", "openai/gpt-4.1-mini", "anthropic/claude-haiku-4-5"),
	}
	rt, h, closeHandler := newHandler(t, opts, append(base, rtOpts...)...)
	fx := &fixture{up: up, rt: rt, h: h}
	fx.cur.Store(h)
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fx.cur.Load().ServeHTTP(w, r) }))
	fx.gw, fx.url = gw, gw.URL
	t.Cleanup(func() {
		gw.CloseClientConnections()
		gw.Close()
		closeHandler()
		up.Close()
	})
	return fx
}

// newHandler is a gateway handler with opts over a new runtime of rtOpts.
// closeHandler closes the handler (an error fails the test), then the
// runtime: a test defers it, or calls it from its cleanup after closing
// the server in front.
func newHandler(t *testing.T, opts gateway.Options, rtOpts ...runtime.Option) (rt *runtime.Runtime, h *gateway.Handler, closeHandler func()) {
	t.Helper()
	rt, err := runtime.New(rtOpts...)
	if err != nil {
		t.Fatal(err)
	}
	h, err = gateway.New(rt, opts)
	if err != nil {
		rt.Close(context.Background())
		t.Fatal(err)
	}
	return rt, h, func() {
		if err := h.Close(context.Background()); err != nil {
			t.Errorf("closing the handler: %v", err)
		}
		rt.Close(context.Background())
	}
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func (f *fixture) do(t *testing.T, method, path, body string, header ...string) answer {
	t.Helper()
	req, err := http.NewRequest(method, f.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := f.gw.Client().Do(req)
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

// assertNoKey fails when the provider key appears in an answer.
func assertNoKey(t *testing.T, a answer) {
	t.Helper()
	if bytes.Contains(a.body, []byte(providerKey)) {
		t.Fatalf("the provider key is in a response body: %s", a.body)
	}
	for k, vs := range a.header {
		for _, v := range vs {
			if strings.Contains(v, providerKey) {
				t.Fatalf("the provider key is in response header %s", k)
			}
		}
	}
}

func decode(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
}

// sseData returns the data payloads of an SSE body, in order.
func sseData(body []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

// sseEvents returns event name and data pairs of an SSE body.
func sseEvents(body []byte) [][2]string {
	var out [][2]string
	var name string
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		line := sc.Text()
		if n, ok := strings.CutPrefix(line, "event: "); ok {
			name = n
		} else if d, ok := strings.CutPrefix(line, "data: "); ok {
			out = append(out, [2]string{name, d})
			name = ""
		}
	}
	return out
}
