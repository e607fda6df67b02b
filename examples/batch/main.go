// Batch sends 10,000 prompts through the runtime, 64 at a time, with a
// progress line, against a simulator that enforces a rate limit: the
// credential actor learns the limit from the response headers and paces
// the requests, so the batch finishes with few or no 429s.
//
//	go run ./examples/batch                  # 10,000 prompts on the simulator
//	go run ./examples/batch -n 500 -m openai/gpt-4.1-mini   # with OPENAI_API_KEY set
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
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
		fmt.Fprintln(os.Stderr, "batch:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, w io.Writer, args []string) error {
	fs := flag.NewFlagSet("batch", flag.ContinueOnError)
	n := fs.Int("n", 10000, "number of prompts")
	conc := fs.Int("c", 64, "requests in flight at most")
	model := fs.String("m", "sim/echo", "model (provider/model or an alias)")
	rps := fs.Int("rps", 2000, "the simulator's rate limit, requests per second (0: none)")
	every := fs.Duration("progress", 500*time.Millisecond, "progress line interval")
	if err := fs.Parse(args); err != nil {
		return err
	}

	// A simulated provider admitting -rps requests per one-second window,
	// answering after 5ms. Its limit is not configured anywhere in the
	// runtime: the actor reads it from the x-ratelimit-* headers.
	s, err := sim.Start(sim.Options{Latency: 5 * time.Millisecond, RPM: *rps, Window: time.Second})
	if err != nil {
		return err
	}
	defer s.Close()
	rt, err := runtime.New(runtime.WithProvider(s.Config()), runtime.FromEnv())
	if err != nil {
		return err
	}
	defer rt.Close(context.Background())

	// The prompts, produced lazily: a channel is the first stage.
	prompts := make(chan *llm.ChatRequest)
	go func() {
		defer close(prompts)
		for i := range *n {
			req := &llm.ChatRequest{Model: *model, MaxTokens: 32,
				Messages: []llm.Message{llm.UserText(fmt.Sprintf("Prompt %d: name one prime number.", i))}}
			select {
			case prompts <- req:
			case <-ctx.Done():
				return
			}
		}
	}()

	var mu sync.Mutex
	var last pipeline.Progress
	opts := pipeline.BatchOptions{Concurrency: *conc, OnProgress: func(p pipeline.Progress) {
		mu.Lock()
		last = p
		mu.Unlock()
	}}
	snapshot := func() pipeline.Progress {
		mu.Lock()
		defer mu.Unlock()
		return last
	}
	line := func(p pipeline.Progress) {
		eta := "--"
		if p.Rate > 0 {
			eta = (time.Duration(float64(*n-p.Done)/p.Rate*float64(time.Second)) + time.Second/2).Truncate(time.Second).String()
		}
		fmt.Fprintf(w, "%6d/%d done, %d failed, %6.0f req/s, %7.0f tok/s, ETA %s\n", p.Done, *n, p.Failed, p.Rate, p.TokenRate, eta)
	}

	ticker := time.NewTicker(*every)
	defer ticker.Stop()
	items := pipeline.Batch(ctx, rt, prompts, opts)
	start := time.Now()
	var firstErr error
	for done := false; !done; {
		select {
		case it, ok := <-items:
			if !ok {
				done = true
				break
			}
			if it.Err != nil && firstErr == nil {
				firstErr = it.Err
			}
		case <-ticker.C:
			line(snapshot())
		}
	}
	p := snapshot()
	line(p)
	took := time.Since(start)
	fmt.Fprintf(w, "\n%d prompts in %v: %.0f req/s, %d tokens, %d failed\n", p.Done, took.Round(time.Millisecond), float64(p.Done)/took.Seconds(), p.Tokens, p.Failed)
	for _, st := range rt.Stats() {
		fmt.Fprintf(w, "provider %s credential %d: %d requests, %d answered 429, %d retries\n", st.Provider, st.Credential, st.Requests, st.RateLimited, st.Retries)
	}
	if firstErr != nil {
		fmt.Fprintf(w, "first error: %v\n", firstErr)
	}
	return ctx.Err()
}
