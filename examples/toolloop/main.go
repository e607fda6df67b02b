// Toolloop runs a conversation with tools: the model asks for tools, Go
// handlers answer, and the model is called again with the results until it
// answers in text.
//
//	go run ./examples/toolloop                      # on the simulator
//	go run ./examples/toolloop -m openai/gpt-4.1-mini "What's the weather in Oslo, in fahrenheit?"
//
// The simulator calls every tool the prompt names (with the JSON object
// that follows the name as arguments) and, once it sees the results,
// answers with a text that lists them.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/pipeline"
	"github.com/chorusrt/chorus/runtime"
	"github.com/chorusrt/chorus/sim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "toolloop:", err)
		os.Exit(1)
	}
}

// tools are the Go handlers the model may call.
var tools = pipeline.ToolSet{
	"get_weather": {
		Definition: llm.Tool{Description: "Current weather in a city",
			Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)},
		Func: func(ctx context.Context, args json.RawMessage) (string, error) {
			var a struct{ City string }
			if err := json.Unmarshal(args, &a); err != nil || a.City == "" {
				return "", fmt.Errorf("get_weather needs a city, got %s", args)
			}
			return fmt.Sprintf(`{"city":%q,"celsius":21,"sky":"clear"}`, a.City), nil
		},
	},
	"convert_temperature": {
		Definition: llm.Tool{Description: "Convert a temperature between celsius and fahrenheit",
			Parameters: json.RawMessage(`{"type":"object","properties":{"value":{"type":"number"},"to":{"type":"string","enum":["fahrenheit","celsius"]}},"required":["value","to"]}`)},
		Func: func(ctx context.Context, args json.RawMessage) (string, error) {
			var a struct {
				Value float64
				To    string
			}
			if err := json.Unmarshal(args, &a); err != nil {
				return "", err
			}
			if a.To == "celsius" {
				return fmt.Sprintf("%.1f", (a.Value-32)*5/9), nil
			}
			return fmt.Sprintf("%.1f", a.Value*9/5+32), nil
		},
	},
}

func run(ctx context.Context, w io.Writer, args []string) error {
	fs := flag.NewFlagSet("toolloop", flag.ContinueOnError)
	model := fs.String("m", "sim/assistant", "model (provider/model or an alias)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	prompt := strings.Join(fs.Args(), " ")
	if prompt == "" {
		prompt = `What is the weather in Oslo in fahrenheit? Use get_weather {"city": "Oslo"} and convert_temperature {"value": 21, "to": "fahrenheit"}.`
	}

	s, err := sim.Start(sim.Options{})
	if err != nil {
		return err
	}
	defer s.Close()
	rt, err := runtime.New(runtime.WithProvider(s.Config()), runtime.FromEnv())
	if err != nil {
		return err
	}
	defer rt.Close(context.Background())

	req := &llm.ChatRequest{Model: *model, MaxTokens: 400, Messages: []llm.Message{
		llm.SystemText("Answer with the tools you are given."),
		llm.UserText(prompt),
	}}
	res, err := pipeline.ToolLoop(ctx, rt, req, tools, pipeline.ToolLoopOptions{MaxTurns: 4, Parallel: true})
	if res != nil {
		for _, m := range res.Messages {
			printMessage(w, m)
		}
		fmt.Fprintf(w, "\n%d model calls, %d tokens in, %d tokens out\n", res.Turns, res.Usage.InputTokens(), res.Usage.CompletionTokens)
	}
	return err
}

func printMessage(w io.Writer, m llm.Message) {
	switch m.Role {
	case llm.RoleTool:
		fmt.Fprintf(w, "tool %s (%s) -> %s\n", m.ToolName, m.ToolCallID, m.Content)
	default:
		if m.Content != "" {
			fmt.Fprintf(w, "%s: %s\n", m.Role, m.Content)
		}
		for _, tc := range m.ToolCalls {
			fmt.Fprintf(w, "%s calls %s(%s) [%s]\n", m.Role, tc.Name, tc.Arguments, tc.ID)
		}
	}
}
