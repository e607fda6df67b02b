package providers_test

import (
	"context"
	"fmt"
	"log"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
)

// The README's streaming example, against a fake OpenAI server instead of
// the real one.
func ExampleClient_Stream() {
	srv := llmtest.NewServer(llmtest.WithDefault(llmtest.Reply{Deltas: []string{"Gophers ", "dig ", "channels."}}))
	defer srv.Close()
	ctx := context.Background()

	cfg, _ := providers.Builtin("openai")
	cfg.BaseURL = srv.OpenAIBaseURL() // the real example keeps the default base URL
	cfg.APIKey = providers.Secret("sk-example")
	client, err := providers.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	stream, err := client.Stream(ctx, &llm.ChatRequest{
		Model:    "gpt-4.1-mini",
		Messages: []llm.Message{llm.UserText("Write a haiku about Go.")},
	})
	if err != nil {
		log.Fatal(err)
	}
	for ev, err := range stream.All() {
		if err != nil {
			log.Fatal(err)
		}
		if ev.Type == llm.EventText {
			fmt.Print(ev.Text)
		}
	}
	res, _ := stream.Result()
	fmt.Println()
	fmt.Println(res.FinishReason, res.Usage.CompletionTokens)
	client.CloseIdleConnections()
	// Output:
	// Gophers dig channels.
	// stop 3
}
