// Flow runs a Genkit flow with two tools on Chorus: the model asks for the
// tools, Genkit runs them, and the model answers from their results,
// streamed to stdout.
//
//	go run ./examples/flow                                  # on Chorus's simulator
//	go run ./examples/flow -m gemini/gemini-2.5-flash "What's the weather in Oslo, in fahrenheit?"
//
// With -m, the providers come from the environment (runtime.FromEnv).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"

	chorus "github.com/chorusrt/chorus/integrations/genkit"
	"github.com/chorusrt/chorus/runtime"
	"github.com/chorusrt/chorus/sim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "flow:", err)
		os.Exit(1)
	}
}

type weatherIn struct {
	City string `json:"city"`
}

type convertIn struct {
	Value float64 `json:"value"`
	To    string  `json:"to" jsonschema:"enum=fahrenheit,enum=celsius"`
}

// syncWriter serializes writes: the tools run in parallel and print.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func run(ctx context.Context, stdout io.Writer, args []string) error {
	w := &syncWriter{w: stdout}
	fs := flag.NewFlagSet("flow", flag.ContinueOnError)
	model := fs.String("m", "", "model (provider/model or an alias); empty runs on the simulator")
	if err := fs.Parse(args); err != nil {
		return err
	}
	prompt := strings.Join(fs.Args(), " ")
	if prompt == "" {
		prompt = `What is the weather in Oslo in fahrenheit? Use get_weather {"city": "Oslo"} and convert_temperature {"value": 21, "to": "fahrenheit"}.`
	}

	opts := []runtime.Option{runtime.FromEnv()}
	if *model == "" {
		s, err := sim.Start(sim.Options{})
		if err != nil {
			return err
		}
		defer s.Close()
		opts = []runtime.Option{runtime.WithProvider(s.Config())}
		*model = "sim/assistant"
	}
	rt, err := runtime.New(opts...)
	if err != nil {
		return err
	}
	defer rt.Close(context.Background())

	// genkit.Init watches for signals for as long as its context lives.
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g := genkit.Init(gctx, genkit.WithPlugins(&chorus.Plugin{Client: rt}))
	weather := genkit.DefineTool(g, "get_weather", "Current weather in a city", func(tc *ai.ToolContext, in weatherIn) (string, error) {
		fmt.Fprintf(w, "tool get_weather(%s)\n", in.City)
		return fmt.Sprintf(`{"city":%q,"celsius":21,"sky":"clear"}`, in.City), nil
	})
	convert := genkit.DefineTool(g, "convert_temperature", "Convert a temperature between celsius and fahrenheit", func(tc *ai.ToolContext, in convertIn) (string, error) {
		fmt.Fprintf(w, "tool convert_temperature(%g, %s)\n", in.Value, in.To)
		if in.To == "celsius" {
			return fmt.Sprintf("%.1f", (in.Value-32)*5/9), nil
		}
		return fmt.Sprintf("%.1f", in.Value*9/5+32), nil
	})
	flow := genkit.DefineStreamingFlow(g, "weather", func(ctx context.Context, q string, cb func(context.Context, string) error) (string, error) {
		resp, err := genkit.Generate(ctx, g, ai.WithModel(chorus.Model(g, *model)), ai.WithSystem("Answer with the tools you are given."),
			ai.WithPrompt(q), ai.WithTools(weather, convert),
			ai.WithStreaming(func(ctx context.Context, c *ai.ModelResponseChunk) error { return cb(ctx, c.Text()) }))
		if err != nil {
			return "", err
		}
		return resp.Text(), nil
	})
	fmt.Fprint(w, "assistant (streamed): ")
	for v, err := range flow.Stream(ctx, prompt) {
		if err != nil {
			return err
		}
		if v.Done {
			fmt.Fprintf(w, "\nassistant: %s\n", v.Output)
		} else {
			fmt.Fprint(w, v.Stream)
		}
	}
	return nil
}
