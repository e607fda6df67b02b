package runtime

import (
	"bytes"
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
)

// refuseTemperature makes srv refuse every request that carries
// temperature, as a model that only takes the default does, and counts
// the refusals.
func refuseTemperature(srv *llmtest.Server) *atomic.Int64 {
	var refused atomic.Int64
	srv.SetResponder(func(r llmtest.Recorded) llmtest.Step {
		if bytes.Contains(r.Body, []byte(`"temperature"`)) {
			refused.Add(1)
			return llmtest.Fail(llmtest.Fault{Status: 400, Message: "Unsupported parameter: 'temperature' is not supported with this model."})
		}
		return llmtest.Text("ok")
	})
	return &refused
}

// TestLearnOncePerEndpoint (invariant 6, issue 14): learn-once state
// belongs to the endpoint, not to a key. Twenty requests, one at a time,
// spread over the two keys of one endpoint that refuses temperature: the
// server refuses it once, and every later request, on either key, goes
// without it.
func TestLearnOncePerEndpoint(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	refused := refuseTemperature(srv)
	rt := newRT(t, WithProvider(openaiCfg(srv, "key-one-0001")), WithProvider(openaiCfg(srv, "key-two-0002")))
	keys := map[string]int{}
	for i := range 20 {
		r := req("openai/m")
		r.Temperature = llm.Ptr(0.3)
		if _, err := rt.Chat(ctxT(t, 10*time.Second), r); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	for _, r := range srv.Requests() {
		keys[r.Header.Get("Authorization")]++
	}
	if len(keys) != 2 {
		t.Fatalf("the requests used %d keys, want both", len(keys))
	}
	if n := refused.Load(); n != 1 {
		t.Fatalf("the endpoint refused temperature %d times, want once: each key learned on its own", n)
	}
	for _, s := range rt.Stats() {
		if !slices.Contains(s.Learned, providers.LearnNoTemperature.String()) {
			t.Fatalf("credential %d does not show the endpoint's lesson: %v", s.Credential, s.Learned)
		}
	}
}

// Another endpoint (another base URL, or another provider id at the same
// URL) learns on its own.
func TestLearnOnceStaysWithItsEndpoint(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	refused := refuseTemperature(srv)
	other := openaiCfg(srv, "key-three-003")
	other.ID = "mirror"
	rt := newRT(t, WithProvider(openaiCfg(srv, "key-one-0001")), WithProvider(other))
	for _, model := range []string{"openai/m", "mirror/m", "openai/m", "mirror/m"} {
		r := req(model)
		r.Temperature = llm.Ptr(0.3)
		if _, err := rt.Chat(ctxT(t, 10*time.Second), r); err != nil {
			t.Fatalf("%s: %v", model, err)
		}
	}
	if n := refused.Load(); n != 2 {
		t.Fatalf("refused %d times, want once per endpoint", n)
	}
}

// One process, one actor system: two runtimes share it, and closing one
// stops its own actors only.
func TestRuntimesShareTheActorSystem(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	a, err := New(WithProvider(openaiCfg(srv, key)))
	if err != nil {
		t.Fatal(err)
	}
	b := newRT(t, WithProvider(openaiCfg(srv, key)))
	if a.sys.Sys != b.sys.Sys {
		t.Fatal("two runtimes, two actor systems")
	}
	if _, err := a.Chat(ctxT(t, 5*time.Second), req("openai/m")); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Chat(ctxT(t, 5*time.Second), req("openai/m")); err == nil {
		t.Fatal("a closed runtime served")
	}
	if _, err := b.Chat(ctxT(t, 5*time.Second), req("openai/m")); err != nil {
		t.Fatalf("closing one runtime broke the other: %v", err)
	}
	if st := b.Stats(); len(st) != 1 || st[0].Requests != 1 {
		t.Fatalf("the other runtime's actor: %+v", st)
	}
}
