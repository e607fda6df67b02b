package runtime

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
)

// cfgOn is a provider id of the OpenAI format on srv.
func cfgOn(id string, srv *llmtest.Server) providers.Config {
	return providers.Config{ID: id, Format: providers.FormatOpenAI, BaseURL: srv.OpenAIBaseURL(), APIKey: key}
}

// servers starts n llmtest servers, closed at the end of the test.
func servers(t *testing.T, n int, opts ...llmtest.Option) []*llmtest.Server {
	t.Helper()
	out := make([]*llmtest.Server, n)
	for i := range out {
		out[i] = llmtest.NewServer(opts...)
		t.Cleanup(out[i].Close)
	}
	return out
}

// oneAttempt makes the credentials' clients try each call once, so that a
// failing answer is a failing call.
var oneAttempt = WithClientOptions(providers.WithRetryPolicy(providers.RetryPolicy{MaxAttempts: 1}))

// pick orders alias's targets for req as a call would, and releases the
// hold; it returns the first target's model.
func pick(t *testing.T, rt *Runtime, alias string, r *llm.ChatRequest) string {
	t.Helper()
	ts, err := rt.resolve(alias)
	if err != nil {
		t.Fatal(err)
	}
	_, ct := rt.startTrace(context.Background(), "chat", alias, ts, false)
	rt.route(context.Background(), r, ts, ct)
	ts[0].rs.release()
	return ts[0].name
}

// TestRouteWeightedPicker: over 10,000 picks each target is first within
// 2% of its weight's share, interleaved (smooth weighted round robin).
func TestRouteWeightedPicker(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rt := newRT(t, WithProvider(cfgOn("a", srv)), WithProvider(cfgOn("b", srv)), WithProvider(cfgOn("c", srv)),
		WithRoutedAlias("w", Route{Strategy: StrategyWeighted, Targets: []Target{{"a/m", 5}, {"b/m", 3}, {"c/m", 2}}}))
	counts := map[string]int{}
	prev, run, longest := "", 0, 0
	for i := 0; i < 10000; i++ {
		m := pick(t, rt, "w", req("w"))
		counts[m]++
		if m == prev {
			run++
		} else {
			run = 1
		}
		longest = max(longest, run)
		prev = m
	}
	for m, w := range map[string]float64{"a/m": 0.5, "b/m": 0.3, "c/m": 0.2} {
		if got := float64(counts[m]) / 10000; math.Abs(got-w) > 0.02*w {
			t.Errorf("%s first in %.4f of picks, want %.2f within 2%%", m, got, w)
		}
	}
	// Smooth: a half share never needs more than two in a row.
	if longest > 2 {
		t.Errorf("a target first %d times in a row", longest)
	}
	if r := rt.Routes(); len(r) != 1 || r[0].Strategy != StrategyWeighted || r[0].Targets[0].Picked != int64(counts["a/m"]) || r[0].Targets[0].InFlight != 0 {
		t.Errorf("Routes %+v", r)
	}
}

// TestRouteWeightedCalls: calls through a weighted alias reach three
// upstreams in the weights' proportions (within 2%), and each report says
// the strategy and why.
func TestRouteWeightedCalls(t *testing.T) {
	ss := servers(t, 3)
	rt := newRT(t, WithProvider(cfgOn("a", ss[0])), WithProvider(cfgOn("b", ss[1])), WithProvider(cfgOn("c", ss[2])),
		WithRoutedAlias("w", Route{Strategy: StrategyWeighted, Targets: []Target{{"a/m", 3}, {"b/m", 2}, {"c/m", 1}}}))
	const n = 600
	var wg sync.WaitGroup
	var bad atomic.Int64
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n/4; i++ {
				var rep CallReport
				if _, err := rt.Chat(WithCallReport(ctxT(t, 20*time.Second), &rep), req("w")); err != nil || rep.Strategy != "weighted" || !strings.HasPrefix(rep.Reason, "weight ") {
					bad.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if bad.Load() > 0 {
		t.Fatalf("%d calls failed or reported no strategy", bad.Load())
	}
	for i, w := range []float64{3, 2, 1} {
		want := n * w / 6
		if got := float64(ss[i].Count()); math.Abs(got-want) > 0.02*want {
			t.Errorf("upstream %d served %v calls, want %v within 2%%", i, got, want)
		}
	}
}

// blocker answers each request after a release, one per send on rel.
type blocker struct {
	rel     chan struct{}
	arrived atomic.Int64
}

func block(srv *llmtest.Server) *blocker {
	b := &blocker{rel: make(chan struct{}, 1000)}
	srv.SetResponder(func(llmtest.Recorded) llmtest.Step {
		b.arrived.Add(1)
		<-b.rel
		return llmtest.Text("ok")
	})
	return b
}

// warm has model's credential see its first answer, so that it admits
// more than a cold start's few calls at once; the blocker forgets it.
func (b *blocker) warm(t *testing.T, rt *Runtime, model string) {
	t.Helper()
	b.release(1)
	if _, err := rt.Chat(ctxT(t, 10*time.Second), req(model)); err != nil {
		t.Fatal(err)
	}
	b.arrived.Add(-1)
}

func (b *blocker) release(n int) {
	for i := 0; i < n; i++ {
		b.rel <- struct{}{}
	}
}

// waitFor polls cond until it holds or the test's generous timeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestRouteLeastBusy: a burst of concurrent calls over three upstreams
// that hold every request leaves their in-flight counts within one of each
// other; when one upstream's calls finish, the next calls go to it; with
// concurrency limits the calls follow them (twice the cap, twice the
// calls).
func TestRouteLeastBusy(t *testing.T) {
	ss := servers(t, 3)
	bs := []*blocker{block(ss[0]), block(ss[1]), block(ss[2])}
	rt := newRT(t, WithProvider(cfgOn("a", ss[0])), WithProvider(cfgOn("b", ss[1])), WithProvider(cfgOn("c", ss[2])),
		WithRoutedAlias("lb", Route{Strategy: StrategyLeastBusy, Targets: []Target{{Model: "a/m"}, {Model: "b/m"}, {Model: "c/m"}}}))
	for i, b := range bs {
		b.warm(t, rt, string(rune('a'+i))+"/m")
	}
	var wg sync.WaitGroup
	var failed atomic.Int64
	call := func() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := rt.Chat(ctxT(t, 30*time.Second), req("lb")); err != nil {
				failed.Add(1)
			}
		}()
	}
	defer func() {
		for _, b := range bs {
			b.release(100)
		}
		wg.Wait()
	}()
	inFlight := func(released [3]int) [3]int {
		var f [3]int
		for i, b := range bs {
			f[i] = int(b.arrived.Load()) - released[i]
		}
		return f
	}
	within1 := func(f [3]int) bool {
		return max(f[0], f[1], f[2])-min(f[0], f[1], f[2]) <= 1
	}
	arrived := func() int {
		return int(bs[0].arrived.Load() + bs[1].arrived.Load() + bs[2].arrived.Load())
	}
	for i := 0; i < 31; i++ {
		call()
	}
	waitFor(t, "31 calls in flight", func() bool { return arrived() == 31 })
	var released [3]int
	if f := inFlight(released); !within1(f) {
		t.Fatalf("in flight %v after a burst of 31, want within one", f)
	}
	// a finishes 6 calls: the next 6 go to a.
	bs[0].release(6)
	released[0] = 6
	waitFor(t, "a's calls to finish", func() bool { return rt.Routes()[0].Targets[0].InFlight == int64(int(bs[0].arrived.Load())-6) })
	for i := 0; i < 6; i++ {
		call()
	}
	waitFor(t, "37 calls", func() bool { return arrived() == 37 })
	if f := inFlight(released); !within1(f) {
		t.Fatalf("in flight %v after a's calls finished and 6 more came, want within one", f)
	}
	for i, r := range rt.Routes()[0].Targets {
		if r.InFlight != int64(inFlight(released)[i]) {
			t.Errorf("Routes says %d in flight at %s, the upstream %d", r.InFlight, r.Model, inFlight(released)[i])
		}
	}
	if failed.Load() > 0 {
		t.Fatalf("%d calls failed", failed.Load())
	}
}

// TestRouteLeastBusyConcurrency: relative to their concurrency, a target
// with twice the cap takes twice the calls.
func TestRouteLeastBusyConcurrency(t *testing.T) {
	ss := servers(t, 2)
	bs := []*blocker{block(ss[0]), block(ss[1])}
	rt := newRT(t, WithProvider(cfgOn("a", ss[0])), WithProvider(cfgOn("b", ss[1])),
		WithLimits("a", Limits{MaxConcurrency: 8}), WithLimits("b", Limits{MaxConcurrency: 4}),
		WithRoutedAlias("lb", Route{Strategy: StrategyLeastBusy, Targets: []Target{{Model: "a/m"}, {Model: "b/m"}}}))
	bs[0].warm(t, rt, "a/m")
	bs[1].warm(t, rt, "b/m")
	var wg sync.WaitGroup
	defer func() {
		bs[0].release(100)
		bs[1].release(100)
		wg.Wait()
	}()
	for i := 0; i < 12; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rt.Chat(ctxT(t, 30*time.Second), req("lb"))
		}()
	}
	waitFor(t, "12 calls in flight", func() bool { return bs[0].arrived.Load()+bs[1].arrived.Load() == 12 })
	if a, b := bs[0].arrived.Load(), bs[1].arrived.Load(); a != 8 || b != 4 {
		t.Errorf("a %d, b %d in flight; want 8 and 4 (caps 8 and 4)", a, b)
	}
}

// delayed answers after the delay d holds (a stall before the headers).
func delayed(srv *llmtest.Server, d *atomic.Int64) {
	srv.SetResponder(func(llmtest.Recorded) llmtest.Step {
		if v := time.Duration(d.Load()); v > 0 {
			return llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultStall, Stall: v, Reply: &llmtest.Reply{Text: "late"}})
		}
		return llmtest.Text("ok")
	})
}

// TestRouteFastest: most calls go to the fastest of three upstreams, and
// once it slows down and another speeds up, most go to the new fastest.
func TestRouteFastest(t *testing.T) {
	ss := servers(t, 3)
	var d [3]atomic.Int64
	for i := range ss {
		delayed(ss[i], &d[i])
	}
	d[1].Store(int64(25 * time.Millisecond))
	d[2].Store(int64(50 * time.Millisecond))
	rt := newRT(t, WithProvider(cfgOn("a", ss[0])), WithProvider(cfgOn("b", ss[1])), WithProvider(cfgOn("c", ss[2])),
		WithRoutedAlias("f", Route{Strategy: StrategyFastest, Targets: []Target{{Model: "a/m"}, {Model: "b/m"}, {Model: "c/m"}}}))
	phase := func(n int) [3]int {
		var before [3]int
		for i, s := range ss {
			before[i] = s.Count()
		}
		for i := 0; i < n; i++ {
			if _, err := rt.Chat(ctxT(t, 20*time.Second), req("f")); err != nil {
				t.Fatal(err)
			}
		}
		var got [3]int
		for i, s := range ss {
			got[i] = s.Count() - before[i]
		}
		t.Logf("%d calls: a %d, b %d, c %d", n, got[0], got[1], got[2])
		return got
	}
	if got := phase(120); got[0] < 60 || got[0] <= got[1] || got[0] <= got[2] {
		t.Errorf("a fastest: calls %v, want most on a", got)
	}
	d[0].Store(int64(75 * time.Millisecond))
	d[1].Store(0)
	// The first slow answer moves the calls: of the next 30, most go to b.
	if got := phase(30); got[1] < 15 {
		t.Errorf("b now fastest: of the first 30 calls %v, want most on b", got)
	}
	if got := phase(120); got[1] < 60 || got[1] <= got[0] || got[1] <= got[2] {
		t.Errorf("b now fastest: calls %v, want most on b", got)
	}
	for _, r := range rt.Routes()[0].Targets {
		if r.TTFT <= 0 && r.Model != "b/m" {
			t.Errorf("%s: no estimate after being served (%+v)", r.Model, r)
		}
	}
}

// TestRouteFastestProbesStale: a target's estimate is pulled toward the
// others' while it is not sampled, so a slow target is tried again.
func TestRouteFastestProbesStale(t *testing.T) {
	old := probeHalfLife
	probeHalfLife = time.Millisecond
	t.Cleanup(func() { probeHalfLife = old })
	now := time.Now()
	ro := &router{}
	slow := &routeTarget{r: ro, ttft: float64(time.Second), sampled: true, lastSample: now}
	_ = &routeTarget{r: ro, ttft: float64(time.Millisecond), sampled: true, lastSample: now} // the other, 1ms
	sum := float64(time.Second + time.Millisecond)
	if s := slow.latencyScore(now, sum, 2); s < float64(900*time.Millisecond) {
		t.Fatalf("fresh slow estimate %v", time.Duration(s))
	}
	if s := slow.latencyScore(now.Add(50*time.Millisecond), sum, 2); s > float64(2*time.Millisecond) {
		t.Errorf("stale slow estimate %v, want pulled to the other's 1ms", time.Duration(s))
	}
}

// TestRouteCheapest: calls go to the cheaper upstream until its calls
// fill its concurrency, then to the dearer one, then back.
func TestRouteCheapest(t *testing.T) {
	ss := servers(t, 2)
	b := block(ss[0])
	rt := newRT(t, WithProvider(cfgOn("cheap", ss[0])), WithProvider(cfgOn("dear", ss[1])),
		WithLimits("cheap", Limits{MaxConcurrency: 2}),
		WithPrices(llm.Prices{"cheap/m": {Input: 0.1, Output: 0.4}, "dear/m": {Input: 3, Output: 15}}),
		WithRoutedAlias("c", Route{Strategy: StrategyCheapest, Targets: []Target{{Model: "dear/m"}, {Model: "cheap/m"}}}))
	var wg sync.WaitGroup
	defer func() {
		b.release(100)
		wg.Wait()
	}()
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rt.Chat(ctxT(t, 30*time.Second), req("c"))
		}()
	}
	waitFor(t, "two calls at cheap", func() bool { return b.arrived.Load() == 2 })
	var rep CallReport
	if _, err := rt.Chat(WithCallReport(ctxT(t, 10*time.Second), &rep), req("c")); err != nil {
		t.Fatal(err)
	}
	if rep.Model != "dear/m" || ss[1].Count() != 1 || rep.Strategy != "cheapest" {
		t.Errorf("with cheap full: served by %s (%+v), dear saw %d", rep.Model, rep, ss[1].Count())
	}
	b.release(2)
	waitFor(t, "cheap's calls to end", func() bool { return rt.Routes()[0].Targets[1].InFlight == 0 })
	b.release(1)
	rep = CallReport{}
	if _, err := rt.Chat(WithCallReport(ctxT(t, 10*time.Second), &rep), req("c")); err != nil {
		t.Fatal(err)
	}
	if rep.Model != "cheap/m" || !strings.HasPrefix(rep.Reason, "expected $") {
		t.Errorf("with room at cheap again: %+v", rep)
	}
}

// TestRouteEjection: an upstream failing half its calls is ejected (its
// calls fall back to the other), receives nothing while ejected, and takes
// calls again once its ejection ended and it answers.
func TestRouteEjection(t *testing.T) {
	ss := servers(t, 2)
	var healthy atomic.Bool
	var n atomic.Int64
	ss[0].SetResponder(func(llmtest.Recorded) llmtest.Step {
		if !healthy.Load() && n.Add(1)%2 == 0 {
			return llmtest.Status(500, 0)
		}
		return llmtest.Text("ok")
	})
	rt := newRT(t, oneAttempt, WithProvider(cfgOn("a", ss[0])), WithProvider(cfgOn("b", ss[1])),
		WithRoutedAlias("h", Route{Strategy: StrategyWeighted, Targets: []Target{{"a/m", 1}, {"b/m", 1}},
			Eject: Ejection{Duration: 400 * time.Millisecond, MinCalls: 6}}))
	calls := func(k int) {
		for i := 0; i < k; i++ {
			if _, err := rt.Chat(ctxT(t, 10*time.Second), req("h")); err != nil {
				t.Fatal(err) // a's failures fall back to b
			}
		}
	}
	// Half of a's calls fail: by 40 calls (about 20 at a) it is ejected.
	for i := 0; i < 40 && !rt.Routes()[0].Targets[0].EjectedUntil.After(time.Now()); i++ {
		calls(1)
	}
	a := rt.Routes()[0].Targets[0]
	if a.Ejections != 1 || !a.EjectedUntil.After(time.Now()) || a.Failed == 0 {
		t.Fatalf("a not ejected: %+v", a)
	}
	before := ss[0].Count()
	calls(10)
	if got := ss[0].Count(); got != before && time.Now().Before(a.EjectedUntil) {
		t.Errorf("a got %d calls while ejected", got-before)
	}
	healthy.Store(true)
	waitFor(t, "the ejection to end", func() bool { return !time.Now().Before(a.EjectedUntil) })
	before = ss[0].Count()
	calls(10)
	if got := ss[0].Count() - before; got < 4 {
		t.Errorf("a took %d of 10 calls once healthy again, want about half", got)
	}
	if a := rt.Routes()[0].Targets[0]; a.Ejections != 1 || a.EjectedUntil.After(time.Now()) {
		t.Errorf("a ejected again: %+v", a)
	}
}

// TestRouteHealthClasses: what counts against a target's health.
func TestRouteHealthClasses(t *testing.T) {
	ctx := context.Background()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	cases := []struct {
		ctx  context.Context
		err  error
		want bool
	}{
		{ctx, nil, false},
		{ctx, &llm.APIError{Status: 503}, true},
		{ctx, &llm.APIError{Status: 0}, true}, // an error event inside a stream
		{ctx, &llm.APIError{Status: 400}, false},
		{ctx, &llm.RateLimitError{APIError: llm.APIError{Status: 429}}, false},
		{ctx, &llm.StreamError{Err: errors.New("reset")}, true},
		{ctx, &llm.TransportError{Err: errors.New("refused")}, true},
		{ctx, fmt.Errorf("call: %w", context.DeadlineExceeded), true},
		{cancelled, fmt.Errorf("call: %w", context.Canceled), false},
		{ctx, &llm.ConfigError{Msg: "x"}, false},
	}
	for _, c := range cases {
		if got := unhealthy(c.ctx, c.err); got != c.want {
			t.Errorf("%v: unhealthy %v, want %v", c.err, got, c.want)
		}
	}
}

// TestRouteStreamNeverMoves: a routed alias's stream that fails after its
// first event returns the partial result and never reaches the next
// target; one that fails before it moves on.
func TestRouteStreamNeverMoves(t *testing.T) {
	ss := servers(t, 2)
	rt := newRT(t, oneAttempt, WithProvider(cfgOn("a", ss[0])), WithProvider(cfgOn("b", ss[1])),
		WithRoutedAlias("s", Route{Targets: []Target{{Model: "a/m"}, {Model: "b/m"}}}))
	ss[0].Push(llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultResetMidStream, After: 2, Reply: &llmtest.Reply{Text: "partial answer here"}}))
	s, err := rt.Stream(ctxT(t, 10*time.Second), req("s"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Result()
	var se *llm.StreamError
	if !errors.As(err, &se) || ss[1].Count() != 0 {
		t.Fatalf("mid-stream failure: %v, b saw %d", err, ss[1].Count())
	}
	ss[0].Push(llmtest.Status(503, 0))
	var rep CallReport
	s, err = rt.Stream(WithCallReport(ctxT(t, 10*time.Second), &rep), req("s"))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := s.Result(); err != nil || res.Content == "" || rep.Model != "b/m" || rep.Step != 1 || rep.Strategy != "fallback" {
		t.Fatalf("failure before the first event: %v %v %+v", res, err, rep)
	}
	if r := rt.Routes()[0].Targets[0]; r.Failed != 2 || r.InFlight != 0 {
		t.Errorf("a: %+v", r)
	}
}

// TestRouteConfigErrors: bad routes fail New with a *llm.ConfigError
// naming the alias and the field.
func TestRouteConfigErrors(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	cases := []struct {
		opts []Option
		want string
	}{
		{[]Option{WithRoutedAlias("x", Route{Strategy: "random", Targets: []Target{{Model: "a/m"}}})}, `alias x strategy: "random" is not a strategy`},
		{[]Option{WithRoutedAlias("x", Route{Strategy: StrategyWeighted, Targets: []Target{{"a/m", 1}, {"a/n", 0}}})}, "alias x targets[1] (a/n) weight: 0 is not positive"},
		{[]Option{WithRoutedAlias("x", Route{Strategy: StrategyLeastBusy, Targets: []Target{{"a/m", -2}}})}, "alias x targets[0] (a/m) weight: -2 is negative"},
		{[]Option{WithPrices(llm.Prices{"a/m": {Input: 1}}), WithRoutedAlias("x", Route{Strategy: StrategyCheapest, Targets: []Target{{Model: "a/m"}, {Model: "a/n"}}})}, "alias x targets[1] (a/n) price: strategy cheapest needs a price"},
		{[]Option{WithRoutedAlias("x", Route{Strategy: StrategyCacheAffinity, Otherwise: StrategyCacheAffinity, Targets: []Target{{Model: "a/m"}}})}, "alias x otherwise"},
		{[]Option{WithRoutedAlias("x", Route{Strategy: StrategyFastest, Targets: []Target{{Model: "z/m"}}})}, `alias x: provider "z" is not registered`},
		{[]Option{WithRoutedAlias("x", Route{Strategy: StrategyFastest})}, "alias: an alias needs"},
		{[]Option{WithRoutedAlias("x", Route{Strategy: StrategyWeighted, Targets: []Target{{"a/m", 1}, {"a/m", 2}}})}, "alias x targets[1] (a/m): appears twice"},
	}
	for _, c := range cases {
		rt, err := New(append([]Option{WithProvider(cfgOn("a", srv))}, c.opts...)...)
		var ce *llm.ConfigError
		if err == nil {
			rt.Close(context.Background())
		}
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("err %v (%T), want a *llm.ConfigError with %q", err, err, c.want)
		}
	}
}

// cachedShare runs the workload (requests over 20 long system prompts,
// each marked for caching) on alias and returns the share of input tokens
// read from the cache.
func cachedShare(t *testing.T, rt *Runtime, model string, prompts []string, n int) float64 {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	var read, all int
	for i := 0; i < n; i++ {
		sys := llm.SystemText(prompts[rng.IntN(len(prompts))])
		sys.Cache = &llm.CacheMark{}
		r := &llm.ChatRequest{Model: model, Messages: []llm.Message{sys, llm.UserText(fmt.Sprintf("question %d", i))}}
		res, err := rt.Chat(ctxT(t, 10*time.Second), r)
		if err != nil {
			t.Fatal(err)
		}
		read += res.Usage.CacheReadTokens
		all += res.Usage.CacheReadTokens + res.Usage.CacheWriteTokens + res.Usage.PromptTokens
	}
	return float64(read) / float64(all)
}

// TestRouteCacheAffinity: 20 system prompts over 4 Anthropic upstreams
// that cache prompts as Anthropic does reach at least 90% of the cached
// share of one upstream serving them all, where spreading them by weight
// does not; prompts too short to key are spread by the fallback strategy.
func TestRouteCacheAffinity(t *testing.T) {
	prompts := make([]string, 20)
	for i := range prompts {
		prompts[i] = fmt.Sprintf("You are assistant %d. ", i) + strings.Repeat(fmt.Sprintf("Rule %d: answer briefly. ", i), 250)
	}
	const n = 400
	one := servers(t, 1, llmtest.WithPromptCache())[0]
	rt1 := newRT(t, WithProvider(anthropicCfg(one)))
	single := cachedShare(t, rt1, "anthropic/claude", prompts, n)

	build := func(s Strategy) (*Runtime, []*llmtest.Server) {
		ss := servers(t, 4, llmtest.WithPromptCache())
		opts := []Option{}
		var targets []Target
		for i, srv := range ss {
			id := fmt.Sprintf("an%d", i)
			opts = append(opts, WithProvider(providers.Config{ID: id, Format: providers.FormatAnthropic, BaseURL: srv.AnthropicBaseURL(), APIKey: key}))
			targets = append(targets, Target{Model: id + "/claude", Weight: 1})
		}
		opts = append(opts, WithRoutedAlias("cached", Route{Strategy: s, Targets: targets}))
		return newRT(t, opts...), ss
	}
	rtA, ssA := build(StrategyCacheAffinity)
	affinity := cachedShare(t, rtA, "cached", prompts, n)
	rtW, _ := build(StrategyWeighted)
	spread := cachedShare(t, rtW, "cached", prompts, n)
	t.Logf("cached-token share: one upstream %.3f, cache_affinity over 4 %.3f, weighted over 4 %.3f", single, affinity, spread)
	if affinity < 0.9*single {
		t.Errorf("cache_affinity reached %.3f, want >= 90%% of one upstream's %.3f", affinity, single)
	}
	if spread >= 0.9*single {
		t.Errorf("weighted reached %.3f too: the workload does not tell affinity apart", spread)
	}
	used := 0
	for _, s := range ssA {
		if s.Count() > 0 {
			used++
		}
	}
	// Routes reports the same share.
	var in, cached int64
	for _, r := range rtA.Routes()[0].Targets {
		in, cached = in+r.InputTokens, cached+r.CachedTokens
	}
	if in == 0 || math.Abs(float64(cached)/float64(in)-affinity) > 1e-9 {
		t.Errorf("Routes: %d of %d input tokens cached, the answers said %.3f", cached, in, affinity)
	}
	if used < 3 {
		t.Errorf("the prefixes went to %d of 4 upstreams", used)
	}
	// A short prompt has no prefix to keep: least_busy spreads it.
	var rep CallReport
	if _, err := rtA.Chat(WithCallReport(ctxT(t, 10*time.Second), &rep), req("cached")); err != nil {
		t.Fatal(err)
	}
	if rep.Strategy != "cache_affinity" || !strings.Contains(rep.Reason, "busy") {
		t.Errorf("short prompt report %+v", rep)
	}
}

// TestRouteSpan: a routed alias's call span says the strategy and why,
// and names the target that served.
func TestRouteSpan(t *testing.T) {
	rig := newTelRig(t)
	ss := servers(t, 2)
	rt := newRT(t, WithTelemetry(rig.tel), WithProvider(cfgOn("a", ss[0])), WithProvider(cfgOn("b", ss[1])),
		WithRoutedAlias("w", Route{Strategy: StrategyWeighted, Targets: []Target{{"a/m", 1}, {"b/m", 3}}}))
	if _, err := rt.Chat(ctxT(t, 10*time.Second), req("w")); err != nil {
		t.Fatal(err)
	}
	spans := rig.ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	a := attrs(spans[0])
	if a["chorus.route.strategy"].AsString() != "weighted" || a["chorus.route.reason"].AsString() != "weight 3 of 4" ||
		a["gen_ai.provider.name"].AsString() != "b" || a["chorus.alias"].AsString() != "w" {
		t.Errorf("span attributes %v", a)
	}
}

// TestRouteRoomless: under any strategy a target without room now goes
// after the ones with room: with a's one slot taken, the next call of a
// fallback route goes to b at once instead of queueing at a.
func TestRouteRoomless(t *testing.T) {
	ss := servers(t, 2)
	b := block(ss[0])
	rt := newRT(t, WithProvider(cfgOn("a", ss[0])), WithProvider(cfgOn("b", ss[1])), WithLimits("a", Limits{MaxConcurrency: 1}),
		WithRoutedAlias("r", Route{Targets: []Target{{Model: "a/m"}, {Model: "b/m"}}}))
	done := make(chan error, 1)
	go func() {
		_, err := rt.Chat(ctxT(t, 30*time.Second), req("r"))
		done <- err
	}()
	waitFor(t, "a call at a", func() bool { return b.arrived.Load() == 1 })
	var rep CallReport
	if _, err := rt.Chat(WithCallReport(ctxT(t, 10*time.Second), &rep), req("r")); err != nil {
		t.Fatal(err)
	}
	if rep.Model != "b/m" || rep.Step != 0 || rep.Attempts != 1 {
		t.Errorf("with a full: %+v", rep)
	}
	b.release(1)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
