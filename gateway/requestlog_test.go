package gateway_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/gateway"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/requestlog"
	"github.com/chorusrt/chorus/runtime"
)

// take returns the records logged since the last take.
func (l *recLog) take() []requestlog.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.recs
	l.recs = nil
	return out
}

func fingerprint(key string) string {
	s := sha256.Sum256([]byte(key))
	return hex.EncodeToString(s[:8])
}

var logPrices = runtime.WithPrices(llm.Prices{"openai/gpt-4.1-mini": {Input: 2, Output: 8}, "anthropic/claude-haiku-4-5": {Input: 1, Output: 5}})

// TestRefusalsAreLogged: a request refused before its call is recorded,
// once, with its status and error kind, its route and format, the key
// (name and fingerprint when known, the fingerprint of an unknown key,
// nothing for a missing one) and the requested model when it was parsed;
// no usage, no cost. A call's own failure stays one record.
func TestRefusalsAreLogged(t *testing.T) {
	lg := &recLog{}
	opts := gateway.Options{RequestLog: lg, Keys: []gateway.Key{
		{Name: "a", SHA256: gateway.HashKey("gk-a")},
		{Name: "mini-only", SHA256: gateway.HashKey("gk-mini"), Models: []string{"openai/gpt-4.1-mini"}},
		{Name: "one-rpm", SHA256: gateway.HashKey("gk-rpm"), RPM: 1},
		{Name: "broke", SHA256: gateway.HashKey("gk-broke"), BudgetUSD: 1e-9},
	}, MaxBodyBytes: 4096}
	f := newFixture(t, opts, logPrices)
	const chat = `{"model":"openai/gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}`
	u := llm.Usage{PromptTokens: 10, CompletionTokens: 5}
	ok := func() { f.up.Push(llmtest.Respond(llmtest.Reply{Text: "ok", Usage: &u})) }

	for _, c := range []struct {
		name         string
		path, body   string
		header       []string
		before       func() // a call first (its record taken apart)
		status       int
		kind         string
		keyName, fp  string
		format       string
		requested    string
		streamWanted bool
	}{
		{name: "missing key", path: "/v1/chat/completions", body: chat, status: 401, kind: "unauthorized", format: "openai"},
		{name: "unknown key", path: "/v1/chat/completions", body: chat, header: []string{"Authorization", "Bearer gk-nobody"},
			status: 401, kind: "unauthorized", fp: fingerprint("gk-nobody"), format: "openai"},
		{name: "unknown key, anthropic", path: "/v1/messages", body: `{"model":"anthropic/claude-haiku-4-5","max_tokens":8,"messages":[]}`,
			header: []string{"x-api-key", "gk-nobody"}, status: 401, kind: "unauthorized", fp: fingerprint("gk-nobody"), format: "anthropic"},
		{name: "malformed", path: "/v1/chat/completions", body: `{"model":`, header: []string{"Authorization", "Bearer gk-a"},
			status: 400, kind: "invalid_request", keyName: "a", fp: fingerprint("gk-a"), format: "openai"},
		{name: "too large", path: "/v1/responses", body: `{"input":"` + strings.Repeat("x", 5000) + `"}`, header: []string{"Authorization", "Bearer gk-a"},
			status: 413, kind: "too_large", keyName: "a", fp: fingerprint("gk-a"), format: "openai"},
		{name: "model not allowed", path: "/v1/chat/completions", body: strings.Replace(chat, "openai/gpt-4.1-mini", "anthropic/claude-haiku-4-5", 1),
			header: []string{"Authorization", "Bearer gk-mini"}, status: 403, kind: "forbidden", keyName: "mini-only", fp: fingerprint("gk-mini"),
			format: "openai", requested: "anthropic/claude-haiku-4-5"},
		{name: "unknown model", path: "/v1/embeddings", body: `{"model":"nope/x","input":"hi"}`, header: []string{"Authorization", "Bearer gk-a"},
			status: 404, kind: "model_not_found", keyName: "a", fp: fingerprint("gk-a"), format: "openai", requested: "nope/x"},
		{name: "unknown model, gemini", path: "/v1beta/models/nope/x:streamGenerateContent?alt=sse", body: `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`,
			header: []string{"x-goog-api-key", "gk-a"}, status: 404, kind: "model_not_found", keyName: "a", fp: fingerprint("gk-a"), format: "gemini",
			requested: "nope/x", streamWanted: true},
		{name: "a method not served", path: "/v1beta/models/gemini-2.5-flash:countTokens", body: `{}`,
			header: []string{"x-goog-api-key", "gk-a"}, status: 404, kind: "not_found", fp: fingerprint("gk-a"), format: "gemini"}, // not authenticated: the key is not looked up
		{name: "rate limit", path: "/v1/chat/completions", body: chat, header: []string{"Authorization", "Bearer gk-rpm"},
			before: ok, status: 429, kind: "rate_limit", keyName: "one-rpm", fp: fingerprint("gk-rpm"), format: "openai", requested: "openai/gpt-4.1-mini"},
		{name: "budget spent", path: "/v1/chat/completions", body: chat, header: []string{"Authorization", "Bearer gk-broke"},
			before: ok, status: 429, kind: "budget", keyName: "broke", fp: fingerprint("gk-broke"), format: "openai", requested: "openai/gpt-4.1-mini"},
	} {
		if c.before != nil {
			c.before()
			if a := f.do(t, "POST", c.path, c.body, c.header...); a.status != 200 {
				t.Fatalf("%s: the first call: %d %s", c.name, a.status, a.body)
			}
			if recs := lg.take(); len(recs) != 1 || recs[0].Status != 200 || recs[0].Cost <= 0 {
				t.Fatalf("%s: the first call's records: %+v", c.name, recs)
			}
		}
		a := f.do(t, "POST", c.path, c.body, c.header...)
		if a.status != c.status {
			t.Fatalf("%s: status %d, want %d: %s", c.name, a.status, c.status, a.body)
		}
		recs := lg.take()
		if len(recs) != 1 {
			t.Fatalf("%s: %d records, want 1: %+v", c.name, len(recs), recs)
		}
		r := recs[0]
		route := "POST " + strings.Split(c.path, "?")[0]
		if strings.HasPrefix(c.path, "/v1beta/") {
			route = "POST /v1beta/models/{rest...}"
		}
		if r.Status != c.status || r.ErrorType != c.kind || r.KeyName != c.keyName || r.KeyFingerprint != c.fp || r.Format != c.format ||
			r.Requested != c.requested || r.Stream != c.streamWanted || r.Route != route || r.Time.IsZero() || r.Latency <= 0 ||
			r.Model != "" || r.Attempts != 0 || r.InputTokens != 0 || r.OutputTokens != 0 || r.Cost != 0 || r.RequestBody != "" || r.Answer != "" {
			t.Errorf("%s: record %+v", c.name, r)
		}
		if strings.Contains(fmt.Sprintf("%+v", r), "gk-") {
			t.Errorf("%s: a record holds a key: %+v", c.name, r)
		}
	}

	// A call that failed upstream: its own record, not a refusal's too.
	f.up.Push(llmtest.Status(500, 0))
	f.up.Push(llmtest.Status(500, 0))
	f.up.Push(llmtest.Status(500, 0))
	if a := f.do(t, "POST", "/v1/chat/completions", chat, "Authorization", "Bearer gk-a"); a.status != 502 {
		t.Fatalf("upstream failure: %d %s", a.status, a.body)
	}
	if recs := lg.take(); len(recs) != 1 || recs[0].ErrorType != "upstream" || recs[0].Attempts == 0 || recs[0].Model != "openai/gpt-4.1-mini" {
		t.Fatalf("upstream failure's records: %+v", recs)
	}
}

// TestFanOutIsLogged: a fan-out request is recorded once per model's
// answer, buffered and streamed, each with its model, usage and cost; a
// model that failed has its failure's record.
func TestFanOutIsLogged(t *testing.T) {
	lg := &recLog{}
	opts := gateway.Options{RequestLog: lg, FanOut: map[string][]string{"pair": {"openai/gpt-4.1-mini", "anthropic/claude-haiku-4-5"}},
		Keys: []gateway.Key{{Name: "a", SHA256: gateway.HashKey("gk-a")}}}
	f := newFixture(t, opts, logPrices)
	prices := map[string]llm.Price{"openai/gpt-4.1-mini": {Input: 2, Output: 8}, "anthropic/claude-haiku-4-5": {Input: 1, Output: 5}}
	f.up.SetResponder(func(r llmtest.Recorded) llmtest.Step {
		if strings.Contains(string(r.Body), "fail-anthropic") && strings.Contains(r.Path, "messages") {
			return llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 400}}
		}
		u := llm.Usage{PromptTokens: 100, CompletionTokens: 10}
		if strings.Contains(r.Path, "messages") {
			u = llm.Usage{PromptTokens: 200, CompletionTokens: 20}
		}
		return llmtest.Respond(llmtest.Reply{Text: "answer", Usage: &u})
	})
	for _, c := range []struct {
		name   string
		stream bool
		fail   bool
	}{{"buffered", false, false}, {"streamed", true, false}, {"buffered, one failing", false, true}, {"streamed, one failing", true, true}} {
		content := "hello"
		if c.fail {
			content = "fail-anthropic"
		}
		body := `{"model":"pair","messages":[{"role":"user","content":"` + content + `"}]}`
		if c.stream {
			body = `{"model":"pair","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"` + content + `"}]}`
		}
		req, _ := http.NewRequest("POST", f.url+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer gk-a")
		resp, err := f.gw.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", c.name, resp.StatusCode, b)
		}
		recs := lg.take()
		if len(recs) != 2 {
			t.Fatalf("%s: %d records, want one per model: %+v", c.name, len(recs), recs)
		}
		byModel := map[string]requestlog.Record{}
		for _, r := range recs {
			byModel[r.Model] = r
		}
		for _, m := range []string{"openai/gpt-4.1-mini", "anthropic/claude-haiku-4-5"} {
			r, ok := byModel[m]
			if !ok {
				t.Fatalf("%s: no record of %s: %+v", c.name, m, recs)
			}
			if r.Requested != "pair" || r.KeyName != "a" || r.Stream != c.stream || r.Route != "POST /v1/chat/completions" || r.Attempts != 1 || r.Latency <= 0 {
				t.Errorf("%s: %s's record %+v", c.name, m, r)
			}
			if c.fail && m == "anthropic/claude-haiku-4-5" {
				if r.Status != 400 || r.ErrorType != "upstream_4xx" || r.Cost != 0 || r.OutputTokens != 0 {
					t.Errorf("%s: the failed model's record %+v", c.name, r)
				}
				continue
			}
			in, out := 100, 10
			if m == "anthropic/claude-haiku-4-5" {
				in, out = 200, 20
			}
			p := prices[m]
			cost := (float64(in)*p.Input + float64(out)*p.Output) / 1e6
			if r.Status != 200 || r.ErrorType != "" || r.InputTokens != in || r.OutputTokens != out || fmt.Sprintf("%.9f", r.Cost) != fmt.Sprintf("%.9f", cost) ||
				c.stream && r.TTFT <= 0 {
				t.Errorf("%s: %s's record %+v (cost want %v)", c.name, m, r, cost)
			}
		}
	}
}

// TestContentLogging: with LogContent off (the default) a record holds no
// content; on, it holds the request's body and the answer's text, each cut
// to LogContentBytes, for buffered and streamed answers and refusals; a
// key sent in a header is in no record either way.
func TestContentLogging(t *testing.T) {
	keys := []gateway.Key{{Name: "a", SHA256: gateway.HashKey("gk-a-SECRET")}}
	const long = "a prompt that is long enough to be cut: 0123456789 0123456789 0123456789 0123456789"
	body := `{"model":"openai/gpt-4.1-mini","messages":[{"role":"user","content":"` + long + `"}]}`
	sbody := `{"model":"openai/gpt-4.1-mini","stream":true,"messages":[{"role":"user","content":"` + long + `"}]}`
	for _, on := range []bool{false, true} {
		lg := &recLog{}
		f := newFixture(t, gateway.Options{RequestLog: lg, Keys: keys, LogContent: on, LogContentBytes: 64})
		f.up.SetResponder(func(llmtest.Recorded) llmtest.Step {
			return llmtest.Text("the answer, which is longer than sixty-four bytes once it is all written out: é")
		})
		for _, b := range []string{body, sbody} {
			if a := f.do(t, "POST", "/v1/chat/completions", b, "Authorization", "Bearer gk-a-SECRET", "x-api-key", "gk-a-SECRET"); a.status != 200 {
				t.Fatalf("on=%v: %d %s", on, a.status, a.body)
			}
		}
		if a := f.do(t, "POST", "/v1/chat/completions", strings.Replace(body, "openai/", "nope/", 1), "Authorization", "Bearer gk-a-SECRET"); a.status != 404 {
			t.Fatalf("on=%v: refusal %d %s", on, a.status, a.body)
		}
		recs := lg.take()
		if len(recs) != 3 {
			t.Fatalf("on=%v: %d records", on, len(recs))
		}
		for i, r := range recs {
			if s := fmt.Sprintf("%+v", r); strings.Contains(s, "SECRET") || strings.Contains(s, providerKey) {
				t.Fatalf("on=%v: record %d holds a key: %s", on, i, s)
			}
			if !on {
				if r.RequestBody != "" || r.Answer != "" || strings.Contains(fmt.Sprintf("%+v", r), "prompt") {
					t.Fatalf("off: record %d holds content: %+v", i, r)
				}
				continue
			}
			want := []string{body, sbody, strings.Replace(body, "openai/", "nope/", 1)}[i][:64]
			if r.RequestBody != want {
				t.Errorf("on: record %d's body %q, want %q", i, r.RequestBody, want)
			}
			wantAnswer := "the answer, which is longer than sixty-four bytes once it is all"
			if i == 2 {
				wantAnswer = "" // refused: no answer
			}
			if r.Answer != wantAnswer {
				t.Errorf("on: record %d's answer %q, want %q", i, r.Answer, wantAnswer)
			}
		}
	}
}
