package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chorusrt/chorus/gateway"
	"github.com/chorusrt/chorus/keystore"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
)

func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkGatewayFleet: buffered chat completions through the gateway to
// llmtest with a key whose RPM, TPM, concurrency and budget are all set
// (so every call is admitted, reserved and settled), the limits counted in
// memory (off: no key store) and on a key store (SQLite, PostgreSQL);
// "nokey" has no key at all. It reports ns/op and the process's CPU per
// request (client, gateway and upstream share it); compare on against off.
func BenchmarkGatewayFleet(b *testing.B) {
	key := gateway.Key{Name: "bench", SHA256: gateway.HashKey("gk-bench"), RPM: 1 << 30, TPM: 1 << 40, Concurrency: 1 << 20, BudgetUSD: 1e6}
	const body = `{"model":"openai/gpt-4.1-mini","max_tokens":50,"messages":[{"role":"user","content":"hello"}]}`
	run := func(b *testing.B, st *keystore.Store, keys []gateway.Key) {
		up := llmtest.NewServer()
		defer up.Close()
		up.SetResponder(func(llmtest.Recorded) llmtest.Step {
			return llmtest.Step{Reply: &llmtest.Reply{Text: "ok", Usage: &llm.Usage{PromptTokens: 5, CompletionTokens: 2}}}
		})
		rt, err := runtime.New(
			runtime.WithProvider(providers.Config{ID: "openai", Format: providers.FormatOpenAI, BaseURL: up.OpenAIBaseURL(), APIKey: providerKey}),
			runtime.WithPrices(llm.Prices{"openai/gpt-4.1-mini": {Input: 0.4, Output: 1.6}}),
		)
		if err != nil {
			b.Fatal(err)
		}
		defer rt.Close(context.Background())
		h, err := gateway.New(rt, gateway.Options{Keys: keys, KeyStore: st})
		if err != nil {
			b.Fatal(err)
		}
		srv := httptest.NewServer(h)
		defer func() {
			srv.Close()
			_ = h.Close(context.Background())
			if st != nil {
				st.Close()
			}
		}()
		c := srv.Client()
		c.Transport.(*http.Transport).MaxIdleConnsPerHost = 64
		b.ReportAllocs()
		b.ResetTimer()
		cpu := cpuNow()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				req, _ := http.NewRequest("POST", srv.URL+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer gk-bench")
				resp, err := c.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Errorf("status %d", resp.StatusCode)
					return
				}
			}
		})
		b.ReportMetric(float64(cpuNow()-cpu)/float64(b.N), "cpu-ns/op")
	}
	b.Run("nokey", func(b *testing.B) { run(b, nil, nil) })
	b.Run("off", func(b *testing.B) { run(b, nil, []gateway.Key{key}) })
	b.Run("sqlite", func(b *testing.B) { run(b, sqliteOpener(b)(), []gateway.Key{key}) })
	b.Run("postgres", func(b *testing.B) { run(b, pgOpenerTB(b)(), []gateway.Key{key}) })
}
