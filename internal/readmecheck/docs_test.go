package readmecheck

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"

	"github.com/chorusrt/chorus/batch"
	"github.com/chorusrt/chorus/console"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/mcptools"
	"github.com/chorusrt/chorus/pipeline"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
	"github.com/chorusrt/chorus/session"
	"github.com/chorusrt/chorus/store"
)

// The Go blocks of the README and the guides that no Example runs, pasted
// as they are written there (TestGoBlocksCompile holds each block to its
// copy here, token for token). They are never run: the build type-checks
// them, which is the check. A block's free variables are the function's
// parameters.

var (
	_ = readmeLibrary
	_ = readmeSession
	_ = readmeConsole
	_ = guideProviderStream
	_ = guideKeyPool
	_ = guideRoutedAlias
	_ = guideBatchFromGo
	_ = guideMCP
	_ = guideLLMTest
)

// readmeLibrary is the README's "The library" face.
func readmeLibrary(ctx context.Context) {
	rt, err := runtime.New(
		runtime.FromEnv(), // every provider whose key is in the environment
		runtime.WithAlias("fast", "openai/gpt-4.1-mini", "anthropic/claude-haiku-4-5"),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(context.Background())
	stream, err := rt.Stream(ctx, &llm.ChatRequest{Model: "fast",
		Messages: []llm.Message{llm.UserText("Write a haiku about Go.")}})
	if err != nil {
		log.Fatal(err) // a *llm.ConfigError: nothing was sent
	}
	for ev, err := range stream.All() { // or stream.Events(), or stream.Result()
		if err != nil {
			log.Fatal(err) // typed: *llm.StreamError holds the partial result
		}
		fmt.Print(ev.Text)
	}
}

// readmeSession is the README's "A session" face and the sessions guide's
// first block.
func readmeSession(ctx context.Context, rt *runtime.Runtime, journal store.Journal, lookupOrder, refund session.Tool) {
	m, err := session.New(session.Options{
		Journal: journal, Model: rt, ModelName: "openai/gpt-4.1-mini",
		Tools:  []session.Tool{lookupOrder, refund},
		Policy: map[string]session.ToolPolicy{"refund": {Effect: session.EffectNonIdempotentWrite}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close(ctx)
	m.Recover(ctx) // resume what a crash interrupted
	m.Send(ctx, "support-42", llm.UserText("refund order 7"))
	snap, _ := m.Snapshot(ctx, "support-42")
	m.Resolve(ctx, "support-42", snap.Pending[0].ID, true, "ok") // approve the refund
	res, _ := m.Wait(ctx, "support-42")
	fmt.Println(res.Answer)
}

// readmeConsole is the README's "The console" face and the console guide's
// Go block.
func readmeConsole(ctx context.Context, rt *runtime.Runtime, mgr *session.Manager, token string, total int, in io.Reader, out *batch.Output) error {
	reg := batch.NewRegistry(20)
	h, err := console.New(console.Options{Runtime: rt, Sessions: mgr, Batches: reg, Token: token})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	h.Register(mux)                    // pages under /console/, the API under /api/console/
	tr := reg.Track("in.jsonl", total) // a job the console shows as it runs
	_, err = batch.Run(ctx, batch.Job{Input: in, Output: out, Runner: rt, Observe: tr.Observe})
	tr.Finish(err)
	return nil
}

// guideProviderStream is the providers guide's client on its own.
func guideProviderStream(ctx context.Context) {
	cfg, _ := providers.Builtin("openai") // or: providers.FromEnv()
	cfg.APIKey = providers.Secret(os.Getenv("OPENAI_API_KEY"))
	client, err := providers.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	stream, err := client.Stream(ctx, &llm.ChatRequest{
		Model:    "gpt-4.1-mini",
		Messages: []llm.Message{llm.UserText("Write a haiku about Go.")},
	})
	if err != nil {
		log.Fatal(err)
	}
	for ev, err := range stream.All() {
		if err != nil {
			log.Fatal(err)
		}
		if ev.Type == llm.EventText {
			fmt.Print(ev.Text)
		}
	}
	res, _ := stream.Result()
	fmt.Println(res.FinishReason, res.Usage.TotalTokens(), res.Meta.RateLimit.RemainingRequests)
}

// guideRoutedAlias is the runtime guide's aliases that balance.
func guideRoutedAlias(ctx context.Context, msgs []llm.Message) error {
	rt, err := runtime.New(
		runtime.FromEnv(),
		runtime.WithPrices(llm.Prices{
			"openai/gpt-4.1-mini":        {Input: 0.40, Output: 1.60},
			"anthropic/claude-haiku-4-5": {Input: 1, Output: 5},
		}),
		runtime.WithRoutedAlias("spread", runtime.Route{
			Strategy: runtime.StrategyWeighted,
			Targets: []runtime.Target{
				{Model: "openai/gpt-4.1-mini", Weight: 3},
				{Model: "anthropic/claude-haiku-4-5", Weight: 1},
			},
		}),
		runtime.WithRoutedAlias("support", runtime.Route{
			Strategy:  runtime.StrategyCacheAffinity, // one long system prompt per product
			Otherwise: runtime.StrategyCheapest,      // short prompts: the cheapest with room
			Targets:   []runtime.Target{{Model: "openai/gpt-4.1-mini"}, {Model: "anthropic/claude-haiku-4-5"}},
		}),
	)
	if err != nil {
		return err // an unknown strategy, a weight that is not positive, cheapest without a price
	}
	defer rt.Close(context.Background())
	var rep runtime.CallReport
	res, err := rt.Chat(runtime.WithCallReport(ctx, &rep), &llm.ChatRequest{Model: "spread", Messages: msgs})
	if err != nil {
		return err
	}
	fmt.Println(rep.Model, rep.Strategy, rep.Reason, res.Content) // openai/gpt-4.1-mini weighted weight 3 of 4 ...
	return nil
}

// guideKeyPool is the runtime guide's key pool behind an alias.
func guideKeyPool(ctx context.Context, keyA, keyB string) error {
	rt, err := runtime.New(
		runtime.WithProvider(providers.Config{ID: "openai", Format: providers.FormatOpenAI,
			BaseURL: "https://api.openai.com/v1", APIKey: providers.Secret(keyA)}),
		runtime.WithProvider(providers.Config{ID: "openai", Format: providers.FormatOpenAI,
			BaseURL: "https://api.openai.com/v1", APIKey: providers.Secret(keyB)}),
		runtime.FromEnv(),
		runtime.WithAlias("fast", "openai/gpt-4.1-mini", "anthropic/claude-haiku-4-5"),
		runtime.WithLimits("openai", runtime.Limits{Shared: true}), // both keys draw on one organisation's limit
	)
	if err != nil {
		return err
	}
	defer rt.Close(context.Background())
	res, err := rt.Chat(ctx, &llm.ChatRequest{Model: "fast", Messages: []llm.Message{llm.UserText("hi")}})
	_ = res
	return err
}

// guideBatchFromGo is the batch guide's job from Go.
func guideBatchFromGo(ctx context.Context, rt *runtime.Runtime, in io.Reader, prices llm.Prices, clients map[string]*providers.Client) {
	out, err := batch.OpenOutput("results.jsonl", batch.Resume) // or batch.Create, batch.Overwrite
	if err != nil {
		log.Fatal(err)
	}
	rep, err := batch.Run(ctx, batch.Job{
		Input: in, Output: out, Runner: rt, // rt: *runtime.Runtime, or *cluster.Node, or yours
		Observe: func(ev batch.Event) { /* EventDone, EventBadLine, EventRemote, ... */ },
		Prices:  &batch.Prices{Models: prices},   // optional: cost per result and per model
		Native:  &batch.Native{Clients: clients}, // optional: provider batch APIs
	})
	cerr := out.Close()
	fmt.Println(rep.Succeeded, rep.Failed, rep.BadLines, rep.Models)
	_, _ = err, cerr
}

// guideMCP is the MCP guide's servers for a tool loop and a session.
func guideMCP(ctx context.Context, rt *runtime.Runtime, req *llm.ChatRequest, journal store.Journal, token string) {
	set, err := mcptools.Start(ctx, mcptools.Options{Servers: []mcptools.Server{
		{Name: "fs", Command: []string{"mcp-server-filesystem", "/srv/data"}, Trusted: true},
		{Name: "tracker", URL: "https://mcp.example.com/mcp", Prefix: "tr_",
			Headers: map[string]string{"Authorization": "Bearer " + token}},
	}})
	if err != nil {
		log.Fatal(err)
	}
	defer set.Close(ctx)
	res, err := pipeline.ToolLoop(ctx, rt, req, set.ToolSet(), pipeline.ToolLoopOptions{})
	m, err := session.New(session.Options{Journal: journal, Model: rt, ModelName: "openai/gpt-4.1-mini",
		Tools: set.SessionTools()})
	_, _, _ = res, m, err
}

// guideLLMTest is the testing guide's llmtest server.
func guideLLMTest(ctx context.Context) error {
	srv := llmtest.NewServer()
	defer srv.Close()
	srv.Push(llmtest.Text("hello"))
	client, err := providers.New(providers.Config{ID: "openai", Format: providers.FormatOpenAI,
		BaseURL: srv.OpenAIBaseURL(), APIKey: "test"})
	if err != nil {
		return err
	}
	res, err := client.Chat(ctx, &llm.ChatRequest{Model: "gpt-4.1-mini", Messages: []llm.Message{llm.UserText("hi")}})
	_ = res
	return err
}
