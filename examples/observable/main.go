// Observable consumes a stream's deltas as an RxGo Observable
// (pipeline/rx): one request, several observers, each an operator chain.
// It prints the text live, counts the deltas, sums the bytes, and groups
// the deltas into 100 ms windows to show the stream's pace; then it merges
// a fan-out of two models and counts each model's deltas.
//
//	go run ./examples/observable                 # on the simulator
//	go run ./examples/observable -m openai/gpt-4.1-mini "Tell me about rivers"
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

	"github.com/reactivex/rxgo/v2"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/pipeline"
	"github.com/chorusrt/chorus/pipeline/rx"
	"github.com/chorusrt/chorus/runtime"
	"github.com/chorusrt/chorus/sim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "observable:", err)
		os.Exit(1)
	}
}

func isText(v any) bool { return v.(llm.Event).Type == llm.EventText }

func run(ctx context.Context, w io.Writer, args []string) error {
	fs := flag.NewFlagSet("observable", flag.ContinueOnError)
	model := fs.String("m", "sim/prose", "model (provider/model or an alias)")
	second := fs.String("m2", "sim/echo", "second model of the fan-out")
	if err := fs.Parse(args); err != nil {
		return err
	}
	prompt := strings.Join(fs.Args(), " ")
	if prompt == "" {
		prompt = "Describe a river delta."
	}
	// 150 tokens per second: a ~90-token answer streams for about 0.6 s.
	s, err := sim.Start(sim.Options{Latency: 20 * time.Millisecond, TokensPerSecond: 150})
	if err != nil {
		return err
	}
	defer s.Close()
	rt, err := runtime.New(runtime.WithProvider(s.Config()), runtime.FromEnv())
	if err != nil {
		return err
	}
	defer rt.Close(context.Background())

	// Cancelling ctx releases the stream and every observer.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req := &llm.ChatRequest{Model: *model, MaxTokens: 300, Messages: []llm.Message{llm.UserText(prompt)}}
	stream, err := rt.Stream(ctx, req)
	if err != nil {
		return err
	}
	// One request, read once; every observer replays it from the start.
	texts := rx.FromStream(ctx, stream).Filter(isText)

	// Observer 0, subscribed now so that it sees the deltas as they come:
	// how many arrive in each 100 ms window, the stream's pace.
	paced := make(chan []int, 1)
	go func() {
		var windows []int
		for item := range texts.BufferWithTime(rxgo.WithDuration(100 * time.Millisecond)).Observe() {
			if batch, ok := item.V.([]any); ok {
				windows = append(windows, len(batch))
			}
		}
		paced <- windows
	}()

	// Observer 1: the text, live.
	fmt.Fprintf(w, "== %s, live ==\n", *model)
	<-texts.ForEach(
		func(v any) { fmt.Fprint(w, v.(llm.Event).Text) },
		func(err error) { fmt.Fprintf(w, "\nstream error: %v", err) },
		func() { fmt.Fprintln(w) },
	)
	// Observer 2: how many deltas. Observer 3: how many bytes.
	count, err := texts.Count().Get()
	if err != nil {
		return err
	}
	bytes, err := texts.
		Map(func(_ context.Context, v any) (any, error) { return len(v.(llm.Event).Text), nil }).
		Reduce(func(_ context.Context, acc, v any) (any, error) {
			if acc == nil {
				return v, nil
			}
			return acc.(int) + v.(int), nil
		}).Get()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%d text deltas, %d bytes\n", count.V, bytes.V)
	fmt.Fprintf(w, "deltas per 100 ms window: %v\n", <-paced)
	res, err := stream.Result()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "finish %s, %d tokens out\n", res.FinishReason, res.Usage.CompletionTokens)

	// A fan-out as one Observable of tagged events; count per model.
	fan := pipeline.FanOut(ctx, rt, req, *model, *second)
	tagged := rx.FromFan(ctx, fan)
	perModel := map[string]int{}
	for item := range tagged.Observe(rxgo.WithErrorStrategy(rxgo.ContinueOnError)) {
		if item.Error() {
			fmt.Fprintf(w, "model failed: %v\n", item.E)
			continue
		}
		t := item.V.(pipeline.Tagged)
		if t.Event.Type == llm.EventText {
			perModel[t.Model]++
		}
	}
	for _, m := range []string{*model, *second} {
		fmt.Fprintf(w, "fan-out: %s sent %d text deltas\n", m, perModel[m])
	}
	return nil
}
