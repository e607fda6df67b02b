package runtime

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/chorusrt/chorus/cache"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

func newCache(t *testing.T) *cache.Cache {
	t.Helper()
	s, err := cache.NewMemory(cache.Limits{MaxEntries: 100})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cache.New(s, cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

var toolReply = llmtest.Reply{Text: "let me check", ToolCalls: []llm.ToolCall{{Name: "weather", Arguments: `{"city":"Paris"}`}},
	Usage: &llm.Usage{PromptTokens: 11, CompletionTokens: 7}}

func collect(t *testing.T, s *llm.Stream) (*llm.ChatResult, []llm.Event) {
	t.Helper()
	var evs []llm.Event
	for ev, err := range s.All() {
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	res, err := s.Result()
	if err != nil {
		t.Fatal(err)
	}
	return res, evs
}

// TestCacheChat: the second identical call is answered from the cache,
// with the stored usage, a cost of zero and the report marked hit.
func TestCacheChat(t *testing.T) {
	srv := llmtest.NewServer(llmtest.WithDefault(toolReply))
	defer srv.Close()
	rt := newRT(t, WithProvider(openaiCfg(srv, key)), WithCache(newCache(t), CacheOptions{}),
		WithPrices(llm.Prices{"openai/gpt-test": {Input: 1, Output: 2}}))
	var first, second CallReport
	a, err := rt.Chat(WithCallReport(ctxT(t, 5*time.Second), &first), req("openai/gpt-test"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := rt.Chat(WithCallReport(ctxT(t, 5*time.Second), &second), req("openai/gpt-test"))
	if err != nil {
		t.Fatal(err)
	}
	if srv.Count() != 1 {
		t.Fatalf("upstream requests = %d, want 1", srv.Count())
	}
	if first.Cache != "miss" || !first.Priced || first.Cost == 0 {
		t.Fatalf("first report %+v, want a priced miss", first)
	}
	if second.Cache != "hit" || !second.Priced || second.Cost != 0 || second.Model != "openai/gpt-test" {
		t.Fatalf("second report %+v, want a hit at zero cost", second)
	}
	if b.Content != a.Content || !reflect.DeepEqual(b.ToolCalls, a.ToolCalls) || b.Usage != a.Usage || b.FinishReason != a.FinishReason {
		t.Fatalf("hit %+v differs from the answer %+v", b, a)
	}
	if st, ok := rt.CacheStats(); !ok || st.Hits != 1 || st.Misses != 1 || st.Stored != 1 {
		t.Fatalf("CacheStats = %+v, %v", st, ok)
	}
	// Another model is another entry.
	if _, err := rt.Chat(ctxT(t, 5*time.Second), req("openai/gpt-other")); err != nil || srv.Count() != 2 {
		t.Fatalf("another model: %v, upstream %d", err, srv.Count())
	}
}

// TestCacheStream: a streamed answer is stored; a stream served from the
// cache replays its events (text, tool calls, usage, finish), and a
// buffered call gets the whole answer.
func TestCacheStream(t *testing.T) {
	srv := llmtest.NewServer(llmtest.WithDefault(toolReply))
	defer srv.Close()
	rt := newRT(t, WithProvider(anthropicCfg(srv)), WithCache(newCache(t), CacheOptions{}))
	s, err := rt.Stream(ctxT(t, 5*time.Second), req("anthropic/claude-test"))
	if err != nil {
		t.Fatal(err)
	}
	live, liveEvs := collect(t, s)
	var rep CallReport
	s, err = rt.Stream(WithCallReport(ctxT(t, 5*time.Second), &rep), req("anthropic/claude-test"))
	if err != nil {
		t.Fatal(err)
	}
	hitRes, hitEvs := collect(t, s)
	if srv.Count() != 1 || rep.Cache != "hit" {
		t.Fatalf("upstream %d, report %+v; want 1 and a hit", srv.Count(), rep)
	}
	if hitRes.Content != live.Content || !reflect.DeepEqual(hitRes.ToolCalls, live.ToolCalls) || hitRes.Usage != live.Usage || hitRes.FinishReason != llm.FinishToolCalls {
		t.Fatalf("replayed %+v, live %+v", hitRes, live)
	}
	// The replay accumulates to the same text and arguments.
	acc := func(evs []llm.Event) (text, args string, usage llm.Usage, fin llm.FinishReason) {
		for _, e := range evs {
			switch e.Type {
			case llm.EventText:
				text += e.Text
			case llm.EventToolCallStart, llm.EventToolCallDelta:
				args += e.Text
			case llm.EventUsage:
				usage = *e.Usage
			case llm.EventFinish:
				fin = e.Finish
			}
		}
		return
	}
	t1, a1, u1, f1 := acc(liveEvs)
	t2, a2, u2, f2 := acc(hitEvs)
	if t1 != t2 || a1 != a2 || u1 != u2 || f1 != f2 {
		t.Fatalf("replayed events %q %q %+v %s, live %q %q %+v %s", t2, a2, u2, f2, t1, a1, u1, f1)
	}
	res, err := rt.Chat(ctxT(t, 5*time.Second), req("anthropic/claude-test"))
	if err != nil || res.Content != live.Content || srv.Count() != 1 {
		t.Fatalf("buffered after stream: %+v, %v, upstream %d", res, err, srv.Count())
	}
}

// TestCacheCoalescing: 100 identical concurrent calls, buffered and
// streamed, make one upstream call.
func TestCacheCoalescing(t *testing.T) {
	for _, streamed := range []bool{false, true} {
		srv := llmtest.NewServer(llmtest.WithDefault(toolReply), llmtest.WithLatency(200*time.Millisecond, 0))
		rt := newRT(t, WithProvider(openaiCfg(srv, key)), WithCache(newCache(t), CacheOptions{}))
		var wg sync.WaitGroup
		errs := make(chan error, 100)
		for range 100 {
			wg.Go(func() {
				ctx := ctxT(t, 10*time.Second)
				var res *llm.ChatResult
				var err error
				if streamed {
					var s *llm.Stream
					if s, err = rt.Stream(ctx, req("openai/gpt-test")); err == nil {
						res, err = s.Result()
					}
				} else {
					res, err = rt.Chat(ctx, req("openai/gpt-test"))
				}
				if err == nil && (res.Content != "let me check" || len(res.ToolCalls) != 1) {
					err = errors.New("wrong answer: " + res.Content)
				}
				if err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if srv.Count() != 1 {
			t.Fatalf("streamed=%v: upstream requests = %d, want 1", streamed, srv.Count())
		}
		srv.Close()
	}
}

// TestCacheModesAndNamespaces: the context picks the mode and the
// namespace.
func TestCacheModesAndNamespaces(t *testing.T) {
	srv := llmtest.NewServer(llmtest.WithDefault(toolReply))
	defer srv.Close()
	rt := newRT(t, WithProvider(openaiCfg(srv, key)), WithCache(newCache(t), CacheOptions{Namespace: "default"}))
	call := func(ctx context.Context) string {
		t.Helper()
		var rep CallReport
		if _, err := rt.Chat(WithCallReport(ctx, &rep), req("openai/gpt-test")); err != nil {
			t.Fatal(err)
		}
		return rep.Cache
	}
	ctx := ctxT(t, 10*time.Second)
	steps := []struct {
		ctx      context.Context
		want     string
		upstream int
	}{
		{WithCacheMode(ctx, cache.ReadOnly), "miss", 1}, // not stored
		{ctx, "miss", 2},                                 // stored in "default"
		{ctx, "hit", 2},                                  //
		{WithCacheMode(ctx, cache.Off), "", 3},           // not consulted
		{WithCacheMode(ctx, cache.WriteOnly), "miss", 4}, // asked again, refreshed
		{WithCacheNamespace(ctx, "key-b"), "miss", 5},    // another tenant
		{WithCacheNamespace(ctx, "key-b"), "hit", 5},     //
		{WithCacheMode(WithCacheNamespace(ctx, "key-c"), cache.ReadOnly), "miss", 6},
	}
	for i, s := range steps {
		if got := call(s.ctx); got != s.want || srv.Count() != s.upstream {
			t.Fatalf("step %d: cache %q, upstream %d; want %q, %d", i, got, srv.Count(), s.want, s.upstream)
		}
	}
}

// TestCachePartialNotStored: a stream that fails midway is not stored.
func TestCachePartialNotStored(t *testing.T) {
	srv := llmtest.NewServer(llmtest.WithDefault(toolReply))
	defer srv.Close()
	rt := newRT(t, WithProvider(openaiCfg(srv, key)), WithCache(newCache(t), CacheOptions{}))
	srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultResetMidStream, After: 2}})
	s, err := rt.Stream(ctxT(t, 5*time.Second), req("openai/gpt-test"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Result(); err == nil {
		t.Fatal("the reset stream succeeded")
	}
	var rep CallReport
	if _, err := rt.Chat(WithCallReport(ctxT(t, 5*time.Second), &rep), req("openai/gpt-test")); err != nil || rep.Cache != "miss" {
		t.Fatalf("after a partial stream: %v, %q; want a miss", err, rep.Cache)
	}
	if srv.Count() != 2 {
		t.Fatalf("upstream requests = %d, want 2", srv.Count())
	}
}

type brokenStore struct{}

func (brokenStore) Get(context.Context, string, string, time.Time) ([]byte, bool, error) {
	return nil, false, errors.New("store down")
}
func (brokenStore) Put(context.Context, cache.Entry) error { return errors.New("store down") }
func (brokenStore) Close() error                           { return nil }

// TestCacheStoreDown: a failing store never fails a call.
func TestCacheStoreDown(t *testing.T) {
	srv := llmtest.NewServer(llmtest.WithDefault(toolReply))
	defer srv.Close()
	c, _ := cache.New(brokenStore{}, cache.Options{})
	rt := newRT(t, WithProvider(openaiCfg(srv, key)), WithCache(c, CacheOptions{}))
	for range 2 {
		if _, err := rt.Chat(ctxT(t, 5*time.Second), req("openai/gpt-test")); err != nil {
			t.Fatal(err)
		}
		s, err := rt.Stream(ctxT(t, 5*time.Second), req("openai/gpt-test"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Result(); err != nil {
			t.Fatal(err)
		}
	}
	if st, _ := rt.CacheStats(); srv.Count() != 4 || st.Errors != 8 {
		t.Fatalf("upstream %d, stats %+v; want 4 calls, 8 errors", srv.Count(), st)
	}
}

// TestCacheStreamThinking: a cached Anthropic answer replays each thinking
// block with its signature (invariant 7 holds for hits too).
func TestCacheStreamThinking(t *testing.T) {
	srv := llmtest.NewServer(llmtest.WithDefault(llmtest.Reply{Text: "done",
		Thinking: []llm.ThinkingBlock{{Text: "first thought", Signature: "sig-A"}, {Text: "second thought", Signature: "sig-B"}}}))
	defer srv.Close()
	rt := newRT(t, WithProvider(anthropicCfg(srv)), WithCache(newCache(t), CacheOptions{}))
	var results []*llm.ChatResult
	var sigs [2][]string
	for i := range 2 {
		s, err := rt.Stream(ctxT(t, 5*time.Second), req("anthropic/claude-test"))
		if err != nil {
			t.Fatal(err)
		}
		res, evs := collect(t, s)
		for _, e := range evs {
			if e.Type == llm.EventReasoning && e.Signature != "" {
				sigs[i] = append(sigs[i], e.Signature)
			}
		}
		results = append(results, res)
	}
	if srv.Count() != 1 {
		t.Fatalf("upstream %d, want 1", srv.Count())
	}
	if !reflect.DeepEqual(results[0].ThinkingBlocks, results[1].ThinkingBlocks) || len(results[1].ThinkingBlocks) != 2 {
		t.Fatalf("thinking blocks: live %+v, cached %+v", results[0].ThinkingBlocks, results[1].ThinkingBlocks)
	}
	if !reflect.DeepEqual(sigs[0], sigs[1]) || len(sigs[1]) != 2 {
		t.Fatalf("signature events: live %v, cached %v", sigs[0], sigs[1])
	}
}

// TestCacheHitSpan: a hit is an inference span of its own marked
// chorus.cache=hit; the miss before it is the provider call's span.
func TestCacheHitSpan(t *testing.T) {
	srv := llmtest.NewServer(llmtest.WithDefault(toolReply))
	defer srv.Close()
	rig := newTelRig(t)
	rt := newRT(t, WithProvider(openaiCfg(srv, key)), WithCache(newCache(t), CacheOptions{}), WithTelemetry(rig.tel))
	for range 2 {
		if _, err := rt.Chat(ctxT(t, 5*time.Second), req("openai/gpt-test")); err != nil {
			t.Fatal(err)
		}
	}
	s, err := rt.Stream(ctxT(t, 5*time.Second), req("openai/gpt-test"))
	if err != nil {
		t.Fatal(err)
	}
	collect(t, s)
	var marks []string
	for _, sp := range rig.ended() {
		if sp.Name() != "chat gpt-test" {
			continue
		}
		marks = append(marks, attrs(sp)["chorus.cache"].Emit())
	}
	if want := []string{"", "hit", "hit"}; !reflect.DeepEqual(marks, want) {
		t.Fatalf("chat spans' chorus.cache = %q, want %q", marks, want)
	}
}
