package eino_test

import (
	"testing"
	"time"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/schema"

	chorus "github.com/chorusrt/chorus/integrations/eino"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/runtime"
)

// TestADKChatModelAgentOnEveryWireFormat runs eino's ADK ChatModelAgent
// with two tools through the adapter, through adk.Runner, on each format,
// buffered and streamed: model events (streamed when the runner streams)
// with both tool calls, one event per tool result, and the final answer.
func TestADKChatModelAgentOnEveryWireFormat(t *testing.T) {
	for _, w := range wires {
		for _, streamed := range []bool{false, true} {
			name := w.name + map[bool]string{false: "/buffered", true: "/streamed"}[streamed]
			t.Run(name, func(t *testing.T) {
				srv := llmtest.NewServer()
				defer srv.Close()
				rt := newRT(t, runtime.WithProvider(w.cfg(srv)))
				srv.Push(parallelCalls(), llmtest.Text(answer))
				cm, err := chorus.New(rt, chorus.Config{Model: w.model, MaxTokens: 200})
				if err != nil {
					t.Fatal(err)
				}
				box := &toolbox{}
				ctx := ctxT(t, 20*time.Second)
				a, err := adk.NewChatModelAgent(ctx, &adk.ChatModelAgentConfig{
					Name: "weather", Description: "answers weather questions", Instruction: "Use the tools.",
					Model: cm, ToolsConfig: adk.ToolsConfig{ToolsNodeConfig: toolsNode(t, box)},
				})
				if err != nil {
					t.Fatal(err)
				}
				it := adk.NewRunner(ctx, adk.RunnerConfig{Agent: a, EnableStreaming: streamed}).Query(ctx, question)
				var calls, results int
				var last *schema.Message
				for {
					ev, ok := it.Next()
					if !ok {
						break
					}
					if ev.Err != nil {
						t.Fatalf("agent event: %v", ev.Err)
					}
					if ev.Output == nil || ev.Output.MessageOutput == nil {
						continue
					}
					msg, _, err := adk.GetMessage(ev)
					if err != nil {
						t.Fatal(err)
					}
					switch msg.Role {
					case schema.Tool:
						results++
					case schema.Assistant:
						if ev.Output.MessageOutput.IsStreaming != streamed {
							t.Errorf("model event streaming=%v, want %v", ev.Output.MessageOutput.IsStreaming, streamed)
						}
						calls += len(msg.ToolCalls)
						last = msg
					}
				}
				if calls != 2 || results != 2 || last == nil || last.Content != answer {
					t.Fatalf("%d calls, %d results, last %+v", calls, results, last)
				}
				checkToolRound(t, srv.Requests(), box, streamed)
			})
		}
	}
}
