package mcptools

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/pipeline"
)

// TestToolLoopEverything runs a tool loop on the simulator against the
// real server-everything, over stdio and over Streamable HTTP: the model
// calls echo, get-sum and get-tiny-image; the texts come back as the tool
// results and the image as an image part.
func TestToolLoopEverything(t *testing.T) {
	for _, transport := range []string{"stdio", "streamableHttp"} {
		t.Run(transport, func(t *testing.T) {
			srv := Server{Name: "everything", Trusted: true}
			if transport == "stdio" {
				srv.Command = everything(t)
			} else {
				srv.URL = httpEverything(t)
			}
			set := start(t, Options{Servers: []Server{srv}})
			model := simClient(t)
			tools := set.ToolSet()
			for _, name := range []string{"echo", "get-sum", "get-tiny-image", "trigger-long-running-operation"} {
				if _, ok := tools[name]; !ok {
					t.Fatalf("tool %q is missing from %v", name, set.Tools())
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			prompt := `call echo {"message":"hello from chorus"} then get-sum {"a":2,"b":40} then get-tiny-image`
			res, err := pipeline.ToolLoop(ctx, model, &llm.ChatRequest{Model: "prose", Messages: []llm.Message{llm.UserText(prompt)}}, tools, pipeline.ToolLoopOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]llm.Message{}
			for _, m := range res.Messages {
				if m.Role == llm.RoleTool {
					got[m.ToolName] = m
				}
			}
			if m := got["echo"]; m.IsError || m.Content != "Echo: hello from chorus" {
				t.Errorf("echo: %+v", m)
			}
			if m := got["get-sum"]; m.IsError || !strings.Contains(m.Content, "42") {
				t.Errorf("get-sum: %+v", m)
			}
			img := got["get-tiny-image"]
			var images []llm.Part
			for _, p := range img.Parts {
				if p.Type == llm.PartImage {
					images = append(images, p)
				}
			}
			if img.IsError || len(images) != 1 || images[0].MIMEType != "image/png" || !bytes.HasPrefix(images[0].Data, []byte("\x89PNG")) {
				t.Errorf("get-tiny-image: want one inline PNG part, got error=%v content=%q parts=%d", img.IsError, img.Content, len(img.Parts))
			}
			if res.Turns != 2 || res.Result.Content == "" || len(res.Result.ToolCalls) > 0 {
				t.Errorf("turns %d, final answer %q", res.Turns, res.Result.Content)
			}
		})
	}
}

// TestResultKinds: a result marked isError is an error result the model
// sees; an unknown tool on the server (a JSON-RPC error) is a *CallError;
// structured content is kept.
func TestResultKinds(t *testing.T) {
	set := start(t, Options{Servers: []Server{{Name: "everything", Command: everything(t)}}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	r, err := set.Call(ctx, "get-structured-content", []byte(`{"location":"Chicago"}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Structured) == 0 || !bytes.Contains(r.Structured, []byte("temperature")) {
		t.Errorf("structured content: %s (text %q)", r.Structured, r.Text)
	}

	// Arguments the server's schema refuses: the TypeScript SDK answers
	// with isError (2025-11-25) or a JSON-RPC error; either way the model
	// sees an error, never a success.
	msgs := mustLoopOne(t, set, "get-sum", `{"a":"x"}`)
	if !msgs.IsError {
		t.Errorf("bad arguments: want an error result, got %+v", msgs)
	}

	// A tool the server does not have (it went away after the list): the
	// TypeScript SDK answers isError, others a JSON-RPC error (a *CallError).
	tool := &Tool{Name: "no-such-tool", Server: "everything", RemoteName: "no-such-tool"}
	r, err = set.server("everything").call(ctx, tool, nil, "")
	var ce *CallError
	if (err == nil && !r.IsError) || (err != nil && (!asCallError(err, &ce) || ce.Server != "everything")) {
		t.Errorf("unknown tool on the server: want isError or a *CallError, got %+v, %T %v", r, err, err)
	}
}

// mustLoopOne runs one tool through the ToolSet as a tool loop would and
// returns its tool message.
func mustLoopOne(t *testing.T, set *Set, name, args string) llm.Message {
	t.Helper()
	tool, ok := set.ToolSet()[name]
	if !ok {
		t.Fatalf("no tool %q", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	text, parts, err := tool.PartsFunc(ctx, []byte(args))
	m := llm.Message{Role: llm.RoleTool, Content: text, Parts: parts}
	if err != nil {
		m.Content, m.IsError = err.Error(), true
	}
	return m
}

func asCallError(err error, target **CallError) bool { return errors.As(err, target) }
