package gateway_test

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/chorusrt/chorus/cache"
	"github.com/chorusrt/chorus/gateway"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/requestlog"
	"github.com/chorusrt/chorus/runtime"
)

func cacheOpt(t *testing.T) runtime.Option {
	t.Helper()
	s, err := cache.NewMemory(cache.Limits{MaxEntries: 1000})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cache.New(s, cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return runtime.WithCache(c, runtime.CacheOptions{})
}

var cacheKeys = gateway.Options{Keys: []gateway.Key{
	{Name: "a", SHA256: gateway.HashKey("gk-a")},
	{Name: "b", SHA256: gateway.HashKey("gk-b")},
}}

// TestCacheHeaders: x-chorus-cache says hit or miss; a hit sends nothing
// upstream and answers what the provider answered, buffered or streamed;
// key b never reads key a's entry; the request header picks the mode.
func TestCacheHeaders(t *testing.T) {
	fx := newFixture(t, cacheKeys, cacheOpt(t))
	fx.up.Push(llmtest.Step{Reply: &llmtest.Reply{Text: "cached words", Usage: &llm.Usage{PromptTokens: 9, CompletionTokens: 4}}})
	body := `{"model":"openai/gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}`
	spaced := "{ \"messages\": [ {\"content\": \"hi\", \"role\": \"user\"} ],\n \"model\": \"openai/gpt-4.1-mini\" }"
	ask := func(key, b string, hdr ...string) answer {
		t.Helper()
		a := fx.do(t, "POST", "/v1/chat/completions", b, append([]string{"Authorization", "Bearer " + key}, hdr...)...)
		if a.status != 200 {
			t.Fatalf("status %d: %s", a.status, a.body)
		}
		return a
	}
	first := ask("gk-a", body)
	second := ask("gk-a", spaced)
	if first.header.Get("x-chorus-cache") != "miss" || second.header.Get("x-chorus-cache") != "hit" || fx.up.Count() != 1 {
		t.Fatalf("x-chorus-cache %q then %q, upstream %d; want miss, hit, 1", first.header.Get("x-chorus-cache"), second.header.Get("x-chorus-cache"), fx.up.Count())
	}
	var a, b struct {
		Choices []struct {
			Message struct{ Content string }
		}
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	decode(t, first.body, &a)
	decode(t, second.body, &b)
	if b.Choices[0].Message.Content != "cached words" || b.Usage != a.Usage || b.Usage.CompletionTokens != 4 {
		t.Fatalf("hit %+v, provider's %+v", b, a)
	}
	if c := second.header.Get("x-chorus-cost-usd"); c != "" && c != "0" {
		t.Fatalf("a hit costs %s", c)
	}
	// Streamed, from the buffered entry.
	st := ask("gk-a", strings.Replace(body, `"messages"`, `"stream":true,"messages"`, 1))
	if st.header.Get("x-chorus-cache") != "hit" || fx.up.Count() != 1 {
		t.Fatalf("stream: x-chorus-cache %q, upstream %d", st.header.Get("x-chorus-cache"), fx.up.Count())
	}
	var text strings.Builder
	for _, d := range sseData(st.body) {
		if d == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				Delta struct{ Content string }
			}
		}
		decode(t, []byte(d), &ch)
		for _, c := range ch.Choices {
			text.WriteString(c.Delta.Content)
		}
	}
	if text.String() != "cached words" {
		t.Fatalf("streamed hit text %q", text.String())
	}
	// Key b has its own namespace.
	if got := ask("gk-b", body).header.Get("x-chorus-cache"); got != "miss" || fx.up.Count() != 2 {
		t.Fatalf("key b: %q, upstream %d; want a miss", got, fx.up.Count())
	}
	// The request header picks the mode.
	if got := ask("gk-a", body, "x-chorus-cache", "off").header.Get("x-chorus-cache"); got != "" || fx.up.Count() != 3 {
		t.Fatalf("off: %q, upstream %d", got, fx.up.Count())
	}
	bad := fx.do(t, "POST", "/v1/chat/completions", body, "Authorization", "Bearer gk-a", "x-chorus-cache", "sometimes")
	if bad.status != 400 || !strings.Contains(string(bad.body), "x-chorus-cache") || fx.up.Count() != 3 {
		t.Fatalf("bad mode: %d %s", bad.status, bad.body)
	}
}

// TestCacheShareAcrossKeys: one namespace for every key.
func TestCacheShareAcrossKeys(t *testing.T) {
	opts := cacheKeys
	opts.CacheShareAcrossKeys = true
	fx := newFixture(t, opts, cacheOpt(t))
	body := `{"model":"openai/gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}`
	fx.do(t, "POST", "/v1/chat/completions", body, "Authorization", "Bearer gk-a")
	if got := fx.do(t, "POST", "/v1/chat/completions", body, "Authorization", "Bearer gk-b").header.Get("x-chorus-cache"); got != "hit" || fx.up.Count() != 1 {
		t.Fatalf("key b after key a, shared: %q, upstream %d", got, fx.up.Count())
	}
}

// TestCacheBatchNamespace: a gateway batch's lines cache in their key's
// namespace: the key's own chat call is then a hit, another key's a miss,
// and the batch's output line of a hit says so.
func TestCacheBatchNamespace(t *testing.T) {
	f := newFixture(t, batchKeys(), cacheOpt(t))
	input := `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"openai/gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}}` + "\n"
	run := func() []map[string]any {
		t.Helper()
		var file struct{ ID string }
		decode(t, f.upload(t, "gk-batcher", "batch", "in.jsonl", []byte(input)).body, &file)
		var created batchObj
		decode(t, f.do(t, "POST", "/v1/batches", `{"input_file_id":"`+file.ID+`","endpoint":"/v1/chat/completions","completion_window":"24h"}`, "Authorization", "Bearer gk-batcher").body, &created)
		b := f.waitBatch(t, "gk-batcher", created.ID)
		if b.Status != "completed" || b.OutputFileID == nil {
			t.Fatalf("batch %+v", b)
		}
		return lines(f.do(t, "GET", "/v1/files/"+*b.OutputFileID+"/content", "", "Authorization", "Bearer gk-batcher").body)
	}
	if l := run(); len(l) != 1 || l[0]["cache"] != nil {
		t.Fatalf("first run: %v", l)
	}
	if l := run(); len(l) != 1 || l[0]["cache"] != "hit" || f.up.Count() != 1 {
		t.Fatalf("second run: %v, upstream %d", l, f.up.Count())
	}
	body := `{"model":"openai/gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}`
	if got := f.do(t, "POST", "/v1/chat/completions", body, "Authorization", "Bearer gk-batcher").header.Get("x-chorus-cache"); got != "hit" {
		t.Fatalf("the batch key's chat: %q, want hit", got)
	}
	if got := f.do(t, "POST", "/v1/chat/completions", body, "Authorization", "Bearer gk-other").header.Get("x-chorus-cache"); got != "miss" {
		t.Fatalf("another key's chat: %q, want miss", got)
	}
}

// TestCacheFanOutNamespace: a fan-out's calls cache in the key's
// namespace too.
func TestCacheFanOutNamespace(t *testing.T) {
	opts := cacheKeys
	opts.FanOut = map[string][]string{"both": {"openai/gpt-4.1-mini", "anthropic/claude-haiku-4-5"}}
	fx := newFixture(t, opts, cacheOpt(t))
	fan := `{"model":"both","messages":[{"role":"user","content":"hi"}]}`
	for _, key := range []string{"gk-a", "gk-a", "gk-b"} {
		if a := fx.do(t, "POST", "/v1/chat/completions", fan, "Authorization", "Bearer "+key); a.status != 200 {
			t.Fatalf("fan-out: %d %s", a.status, a.body)
		}
	}
	if fx.up.Count() != 4 {
		t.Fatalf("upstream requests = %d, want 4 (key a twice: 2, key b: 2 more)", fx.up.Count())
	}
	one := `{"model":"openai/gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}`
	if got := fx.do(t, "POST", "/v1/chat/completions", one, "Authorization", "Bearer gk-b").header.Get("x-chorus-cache"); got != "hit" {
		t.Fatalf("key b's single call after its fan-out: %q, want hit", got)
	}
}

// TestCacheAcrossFormats: the client's wire format is not in the key: a
// question asked on OpenAI's route is a hit on Anthropic's, answered in
// Anthropic's shape.
func TestCacheAcrossFormats(t *testing.T) {
	fx := newFixture(t, cacheKeys, cacheOpt(t))
	fx.up.Push(llmtest.Step{Reply: &llmtest.Reply{Text: "same either way", Usage: &llm.Usage{PromptTokens: 6, CompletionTokens: 3}}})
	oa := fx.do(t, "POST", "/v1/chat/completions", `{"model":"anthropic/claude-haiku-4-5","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer gk-a")
	an := fx.do(t, "POST", "/v1/messages", `{"model":"anthropic/claude-haiku-4-5","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer gk-a", "anthropic-version", "2023-06-01")
	if oa.status != 200 || an.status != 200 || oa.header.Get("x-chorus-cache") != "miss" || an.header.Get("x-chorus-cache") != "hit" || fx.up.Count() != 1 {
		t.Fatalf("openai route %d %q, anthropic route %d %q %s, upstream %d", oa.status, oa.header.Get("x-chorus-cache"), an.status, an.header.Get("x-chorus-cache"), an.body, fx.up.Count())
	}
	var m struct {
		Type    string
		Content []struct{ Type, Text string }
		Usage   struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		}
	}
	decode(t, an.body, &m)
	if m.Type != "message" || len(m.Content) != 1 || m.Content[0].Text != "same either way" || m.Usage.OutputTokens != 3 || m.Usage.InputTokens != 6 {
		t.Fatalf("anthropic answer from the cache: %s", an.body)
	}
}

// TestCacheGeminiStream: a Gemini client's streamed request is answered
// from the cache in Gemini's stream shape: text, the function call, the
// finish and the usage as the provider's stream had them.
func TestCacheGeminiStream(t *testing.T) {
	fx := newFixture(t, cacheKeys, cacheOpt(t))
	fx.up.Push(llmtest.Respond(llmtest.Reply{Deltas: []string{"un ", "deux"}, ToolCalls: []llm.ToolCall{{ID: "call_g", Name: "f", Arguments: `{"n":2}`}}, Usage: &llm.Usage{PromptTokens: 7, CompletionTokens: 4}}))
	const body = `{"contents":[{"role":"user","parts":[{"text":"count"}]}],"tools":[{"functionDeclarations":[{"name":"f","parameters":{"type":"object"}}]}]}`
	type seen struct {
		text, call, finish string
		usage              [3]int
	}
	var got [2]seen
	for i := range 2 {
		a := fx.do(t, "POST", "/v1beta/models/gemini/gemini-2.5-flash:streamGenerateContent?alt=sse", body, "x-goog-api-key", "gk-a")
		if want := []string{"miss", "hit"}[i]; a.status != 200 || a.header.Get("x-chorus-cache") != want {
			t.Fatalf("call %d: %d %q, want %s: %s", i, a.status, a.header.Get("x-chorus-cache"), want, a.body)
		}
		for _, d := range sseData(a.body) {
			var c geminiResponse
			decode(t, []byte(d), &c)
			for _, p := range c.Candidates[0].Content.Parts {
				if p.Text != nil {
					got[i].text += *p.Text
				}
				if p.FunctionCall != nil {
					got[i].call = p.FunctionCall.Name + fmt.Sprint(p.FunctionCall.Args)
				}
			}
			if c.Candidates[0].FinishReason != "" {
				got[i].finish = c.Candidates[0].FinishReason
			}
			if u := c.UsageMetadata; u != nil && u.TotalTokenCount > 0 {
				got[i].usage = [3]int{u.PromptTokenCount, u.CandidatesTokenCount, u.TotalTokenCount}
			}
		}
	}
	if got[0] != got[1] || got[0].text != "un deux" || got[0].call == "" || got[0].usage[2] != 11 || fx.up.Count() != 1 {
		t.Fatalf("from the provider %+v, from the cache %+v, upstream %d", got[0], got[1], fx.up.Count())
	}
}

// TestCacheResponsesEncryptedReasoning: a streamed Responses request
// answered from the cache ends with the reasoning items the provider's
// answer had (invariant 7): one per item, with its id, summary and
// encrypted_content, before the item it preceded, as the answer from the
// provider does; the streamed text and reasoning are the provider's too.
// The provider's answer has three reasoning items, the second without a
// summary (it streams nothing), then a message and a function call.
func TestCacheResponsesEncryptedReasoning(t *testing.T) {
	fx := newFixture(t, cacheKeys, cacheOpt(t))
	fx.up.Push(llmtest.Respond(llmtest.Reply{
		Thinking: []llm.ThinkingBlock{{Text: "first thought", Signature: "enc-A"}, {Signature: "enc-B"}, {Text: "third", Signature: "enc-C"}},
		Text:     "answer", ToolCalls: []llm.ToolCall{{ID: "call_r", Name: "f", Arguments: `{"n":1}`}},
		Usage: &llm.Usage{PromptTokens: 5, CompletionTokens: 7, ReasoningTokens: 3},
	}))
	const body = `{"model":"openai/gpt-4.1-mini","input":"think","stream":true,"include":["reasoning.encrypted_content"],"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}]}`
	type item struct {
		Type             string `json:"type"`
		ID               string `json:"id"`
		EncryptedContent string `json:"encrypted_content"`
		CallID           string `json:"call_id"`
		Summary          []struct {
			Text string `json:"text"`
		} `json:"summary"`
	}
	type seen struct {
		text, reasoning string
		items           []item
	}
	var got [2]seen
	for i, want := range []string{"miss", "hit"} {
		a := fx.do(t, "POST", "/v1/responses", body, "Authorization", "Bearer gk-a")
		if a.status != 200 || a.header.Get("x-chorus-cache") != want {
			t.Fatalf("call %d: %d %q, want %s: %s", i, a.status, a.header.Get("x-chorus-cache"), want, a.body)
		}
		for _, e := range sseEvents(a.body) {
			var ev struct {
				Delta    string `json:"delta"`
				Response struct {
					Output []item `json:"output"`
				} `json:"response"`
			}
			decode(t, []byte(e[1]), &ev)
			switch e[0] {
			case "response.output_text.delta":
				got[i].text += ev.Delta
			case "response.reasoning_summary_text.delta":
				got[i].reasoning += ev.Delta
			case "response.completed":
				got[i].items = ev.Response.Output
			}
		}
	}
	if fx.up.Count() != 1 {
		t.Fatalf("upstream %d, want 1", fx.up.Count())
	}
	var shape []string
	for _, it := range got[0].items {
		s := it.Type + ":" + it.ID + ":" + it.EncryptedContent + ":" + it.CallID
		if len(it.Summary) > 0 {
			s += ":" + it.Summary[0].Text
		}
		shape = append(shape, s)
	}
	want := []string{"reasoning:rs_llmtest_1_0:enc-A::first thought", "reasoning:rs_llmtest_1_1:enc-B:", "reasoning:rs_llmtest_1_2:enc-C::third"}
	if len(shape) != 5 || !slices.Equal(shape[:3], want) || got[0].items[3].Type != "message" || got[0].items[4].CallID != "call_r" {
		t.Fatalf("the provider's answer's output items:\n%s", strings.Join(shape, "\n"))
	}
	if got[0].text != "answer" || got[0].reasoning != "first thought\n\nthird" {
		t.Fatalf("the provider's answer streamed %q, reasoning %q", got[0].text, got[0].reasoning)
	}
	if got[1].text != got[0].text || got[1].reasoning != got[0].reasoning || !reflect.DeepEqual(got[1].items[:3], got[0].items[:3]) ||
		len(got[1].items) != 5 || got[1].items[3].Type != "message" || got[1].items[4].CallID != "call_r" {
		t.Fatalf("from the cache %+v\nfrom the provider %+v", got[1], got[0])
	}
}

// TestCacheHitChargesNothing: a call the cache answered used no provider
// tokens and cost nothing: it charges none of its key's tokens per minute
// and nothing of its budget, buffered, streamed or in a fan-out. Each
// answer is 13 tokens and $0.006 against a key of 20 tokens a minute and a
// $0.01 budget: charged as a call, the second hit would already be
// refused.
func TestCacheHitChargesNothing(t *testing.T) {
	opts := gateway.Options{Keys: []gateway.Key{{Name: "a", SHA256: gateway.HashKey("gk-a"), TPM: 20, BudgetUSD: 0.01}},
		FanOut: map[string][]string{"both": {"openai/gpt-4.1-mini", "openai/gpt-4.1"}}}
	// 9 prompt and 4 completion tokens at $400 and $600 per million.
	fx := newFixture(t, opts, cacheOpt(t), runtime.WithPrices(llm.Prices{"openai/gpt-4.1-mini": {Input: 400, Output: 600}, "openai/gpt-4.1": {Input: 400, Output: 600}}))
	usage := &llm.Usage{PromptTokens: 9, CompletionTokens: 4}
	const body = `{"model":"openai/gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}`
	streamed := strings.Replace(body, `"messages"`, `"stream":true,"stream_options":{"include_usage":true},"messages"`, 1)
	ask := func(b, want string) answer {
		t.Helper()
		a := fx.do(t, "POST", "/v1/chat/completions", b, "Authorization", "Bearer gk-a")
		if a.status != 200 || a.header.Get("x-chorus-cache") != want {
			t.Fatalf("%s: %d %q, want %s: %s", b, a.status, a.header.Get("x-chorus-cache"), want, a.body)
		}
		return a
	}
	fx.up.Push(llmtest.Step{Reply: &llmtest.Reply{Text: "once", Usage: usage}})
	if c := ask(body, "miss").header.Get("x-chorus-cost-usd"); c != "0.006" {
		t.Fatalf("the miss costs %q, want 0.006", c)
	}
	for i := range 5 {
		a := ask(body, "hit")
		if got := a.header.Get("x-ratelimit-remaining-tokens"); got != "7" {
			t.Fatalf("buffered hit %d: %s tokens left, want 7 (20 less the miss's 13)", i, got)
		}
	}
	for i := range 5 {
		a := ask(streamed, "hit")
		if got := a.header.Get("x-ratelimit-remaining-tokens"); got != "7" || !strings.Contains(string(a.body), `"completion_tokens":4`) {
			t.Fatalf("streamed hit %d: %s tokens left, want 7: %s", i, got, a.body)
		}
	}
	// A fan-out whose one model is a hit charges the other's tokens only.
	fx.up.Push(llmtest.Step{Reply: &llmtest.Reply{Text: "other", Usage: &llm.Usage{PromptTokens: 2, CompletionTokens: 1}}})
	if a := ask(`{"model":"both","messages":[{"role":"user","content":"hi"}]}`, ""); a.header.Get("x-ratelimit-remaining-tokens") != "7" {
		t.Fatalf("fan-out: %s tokens left, want 7", a.header.Get("x-ratelimit-remaining-tokens"))
	}
	if got := ask(body, "hit").header.Get("x-ratelimit-remaining-tokens"); got != "4" {
		t.Fatalf("after the fan-out: %s tokens left, want 4 (7 less the other model's 3)", got)
	}
	// The same fan-out streamed: both models are hits now.
	if a := ask(`{"model":"both","stream":true,"messages":[{"role":"user","content":"hi"}]}`, ""); !strings.Contains(string(a.body), "[DONE]") {
		t.Fatalf("streamed fan-out: %s", a.body)
	}
	if got := ask(body, "hit").header.Get("x-ratelimit-remaining-tokens"); got != "4" {
		t.Fatalf("after the streamed fan-out of two hits: %s tokens left, want 4", got)
	}
	if n := fx.up.Count(); n != 2 {
		t.Fatalf("%d upstream calls, want 2", n)
	}
}

// recLog keeps the records a gateway logs.
type recLog struct {
	mu   sync.Mutex
	recs []requestlog.Record
}

func (l *recLog) Log(r requestlog.Record) {
	l.mu.Lock()
	l.recs = append(l.recs, r)
	l.mu.Unlock()
}

// TestCacheHitsAreLogged: with the request log on, the record of a call
// the cache answered says so (and costs nothing); the first call's does
// not.
func TestCacheHitsAreLogged(t *testing.T) {
	lg := &recLog{}
	opts := cacheKeys
	opts.RequestLog = lg
	fx := newFixture(t, opts, cacheOpt(t))
	fx.up.Push(llmtest.Text("once"))
	body := `{"model":"openai/gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}`
	for i, want := range []string{"miss", "hit"} {
		if a := fx.do(t, "POST", "/v1/chat/completions", body, "Authorization", "Bearer gk-a"); a.status != 200 || a.header.Get("x-chorus-cache") != want {
			t.Fatalf("call %d: %d %q %s", i, a.status, a.header.Get("x-chorus-cache"), a.body)
		}
	}
	lg.mu.Lock()
	defer lg.mu.Unlock()
	if len(lg.recs) != 2 || lg.recs[0].CacheHit || !lg.recs[1].CacheHit || lg.recs[1].Cost != 0 {
		t.Fatalf("records %+v", lg.recs)
	}
}
