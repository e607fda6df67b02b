package llmtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llmtest"
)

// faultText is streamed as 5 deltas of 4 bytes.
const faultText = "abcdefghijklmnopqrst"

// inspected is what a (possibly broken) stream body shows.
type inspected struct {
	events     []sseEvent
	deltas     int
	terminated bool
	text       string
	badJSON    []string // data that is not JSON
}

func inspect(t *testing.T, f llmtest.Format, body []byte) inspected {
	t.Helper()
	events, _ := parseSSE(body)
	in := inspected{events: events}
	for _, ev := range events {
		if ev.Data == "[DONE]" {
			in.terminated = true
			continue
		}
		var m map[string]any
		if json.Unmarshal([]byte(ev.Data), &m) != nil {
			in.badJSON = append(in.badJSON, ev.Data)
			continue
		}
		switch f {
		case llmtest.FormatOpenAI:
			d, _ := get(m, "choices", 0, "delta").(map[string]any)
			if c := str(d["content"]) + str(d["reasoning_content"]) + str(d["refusal"]) + str(get(d, "tool_calls", 0, "function", "arguments")); c != "" {
				in.deltas++
				in.text += str(d["content"])
			}
		case llmtest.FormatAnthropic:
			if ev.Name == "message_stop" {
				in.terminated = true
			}
			if ev.Name == "content_block_delta" {
				switch str(get(m, "delta", "type")) {
				case "text_delta":
					in.deltas++
					in.text += str(get(m, "delta", "text"))
				case "thinking_delta":
					in.deltas++
				case "input_json_delta":
					if str(get(m, "delta", "partial_json")) != "" {
						in.deltas++
					}
				}
			}
		case llmtest.FormatGemini:
			if str(get(m, "candidates", 0, "finishReason")) != "" {
				in.terminated = true
				continue
			}
			if parts := asSlice(get(m, "candidates", 0, "content", "parts")); len(parts) > 0 && m["padding"] == nil {
				in.deltas++
				in.text += str(get(parts[0], "text"))
			}
		}
	}
	return in
}

// sent is what send got: a transport error, or a response and its body.
type sent struct {
	resp    *http.Response
	body    []byte
	err     error // from Do
	readErr error // from reading the body
}

// send is post without failing on transport errors.
func send(ctx context.Context, c *http.Client, url, body string) sent {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return sent{err: err}
	}
	resp, err := c.Do(req)
	if err != nil {
		return sent{err: err}
	}
	defer resp.Body.Close()
	b, rerr := io.ReadAll(resp.Body)
	return sent{resp: resp, body: b, readErr: rerr}
}

func faultStep(kind llmtest.FaultKind, after int) llmtest.Step {
	return llmtest.Fail(llmtest.Fault{Kind: kind, After: after, Reply: &llmtest.Reply{Text: faultText}})
}

func TestFaultStatus(t *testing.T) {
	tests := []struct {
		name       string
		ep         endpoint
		fault      llmtest.Fault
		retryAfter string
		retryMS    string
		check      func(t *testing.T, m map[string]any)
	}{
		{
			name: "openai 503", ep: openaiEP, fault: llmtest.Fault{Status: 503, RetryAfter: 1500 * time.Millisecond},
			retryAfter: "2", retryMS: "1500",
			check: func(t *testing.T, m map[string]any) {
				if str(get(m, "error", "message")) == "" || str(get(m, "error", "type")) != "server_error" {
					t.Errorf("body %v", m)
				}
			},
		},
		{
			name: "openai quota", ep: openaiEP, fault: llmtest.Fault{Status: 429, Code: "insufficient_quota"},
			check: func(t *testing.T, m map[string]any) {
				if !strings.Contains(str(get(m, "error", "message")), "exceeded your current quota") ||
					str(get(m, "error", "code")) != "insufficient_quota" || str(get(m, "error", "type")) != "insufficient_quota" {
					t.Errorf("body %v", m)
				}
			},
		},
		{
			name: "openai custom", ep: openaiEP, fault: llmtest.Fault{Status: 400, Message: "stream_options not supported", Code: "bad"},
			check: func(t *testing.T, m map[string]any) {
				if str(get(m, "error", "message")) != "stream_options not supported" || str(get(m, "error", "code")) != "bad" ||
					str(get(m, "error", "type")) != "invalid_request_error" {
					t.Errorf("body %v", m)
				}
			},
		},
		{
			name: "anthropic 529", ep: anthropicEP, fault: llmtest.Fault{Status: 529, RetryAfter: 3 * time.Second},
			retryAfter: "3", retryMS: "3000",
			check: func(t *testing.T, m map[string]any) {
				if str(m["type"]) != "error" || str(get(m, "error", "type")) != "overloaded_error" || str(get(m, "error", "message")) != "Overloaded" {
					t.Errorf("body %v", m)
				}
			},
		},
		{
			name: "anthropic 429", ep: anthropicEP, fault: llmtest.Fault{Status: 429},
			check: func(t *testing.T, m map[string]any) {
				if str(get(m, "error", "type")) != "rate_limit_error" {
					t.Errorf("body %v", m)
				}
			},
		},
		{
			name: "gemini 429", ep: geminiEP, fault: llmtest.Fault{Status: 429, RetryAfter: 1500 * time.Millisecond},
			check: func(t *testing.T, m map[string]any) {
				if num(get(m, "error", "code")) != 429 || str(get(m, "error", "status")) != "RESOURCE_EXHAUSTED" ||
					str(get(m, "error", "details", 0, "@type")) != "type.googleapis.com/google.rpc.RetryInfo" ||
					str(get(m, "error", "details", 0, "retryDelay")) != "1.5s" {
					t.Errorf("body %v", m)
				}
			},
		},
		{
			name: "gemini default 500", ep: geminiEP, fault: llmtest.Fault{},
			check: func(t *testing.T, m map[string]any) {
				if num(get(m, "error", "code")) != 500 || str(get(m, "error", "status")) != "INTERNAL" || get(m, "error", "details") != nil {
					t.Errorf("body %v", m)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.NewServer()
			defer srv.Close()
			c := newClient(t)
			want := tc.fault.Status
			if want == 0 {
				want = 500
			}
			for _, stream := range []bool{false, true} {
				f := tc.fault
				f.Kind = llmtest.FaultStatus
				srv.Push(llmtest.Fail(f))
				r := post(t, c, tc.ep.url(srv, stream), tc.ep.body(stream))
				if r.resp.StatusCode != want {
					t.Fatalf("status %d, want %d", r.resp.StatusCode, want)
				}
				if got := r.resp.Header.Get("retry-after"); got != tc.retryAfter {
					t.Errorf("retry-after %q, want %q", got, tc.retryAfter)
				}
				if got := r.resp.Header.Get("retry-after-ms"); got != tc.retryMS {
					t.Errorf("retry-after-ms %q, want %q", got, tc.retryMS)
				}
				if ct := r.resp.Header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("content-type %q", ct)
				}
				tc.check(t, obj(t, string(r.body)))
			}
			if want == 429 && srv.RateLimited() != 2 {
				t.Errorf("RateLimited() = %d, want 2", srv.RateLimited())
			}
		})
	}
	t.Run("helper", func(t *testing.T) {
		srv := llmtest.NewServer()
		defer srv.Close()
		srv.Push(llmtest.Status(429, 2*time.Second))
		r := post(t, newClient(t), openaiEP.url(srv, false), openaiEP.body(false))
		if r.resp.StatusCode != 429 || r.resp.Header.Get("retry-after") != "2" || str(get(obj(t, string(r.body)), "error", "code")) != "rate_limit_exceeded" {
			t.Errorf("status %d retry-after %q body %s", r.resp.StatusCode, r.resp.Header.Get("retry-after"), r.body)
		}
	})
}

func TestFaultResetBeforeHeaders(t *testing.T) {
	for _, ep := range endpoints {
		t.Run(string(ep.format), func(t *testing.T) {
			srv := llmtest.NewServer()
			defer srv.Close()
			srv.Push(llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultResetBeforeHeaders}))
			c := newClient(t)
			if s := send(context.Background(), c, ep.url(srv, true), ep.body(true)); s.err == nil {
				t.Fatal("request succeeded, want a connection error")
			}
			// The next request is served normally.
			r := post(t, c, ep.url(srv, false), ep.body(false))
			if r.resp.StatusCode != 200 {
				t.Errorf("next request status %d", r.resp.StatusCode)
			}
		})
	}
}

func TestFaultResetMidStream(t *testing.T) {
	for _, ep := range endpoints {
		t.Run(string(ep.format), func(t *testing.T) {
			srv := llmtest.NewServer()
			defer srv.Close()
			srv.Push(faultStep(llmtest.FaultResetMidStream, 2), faultStep(llmtest.FaultResetMidStream, 0))
			c := newClient(t)
			s := send(context.Background(), c, ep.url(srv, true), ep.body(true))
			resp, body, err, rerr := s.resp, s.body, s.err, s.readErr
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("err %v", err)
			}
			if rerr == nil || errors.Is(rerr, io.EOF) {
				t.Fatalf("body read ended with %v, want a connection error", rerr)
			}
			if testing.Verbose() {
				t.Logf("read error: %v", rerr)
			}
			in := inspect(t, ep.format, body)
			if in.deltas != 2 || in.terminated {
				t.Errorf("deltas %d terminated %v before the reset", in.deltas, in.terminated)
			}
			// Buffered: half a body, then the reset.
			s = send(context.Background(), c, ep.url(srv, false), ep.body(false))
			if s.err != nil || s.resp.StatusCode != 200 || s.readErr == nil || json.Valid(s.body) {
				t.Fatalf("buffered: err %v read err %v valid %v", s.err, s.readErr, json.Valid(s.body))
			}
		})
	}
}

func TestFaultStall(t *testing.T) {
	for _, ep := range endpoints {
		t.Run(string(ep.format)+" cancelled", func(t *testing.T) {
			srv := llmtest.NewServer()
			defer srv.Close()
			srv.Push(llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultStall, After: 1, Stall: time.Minute, Reply: &llmtest.Reply{Text: faultText}}))
			c := newClient(t)
			ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
			defer cancel()
			start := time.Now()
			s := send(ctx, c, ep.url(srv, true), ep.body(true))
			resp, body, err, rerr := s.resp, s.body, s.err, s.readErr
			if err != nil {
				t.Fatalf("headers should arrive before the stall: %v", err)
			}
			if resp.StatusCode != 200 || !errors.Is(rerr, context.DeadlineExceeded) {
				t.Fatalf("status %d read err %v, want the deadline", resp.StatusCode, rerr)
			}
			if el := time.Since(start); el > 5*time.Second {
				t.Errorf("stall not cut by the cancel: %v", el)
			}
			if in := inspect(t, ep.format, body); in.deltas != 1 {
				t.Errorf("%d deltas before the stall, want 1", in.deltas)
			}
			// The handler honours the cancel: its connection closes.
			waitFor(t, func() bool { return srv.OpenConns() == 0 }, "OpenConns() == 0 after the cancel")
		})
		t.Run(string(ep.format)+" elapses", func(t *testing.T) {
			srv := llmtest.NewServer()
			defer srv.Close()
			srv.Push(llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultStall, After: 1, Stall: 80 * time.Millisecond, Reply: &llmtest.Reply{Text: faultText}}),
				llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultStall, Stall: 80 * time.Millisecond}))
			c := newClient(t)
			r := post(t, c, ep.url(srv, true), ep.body(true))
			in := inspect(t, ep.format, r.body)
			if r.readErr != nil || !in.terminated || in.text != faultText || r.elapsed < 80*time.Millisecond {
				t.Errorf("err %v terminated %v text %q elapsed %v", r.readErr, in.terminated, in.text, r.elapsed)
			}
			r = post(t, c, ep.url(srv, false), ep.body(false))
			if r.resp.StatusCode != 200 || !json.Valid(r.body) || r.elapsed < 80*time.Millisecond {
				t.Errorf("buffered: status %d elapsed %v", r.resp.StatusCode, r.elapsed)
			}
		})
	}
}

func TestFaultMalformedLine(t *testing.T) {
	for _, ep := range endpoints {
		t.Run(string(ep.format), func(t *testing.T) {
			srv := llmtest.NewServer()
			defer srv.Close()
			srv.Push(faultStep(llmtest.FaultMalformedLine, 3), faultStep(llmtest.FaultMalformedLine, 0))
			c := newClient(t)
			r := post(t, c, ep.url(srv, true), ep.body(true))
			in := inspect(t, ep.format, r.body)
			if len(in.badJSON) != 1 || in.badJSON[0] != "{not json" {
				t.Fatalf("bad lines %q", in.badJSON)
			}
			// The malformed line comes after exactly 3 deltas.
			var before inspected
			for i, ev := range in.events {
				if ev.Data == "{not json" {
					before = inspect(t, ep.format, reframe(in.events[:i]))
				}
			}
			if before.deltas != 3 {
				t.Errorf("%d deltas before the malformed line, want 3", before.deltas)
			}
			if !in.terminated || in.text != faultText {
				t.Errorf("stream did not continue to its end: terminated %v text %q", in.terminated, in.text)
			}
			r = post(t, c, ep.url(srv, false), ep.body(false))
			if string(r.body) != "{not json" {
				t.Errorf("buffered body %q", r.body)
			}
		})
	}
}

// reframe writes events back as an SSE body.
func reframe(events []sseEvent) []byte {
	var b strings.Builder
	for _, ev := range events {
		if ev.Name != "" {
			b.WriteString("event: " + ev.Name + "\n")
		}
		b.WriteString("data: " + ev.Data + "\n\n")
	}
	return []byte(b.String())
}

func TestFaultTruncatedJSON(t *testing.T) {
	for _, ep := range endpoints {
		t.Run(string(ep.format), func(t *testing.T) {
			srv := llmtest.NewServer()
			defer srv.Close()
			srv.Push(faultStep(llmtest.FaultTruncatedJSON, 2), faultStep(llmtest.FaultTruncatedJSON, 0))
			c := newClient(t)
			r := post(t, c, ep.url(srv, true), ep.body(true))
			in := inspect(t, ep.format, r.body)
			if r.readErr != nil {
				t.Fatalf("body should end cleanly: %v", r.readErr)
			}
			last := in.events[len(in.events)-1].Data
			if len(in.badJSON) != 1 || in.badJSON[0] != last || !strings.HasPrefix(last, "{") {
				t.Errorf("last event %q is not a cut JSON chunk (bad %q)", last, in.badJSON)
			}
			if in.deltas != 2 || in.terminated {
				t.Errorf("deltas %d terminated %v", in.deltas, in.terminated)
			}
			r = post(t, c, ep.url(srv, false), ep.body(false))
			if r.readErr != nil || json.Valid(r.body) || !strings.HasPrefix(string(r.body), "{") {
				t.Errorf("buffered: err %v body %q", r.readErr, r.body)
			}
		})
	}
}

func TestFaultPrematureClose(t *testing.T) {
	for _, ep := range endpoints {
		t.Run(string(ep.format), func(t *testing.T) {
			srv := llmtest.NewServer()
			defer srv.Close()
			srv.Push(faultStep(llmtest.FaultPrematureClose, 3), faultStep(llmtest.FaultPrematureClose, 0))
			c := newClient(t)
			r := post(t, c, ep.url(srv, true), ep.body(true))
			if r.readErr != nil {
				t.Fatalf("premature close should be a clean EOF: %v", r.readErr)
			}
			in := inspect(t, ep.format, r.body)
			if in.deltas != 3 || in.terminated || len(in.badJSON) != 0 {
				t.Errorf("deltas %d terminated %v bad %q", in.deltas, in.terminated, in.badJSON)
			}
			r = post(t, c, ep.url(srv, false), ep.body(false))
			if !errors.Is(r.readErr, io.ErrUnexpectedEOF) {
				t.Errorf("buffered read err %v, want unexpected EOF", r.readErr)
			}
		})
	}
	t.Run("gemini array", func(t *testing.T) {
		srv := llmtest.NewServer()
		defer srv.Close()
		srv.Push(faultStep(llmtest.FaultPrematureClose, 2))
		r := post(t, newClient(t), srv.GeminiBaseURL()+"/v1beta/models/m:streamGenerateContent", geminiEP.body(true))
		if r.readErr != nil || !strings.HasPrefix(string(r.body), "[") || strings.HasSuffix(string(r.body), "]") || json.Valid(r.body) {
			t.Errorf("err %v body %q", r.readErr, r.body)
		}
		if strings.Contains(string(r.body), "finishReason") {
			t.Error("finishReason sent before a premature close")
		}
	})
}

func TestFaultNonSSE200(t *testing.T) {
	for _, ep := range endpoints {
		t.Run(string(ep.format), func(t *testing.T) {
			srv := llmtest.NewServer()
			defer srv.Close()
			srv.Push(faultStep(llmtest.FaultNonSSE200, 0))
			r := post(t, newClient(t), ep.url(srv, true), ep.body(true))
			if ct := r.resp.Header.Get("Content-Type"); r.resp.StatusCode != 200 || ct != "application/json" {
				t.Fatalf("status %d content-type %q", r.resp.StatusCode, ct)
			}
			m := obj(t, string(r.body))
			var text string
			switch ep.format {
			case llmtest.FormatOpenAI:
				text = str(get(m, "choices", 0, "message", "content"))
			case llmtest.FormatAnthropic:
				text = str(get(m, "content", 0, "text"))
			case llmtest.FormatGemini:
				text = str(get(m, "candidates", 0, "content", "parts", 0, "text"))
			}
			if text != faultText {
				t.Errorf("buffered text %q in %s", text, r.body)
			}
			if recs := srv.Requests(); !recs[0].Stream {
				t.Error("request not recorded as a stream request")
			}
		})
	}
}

func TestFaultInStreamError(t *testing.T) {
	for _, ep := range endpoints {
		t.Run(string(ep.format), func(t *testing.T) {
			srv := llmtest.NewServer()
			defer srv.Close()
			srv.Push(faultStep(llmtest.FaultInStreamError, 2),
				llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultInStreamError, Status: 500, Message: "boom"}))
			c := newClient(t)
			r := post(t, c, ep.url(srv, true), ep.body(true))
			in := inspect(t, ep.format, r.body)
			if r.readErr != nil || r.resp.StatusCode != 200 || in.deltas != 2 || in.terminated {
				t.Fatalf("err %v status %d deltas %d terminated %v", r.readErr, r.resp.StatusCode, in.deltas, in.terminated)
			}
			last := in.events[len(in.events)-1]
			m := obj(t, last.Data)
			switch ep.format {
			case llmtest.FormatOpenAI:
				if str(get(m, "error", "message")) == "" || str(get(m, "error", "code")) == "" {
					t.Errorf("error chunk %v", m)
				}
			case llmtest.FormatAnthropic:
				if last.Name != "error" || str(m["type"]) != "error" || str(get(m, "error", "type")) != "overloaded_error" ||
					str(get(m, "error", "message")) != "Overloaded" {
					t.Errorf("error event %q %v", last.Name, m)
				}
			case llmtest.FormatGemini:
				if num(get(m, "error", "code")) != 500 || str(get(m, "error", "status")) != "INTERNAL" {
					t.Errorf("error chunk %v", m)
				}
			}
			r = post(t, c, ep.url(srv, false), ep.body(false))
			if r.resp.StatusCode != 200 || !strings.Contains(string(r.body), "boom") {
				t.Errorf("buffered: status %d body %s", r.resp.StatusCode, r.body)
			}
		})
	}
}

func TestFaultOversizeLine(t *testing.T) {
	for _, ep := range endpoints {
		t.Run(string(ep.format), func(t *testing.T) {
			srv := llmtest.NewServer()
			defer srv.Close()
			srv.Push(faultStep(llmtest.FaultOversizeLine, 1))
			r := post(t, newClient(t), ep.url(srv, true), ep.body(true))
			longest := 0
			for _, line := range strings.Split(string(r.body), "\n") {
				longest = max(longest, len(line))
			}
			if longest < 2<<20 {
				t.Errorf("longest line %d bytes, want >= 2 MiB", longest)
			}
			in := inspect(t, ep.format, r.body)
			if !in.terminated || in.text != faultText || len(in.badJSON) != 0 {
				t.Errorf("terminated %v text %q bad %d", in.terminated, in.text, len(in.badJSON))
			}
		})
	}
}

func TestFaultSlowDrip(t *testing.T) {
	for _, ep := range endpoints {
		t.Run(string(ep.format), func(t *testing.T) {
			srv := llmtest.NewServer()
			defer srv.Close()
			const drip = 100 * time.Millisecond
			srv.Push(llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultSlowDrip, Stall: drip, Reply: &llmtest.Reply{Text: faultText}}),
				llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultSlowDrip, Stall: drip}))
			c := newClient(t)
			r := post(t, c, ep.url(srv, true), ep.body(true))
			in := inspect(t, ep.format, r.body)
			if r.elapsed < drip || !in.terminated || in.text != faultText {
				t.Errorf("elapsed %v terminated %v text %q", r.elapsed, in.terminated, in.text)
			}
			r = post(t, c, ep.url(srv, false), ep.body(false))
			if r.elapsed < drip || !json.Valid(r.body) {
				t.Errorf("buffered: elapsed %v valid %v", r.elapsed, json.Valid(r.body))
			}
		})
	}
}

// waitFor polls cond for up to 5 seconds.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
