// Agent runs eino's ReAct agent with two tools on Chorus: the model asks
// for the tools, eino runs them, and the model answers from their results.
//
//	go run ./examples/agent                                  # on Chorus's simulator
//	go run ./examples/agent -m openai/gpt-4.1-mini "What's the weather in Oslo, in fahrenheit?"
//
// With -m, the providers come from the environment (runtime.FromEnv:
// OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY, ...).
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

	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/components/tool/utils"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"

	chorus "github.com/chorusrt/chorus/integrations/eino"
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

type weatherIn struct {
	City string `json:"city" jsonschema:"description=the city"`
}

type convertIn struct {
	Value float64 `json:"value"`
	To    string  `json:"to" jsonschema:"enum=fahrenheit,enum=celsius"`
}

// tools are the agent's two tools; each prints its call to w.
func tools(w io.Writer) ([]tool.BaseTool, error) {
	weather, err := utils.InferTool("get_weather", "Current weather in a city", func(ctx context.Context, in weatherIn) (string, error) {
		fmt.Fprintf(w, "tool get_weather(%s)\n", in.City)
		return fmt.Sprintf(`{"city":%q,"celsius":21,"sky":"clear"}`, in.City), nil
	})
	if err != nil {
		return nil, err
	}
	convert, err := utils.InferTool("convert_temperature", "Convert a temperature between celsius and fahrenheit", func(ctx context.Context, in convertIn) (string, error) {
		fmt.Fprintf(w, "tool convert_temperature(%g, %s)\n", in.Value, in.To)
		if in.To == "celsius" {
			return fmt.Sprintf("%.1f", (in.Value-32)*5/9), nil
		}
		return fmt.Sprintf("%.1f", in.Value*9/5+32), nil
	})
	if err != nil {
		return nil, err
	}
	return []tool.BaseTool{weather, convert}, nil
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
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
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

	cm, err := chorus.New(rt, chorus.Config{Model: *model, MaxTokens: 400})
	if err != nil {
		return err
	}
	ts, err := tools(w)
	if err != nil {
		return err
	}
	agent, err := react.NewAgent(ctx, &react.AgentConfig{ToolCallingModel: cm, ToolsConfig: compose.ToolsNodeConfig{Tools: ts}, MaxStep: 8})
	if err != nil {
		return err
	}
	out, err := agent.Generate(ctx, []*schema.Message{schema.SystemMessage("Answer with the tools you are given."), schema.UserMessage(prompt)})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "assistant: %s\n", out.Content)
	if u := out.ResponseMeta.Usage; u != nil {
		fmt.Fprintf(w, "last call: %d tokens in, %d out\n", u.PromptTokens, u.CompletionTokens)
	}
	return nil
}
