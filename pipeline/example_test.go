package pipeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/pipeline"
	"github.com/chorusrt/chorus/pipeline/rx"
	"github.com/chorusrt/chorus/providers"
)

// One prompt to two models at once: events arrive tagged and interleaved,
// each model's answer and error are kept apart.
func ExampleFanOut() {
	srv := llmtest.NewServer() // a fake OpenAI-format server; use the runtime or a real provider instead
	defer srv.Close()
	client, _ := providers.New(providers.Compatible("local", srv.OpenAIBaseURL(), ""))

	req := &llm.ChatRequest{Messages: []llm.Message{llm.UserText("Say hello")}}
	fan := pipeline.FanOut(context.Background(), client, req, "model-a", "model-b")
	streamed := map[string]string{}
	for t, err := range fan.All() {
		if err != nil {
			fmt.Println("failed:", err) // one model failed; the others go on
			continue
		}
		streamed[t.Model] += t.Event.Text
	}
	for _, r := range fan.Results() {
		fmt.Printf("%s streamed %q, answered %q, err %v\n", r.Model, streamed[r.Model], r.Result.Content, r.Err)
	}
	// Output:
	// model-a streamed "simulated reply", answered "simulated reply", err <nil>
	// model-b streamed "simulated reply", answered "simulated reply", err <nil>
}

// Many requests, at most two at a time, in input order; a failed request
// fails only its own item.
func ExampleBatch() {
	srv := llmtest.NewServer()
	defer srv.Close()
	client, _ := providers.New(providers.Compatible("local", srv.OpenAIBaseURL(), ""))
	ctx := context.Background()
	var reqs []*llm.ChatRequest
	for _, q := range []string{"one", "", "three"} {
		reqs = append(reqs, &llm.ChatRequest{Model: "gpt-4.1-mini", Messages: []llm.Message{llm.UserText(q)}})
	}
	var last pipeline.Progress // the running count: done, failed, tokens, rate
	opts := pipeline.BatchOptions{Concurrency: 2, Ordered: true, OnProgress: func(p pipeline.Progress) { last = p }}
	for it := range pipeline.Batch(ctx, client, pipeline.FromSlice(ctx, reqs), opts) { // each an Item{Index, Value, Err}
		if it.Err != nil {
			fmt.Println(it.Index, "error:", it.Err)
		} else {
			fmt.Println(it.Index, it.Value.Content)
		}
	}
	fmt.Println(last.Done, "done,", last.Failed, "failed")
	// Output:
	// 0 simulated reply
	// 1 error: llm: invalid messages[0].content: is empty
	// 2 simulated reply
	// 3 done, 1 failed
}

// A tool loop with a Go handler: the model calls the tool, sees its result
// and answers.
func ExampleToolLoop() {
	srv := llmtest.NewServer()
	defer srv.Close()
	srv.Push(llmtest.ToolCalls(llm.ToolCall{Name: "weather", Arguments: `{"city":"Paris"}`}), llmtest.Text("Sunny in Paris."))
	client, _ := providers.New(providers.Compatible("local", srv.OpenAIBaseURL(), ""))

	tools := pipeline.ToolSet{"weather": {
		Definition: llm.Tool{Description: "Current weather in a city",
			Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)},
		Func: func(ctx context.Context, args json.RawMessage) (string, error) {
			var a struct{ City string }
			err := json.Unmarshal(args, &a)
			return "sunny in " + a.City, err
		},
	}}
	req := &llm.ChatRequest{Model: "gpt-4.1-mini", Messages: []llm.Message{llm.UserText("Weather in Paris?")}}
	res, err := pipeline.ToolLoop(context.Background(), client, req, tools, pipeline.ToolLoopOptions{MaxTurns: 4})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s (%d turns; tool said %q)\n", res.Result.Content, res.Turns, res.Messages[2].Content)
	// Output: Sunny in Paris. (2 turns; tool said "sunny in Paris")
}

// A stream as an RxGo Observable: two observers, one request.
func Example_observable() {
	srv := llmtest.NewServer()
	defer srv.Close()
	srv.Push(llmtest.Deltas("Hello", ", ", "world"))
	client, _ := providers.New(providers.Compatible("local", srv.OpenAIBaseURL(), ""))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // releases the stream and every observer
	stream, _ := client.Stream(ctx, &llm.ChatRequest{Model: "gpt-4.1-mini", Messages: []llm.Message{llm.UserText("hi")}})
	texts := rx.FromStream(ctx, stream).Filter(func(v any) bool { return v.(llm.Event).Type == llm.EventText })
	upper := texts.Map(func(_ context.Context, v any) (any, error) { return strings.ToUpper(v.(llm.Event).Text), nil })
	for item := range texts.Observe() {
		fmt.Print(item.V.(llm.Event).Text)
	}
	fmt.Println()
	for item := range upper.Observe() {
		fmt.Print(item.V)
	}
	fmt.Println("\nrequests:", srv.Count())
	// Output:
	// Hello, world
	// HELLO, WORLD
	// requests: 1
}
