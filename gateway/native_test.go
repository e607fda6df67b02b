package gateway_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/batch"
	"github.com/chorusrt/chorus/gateway"
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
	up := llmtest.NewServer(llmtest.WithBatchAPI(llmtest.BatchAPIOptions{Run: run, Result: func(id string, _ []byte) llmtest.BatchResult {
		return llmtest.BatchResult{Reply: &llmtest.Reply{Text: "native " + id}}
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
	rt, h, closeHandler := newHandler(t, gateway.Options{BatchNative: &batch.Native{Clients: clients, Poll: 5 * time.Millisecond}}, opts...)
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
