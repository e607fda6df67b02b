package batch_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/chorusrt/chorus/batch"
	"github.com/chorusrt/chorus/llm"
)

// echo is a Runner: in a program, a *runtime.Runtime or a *cluster.Node.
type echo struct{}

func (echo) Chat(_ context.Context, req *llm.ChatRequest) (*llm.ChatResult, error) {
	return &llm.ChatResult{Content: "echo: " + req.Messages[0].Content, FinishReason: llm.FinishStop,
		Usage: llm.Usage{PromptTokens: 3, CompletionTokens: 2}, Meta: llm.ResponseMeta{Provider: "local", Model: "m"}}, nil
}

func (echo) Embed(context.Context, *llm.EmbedRequest) (*llm.EmbedResult, error) {
	return nil, fmt.Errorf("no embeddings here")
}

// A job from Go: one output line per custom_id, the bad line reported by
// number, the summary per model with its cost from the caller's prices.
func ExampleRun() {
	dir, _ := os.MkdirTemp("", "batch-example")
	defer os.RemoveAll(dir)
	out, err := batch.OpenOutput(filepath.Join(dir, "results.jsonl"), batch.Create)
	if err != nil {
		fmt.Println(err)
		return
	}
	in := strings.NewReader(`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"local/m","messages":[{"role":"user","content":"hi"}]}}
{"custom_id":"b","method":"POST","url":"/v1/chat/completions","body":{"model":"local/m","messages":[{"role":"robot","content":"hi"}]}}
`)
	rep, err := batch.Run(context.Background(), batch.Job{
		Input: in, InputName: "in.jsonl", Output: out, Runner: echo{},
		Prices: &batch.Prices{Models: llm.Prices{"local/m": {Input: 1, Output: 2}}},
	})
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	fmt.Println(rep.Succeeded, rep.Failed, rep.Written, err)
	for _, b := range rep.BadLines {
		fmt.Printf("line %d: %v\n", b.Line, b.Err)
	}
	for _, m := range rep.Models {
		fmt.Println(m.Model, m.Requests, m.Tokens, m.Cost)
	}
	// Output:
	// 1 0 2 <nil>
	// line 2: body.messages[0].role: unknown role "robot" (system, developer, user, assistant, tool)
	// local/m 1 5 $0.000007
}
