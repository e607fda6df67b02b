package sim_test

import (
	"context"
	"fmt"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/runtime"
	"github.com/chorusrt/chorus/sim"
)

// The simulator as provider "sim" of a runtime: no key, the whole stack.
func Example() {
	s, err := sim.Start(sim.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	rt, err := runtime.New(runtime.WithProvider(s.Config()))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close(context.Background())

	res, err := rt.Chat(context.Background(), &llm.ChatRequest{
		Model:    "sim/echo",
		Messages: []llm.Message{llm.UserText("Hello, simulator")},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Content, res.FinishReason)
	// Output: [simulated] Hello, simulator stop
}
