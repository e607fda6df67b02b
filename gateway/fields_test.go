package gateway_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/gateway"
	"github.com/chorusrt/chorus/llmtest"
)

// upstreamBody is the last request body the upstream received, as fields.
func upstreamBody(t *testing.T, up *llmtest.Server) map[string]json.RawMessage {
	t.Helper()
	reqs := up.Requests()
	if len(reqs) == 0 {
		t.Fatal("the upstream received nothing")
	}
	var m map[string]json.RawMessage
	decode(t, reqs[len(reqs)-1].Body, &m)
	return m
}

// sameJSON compares two JSON values semantically.
func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// Every field an OpenAI client sends reaches an OpenAI upstream: mapped
// fields as sent, passthrough fields unchanged; a developer message stays
// developer.
func TestOpenAIChatFieldsReachOpenAI(t *testing.T) {
	fx := newFixture(t, gateway.Options{})
	fields := map[string]string{
		"prompt_cache_key":       `"tenant-7"`,
		"prompt_cache_retention": `"24h"`,
		"service_tier":           `"flex"`,
		"store":                  `true`,
		"user":                   `"u-1"`,
		"safety_identifier":      `"s-1"`,
		"metadata":               `{"job":"nightly"}`,
		"logprobs":               `true`,
		"top_logprobs":           `3`,
		"logit_bias":             `{"50256":-100}`,
		"frequency_penalty":      `0.5`,
		"presence_penalty":       `-0.25`,
		"verbosity":              `"low"`,
		"temperature":            `0.2`,
		"top_p":                  `0.9`,
		"seed":                   `7`,
		"stop":                   `["END"]`,
		"parallel_tool_calls":    `false`,
		// Passed through: no llm equivalent, same format.
		"web_search_options": `{"search_context_size":"low"}`,
		"prediction":         `{"type":"content","content":"x"}`,
		"modalities":         `["text"]`,
		"x_vendor_knob":      `{"a":[1,2]}`,
	}
	var b strings.Builder
	b.WriteString(`{"model":"gpt-4o-mini","messages":[{"role":"developer","content":"be brief"},{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]`)
	for k, v := range fields {
		b.WriteString(`,"` + k + `":` + v)
	}
	b.WriteString("}")
	for _, stream := range []bool{false, true} {
		body := b.String()
		if stream {
			body = strings.Replace(body, `{"model"`, `{"stream":true,"model"`, 1)
		}
		fx.up.Push(llmtest.Text("ok"))
		a := fx.do(t, "POST", "/v1/chat/completions", body)
		if a.status != 200 {
			t.Fatalf("stream=%v: %d %s", stream, a.status, a.body)
		}
		if d := a.header.Get("x-chorus-dropped"); d != "" {
			t.Errorf("stream=%v: dropped %q", stream, d)
		}
		got := upstreamBody(t, fx.up)
		for k, v := range fields {
			if !sameJSON(got[k], []byte(v)) {
				t.Errorf("stream=%v: %s arrived as %s, want %s", stream, k, got[k], v)
			}
		}
		var msgs []struct{ Role string }
		decode(t, got["messages"], &msgs)
		if len(msgs) != 2 || msgs[0].Role != "developer" {
			t.Errorf("stream=%v: messages arrived as %s", stream, got["messages"])
		}
	}
}

// An OpenAI client's fields that an Anthropic upstream cannot honour are
// refused with a 400 naming them, nothing sent; with DropUnsupported the
// call goes without them and x-chorus-dropped names them. Fields that only
// OpenAI keeps (safety_identifier, metadata, prompt_cache_key) are dropped
// either way, and named.
func TestOpenAIChatFieldsToAnthropic(t *testing.T) {
	const body = `{"model":"anthropic/claude-haiku-4-5","messages":[{"role":"user","content":"hi"}],"logprobs":true,"frequency_penalty":0.5,"web_search_options":{},"user":"u-1","safety_identifier":"s","metadata":{"a":"b"},"prompt_cache_key":"k"}`
	fx := newFixture(t, gateway.Options{})
	a := fx.do(t, "POST", "/v1/chat/completions", body)
	if a.status != 400 || !strings.Contains(string(a.body), "frequency_penalty, logprobs, web_search_options are not supported by the anthropic format") || !strings.Contains(string(a.body), `"code":"unsupported_parameter"`) {
		t.Fatalf("refused: %d %s", a.status, a.body)
	}
	if fx.up.Count() != 0 {
		t.Fatalf("the upstream was called")
	}

	fx = newFixture(t, gateway.Options{DropUnsupported: true})
	fx.up.Push(llmtest.Text("ok"))
	a = fx.do(t, "POST", "/v1/chat/completions", body)
	if a.status != 200 {
		t.Fatalf("dropped: %d %s", a.status, a.body)
	}
	if d := a.header.Get("x-chorus-dropped"); d != "prompt_cache_key,metadata,safety_identifier,frequency_penalty,logprobs,web_search_options" {
		t.Errorf("x-chorus-dropped %q", d)
	}
	got := upstreamBody(t, fx.up)
	for _, k := range []string{"logprobs", "frequency_penalty", "web_search_options", "safety_identifier", "prompt_cache_key"} {
		if got[k] != nil {
			t.Errorf("%s reached Anthropic: %s", k, got[k])
		}
	}
	// user is Anthropic's metadata.user_id; OpenAI's metadata labels are not.
	if !sameJSON(got["metadata"], []byte(`{"user_id":"u-1"}`)) {
		t.Errorf("metadata %s", got["metadata"])
	}
}

// A fallback target whose format cannot honour a field is skipped: the
// alias's other target serves.
func TestUnsupportedFieldSkipsAFallbackTarget(t *testing.T) {
	fx := newFixture(t, gateway.Options{}, runtimeAlias("lp", "anthropic/claude-haiku-4-5", "openai/gpt-4.1-mini"))
	fx.up.Push(llmtest.Text("ok"))
	a := fx.do(t, "POST", "/v1/chat/completions", `{"model":"lp","messages":[{"role":"user","content":"hi"}],"logprobs":true}`)
	if a.status != 200 || a.header.Get("x-chorus-model") != "openai/gpt-4.1-mini" {
		t.Fatalf("%d %s %s", a.status, a.header.Get("x-chorus-model"), a.body)
	}
	if reqs := fx.up.Requests(); len(reqs) != 1 || reqs[0].Format != llmtest.FormatOpenAI {
		t.Fatalf("upstream requests: %d", len(reqs))
	}
}
