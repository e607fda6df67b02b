package runtime

import (
	"context"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
)

// TestCallReport: a call given a CallReport hears which model, provider,
// credential (a fingerprint, never the key) and fallback step served, after
// how many placements, and the cost when priced; a stream's report is
// final (but for its cost) once the first event arrived.
func TestCallReport(t *testing.T) {
	u := &llm.Usage{PromptTokens: 1000, CompletionTokens: 500}
	oa := llmtest.NewServer()
	defer oa.Close()
	an := llmtest.NewServer(llmtest.WithDefault(llmtest.Reply{Text: "ok", Usage: u}))
	defer an.Close()
	rt := newRT(t, WithProvider(openaiCfg(oa, key)), WithProvider(anthropicCfg(an)), WithAlias("fast", "openai/m1", "anthropic/m2"),
		WithPrices(llm.Prices{"anthropic/m2": {Input: 2, Output: 8}}))

	// Buffered: the first target fails (retryable), the fallback serves.
	for i := 0; i < fast.MaxAttempts; i++ {
		oa.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 503}})
	}
	var rep CallReport
	if _, err := rt.Chat(WithCallReport(ctxT(t, 10*time.Second), &rep), req("fast")); err != nil {
		t.Fatal(err)
	}
	if rep.Model != "anthropic/m2" || rep.Provider != "anthropic" || rep.Step != 1 || rep.Attempts != 2 || rep.Credential == "" ||
		strings.Contains(rep.Credential, key) || !rep.Priced || math.Abs(rep.Cost-(1000*2+500*8)/1e6) > 1e-12 || rep.QueueWait < 0 {
		t.Errorf("buffered report %+v", rep)
	}

	// Streamed, first target serving: final at the first event.
	oa.Push(llmtest.Step{Reply: &llmtest.Reply{Deltas: []string{"a", "b"}}})
	var srep CallReport
	s, err := rt.Stream(WithCallReport(ctxT(t, 10*time.Second), &srep), req("fast"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := <-s.Events(); !ok {
		t.Fatal("no first event")
	}
	if srep.Model != "openai/m1" || srep.Step != 0 || srep.Attempts != 1 || srep.Credential == "" {
		t.Errorf("stream report at the first event %+v", srep)
	}
	if _, err := s.Result(); err != nil {
		t.Fatal(err)
	}
	if srep.Priced {
		t.Errorf("an unpriced model reported a cost: %+v", srep)
	}

	// Without a report nothing is recorded anywhere (and nothing fails).
	if _, err := rt.Chat(ctxT(t, 10*time.Second), req("anthropic/m2")); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkMemCallRuntimeWithReport is BenchmarkMemCallRuntime with a
// CallReport per call: what the report costs when used (unused, it is one
// context lookup per call).
func BenchmarkMemCallRuntimeWithReport(b *testing.B) {
	hc := &http.Client{Transport: memTransport{memBody(1)}}
	rt, err := New(WithProvider(memCfg()), WithClientOptions(providers.WithHTTPClient(hc)))
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close(context.Background())
	r := &llm.ChatRequest{Model: "openai/m", Messages: []llm.Message{llm.UserText("go")}}
	b.ReportAllocs()
	for b.Loop() {
		var rep CallReport
		s, err := rt.Stream(WithCallReport(context.Background(), &rep), r)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Result(); err != nil {
			b.Fatal(err)
		}
		if rep.Attempts != 1 {
			b.Fatalf("report %+v", rep)
		}
	}
}
