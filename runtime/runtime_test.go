package runtime

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const key = "sk-runtime-test-KEY-42"

var fast = providers.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}

func openaiCfg(srv *llmtest.Server, k string) providers.Config {
	return providers.Config{ID: "openai", Format: providers.FormatOpenAI, BaseURL: srv.OpenAIBaseURL(), APIKey: providers.Secret(k)}
}

func anthropicCfg(srv *llmtest.Server) providers.Config {
	return providers.Config{ID: "anthropic", Format: providers.FormatAnthropic, BaseURL: srv.AnthropicBaseURL(), APIKey: key}
}

func newRT(t *testing.T, opts ...Option) *Runtime {
	t.Helper()
	opts = append([]Option{WithClientOptions(providers.WithRetryPolicy(fast), providers.WithTimeout(10*time.Second), providers.WithIdleTimeout(2*time.Second))}, opts...)
	rt, err := New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	return rt
}

func req(model string) *llm.ChatRequest {
	return &llm.ChatRequest{Model: model, Messages: []llm.Message{llm.UserText("hello")}}
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestChatAndStreamThroughActors(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rt := newRT(t, WithProvider(openaiCfg(srv, key)), WithProvider(anthropicCfg(srv)))
	srv.Push(llmtest.Step{Reply: &llmtest.Reply{Text: "buffered reply"}})
	res, err := rt.Chat(ctxT(t, 5*time.Second), req("openai/gpt-test"))
	if err != nil || res.Content != "buffered reply" {
		t.Fatalf("chat: %v %v", res, err)
	}
	srv.Push(llmtest.Step{Reply: &llmtest.Reply{Text: "streamed reply"}})
	s, err := rt.Stream(ctxT(t, 5*time.Second), req("anthropic/claude-test"))
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for ev, err := range s.All() {
		if err != nil {
			t.Fatal(err)
		}
		text.WriteString(ev.Text)
	}
	if text.String() != "streamed reply" {
		t.Fatalf("stream text %q", text.String())
	}
	if got := srv.Requests(); got[0].Model != "gpt-test" || got[1].Model != "claude-test" {
		t.Fatalf("models sent: %q %q", got[0].Model, got[1].Model)
	}
	st := rt.Stats()
	if len(st) != 2 || st[0].Requests != 1 || st[1].Requests != 1 || st[0].Attempts != 1 {
		t.Fatalf("stats: %+v", st)
	}
}

func TestModelResolutionErrors(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rt := newRT(t, WithProvider(openaiCfg(srv, key)), WithAlias("fast", "openai/a"))
	for _, m := range []string{"nope/x", "gpt-4", "openai/", "slow"} {
		_, err := rt.Chat(ctxT(t, time.Second), req(m))
		var ce *llm.ConfigError
		if !errors.As(err, &ce) || ce.Field != "model" {
			t.Errorf("%q: %v", m, err)
		}
	}
	if _, err := New(WithProvider(openaiCfg(srv, key)), WithAlias("bad", "missing/model")); err == nil {
		t.Fatal("alias to an unknown provider accepted")
	}
	if srv.Count() != 0 {
		t.Fatal("a bad model reached the server")
	}
}

// TestCooldownRotatesCredentials: a 429 cools only that credential; the
// other key serves at once, and the stats show who did what.
func TestCooldownRotatesCredentials(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rt := newRT(t, WithProvider(openaiCfg(srv, "key-one-0001")), WithProvider(openaiCfg(srv, "key-two-0002")))
	srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 429, RetryAfter: 30 * time.Second}})
	start := time.Now()
	res, err := rt.Chat(ctxT(t, 10*time.Second), req("openai/m"))
	if err != nil || res.Content == "" || time.Since(start) > 5*time.Second {
		t.Fatalf("rotation: %v after %v", err, time.Since(start))
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || reqs[0].Header.Get("Authorization") == reqs[1].Header.Get("Authorization") {
		t.Fatalf("the retry did not move to the other key")
	}
	st := rt.Stats()
	var cooled, served int
	for _, s := range st {
		if s.RateLimited == 1 && s.CooldownUntil.After(time.Now().Add(20*time.Second)) {
			cooled++
		}
		if s.RateLimited == 0 && s.Requests == 1 && s.Failed == 0 {
			served++
		}
	}
	if cooled != 1 || served != 1 {
		t.Fatalf("stats: %+v", st)
	}
	// The cooled key stays out of rotation while the other one serves.
	for i := 0; i < 4; i++ {
		if _, err := rt.Chat(ctxT(t, 5*time.Second), req("openai/m")); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range srv.Requests()[2:] {
		if r.Header.Get("Authorization") == reqs[0].Header.Get("Authorization") {
			t.Fatal("a cooling credential was used")
		}
	}
}

// TestWaitsForCooldownWithinBudget: with one credential, a caller whose
// budget outlasts the retry-after waits and is served.
func TestWaitsForCooldownWithinBudget(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rt := newRT(t, WithProvider(openaiCfg(srv, key)))
	srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 429, RetryAfter: 300 * time.Millisecond}})
	start := time.Now()
	s, _ := rt.Stream(ctxT(t, 10*time.Second), req("openai/m"))
	res, err := s.Result()
	if err != nil || res.Content == "" {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < 250*time.Millisecond {
		t.Fatalf("served after %v, before the cooldown ended", waited)
	}
	if srv.RateLimited() != 1 || srv.Count() != 2 {
		t.Fatalf("429s %d, requests %d", srv.RateLimited(), srv.Count())
	}
}

// TestFallbackBeforeFirstEventOnly: an alias moves to its next model on a
// retryable failure before the first event, never after it.
func TestFallbackBeforeFirstEventOnly(t *testing.T) {
	oa := llmtest.NewServer()
	defer oa.Close()
	an := llmtest.NewServer()
	defer an.Close()
	rt := newRT(t, WithProvider(openaiCfg(oa, key)), WithProvider(anthropicCfg(an)), WithAlias("fast", "openai/m1", "anthropic/m2"))
	for i := 0; i < fast.MaxAttempts; i++ {
		oa.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 503}})
	}
	an.Push(llmtest.Step{Reply: &llmtest.Reply{Text: "from the fallback"}})
	s, _ := rt.Stream(ctxT(t, 10*time.Second), req("fast"))
	res, err := s.Result()
	if err != nil || res.Content != "from the fallback" || res.Meta.Provider != "anthropic" {
		t.Fatalf("fallback: %+v %v", res, err)
	}
	// After the first event: the partial result and the error, no fallback.
	before := an.Count()
	oa.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultResetMidStream, After: 2, Reply: &llmtest.Reply{Deltas: []string{"a", "b", "c"}}}})
	s, _ = rt.Stream(ctxT(t, 10*time.Second), req("fast"))
	_, err = s.Result()
	var se *llm.StreamError
	if !errors.As(err, &se) || se.Partial.Content != "ab" || an.Count() != before {
		t.Fatalf("after first event: %v (fallback requests %d)", err, an.Count()-before)
	}
	// A non-retryable failure is returned, not fallen back from.
	oa.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 400, Message: "bad request"}})
	_, err = rt.Chat(ctxT(t, 10*time.Second), req("fast"))
	var api *llm.APIError
	if !errors.As(err, &api) || api.Status != 400 || an.Count() != before {
		t.Fatalf("400: %v", err)
	}
}

// TestFallbackWhenCoolingPastBudget: every credential of the first model
// cools down longer than the caller can wait: the next model serves at once.
func TestFallbackWhenCoolingPastBudget(t *testing.T) {
	oa := llmtest.NewServer()
	defer oa.Close()
	an := llmtest.NewServer()
	defer an.Close()
	rt := newRT(t, WithProvider(openaiCfg(oa, key)), WithProvider(anthropicCfg(an)), WithAlias("fast", "openai/m1", "anthropic/m2"))
	oa.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 429, RetryAfter: time.Hour}})
	start := time.Now()
	res, err := rt.Chat(ctxT(t, 3*time.Second), req("fast"))
	if err != nil || res.Meta.Provider != "anthropic" || time.Since(start) > 2*time.Second {
		t.Fatalf("got %v %v after %v", res, err, time.Since(start))
	}
	// Cooling, the first model is not even tried now.
	before := oa.Count()
	if _, err := rt.Chat(ctxT(t, 3*time.Second), req("fast")); err != nil || oa.Count() != before {
		t.Fatalf("cooling credential tried again: %v", err)
	}
}

// TestZero429AfterLimitsLearned: against a server enforcing a request
// window, the runtime learns the limit from the headers and paces: no 429.
func TestZero429AfterLimitsLearned(t *testing.T) {
	const limit, window, total = 20, 400 * time.Millisecond, 100
	srv := llmtest.NewServer(llmtest.WithRateLimit(llmtest.RateLimit{Requests: limit, Window: window}))
	defer srv.Close()
	rt := newRT(t, WithProvider(openaiCfg(srv, key)))
	start := time.Now()
	var wg sync.WaitGroup
	var failed atomic.Int64
	sem := make(chan struct{}, 16)
	for i := 0; i < total; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if _, err := rt.Chat(ctxT(t, 30*time.Second), req("openai/m")); err != nil {
				failed.Add(1)
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if n := srv.RateLimited(); n != 0 {
		t.Fatalf("%d requests were refused with 429", n)
	}
	minimum := time.Duration(total/limit-1) * window
	t.Logf("pacing: %d requests, limit %d per %v: %v (theoretical minimum %v, %.0f%% of the allowed rate)",
		total, limit, window, elapsed.Round(time.Millisecond), minimum, 100*float64(minimum)/float64(elapsed))
}

func TestOverloadIsImmediateAndTyped(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rt := newRT(t, WithProvider(openaiCfg(srv, key)), WithLimits("openai", Limits{MaxConcurrency: 1}), WithQueueSize(1))
	srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStall, After: 1, Stall: 2 * time.Second, Reply: &llmtest.Reply{Deltas: []string{"a", "b"}}}})
	holder, _ := rt.Stream(ctxT(t, 10*time.Second), req("openai/m"))
	<-holder.Events() // admitted and streaming
	queued := make(chan error, 1)
	go func() { _, err := rt.Chat(ctxT(t, 10*time.Second), req("openai/m")); queued <- err }()
	deadline := time.Now().Add(2 * time.Second)
	for rt.Stats()[0].Queued != 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	_, err := rt.Chat(ctxT(t, 10*time.Second), req("openai/m"))
	if !errors.Is(err, llm.ErrOverloaded) || time.Since(start) > time.Second {
		t.Fatalf("third caller: %v after %v", err, time.Since(start))
	}
	holder.Close()
	if err := <-queued; err != nil {
		t.Fatalf("queued caller: %v", err)
	}
}

func TestCloseDrainsThenCancels(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	// The test reads no event until Close returns: the whole answer (20
	// deltas, usage, finish) must fit the stream's buffer.
	rt, err := New(WithProvider(openaiCfg(srv, key)), WithStreamBuffer(32))
	if err != nil {
		t.Fatal(err)
	}
	// A stream in flight finishes during a generous Close.
	deltas := make([]string, 20)
	for i := range deltas {
		deltas[i] = "x"
	}
	srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultSlowDrip, Stall: 300 * time.Millisecond, Reply: &llmtest.Reply{Deltas: deltas}}})
	s, _ := rt.Stream(context.Background(), req("openai/m"))
	<-s.Events()
	if err := rt.Close(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Result(); err != nil || len(res.Content) != 20 {
		t.Fatalf("in-flight stream after Close: %v %v", res, err)
	}
	if _, err := rt.Chat(context.Background(), req("openai/m")); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}

	// A stalled stream is cancelled when the grace period ends.
	rt2, _ := New(WithProvider(openaiCfg(srv, key)))
	srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStall, After: 1, Stall: 30 * time.Second, Reply: &llmtest.Reply{Deltas: []string{"a", "b"}}}})
	s2, _ := rt2.Stream(context.Background(), req("openai/m"))
	<-s2.Events()
	start := time.Now()
	if err := rt2.Close(ctxT(t, 200*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close: %v", err)
	}
	if _, err := s2.Result(); !errors.Is(err, context.Canceled) || time.Since(start) > 5*time.Second {
		t.Fatalf("stalled stream: %v", err)
	}
}

func TestKeyNeverInRuntimeErrors(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rt := newRT(t, WithProvider(openaiCfg(srv, key)))
	srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 401, Message: "invalid key " + key}})
	_, err := rt.Chat(ctxT(t, 5*time.Second), req("openai/m"))
	if err == nil || strings.Contains(err.Error(), key) {
		t.Fatalf("error %v", err)
	}
	for _, s := range rt.Stats() {
		if strings.Contains(strings.Join(s.Learned, ","), key) {
			t.Fatal("key in stats")
		}
	}
}

func TestOperationsThroughActors(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rt := newRT(t, WithProvider(openaiCfg(srv, key)), WithProvider(anthropicCfg(srv)), WithAlias("emb", "openai/text-embedding-3-small"))
	er, err := rt.Embed(ctxT(t, 5*time.Second), &llm.EmbedRequest{Model: "emb", Inputs: []string{"a", "b", "c"}})
	if err != nil || len(er.Vectors) != 3 || len(er.Vectors[0]) == 0 {
		t.Fatalf("embed: %+v %v", er, err)
	}
	ct, err := rt.CountTokens(ctxT(t, 5*time.Second), req("anthropic/claude"))
	if err != nil || ct.InputTokens <= 0 {
		t.Fatalf("count: %+v %v", ct, err)
	}
	if _, err := rt.CountTokens(ctxT(t, 5*time.Second), req("openai/gpt")); !errors.Is(err, llm.ErrUnsupported) {
		t.Fatalf("count on openai: %v", err)
	}
	models, err := rt.ListModels(ctxT(t, 5*time.Second), "openai")
	if err != nil || len(models) == 0 {
		t.Fatalf("models: %v %v", models, err)
	}
	var requests int64
	for _, s := range rt.Stats() {
		requests += s.Requests
	}
	if requests != 4 {
		t.Fatalf("%d requests went through the actors, want 4", requests)
	}
}

// TestInvariant10_BudgetIncludesQueueing: time spent waiting for admission
// counts against the runtime's whole-call budget.
func TestInvariant10_BudgetIncludesQueueing(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rt := newRT(t, WithProvider(openaiCfg(srv, key)), WithLimits("openai", Limits{MaxConcurrency: 1}), WithTimeout(300*time.Millisecond))
	// Hold the only slot with a raw grant, outside any budget.
	c := rt.groups["openai"].creds[0]
	seq, err := c.ref.Admit(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = rt.Chat(context.Background(), req("openai/m"))
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Fatalf("queued call: %v after %v", err, time.Since(start))
	}
	c.ref.Finish(finished(seq, outcome{}))
	if srv.Count() != 0 {
		t.Fatal("the call that timed out in the queue reached the provider")
	}
}
