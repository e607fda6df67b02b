package gateway_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/batch"
	"github.com/chorusrt/chorus/gateway"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
)

// TestBatchesNative: with Options.BatchNative, a batch's lines go to the
// providers' own batch APIs (one batch per provider), none runs live, and
// the answers come back as OpenAI output lines.
func TestBatchesNative(t *testing.T) {
	f := nativeGateway(t, 30*time.Millisecond)
	up := f.up
	line := func(id, model string) string {
		return `{"custom_id":"` + id + `","method":"POST","url":"/v1/chat/completions","body":{"model":"` + model + `","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}}` + "\n"
	}
	var file struct{ ID string }
	decode(t, f.upload(t, "", "batch", "in.jsonl", []byte(line("o1", "openai/gpt-4.1-mini")+line("a1", "anthropic/claude-haiku-4-5"))).body, &file)
	var created batchObj
	decode(t, f.do(t, "POST", "/v1/batches", `{"input_file_id":"`+file.ID+`","endpoint":"/v1/chat/completions","completion_window":"24h"}`).body, &created)
	b := f.waitBatch(t, "", created.ID)
	if b.Status != "completed" || b.RequestCounts.Completed != 2 || b.OutputFileID == nil {
		t.Fatalf("batch %+v", b)
	}
	out := string(f.do(t, "GET", "/v1/files/"+*b.OutputFileID+"/content", "").body)
	if !strings.Contains(out, `"content":"native o1"`) || !strings.Contains(out, `"content":"native a1"`) {
		t.Fatalf("output %s", out)
	}
	if n := len(up.Batches()); n != 2 {
		t.Fatalf("%d native batches, want one per provider", n)
	}
	for _, r := range up.Requests() {
		if strings.HasSuffix(r.Path, "/chat/completions") || strings.HasSuffix(r.Path, "/v1/messages") {
			t.Errorf("a line ran live: %s", r.Path)
		}
	}
}

// nativeGateway is a gateway whose providers (openai, anthropic) and their
// batch APIs are one llmtest server, a batch running for run.
func nativeGateway(t *testing.T, run time.Duration) *fixture {
	t.Helper()
	return nativeGatewayWith(t, run, gateway.Options{})
}

// nativeGatewayWith is nativeGateway with opts (BatchNative is set) and
// rtOpts; each native answer used 1,000 prompt and 1,000 completion
// tokens.
func nativeGatewayWith(t *testing.T, run time.Duration, gopts gateway.Options, rtOpts ...runtime.Option) *fixture {
	t.Helper()
	up := llmtest.NewServer(llmtest.WithBatchAPI(llmtest.BatchAPIOptions{Run: run, Result: func(id string, _ []byte) llmtest.BatchResult {
		return llmtest.BatchResult{Reply: &llmtest.Reply{Text: "native " + id, Usage: &llm.Usage{PromptTokens: 1000, CompletionTokens: 1000}}}
	}}))
	clients := map[string]*providers.Client{}
	var opts []runtime.Option
	for id, base := range map[string]string{"openai": up.OpenAIBaseURL(), "anthropic": up.AnthropicBaseURL()} {
		cfg, _ := providers.Builtin(id)
		cfg.BaseURL, cfg.APIKey = base, providerKey
		c, err := providers.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		clients[id] = c
		opts = append(opts, runtime.WithProvider(cfg))
	}
	gopts.BatchNative = &batch.Native{Clients: clients, Poll: 5 * time.Millisecond}
	rt, h, closeHandler := newHandler(t, gopts, append(opts, rtOpts...)...)
	gw := httptest.NewServer(h)
	t.Cleanup(func() {
		gw.CloseClientConnections()
		gw.Close()
		closeHandler()
		up.Close()
	})
	return &fixture{up: up, rt: rt, h: h, gw: gw, url: gw.URL}
}

// TestBatchesNativeCancel: cancelling a batch whose lines wait in a
// provider's batch API cancels that native batch too.
func TestBatchesNativeCancel(t *testing.T) {
	f := nativeGateway(t, time.Hour)
	in := `{"custom_id":"o1","method":"POST","url":"/v1/chat/completions","body":{"model":"openai/gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}}` + "\n"
	var file struct{ ID string }
	decode(t, f.upload(t, "", "batch", "in.jsonl", []byte(in)).body, &file)
	var created batchObj
	decode(t, f.do(t, "POST", "/v1/batches", `{"input_file_id":"`+file.ID+`","endpoint":"/v1/chat/completions","completion_window":"24h"}`).body, &created)
	for deadline := time.Now().Add(10 * time.Second); len(f.up.Batches()) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no native batch was submitted")
		}
	}
	if a := f.do(t, "POST", "/v1/batches/"+created.ID+"/cancel", ""); a.status != 200 {
		t.Fatalf("cancel %d %s", a.status, a.body)
	}
	b := f.waitBatch(t, "", created.ID)
	if nb := f.up.Batches(); b.Status != "cancelled" || len(nb) != 1 || !nb[0].Cancelled {
		t.Fatalf("batch %+v, native batches %+v", b, nb)
	}
}

// TestBatchesNativeChargeTheKey: lines a provider's batch API answered are
// charged to the batch's key at the batch price (half the live price
// here): two lines of $0.01 live cost spend $0.01 of the key's budget, so
// a key with $0.009 is then refused, and a key with $0.011 is not.
func TestBatchesNativeChargeTheKey(t *testing.T) {
	for _, c := range []struct {
		budget float64
		want   int
	}{{0.009, 429}, {0.011, 200}} {
		f := nativeGatewayWith(t, 10*time.Millisecond, gateway.Options{Keys: []gateway.Key{{Name: "k", SHA256: gateway.HashKey("gk-native"), BudgetUSD: c.budget}}},
			runtime.WithPrices(llm.Prices{"openai/gpt-4.1-mini": {Input: 2, Output: 8, BatchDiscount: 0.5}}))
		key := []string{"Authorization", "Bearer gk-native"}
		line := func(id string) string {
			return `{"custom_id":"` + id + `","method":"POST","url":"/v1/chat/completions","body":{"model":"openai/gpt-4.1-mini","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}}` + "\n"
		}
		var file struct{ ID string }
		decode(t, f.upload(t, "gk-native", "batch", "in.jsonl", []byte(line("a")+line("b"))).body, &file)
		var created batchObj
		decode(t, f.do(t, "POST", "/v1/batches", `{"input_file_id":"`+file.ID+`","endpoint":"/v1/chat/completions","completion_window":"24h"}`, key...).body, &created)
		if b := f.waitBatch(t, "gk-native", created.ID); b.Status != "completed" || b.RequestCounts.Completed != 2 {
			t.Fatalf("batch %+v", b)
		}
		f.up.Push(llmtest.Text("live"))
		a := f.do(t, "POST", "/v1/chat/completions", `{"model":"openai/gpt-4.1-mini","messages":[{"role":"user","content":"x"}]}`, key...)
		if a.status != c.want {
			t.Errorf("budget $%v after $0.01 of native answers: %d %s, want %d", c.budget, a.status, a.body, c.want)
		}
	}
}
