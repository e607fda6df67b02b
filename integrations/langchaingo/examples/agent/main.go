// Agent runs LangChainGo's functions agent with two tools on Chorus: the
// model asks for the tools, the executor runs them, and the model answers
// from their results.
//
//	go run ./examples/agent                                  # on Chorus's simulator
//	go run ./examples/agent -m anthropic/claude-haiku-4-5 "What's the weather in Oslo, in fahrenheit?"
//
// With -m, the providers come from the environment (runtime.FromEnv). The
// functions agent gives every tool one string argument, __arg1; the default
// prompt names it so that the simulator fills it in.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"

	"github.com/tmc/langchaingo/agents"
	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/tools"

	chorus "github.com/chorusrt/chorus/integrations/langchaingo"
	"github.com/chorusrt/chorus/runtime"
	"github.com/chorusrt/chorus/sim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}

// tool is a LangChainGo tool that prints its calls to w.
type tool struct {
	name, desc string
	fn         func(string) string
	w          io.Writer
}

func (t tool) Name() string        { return t.name }
func (t tool) Description() string { return t.desc }
func (t tool) Call(ctx context.Context, input string) (string, error) {
	fmt.Fprintf(t.w, "tool %s(%s)\n", t.name, input)
	return t.fn(input), nil
}

func agentTools(w io.Writer) []tools.Tool {
	return []tools.Tool{
		tool{"get_weather", "Current weather in a city; the argument is the city", func(city string) string {
			return fmt.Sprintf(`{"city":%q,"celsius":21,"sky":"clear"}`, city)
		}, w},
		tool{"convert_temperature", "Convert celsius to fahrenheit; the argument is the number", func(c string) string {
			v, err := strconv.ParseFloat(strings.TrimSpace(c), 64)
			if err != nil {
				return "not a number: " + c
			}
			return fmt.Sprintf("%.1f", v*9/5+32)
		}, w},
	}
}

func run(ctx context.Context, w io.Writer, args []string) error {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	model := fs.String("m", "", "model (provider/model or an alias); empty runs on the simulator")
	if err := fs.Parse(args); err != nil {
		return err
	}
	prompt := strings.Join(fs.Args(), " ")
	if prompt == "" {
		prompt = `What is the weather in Oslo in fahrenheit? Use get_weather {"__arg1": "Oslo"} and convert_temperature {"__arg1": "21"}.`
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

	llm, err := chorus.New(rt, chorus.Config{Model: *model, MaxTokens: 400})
	if err != nil {
		return err
	}
	agent := agents.NewOpenAIFunctionsAgent(llm, agentTools(w))
	out, err := chains.Run(ctx, agents.NewExecutor(agent, agents.WithMaxIterations(6)), prompt)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "assistant: %s\n", out)
	return nil
}
