package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/runtime"
)

func TestHeaderNamesAreCanonical(t *testing.T) {
	for _, name := range []string{hdrModel, hdrProvider, hdrCredential, hdrFallbackStep, hdrAttempts, hdrQueueMS, hdrHTTPAttempts, hdrCostUSD, hdrDropped, hdrRoute} {
		if c := textproto.CanonicalMIMEHeaderKey(name); c != name {
			t.Errorf("header name %q is not canonical (%q)", name, c)
		}
		if !strings.HasPrefix(strings.ToLower(name), "x-chorus-") {
			t.Errorf("header name %q is not x-chorus-*", name)
		}
	}
}

// TestChorusHeadersAsSet: the x-chorus-* headers are what Header.Set of
// their documented lowercase names gives, values included, and a header
// set before is replaced, not added to.
func TestChorusHeadersAsSet(t *testing.T) {
	rep := &runtime.CallReport{Model: "openai/gpt-4.1-mini", Provider: "openai", Credential: "0123abcd", Step: 1, Attempts: 2, QueueWait: 1500 * time.Microsecond, Priced: true, Cost: 0.00125}
	got := http.Header{"X-Chorus-Model": {"stale"}}
	chorusHeaders(got, rep, &llm.ResponseMeta{Attempts: 3})
	want := http.Header{}
	for k, v := range map[string]string{
		"x-chorus-model": "openai/gpt-4.1-mini", "x-chorus-provider": "openai", "x-chorus-credential": "0123abcd",
		"x-chorus-fallback-step": "1", "x-chorus-attempts": "2", "x-chorus-queue-ms": "1.500",
		"x-chorus-http-attempts": "3", "x-chorus-cost-usd": "0.00125",
	} {
		want.Set(k, v)
	}
	if len(got) != len(want) {
		t.Fatalf("headers %v, want %v", got, want)
	}
	for k, v := range want {
		if g := got[k]; len(g) != 1 || g[0] != v[0] {
			t.Errorf("%s: %q, want %q", k, g, v)
		}
	}
	// Appending to one value never reaches the next one's.
	got.Add("X-Chorus-Model", "x")
	if v := got.Get("X-Chorus-Provider"); v != "openai" {
		t.Fatalf("adding to one header changed another: %q", v)
	}
	// A stream's answer (no meta) carries no cost or HTTP attempts; a call
	// never placed carries nothing.
	hd := http.Header{}
	chorusHeaders(hd, rep, nil)
	if hd.Get("x-chorus-cost-usd") != "" || hd.Get("x-chorus-http-attempts") != "" || hd.Get("x-chorus-model") == "" {
		t.Fatalf("stream headers: %v", hd)
	}
	// A routed alias's call says its strategy and why.
	hd = http.Header{}
	chorusHeaders(hd, &runtime.CallReport{Model: "a/m", Attempts: 1, Strategy: "weighted", Reason: "weight 3 of 4"}, nil)
	if got := hd.Get("x-chorus-route"); got != "weighted; weight 3 of 4" {
		t.Fatalf("x-chorus-route %q", got)
	}
	hd = http.Header{}
	chorusHeaders(hd, &runtime.CallReport{}, nil)
	if len(hd) != 0 {
		t.Fatalf("headers of a call never placed: %v", hd)
	}
}

func TestReadBody(t *testing.T) {
	h := &Handler{opts: Options{MaxBodyBytes: 16}}
	for _, tc := range []struct {
		name   string
		body   io.Reader
		length int64
		want   string
		status int
	}{
		{"declared", strings.NewReader("0123456789"), 10, "0123456789", 0},
		{"declared, at the cap", strings.NewReader("0123456789abcdef"), 16, "0123456789abcdef", 0},
		{"declared, past the cap", strings.NewReader("0123456789abcdefg"), 17, "", http.StatusRequestEntityTooLarge},
		{"declared, shorter body", strings.NewReader("0123"), 10, "", http.StatusBadRequest},
		{"declared, read in pieces", iotest.OneByteReader(strings.NewReader("0123456789")), 10, "0123456789", 0},
		{"undeclared", iotest.OneByteReader(strings.NewReader("0123456789")), -1, "0123456789", 0},
		{"undeclared, past the cap", strings.NewReader("0123456789abcdefg"), -1, "", http.StatusRequestEntityTooLarge},
		{"empty", strings.NewReader(""), 0, "", 0},
		{"failing", iotest.ErrReader(io.ErrUnexpectedEOF), -1, "", http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", tc.body)
			r.ContentLength = tc.length
			b, e := h.readBody(r)
			if tc.status != 0 {
				if e == nil || e.Status != tc.status {
					t.Fatalf("error %v, want status %d", e, tc.status)
				}
				return
			}
			if e != nil || string(b) != tc.want {
				t.Fatalf("body %q, error %v; want %q", b, e, tc.want)
			}
		})
	}
}

// TestAdmissionEndsOnce: an admission's end leaves the calls in flight
// once however often it is called, charges its tokens to the window it
// was admitted in only, and the zero admission (no key) does nothing.
func TestAdmissionEndsOnce(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	k := newKeyState(Key{Name: "k", Concurrency: 2, TPM: 1000})
	a, _, e := k.admit(now, 0)
	if e != nil {
		t.Fatal(e)
	}
	b, _, e := k.admit(now, 0)
	if e != nil {
		t.Fatal(e)
	}
	if _, _, e := k.admit(now, 0); e == nil || e.Status != http.StatusTooManyRequests {
		t.Fatalf("a third call in flight of two: %v", e)
	}
	a.end(llm.Usage{PromptTokens: 10, CompletionTokens: 5})
	a.end(llm.Usage{PromptTokens: 10, CompletionTokens: 5})
	if k.inFlight != 1 || k.toks != 15 {
		t.Fatalf("after one end called twice: in flight %d, tokens %d; want 1, 15", k.inFlight, k.toks)
	}
	// b was admitted in a window that has ended: its tokens are not
	// charged to the next one.
	c, _, e := k.admit(now.Add(window), 0)
	if e != nil {
		t.Fatal(e)
	}
	b.end(llm.Usage{PromptTokens: 100})
	c.end(llm.Usage{CompletionTokens: 7})
	if k.inFlight != 0 || k.toks != 7 {
		t.Fatalf("across windows: in flight %d, tokens %d; want 0, 7", k.inFlight, k.toks)
	}
	var none admission
	none.end(llm.Usage{PromptTokens: 1})
}
