package gateway_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/gateway"
	"github.com/chorusrt/chorus/llm"
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

// An Anthropic client's cache_control marks (system block, user block,
// tool), top_k, metadata.user_id, service_tier and its own fields reach
// an Anthropic upstream as sent.
func TestAnthropicFieldsReachAnthropic(t *testing.T) {
	fx := newFixture(t, gateway.Options{})
	const body = `{"model":"claude-sonnet-4-5","max_tokens":64,"top_k":5,"metadata":{"user_id":"u-9"},"service_tier":"standard_only",
"container":"ctr_1","context_management":{"edits":[]},
"system":[{"type":"text","text":"long rules"},{"type":"text","text":"more rules","cache_control":{"type":"ephemeral","ttl":"1h"}}],
"tools":[{"name":"f","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}],
"messages":[{"role":"user","content":[{"type":"text","text":"doc","cache_control":{"type":"ephemeral"}},{"type":"text","text":"question"}]}]}`
	for _, stream := range []bool{false, true} {
		b := body
		if stream {
			b = strings.Replace(b, `"max_tokens":64`, `"max_tokens":64,"stream":true`, 1)
		}
		fx.up.Push(llmtest.Text("ok"))
		a := fx.do(t, "POST", "/v1/messages", b)
		if a.status != 200 {
			t.Fatalf("stream=%v: %d %s", stream, a.status, a.body)
		}
		got := upstreamBody(t, fx.up)
		for k, v := range map[string]string{"top_k": `5`, "metadata": `{"user_id":"u-9"}`, "service_tier": `"standard_only"`, "container": `"ctr_1"`, "context_management": `{"edits":[]}`} {
			if !sameJSON(got[k], []byte(v)) {
				t.Errorf("stream=%v: %s arrived as %s, want %s", stream, k, got[k], v)
			}
		}
		if !sameJSON(got["system"], []byte(`[{"type":"text","text":"long rules"},{"type":"text","text":"more rules","cache_control":{"type":"ephemeral","ttl":"1h"}}]`)) {
			t.Errorf("stream=%v: system arrived as %s", stream, got["system"])
		}
		if !strings.Contains(string(got["tools"]), `"cache_control":{"type":"ephemeral"}`) {
			t.Errorf("stream=%v: tools arrived as %s", stream, got["tools"])
		}
		// The marked block ends a cached prefix; what follows it is not cached.
		if !strings.Contains(string(got["messages"]), `{"type":"text","text":"doc","cache_control":{"type":"ephemeral"}}`) || strings.Count(string(got["messages"]), "cache_control") != 1 {
			t.Errorf("stream=%v: messages arrived as %s", stream, got["messages"])
		}
	}
}

// The same client to an OpenAI upstream: the marks become nothing (OpenAI
// caches prefixes on its own) and are named in x-chorus-dropped; top_k has
// no equivalent there and is refused, unless dropped.
func TestAnthropicFieldsToOpenAI(t *testing.T) {
	const marked = `{"model":"openai/gpt-4.1-mini","max_tokens":64,"system":[{"type":"text","text":"rules","cache_control":{"type":"ephemeral"}}],"metadata":{"user_id":"u-9"},"messages":[{"role":"user","content":"hi"}]}`
	fx := newFixture(t, gateway.Options{})
	fx.up.Push(llmtest.Text("ok"))
	a := fx.do(t, "POST", "/v1/messages", marked)
	if a.status != 200 || a.header.Get("x-chorus-dropped") != "cache_control" {
		t.Fatalf("%d dropped=%q %s", a.status, a.header.Get("x-chorus-dropped"), a.body)
	}
	got := upstreamBody(t, fx.up)
	if strings.Contains(string(fx.up.Requests()[0].Body), "cache_control") || !sameJSON(got["user"], []byte(`"u-9"`)) {
		t.Errorf("upstream body %s", fx.up.Requests()[0].Body)
	}
	a = fx.do(t, "POST", "/v1/messages", `{"model":"openai/gpt-4.1-mini","max_tokens":64,"top_k":3,"messages":[{"role":"user","content":"hi"}]}`)
	if a.status != 400 || !strings.Contains(string(a.body), `"type":"invalid_request_error"`) || !strings.Contains(string(a.body), "top_k is not supported by the openai format") {
		t.Fatalf("top_k to OpenAI: %d %s", a.status, a.body)
	}
	if n := len(fx.up.Requests()); n != 1 {
		t.Fatalf("the refused request reached the upstream (%d requests)", n)
	}
}

// A Gemini client's safetySettings, cachedContent, topK, penalties,
// logprobs and its own generationConfig fields reach a Gemini upstream;
// to an OpenAI upstream, safety settings and a cached-content handle are
// refused.
func TestGeminiFieldsReachGemini(t *testing.T) {
	fx := newFixture(t, gateway.Options{})
	const body = `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],
"safetySettings":[{"category":"HARM_CATEGORY_HATE_SPEECH","threshold":"BLOCK_NONE"}],
"cachedContent":"cachedContents/abc123","labels":{"team":"a"},
"generationConfig":{"topK":4,"presencePenalty":0.5,"frequencyPenalty":0.25,"responseLogprobs":true,"logprobs":2,"responseMimeType":"text/x.enum","responseModalities":["TEXT"],"maxOutputTokens":30}}`
	fx.up.Push(llmtest.Text("ok"))
	a := fx.do(t, "POST", "/v1beta/models/gemini-2.5-flash:generateContent", body)
	if a.status != 200 {
		t.Fatalf("%d %s", a.status, a.body)
	}
	got := upstreamBody(t, fx.up)
	for k, v := range map[string]string{"safetySettings": `[{"category":"HARM_CATEGORY_HATE_SPEECH","threshold":"BLOCK_NONE"}]`, "cachedContent": `"cachedContents/abc123"`, "labels": `{"team":"a"}`} {
		if !sameJSON(got[k], []byte(v)) {
			t.Errorf("%s arrived as %s, want %s", k, got[k], v)
		}
	}
	if !sameJSON(got["generationConfig"], []byte(`{"topK":4,"presencePenalty":0.5,"frequencyPenalty":0.25,"responseLogprobs":true,"logprobs":2,"responseMimeType":"text/x.enum","responseModalities":["TEXT"],"maxOutputTokens":30}`)) {
		t.Errorf("generationConfig arrived as %s", got["generationConfig"])
	}
	a = fx.do(t, "POST", "/v1beta/models/openai/gpt-4.1-mini:generateContent", body)
	if a.status != 400 || !strings.Contains(string(a.body), "safety_settings") || !strings.Contains(string(a.body), "cached_content") || !strings.Contains(string(a.body), `"status":"INVALID_ARGUMENT"`) {
		t.Fatalf("to OpenAI: %d %s", a.status, a.body)
	}
}

// A Responses client reaches OpenAI's Responses API with its own fields:
// store, include, truncation, service_tier, prompt_cache_key, reasoning's
// summary and text's verbosity; the same request to Anthropic is refused
// for what Anthropic cannot honour.
func TestResponsesFieldsReachTheResponsesAPI(t *testing.T) {
	fx := newFixture(t, gateway.Options{})
	const body = `{"model":"gpt-5","input":"hi","store":true,"include":["reasoning.encrypted_content","file_search_call.results"],"truncation":"auto","service_tier":"flex","prompt_cache_key":"k1","safety_identifier":"s1","reasoning":{"effort":"low","summary":"detailed"},"text":{"verbosity":"low"},"max_tool_calls":3}`
	fx.up.Push(llmtest.Text("ok"))
	a := fx.do(t, "POST", "/v1/responses", body)
	if a.status != 200 {
		t.Fatalf("%d %s", a.status, a.body)
	}
	r := fx.up.Requests()[0]
	if r.Path != "/v1/responses" {
		t.Fatalf("went to %s", r.Path)
	}
	got := upstreamBody(t, fx.up)
	for k, v := range map[string]string{"store": `true`, "include": `["file_search_call.results"]`, "truncation": `"auto"`, "service_tier": `"flex"`,
		"prompt_cache_key": `"k1"`, "safety_identifier": `"s1"`, "reasoning": `{"effort":"low","summary":"detailed"}`, "text": `{"verbosity":"low"}`, "max_tool_calls": `3`} {
		if !sameJSON(got[k], []byte(v)) {
			t.Errorf("%s arrived as %s, want %s", k, got[k], v)
		}
	}
	// store:false (the default here) keeps reasoning replayable.
	fx.up.Push(llmtest.Text("ok"))
	if a = fx.do(t, "POST", "/v1/responses", `{"model":"gpt-5","input":"hi","store":false}`); a.status != 200 {
		t.Fatalf("%d %s", a.status, a.body)
	}
	got = upstreamBody(t, fx.up)
	if !sameJSON(got["store"], []byte(`false`)) || !sameJSON(got["include"], []byte(`["reasoning.encrypted_content"]`)) {
		t.Errorf("store:false arrived as store %s include %s", got["store"], got["include"])
	}
	a = fx.do(t, "POST", "/v1/responses", strings.Replace(body, `"gpt-5"`, `"anthropic/claude-haiku-4-5"`, 1))
	if a.status != 400 || !strings.Contains(string(a.body), "verbosity, store, truncation, reasoning.summary, service_tier, include, max_tool_calls") {
		t.Fatalf("to Anthropic: %d %s", a.status, a.body)
	}
}

// An OpenAI client that asks for logprobs gets them back, buffered and
// streamed (each chunk's tokens with it), with the upstream's
// system_fingerprint on the buffered answer.
func TestOpenAILogprobsComeBack(t *testing.T) {
	fx := newFixture(t, gateway.Options{})
	lps := []llm.TokenLogprob{{Token: "Hel", Logprob: -0.5, Bytes: []int{72, 101, 108}, Top: []llm.TopLogprob{{Token: "Hel", Logprob: -0.5}, {Token: "Hi", Logprob: -1.5}}}, {Token: "lo", Logprob: -0.25}}
	const body = `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"logprobs":true,"top_logprobs":2}`
	fx.up.Push(llmtest.Respond(llmtest.Reply{Text: "Hello", Logprobs: lps}))
	a := fx.do(t, "POST", "/v1/chat/completions", body)
	var r struct {
		SystemFingerprint string `json:"system_fingerprint"`
		Choices           []struct {
			Logprobs struct {
				Content []struct {
					Token       string  `json:"token"`
					Logprob     float64 `json:"logprob"`
					TopLogprobs []struct {
						Token string `json:"token"`
					} `json:"top_logprobs"`
				} `json:"content"`
			} `json:"logprobs"`
		} `json:"choices"`
	}
	decode(t, a.body, &r)
	if lp := r.Choices[0].Logprobs.Content; a.status != 200 || len(lp) != 2 || lp[0].Token != "Hel" || lp[0].Logprob != -0.5 || len(lp[0].TopLogprobs) != 2 || lp[1].Token != "lo" || r.SystemFingerprint != "fp_llmtest" {
		t.Fatalf("buffered: %d %s", a.status, a.body)
	}
	fx.up.Push(llmtest.Respond(llmtest.Reply{Deltas: []string{"Hel", "lo"}, Logprobs: lps}))
	a = fx.do(t, "POST", "/v1/chat/completions", strings.Replace(body, `"logprobs":true`, `"logprobs":true,"stream":true`, 1))
	var tokens []string
	fingerprint := ""
	for _, d := range sseData(a.body) {
		if d == "[DONE]" {
			continue
		}
		var c struct {
			SystemFingerprint *string `json:"system_fingerprint"`
			Choices           []struct {
				Logprobs *struct {
					Content []struct {
						Token string `json:"token"`
					} `json:"content"`
				} `json:"logprobs"`
			} `json:"choices"`
		}
		decode(t, []byte(d), &c)
		if c.SystemFingerprint != nil {
			fingerprint = *c.SystemFingerprint
		}
		for _, ch := range c.Choices {
			if ch.Logprobs != nil {
				for _, tk := range ch.Logprobs.Content {
					tokens = append(tokens, tk.Token)
				}
			}
		}
	}
	if fingerprint != "fp_llmtest" {
		t.Errorf("the stream's last chunk does not carry the upstream's system_fingerprint: %s", a.body)
	}
	if strings.Join(tokens, "|") != "Hel|lo" {
		t.Fatalf("streamed logprobs %v in %s", tokens, a.body)
	}
}

// Embedding requests keep a client's own fields: Gemini's taskType and
// title reach a Gemini upstream on every item, an OpenAI client's unknown
// field reaches OpenAI; either to another format is a 400 naming it.
func TestEmbeddingFieldsPassThrough(t *testing.T) {
	fx := newFixture(t, gateway.Options{})
	a := fx.do(t, "POST", "/v1beta/models/text-embedding-004:batchEmbedContents", `{"requests":[
{"model":"models/text-embedding-004","content":{"parts":[{"text":"a"}]},"taskType":"RETRIEVAL_DOCUMENT","title":"t"},
{"model":"models/text-embedding-004","content":{"parts":[{"text":"b"}]},"taskType":"RETRIEVAL_DOCUMENT","title":"t"}]}`)
	if a.status != 200 {
		t.Fatalf("%d %s", a.status, a.body)
	}
	var up struct {
		Requests []map[string]json.RawMessage `json:"requests"`
	}
	decode(t, fx.up.Requests()[0].Body, &up)
	if len(up.Requests) != 2 || !sameJSON(up.Requests[1]["taskType"], []byte(`"RETRIEVAL_DOCUMENT"`)) || !sameJSON(up.Requests[0]["title"], []byte(`"t"`)) {
		t.Fatalf("upstream %s", fx.up.Requests()[0].Body)
	}
	a = fx.do(t, "POST", "/v1beta/models/openai/text-embedding-3-small:embedContent", `{"content":{"parts":[{"text":"a"}]},"taskType":"RETRIEVAL_QUERY"}`)
	if a.status != 400 || !strings.Contains(string(a.body), "taskType") {
		t.Fatalf("taskType to OpenAI: %d %s", a.status, a.body)
	}
	a = fx.do(t, "POST", "/v1beta/models/text-embedding-004:batchEmbedContents", `{"requests":[{"content":{"parts":[{"text":"a"}]},"taskType":"A"},{"content":{"parts":[{"text":"b"}]},"taskType":"B"}]}`)
	if a.status != 400 || !strings.Contains(string(a.body), "requests[1]") {
		t.Fatalf("items that disagree: %d %s", a.status, a.body)
	}
	n := len(fx.up.Requests())
	a = fx.do(t, "POST", "/v1/embeddings", `{"model":"text-embedding-3-small","input":"a","x_vendor":{"k":1}}`)
	if a.status != 200 || len(fx.up.Requests()) != n+1 {
		t.Fatalf("%d %s", a.status, a.body)
	}
	if got := upstreamBody(t, fx.up); !sameJSON(got["x_vendor"], []byte(`{"k":1}`)) {
		t.Fatalf("x_vendor arrived as %s", got["x_vendor"])
	}
	a = fx.do(t, "POST", "/v1/embeddings", `{"model":"gemini/text-embedding-004","input":"a","x_vendor":{"k":1}}`)
	if a.status != 400 || !strings.Contains(string(a.body), "x_vendor") {
		t.Fatalf("x_vendor to Gemini: %d %s", a.status, a.body)
	}
}
