// Fanout streams one prompt to several models at once and shows each
// model's answer with its time to first token, as the deltas arrive.
//
//	go run ./examples/fanout                      # on the built-in simulator
//	go run ./examples/fanout -m openai/gpt-4.1-mini,anthropic/claude-haiku-4-5 "Why is the sky blue?"
//
// With no -m it asks three simulated models; with provider keys in the
// environment (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...) name real models.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/pipeline"
	"github.com/chorusrt/chorus/runtime"
	"github.com/chorusrt/chorus/sim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "fanout:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, w io.Writer, args []string) error {
	fs := flag.NewFlagSet("fanout", flag.ContinueOnError)
	models := fs.String("m", "sim/echo,sim/prose,sim/poet", "comma-separated models (provider/model or aliases)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	prompt := strings.Join(fs.Args(), " ")
	if prompt == "" {
		prompt = "Explain backpressure in one paragraph."
	}

	// The simulator is always there (provider "sim"); keys in the
	// environment add the real providers.
	s, err := sim.Start(sim.Options{Latency: 30 * time.Millisecond, TokensPerSecond: 400})
	if err != nil {
		return err
	}
	defer s.Close()
	rt, err := runtime.New(runtime.WithProvider(s.Config()), runtime.FromEnv())
	if err != nil {
		return err
	}
	defer rt.Close(context.Background())

	req := &llm.ChatRequest{MaxTokens: 200, Messages: []llm.Message{llm.UserText(prompt)}}
	list := strings.Split(*models, ",")
	start := time.Now()
	fan := pipeline.FanOut(ctx, rt, req, list...)

	// The merged view: every model's events, tagged, as they arrive.
	first := map[string]time.Duration{}
	deltas := map[string]int{}
	for t, err := range fan.All() {
		if err != nil {
			fmt.Fprintf(w, "! %v\n", err) // one model failed; the others go on
			continue
		}
		if t.Event.Type != llm.EventText {
			continue
		}
		if _, ok := first[t.Model]; !ok {
			first[t.Model] = time.Since(start)
			fmt.Fprintf(w, "%-12s first token after %v\n", t.Model, first[t.Model].Round(time.Millisecond))
		}
		deltas[t.Model]++
	}
	fmt.Fprintf(w, "\nall %d models done in %v\n", len(list), time.Since(start).Round(time.Millisecond))
	for _, r := range fan.Results() {
		fmt.Fprintf(w, "\n== %s ==\n", r.Model)
		if r.Err != nil {
			fmt.Fprintf(w, "error: %v\n", r.Err)
			continue
		}
		fmt.Fprintf(w, "%s\n-- %s, %d deltas, %d tokens out\n", r.Result.Content, r.Result.FinishReason, deltas[r.Model], r.Result.Usage.CompletionTokens)
	}
	return nil
}
