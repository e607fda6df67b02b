// Package readmecheck compiles the Go snippets of README.md (the runtime, pipeline and
// session examples), so a change of API that would make them wrong fails the
// build of this test. Keep it in step with the README.
package readmecheck

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"strings"

	"github.com/chorusrt/chorus/cluster"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/pipeline"
	"github.com/chorusrt/chorus/pipeline/rx"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
	"github.com/chorusrt/chorus/session"
	"github.com/chorusrt/chorus/store"
)

// readme is never run: go vet and go test type-check it, which is the check.
var _ = readme

func readme(ctx context.Context, msgs []llm.Message, req *llm.ChatRequest, reqs []*llm.ChatRequest, journal store.Journal, lookupOrder, refund session.Tool) {
	rt, err := runtime.New(
		runtime.FromEnv(),
		runtime.WithAlias("fast", "openai/gpt-4.1-mini", "gemini/gemini-2.5-flash"),
		runtime.WithLimits("openai", runtime.Limits{MaxConcurrency: 64}),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(context.Background())
	s, err := rt.Stream(ctx, &llm.ChatRequest{Model: "fast", Messages: msgs})
	if err != nil {
		log.Fatal(err)
	}
	_ = s

	fan := pipeline.FanOut(ctx, rt, req, "openai/gpt-4.1-mini", "anthropic/claude-sonnet-4-5", "gemini/gemini-2.5-flash")
	for t, err := range fan.All() {
		if err != nil {
			log.Println(err)
			continue
		}
		fmt.Printf("[%s] %s", t.Model, t.Event.Text)
	}
	for _, r := range fan.Results() {
		fmt.Println(r.Model, r.Result.Usage.TotalTokens(), r.Err)
	}

	opts := pipeline.BatchOptions{Concurrency: 64, Ordered: true,
		OnProgress: func(p pipeline.Progress) { log.Printf("%d done, %d failed", p.Done, p.Failed) }}
	for it := range pipeline.Batch(ctx, rt, pipeline.FromSlice(ctx, reqs), opts) {
		if it.Err != nil {
			log.Println(it.Index, it.Err)
			continue
		}
		fmt.Println(it.Index, it.Value.Content)
	}

	tools := pipeline.ToolSet{"weather": {
		Definition: llm.Tool{Description: "Current weather in a city",
			Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)},
		Func: func(ctx context.Context, args json.RawMessage) (string, error) { return "sunny", nil },
	}}
	res, err := pipeline.ToolLoop(ctx, rt, req, tools, pipeline.ToolLoopOptions{MaxTurns: 4, Parallel: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Result.Content, res.Turns)
	_ = res.Messages

	stream, _ := rt.Stream(ctx, req)
	texts := rx.FromStream(ctx, stream).Filter(func(v any) bool { return v.(llm.Event).Type == llm.EventText })
	upper := texts.Map(func(_ context.Context, v any) (any, error) { return strings.ToUpper(v.(llm.Event).Text), nil })
	for item := range upper.Observe() {
		fmt.Print(item.V)
	}

	m, err := session.New(session.Options{
		Journal: journal, Model: rt, ModelName: "openai/gpt-4.1-mini",
		Tools:  []session.Tool{lookupOrder, refund},
		Policy: map[string]session.ToolPolicy{"refund": {Effect: session.EffectNonIdempotentWrite}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close(ctx)
	m.Recover(ctx)
	m.Send(ctx, "support-42", llm.UserText("refund order 7"))
	snap, _ := m.Snapshot(ctx, "support-42")
	m.Resolve(ctx, "support-42", snap.Pending[0].ID, true, "ok")
	wres, _ := m.Wait(ctx, "support-42")
	_ = wres.Answer

	cfg, _ := providers.Builtin("openai")
	_ = cfg
}

// scalingOut is the Go snippet of "Scaling out".
var _ = scalingOut

func scalingOut(ctx context.Context, req *llm.ChatRequest, pg store.Journal, tools []session.Tool) error {
	n, err := cluster.Join(ctx, cluster.Config{
		Name: "prod", Bind: "10.0.0.5:7100",
		Peers:    []string{"10.0.0.5:7100", "10.0.0.6:7100", "10.0.0.7:7100"},
		Runtime:  []runtime.Option{runtime.FromEnv()},
		Sessions: &session.Options{Journal: pg, ModelName: "openai/gpt-4.1-mini", Tools: tools},
	})
	if err != nil {
		return err
	}
	defer n.Close(ctx)
	local, err := n.Runtime().Stream(ctx, req) // from this node; the key's budget is cluster-wide
	if err != nil {
		return err
	}
	remote, err := n.Stream(ctx, req) // on some member, its deltas relayed here
	if err != nil {
		return err
	}
	err = n.Sessions().Send(ctx, "support-42", llm.UserText("refund order 7")) // wherever it lives
	_, _ = local, remote
	return err
}
