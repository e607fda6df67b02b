package mcptools_test

import (
	"context"
	"log"
	"os"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/mcptools"
	"github.com/chorusrt/chorus/pipeline"
)

// A tool loop with the tools of a stdio server and a Streamable HTTP one.
// (Compiled, not run: it needs the servers and a model.)
func Example() {
	ctx := context.Background()
	var model pipeline.Client // a *runtime.Runtime, for one
	token := os.Getenv("TRACKER_TOKEN")
	set, err := mcptools.Start(ctx, mcptools.Options{Servers: []mcptools.Server{
		{Name: "fs", Command: []string{"mcp-server-filesystem", "/srv/data"}, Trusted: true},
		{Name: "tracker", URL: "https://mcp.example.com/mcp", Prefix: "tr_",
			Headers: map[string]string{"Authorization": "Bearer " + token}},
	}})
	if err != nil {
		log.Fatal(err)
	}
	defer set.Close(ctx)
	req := &llm.ChatRequest{Model: "openai/gpt-4.1-mini", Messages: []llm.Message{llm.UserText("list /srv/data")}}
	res, err := pipeline.ToolLoop(ctx, model, req, set.ToolSet(), pipeline.ToolLoopOptions{})
	if err != nil {
		log.Fatal(err)
	}
	log.Print(res.Result.Content)
}
