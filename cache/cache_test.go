package cache_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chorusrt/chorus/cache"
	"github.com/chorusrt/chorus/cache/cachetest"
	"github.com/chorusrt/chorus/llm"
)

func openMemory(t *testing.T, lim cache.Limits) cache.Store {
	s, err := cache.NewMemory(lim)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestMemoryConformance(t *testing.T) { cachetest.Run(t, openMemory) }

// TestMemoryLRU: a read keeps an entry; the least recently used goes.
func TestMemoryLRU(t *testing.T) {
	s := openMemory(t, cache.Limits{MaxEntries: 2})
	ctx, now := context.Background(), time.Now()
	s.Put(ctx, cache.Entry{Namespace: "n", Key: "a", Value: []byte("a"), Created: now})
	s.Put(ctx, cache.Entry{Namespace: "n", Key: "b", Value: []byte("b"), Created: now})
	if _, ok, _ := s.Get(ctx, "n", "a", now); !ok {
		t.Fatal("a missing")
	}
	s.Put(ctx, cache.Entry{Namespace: "n", Key: "c", Value: []byte("c"), Created: now})
	for k, want := range map[string]bool{"a": true, "b": false, "c": true} {
		if _, ok, _ := s.Get(ctx, "n", k, now); ok != want {
			t.Fatalf("%s present = %v, want %v (b was least recently used)", k, ok, want)
		}
	}
}

func answer(text string) *llm.ChatResult {
	return &llm.ChatResult{ID: "id-1", Model: "m", Content: text, FinishReason: llm.FinishStop,
		Usage: llm.Usage{PromptTokens: 3, CompletionTokens: 2}}
}

func newCache(t *testing.T, s cache.Store, opts cache.Options) *cache.Cache {
	c, err := cache.New(s, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestStorable: only complete answers with usage are stored.
func TestStorable(t *testing.T) {
	c := newCache(t, openMemory(t, cache.Limits{}), cache.Options{})
	for _, tc := range []struct {
		name string
		res  *llm.ChatResult
		want bool
	}{
		{"stop", answer("x"), true},
		{"length", &llm.ChatResult{FinishReason: llm.FinishLength, Usage: llm.Usage{CompletionTokens: 1}}, true},
		{"tool_calls", &llm.ChatResult{FinishReason: llm.FinishToolCalls, ToolCalls: []llm.ToolCall{{ID: "c", Name: "f", Arguments: "{}"}}, Usage: llm.Usage{CompletionTokens: 1}}, true},
		{"content_filter", &llm.ChatResult{FinishReason: llm.FinishContentFilter, Usage: llm.Usage{CompletionTokens: 1}}, false},
		{"no finish (partial)", &llm.ChatResult{Content: "par", Usage: llm.Usage{CompletionTokens: 1}}, false},
		{"no usage", &llm.ChatResult{Content: "x", FinishReason: llm.FinishStop}, false},
		{"nil", nil, false},
	} {
		if got := c.Put(context.Background(), "n", tc.name, tc.res); got != tc.want {
			t.Errorf("%s: stored = %v, want %v", tc.name, got, tc.want)
		}
		if _, ok := c.Get(context.Background(), "n", tc.name); ok != tc.want {
			t.Errorf("%s: served = %v, want %v", tc.name, ok, tc.want)
		}
	}
	cf := newCache(t, openMemory(t, cache.Limits{}), cache.Options{StoreContentFilter: true})
	if !cf.Put(context.Background(), "n", "k", &llm.ChatResult{FinishReason: llm.FinishContentFilter, Usage: llm.Usage{CompletionTokens: 1}}) {
		t.Error("StoreContentFilter: content_filter answer not stored")
	}
}

// TestModes: what each mode reads and writes.
func TestModes(t *testing.T) {
	for _, tc := range []struct {
		mode          cache.Mode
		seeded        bool // an entry exists before the call
		wantFetch     bool
		wantOutcome   cache.Outcome
		wantStoredNow bool // an entry exists after a call on an empty cache
	}{
		{cache.On, true, false, cache.Hit, true},
		{cache.On, false, true, cache.Miss, true},
		{cache.ReadOnly, true, false, cache.Hit, false},
		{cache.ReadOnly, false, true, cache.Miss, false},
		{cache.WriteOnly, true, true, cache.Miss, true},
		{cache.WriteOnly, false, true, cache.Miss, true},
		{cache.Off, true, true, cache.Bypass, false},
		{cache.Off, false, true, cache.Bypass, false},
	} {
		t.Run(fmt.Sprint(tc.mode, " seeded=", tc.seeded), func(t *testing.T) {
			c := newCache(t, openMemory(t, cache.Limits{}), cache.Options{})
			if tc.seeded {
				c.Put(context.Background(), "n", "k", answer("stored"))
			}
			fetched := false
			res, out, err := c.Do(context.Background(), tc.mode, "n", "k", func(context.Context) (*llm.ChatResult, error) {
				fetched = true
				return answer("fresh"), nil
			})
			if err != nil || fetched != tc.wantFetch || out != tc.wantOutcome {
				t.Fatalf("Do = %v, %v; fetched %v; want fetched %v, %v", out, err, fetched, tc.wantFetch, tc.wantOutcome)
			}
			if want := map[bool]string{true: "fresh", false: "stored"}[fetched]; res.Content != want {
				t.Fatalf("answer %q, want %q", res.Content, want)
			}
			if !tc.seeded {
				if _, ok := c.Get(context.Background(), "n", "k"); ok != tc.wantStoredNow {
					t.Fatalf("stored after the call = %v, want %v", ok, tc.wantStoredNow)
				}
			}
		})
	}
	// A value that is no mode neither reads nor writes.
	c := newCache(t, openMemory(t, cache.Limits{}), cache.Options{})
	c.Put(context.Background(), "n", "k", answer("stored"))
	res, out, _ := c.Do(context.Background(), cache.Mode("sometimes"), "n", "k2", func(context.Context) (*llm.ChatResult, error) { return answer("fresh"), nil })
	if out != cache.Bypass || res.Content != "fresh" {
		t.Fatalf("unknown mode: %v %q", out, res.Content)
	}
	if _, ok := c.Get(context.Background(), "n", "k2"); ok {
		t.Fatal("an unknown mode wrote")
	}
	if _, err := cache.ParseMode("cache", "sometimes"); err == nil || !strings.Contains(err.Error(), "sometimes") {
		t.Fatalf("ParseMode(sometimes) = %v", err)
	}
}

// TestNamespaces: key A never reads key B's entry.
func TestNamespaces(t *testing.T) {
	c := newCache(t, openMemory(t, cache.Limits{}), cache.Options{})
	c.Put(context.Background(), "key-a", "k", answer("a's"))
	if _, ok := c.Get(context.Background(), "key-b", "k"); ok {
		t.Fatal("key-b read key-a's entry")
	}
	n := 0
	res, out, _ := c.Do(context.Background(), cache.On, "key-b", "k", func(context.Context) (*llm.ChatResult, error) {
		n++
		return answer("b's"), nil
	})
	if n != 1 || out != cache.Miss || res.Content != "b's" {
		t.Fatalf("key-b's call: fetched %d, %v, %q", n, out, res.Content)
	}
	if r, _ := c.Get(context.Background(), "key-a", "k"); r.Content != "a's" {
		t.Fatalf("key-a's entry = %q", r.Content)
	}
}

// TestTTL: an entry is served until its TTL has passed, never after.
func TestTTL(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	c := newCache(t, openMemory(t, cache.Limits{}), cache.Options{TTL: time.Hour, Now: clock})
	c.Put(context.Background(), "n", "k", answer("x"))
	advance(59 * time.Minute)
	if _, ok := c.Get(context.Background(), "n", "k"); !ok {
		t.Fatal("entry missing within its TTL")
	}
	advance(time.Minute)
	if _, ok := c.Get(context.Background(), "n", "k"); ok {
		t.Fatal("entry served after its TTL")
	}
	if _, err := cache.New(openMemory(t, cache.Limits{}), cache.Options{TTL: -time.Second}); err == nil || !strings.Contains(err.Error(), "ttl") {
		t.Fatalf("negative TTL: %v, want an error naming ttl", err)
	}
}

// TestEviction: the cache holds at most its cap.
func TestEviction(t *testing.T) {
	s, _ := cache.NewMemory(cache.Limits{MaxEntries: 10})
	defer s.Close()
	c := newCache(t, s, cache.Options{})
	for i := range 25 {
		c.Put(context.Background(), "n", fmt.Sprint(i), answer(fmt.Sprint(i)))
	}
	if s.Len() != 10 {
		t.Fatalf("entries = %d, want 10", s.Len())
	}
	if _, ok := c.Get(context.Background(), "n", "24"); !ok {
		t.Fatal("newest entry evicted")
	}
	if _, ok := c.Get(context.Background(), "n", "0"); ok {
		t.Fatal("oldest entry kept past the cap")
	}
}

// TestCoalescing: 100 identical concurrent calls make one upstream call,
// and each gets its own copy of the answer.
func TestCoalescing(t *testing.T) {
	c := newCache(t, openMemory(t, cache.Limits{}), cache.Options{})
	var calls atomic.Int32
	release := make(chan struct{})
	fetch := func(context.Context) (*llm.ChatResult, error) {
		calls.Add(1)
		<-release
		return answer("one"), nil
	}
	const n = 100
	var wg sync.WaitGroup
	results := make([]*llm.ChatResult, n)
	var started sync.WaitGroup
	started.Add(n)
	for i := range n {
		wg.Go(func() {
			started.Done()
			res, _, err := c.Do(context.Background(), cache.On, "n", "k", fetch)
			if err != nil {
				t.Error(err)
			}
			results[i] = res
		})
	}
	started.Wait()
	time.Sleep(50 * time.Millisecond) // let them all reach the flight
	close(release)
	wg.Wait()
	if got := calls.Load(); got != 1 {
		t.Fatalf("upstream calls = %d, want 1", got)
	}
	for i, r := range results {
		if r == nil || r.Content != "one" {
			t.Fatalf("call %d got %+v", i, r)
		}
	}
	results[1].Content = "changed"
	if results[2].Content != "one" {
		t.Fatal("followers share one answer value")
	}
	if st := c.Stats(); st.Hits+st.Coalesced != n-1 || st.Stored != 1 {
		t.Fatalf("stats %+v: want 99 hits or coalesced, 1 stored", st)
	}
}

// TestCoalescingLeaderFails: when the first call fails, the waiting ones
// ask on their own and get their own answers.
func TestCoalescingLeaderFails(t *testing.T) {
	c := newCache(t, openMemory(t, cache.Limits{}), cache.Options{})
	var calls atomic.Int32
	leaderIn := make(chan struct{})
	release := make(chan struct{})
	var wg sync.WaitGroup
	var leaderErr error
	wg.Go(func() {
		_, _, leaderErr = c.Do(context.Background(), cache.On, "n", "k", func(context.Context) (*llm.ChatResult, error) {
			calls.Add(1)
			close(leaderIn)
			<-release
			return nil, errors.New("upstream 500")
		})
	})
	<-leaderIn
	var followerRes *llm.ChatResult
	wg.Go(func() {
		followerRes, _, _ = c.Do(context.Background(), cache.On, "n", "k", func(context.Context) (*llm.ChatResult, error) {
			calls.Add(1)
			return answer("mine"), nil
		})
	})
	time.Sleep(20 * time.Millisecond)
	close(release)
	wg.Wait()
	if leaderErr == nil || followerRes == nil || followerRes.Content != "mine" || calls.Load() != 2 {
		t.Fatalf("leader err %v, follower %+v, calls %d", leaderErr, followerRes, calls.Load())
	}
}

// failing is a store that fails every call.
type failing struct{}

func (failing) Get(context.Context, string, string, time.Time) ([]byte, bool, error) {
	return nil, false, errors.New("disk on fire")
}
func (failing) Put(context.Context, cache.Entry) error { return errors.New("disk on fire") }
func (failing) Close() error                           { return nil }

// TestStoreFailure: a failing store makes calls go upstream, counted and
// logged, never failed.
func TestStoreFailure(t *testing.T) {
	var log bytes.Buffer
	c := newCache(t, failing{}, cache.Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	for range 3 {
		res, out, err := c.Do(context.Background(), cache.On, "n", "k", func(context.Context) (*llm.ChatResult, error) { return answer("x"), nil })
		if err != nil || out != cache.Miss || res.Content != "x" {
			t.Fatalf("Do on a failing store = %v, %v, %+v", out, err, res)
		}
	}
	if st := c.Stats(); st.Errors != 6 || st.Hits != 0 {
		t.Fatalf("stats %+v, want 6 errors (3 gets, 3 puts)", st)
	}
	if !strings.Contains(log.String(), "disk on fire") {
		t.Fatalf("failures not logged: %q", log.String())
	}
	// A corrupt entry is a miss too.
	s := openMemory(t, cache.Limits{})
	s.Put(context.Background(), cache.Entry{Namespace: "n", Key: "k", Value: []byte("garbage"), Created: time.Now()})
	c2 := newCache(t, s, cache.Options{})
	if _, ok := c2.Get(context.Background(), "n", "k"); ok || c2.Stats().Errors != 1 {
		t.Fatalf("corrupt entry served or not counted: %+v", c2.Stats())
	}
}

// TestReplay: a replayed answer accumulates to the stored one.
func TestReplay(t *testing.T) {
	res := &llm.ChatResult{Content: "hi", Reasoning: "think", FinishReason: llm.FinishToolCalls,
		ToolCalls: []llm.ToolCall{{ID: "c1", Name: "f", Arguments: `{"a":1}`}, {ID: "c2", Name: "g", Arguments: `{}`}},
		Usage:     llm.Usage{PromptTokens: 5, CompletionTokens: 7}}
	var evs []llm.Event
	cache.Replay(res, func(e llm.Event) bool { evs = append(evs, e); return true })
	var types []string
	for _, e := range evs {
		types = append(types, e.Type.String())
	}
	want := "reasoning text tool_call_start tool_call_delta tool_call_start tool_call_delta usage finish"
	if got := strings.Join(types, " "); got != want {
		t.Fatalf("events %s, want %s", got, want)
	}
	if evs[4].ToolIndex != 1 || evs[4].ToolCallID != "c2" || evs[6].Usage.CompletionTokens != 7 || evs[7].Finish != llm.FinishToolCalls {
		t.Fatalf("events %+v", evs)
	}
}

// TestReplayThinking: signed thinking blocks replay with their signatures.
func TestReplayThinking(t *testing.T) {
	res := &llm.ChatResult{Content: "done", FinishReason: llm.FinishStop, Usage: llm.Usage{CompletionTokens: 1},
		ThinkingBlocks: []llm.ThinkingBlock{{Format: "anthropic", Text: "first", Signature: "sig-A"}, {Format: "anthropic", Redacted: true, Data: "x"}, {Format: "anthropic", Text: "second", Signature: "sig-B"}}}
	var got []string
	cache.Replay(res, func(e llm.Event) bool {
		if e.Type == llm.EventReasoning {
			got = append(got, e.Text+"|"+e.Signature)
		}
		return true
	})
	if want := "first| |sig-A second| |sig-B"; strings.Join(got, " ") != want {
		t.Fatalf("reasoning events %q, want %q", strings.Join(got, " "), want)
	}
}

// TestReplayResponsesReasoning: the reasoning items of an OpenAI
// Responses answer replay as that format's stream sends them: each item's
// summary text, a blank line between items, one without a summary sending
// nothing, and no signature events (a Responses block's Signature names
// the item it preceded, not a signature); their encrypted content is in
// the result the stream ends with.
func TestReplayResponsesReasoning(t *testing.T) {
	res := &llm.ChatResult{Content: "done", FinishReason: llm.FinishStop, Usage: llm.Usage{CompletionTokens: 1},
		ThinkingBlocks: []llm.ThinkingBlock{
			{Format: "openai-responses", ID: "rs_1", Text: "first", Data: "enc-1"},
			{Format: "openai-responses", ID: "rs_2", Data: "enc-2"},
			{Format: "openai-responses", ID: "rs_3", Text: "third", Data: "enc-3", Signature: "message:msg_1"},
		}}
	var got []string
	cache.Replay(res, func(e llm.Event) bool {
		if e.Type == llm.EventReasoning {
			got = append(got, e.Text+"|"+e.Signature)
		}
		return true
	})
	if want := []string{"first|", "\n\n|", "third|"}; !slices.Equal(got, want) {
		t.Fatalf("reasoning events %q, want %q", got, want)
	}
}

// TestCoalescingCopies: the leader's caller may change its answer at once;
// the followers' copies do not change with it (go test -race checks the
// copies are taken before).
func TestCoalescingCopies(t *testing.T) {
	c := newCache(t, openMemory(t, cache.Limits{}), cache.Options{})
	leaderIn, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		res, _, _ := c.Do(context.Background(), cache.On, "n", "k", func(context.Context) (*llm.ChatResult, error) {
			close(leaderIn)
			<-release
			return answer("one"), nil
		})
		res.Content = "changed by the leader's caller"
	})
	<-leaderIn
	got := make([]string, 10)
	for i := range got {
		wg.Go(func() {
			res, _, _ := c.Do(context.Background(), cache.On, "n", "k", func(context.Context) (*llm.ChatResult, error) {
				return answer("fetched again"), nil
			})
			got[i] = res.Content
		})
	}
	time.Sleep(20 * time.Millisecond)
	close(release)
	wg.Wait()
	for i, g := range got {
		if g != "one" {
			t.Fatalf("follower %d got %q", i, g)
		}
	}
}

// TestClone: a clone equals its original and shares nothing with it.
func TestClone(t *testing.T) {
	orig := &llm.ChatResult{ID: "x", Content: "c", FinishReason: llm.FinishToolCalls,
		ToolCalls:      []llm.ToolCall{{ID: "1", Name: "f", Arguments: "{}"}},
		ThinkingBlocks: []llm.ThinkingBlock{{Text: "t", Signature: "s"}},
		Images:         []llm.Part{{Type: llm.PartImage, Data: []byte{1, 2, 3}}},
		Logprobs:       []llm.TokenLogprob{{Token: "a", Bytes: []int{97}, Top: []llm.TopLogprob{{Token: "b", Bytes: []int{98}}}}},
		Usage:          llm.Usage{PromptTokens: 1},
		Meta:           llm.ResponseMeta{Dropped: []string{"top_k"}}}
	c := cache.Clone(orig)
	if !reflect.DeepEqual(c, orig) {
		t.Fatalf("clone %+v differs from %+v", c, orig)
	}
	c.ToolCalls[0].Name = "g"
	c.ThinkingBlocks[0].Text = "u"
	c.Images[0].Data[0] = 9
	c.Logprobs[0].Bytes[0] = 0
	c.Logprobs[0].Top[0].Bytes[0] = 0
	c.Meta.Dropped[0] = "seed"
	if orig.ToolCalls[0].Name != "f" || orig.ThinkingBlocks[0].Text != "t" || orig.Images[0].Data[0] != 1 ||
		orig.Logprobs[0].Bytes[0] != 97 || orig.Logprobs[0].Top[0].Bytes[0] != 98 || orig.Meta.Dropped[0] != "top_k" {
		t.Fatalf("the clone shares memory with its original: %+v", orig)
	}
}

// TestMemoryHitsAreCopies: a hit from the memory store is the caller's
// own: changing it changes no later hit.
func TestMemoryHitsAreCopies(t *testing.T) {
	c := newCache(t, openMemory(t, cache.Limits{}), cache.Options{})
	res := answer("stored")
	res.ToolCalls = []llm.ToolCall{{ID: "1", Name: "f"}}
	c.Put(context.Background(), "n", "k", res)
	res.Content, res.ToolCalls[0].Name = "changed after Put", "g"
	a, _ := c.Get(context.Background(), "n", "k")
	a.Content, a.ToolCalls[0].Name = "changed after Get", "h"
	b, _ := c.Get(context.Background(), "n", "k")
	if b.Content != "stored" || b.ToolCalls[0].Name != "f" {
		t.Fatalf("hit %+v, want the answer as stored", b)
	}
}
