package gateway_test

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/gateway"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/runtime"
)

// TestChorusHeaders: a buffered answer names the model, provider,
// credential fingerprint (never the key) and fallback step that served,
// the placements made, the admission wait and the cost when priced; a
// streamed answer sends what is known at its first event in its headers
// and its cost as a trailer.
func TestChorusHeaders(t *testing.T) {
	f := newFixture(t, gateway.Options{}, runtime.WithPrices(llm.Prices{"anthropic/claude-haiku-4-5": {Input: 2, Output: 8}}))
	// The alias "fast": openai fails (retryable, every HTTP attempt), the
	// anthropic fallback serves.
	f.up.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 503}})
	f.up.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 503}})
	f.up.Push(llmtest.Step{Reply: &llmtest.Reply{Text: "hi", Usage: &llm.Usage{PromptTokens: 1000, CompletionTokens: 500}}})
	a := f.do(t, "POST", "/v1/chat/completions", `{"model":"fast","messages":[{"role":"user","content":"hi"}]}`)
	if a.status != 200 {
		t.Fatalf("status %d: %s", a.status, a.body)
	}
	want := map[string]string{
		"x-chorus-model":         "anthropic/claude-haiku-4-5",
		"x-chorus-provider":      "anthropic",
		"x-chorus-fallback-step": "1",
		"x-chorus-attempts":      "2",
		"x-chorus-cost-usd":      "0.006",
	}
	for k, v := range want {
		if got := a.header.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	fp := a.header.Get("x-chorus-credential")
	if fp == "" || strings.Contains(fp, providerKey) || strings.Contains(providerKey, fp) {
		t.Errorf("x-chorus-credential %q: want a fingerprint, never the key", fp)
	}
	if q, err := strconv.ParseFloat(a.header.Get("x-chorus-queue-ms"), 64); err != nil || q < 0 {
		t.Errorf("x-chorus-queue-ms %q", a.header.Get("x-chorus-queue-ms"))
	}

	// Streamed: the headers at the first byte, the cost as a trailer.
	f.up.Push(llmtest.Step{Reply: &llmtest.Reply{Deltas: []string{"a", "b"}, Usage: &llm.Usage{PromptTokens: 1000, CompletionTokens: 500}}})
	req, _ := http.NewRequest("POST", f.url+"/v1/messages", strings.NewReader(`{"model":"anthropic/claude-haiku-4-5","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	resp, err := f.gw.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("x-chorus-model") != "anthropic/claude-haiku-4-5" || resp.Header.Get("x-chorus-fallback-step") != "0" ||
		resp.Header.Get("x-chorus-attempts") != "1" || resp.Header.Get("x-chorus-credential") != fp || resp.Header.Get("x-chorus-queue-ms") == "" {
		t.Errorf("stream %d headers %v", resp.StatusCode, resp.Header)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	if got := resp.Trailer.Get("x-chorus-cost-usd"); got != "0.006" {
		t.Errorf("stream cost trailer %q (trailers %v)", got, resp.Trailer)
	}
}

// TestChorusHeadersOnFailure: a call that failed says what it tried last,
// buffered or streamed (a stream that failed before its first byte).
func TestChorusHeadersOnFailure(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	for _, stream := range []string{"false", "true"} {
		f.up.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 500}}, llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 500}})
		a := f.do(t, "POST", "/v1/chat/completions", `{"model":"openai/gpt-4.1-mini","stream":`+stream+`,"messages":[{"role":"user","content":"hi"}]}`)
		if a.status != 502 || a.header.Get("x-chorus-model") != "openai/gpt-4.1-mini" || a.header.Get("x-chorus-attempts") != "1" || a.header.Get("x-chorus-credential") == "" {
			t.Errorf("stream %s: %d %v", stream, a.status, a.header)
		}
	}
}

// TestGatewayKeyBudget: a key's budget is charged each priced answer's
// cost (buffered and streamed); once spent, the key's calls are refused
// with a 429 the SDKs do not retry (insufficient_quota, x-should-retry:
// false), in each format, and its batch lines fail the same way; another
// key is not affected.
func TestGatewayKeyBudget(t *testing.T) {
	opts := gateway.Options{Keys: []gateway.Key{
		{Name: "capped", SHA256: gateway.HashKey("gk-capped"), BudgetUSD: 0.01},
		{Name: "free", SHA256: gateway.HashKey("gk-free")},
	}}
	f := newFixture(t, opts, runtime.WithPrices(llm.Prices{"openai/gpt-4.1-mini": {Input: 2, Output: 8}}))
	usage := &llm.Usage{PromptTokens: 1000, CompletionTokens: 500} // $0.006
	f.up.Push(llmtest.Step{Reply: &llmtest.Reply{Text: "one", Usage: usage}}, llmtest.Step{Reply: &llmtest.Reply{Deltas: []string{"t", "wo"}, Usage: usage}})
	capped := []string{"Authorization", "Bearer gk-capped"}
	const body = `{"model":"openai/gpt-4.1-mini","messages":[{"role":"user","content":"x"}]}`
	if a := f.do(t, "POST", "/v1/chat/completions", body, capped...); a.status != 200 {
		t.Fatalf("first call: %d %s", a.status, a.body)
	}
	if a := f.do(t, "POST", "/v1/chat/completions", strings.Replace(body, `"x"}]`, `"x"}],"stream":true`, 1), capped...); a.status != 200 || !strings.Contains(string(a.body), "[DONE]") {
		t.Fatalf("streamed call (budget left): %d %s", a.status, a.body)
	}
	// $0.012 spent of $0.01: refused, in each format, without a retry hint.
	a := f.do(t, "POST", "/v1/chat/completions", body, capped...)
	if a.status != 429 || a.header.Get("x-should-retry") != "false" || a.header.Get("retry-after") != "" ||
		!strings.Contains(string(a.body), `"code":"insufficient_quota"`) || !strings.Contains(string(a.body), "budget") {
		t.Fatalf("spent budget: %d %v %s", a.status, a.header, a.body)
	}
	a = f.do(t, "POST", "/v1/messages", `{"model":"openai/gpt-4.1-mini","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`, "x-api-key", "gk-capped")
	if a.status != 429 || a.header.Get("x-should-retry") != "false" || !strings.Contains(string(a.body), `"type":"rate_limit_error"`) {
		t.Fatalf("spent budget, Anthropic format: %d %s", a.status, a.body)
	}
	f.up.Push(llmtest.Text("free"))
	if a := f.do(t, "POST", "/v1/chat/completions", body, "Authorization", "Bearer gk-free"); a.status != 200 {
		t.Fatalf("another key: %d %s", a.status, a.body)
	}
	// A batch line of the spent key fails without reaching the provider.
	in := `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":` + body + "}\n"
	var file struct{ ID string }
	decode(t, f.upload(t, "gk-capped", "batch", "in.jsonl", []byte(in)).body, &file)
	var created batchObj
	decode(t, f.do(t, "POST", "/v1/batches", `{"input_file_id":"`+file.ID+`","endpoint":"/v1/chat/completions","completion_window":"24h"}`, capped...).body, &created)
	b := f.waitBatch(t, "gk-capped", created.ID)
	if b.Status != "completed" || b.RequestCounts.Failed != 1 || b.ErrorFileID == nil {
		t.Fatalf("batch %+v", b)
	}
	if e := f.do(t, "GET", "/v1/files/"+*b.ErrorFileID+"/content", "", capped...); !strings.Contains(string(e.body), `"code":"insufficient_quota"`) {
		t.Errorf("error file %s", e.body)
	}
	if n := f.up.Count(); n != 3 {
		t.Errorf("%d upstream calls, want 3", n)
	}
}

// TestRouteHeader: a call to a routed alias says its strategy and why in
// x-chorus-route, buffered and streamed; a plain alias's says nothing.
func TestRouteHeader(t *testing.T) {
	f := newFixture(t, gateway.Options{}, runtime.WithRoutedAlias("spread", runtime.Route{Strategy: runtime.StrategyWeighted,
		Targets: []runtime.Target{{Model: "openai/gpt-4.1-mini", Weight: 3}, {Model: "anthropic/claude-haiku-4-5", Weight: 1}}}))
	a := f.do(t, "POST", "/v1/chat/completions", `{"model":"spread","messages":[{"role":"user","content":"hi"}]}`)
	if a.status != 200 || a.header.Get("x-chorus-route") != "weighted; weight 3 of 4" || a.header.Get("x-chorus-model") != "openai/gpt-4.1-mini" {
		t.Errorf("buffered %d: x-chorus-route %q, model %q", a.status, a.header.Get("x-chorus-route"), a.header.Get("x-chorus-model"))
	}
	a = f.do(t, "POST", "/v1/chat/completions", `{"model":"spread","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if a.status != 200 || !strings.HasPrefix(a.header.Get("x-chorus-route"), "weighted; weight ") {
		t.Errorf("streamed %d: x-chorus-route %q", a.status, a.header.Get("x-chorus-route"))
	}
	a = f.do(t, "POST", "/v1/chat/completions", `{"model":"fast","messages":[{"role":"user","content":"hi"}]}`)
	if a.status != 200 || a.header.Get("x-chorus-route") != "" {
		t.Errorf("plain alias: x-chorus-route %q", a.header.Get("x-chorus-route"))
	}
}
