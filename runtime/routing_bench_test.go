package runtime

import (
	"context"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

// BenchmarkRoute is the cost of choosing the order of an alias's three
// targets for one call, per strategy, beside a plain fallback list
// (WithAlias): resolving the alias and ordering it, as Chat and Stream do
// before placing the call. No call is made.
func BenchmarkRoute(b *testing.B) {
	srv := llmtest.NewServer()
	defer srv.Close()
	targets := []Target{{"a/m", 3}, {"b/m", 2}, {"c/m", 1}}
	prices := llm.Prices{"a/m": {Input: 1, Output: 2}, "b/m": {Input: 2, Output: 4}, "c/m": {Input: 3, Output: 6}}
	opts := []Option{WithProvider(cfgOn("a", srv)), WithProvider(cfgOn("b", srv)), WithProvider(cfgOn("c", srv)), WithPrices(prices),
		WithAlias("list", "a/m", "b/m", "c/m")}
	for _, s := range []Strategy{StrategyFallback, StrategyWeighted, StrategyLeastBusy, StrategyFastest, StrategyCheapest, StrategyCacheAffinity} {
		opts = append(opts, WithRoutedAlias(string(s), Route{Strategy: s, Targets: targets}))
	}
	rt, err := New(opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close(context.Background())
	// Give fastest estimates to weigh.
	for i, ro := range rt.routes[string(StrategyFastest)].ts {
		ro.ttft, ro.sampled = float64(i+1)*1e6, true
	}
	short := &llm.ChatRequest{Messages: []llm.Message{llm.UserText("hello")}}
	long := &llm.ChatRequest{Messages: []llm.Message{llm.SystemText(strings.Repeat("You answer briefly. ", 250)), llm.UserText("hello")}}
	ctx := context.Background()
	run := func(name, alias string, r *llm.ChatRequest) {
		b.Run(name, func(b *testing.B) {
			// The call's span (not recording: no SDK), started once.
			first, _ := rt.resolve(alias)
			_, ct := rt.startTrace(ctx, "chat", alias, first, false)
			b.ReportAllocs()
			for b.Loop() {
				ts, err := rt.resolve(alias)
				if err != nil {
					b.Fatal(err)
				}
				rt.route(ctx, r, ts, ct)
				if ts[0].rs != nil {
					ts[0].rs.release()
				}
			}
		})
	}
	run("list", "list", short)
	for _, s := range []Strategy{StrategyFallback, StrategyWeighted, StrategyLeastBusy, StrategyFastest, StrategyCheapest} {
		run(string(s), string(s), short)
	}
	run("cache_affinity/keyed", string(StrategyCacheAffinity), long)
	run("cache_affinity/short", string(StrategyCacheAffinity), short)
}
