package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"
)

const usage = `usage: chorus <command> [flags] [args]

Commands:
  batch    run an OpenAI Batch JSONL file (chat and embeddings) with resume
  chat     stream one prompt to one or more models at once
  keys     list, show, create, update, rotate or revoke a server's gateway keys
  models   list the models of every registered provider, or of one
  node     run a member of a Chorus cluster (shared budgets, sessions, batches)
  serve    serve OpenAI-, Anthropic- and Gemini-compatible APIs over the runtime
  sessions list, show, approve, reject or cancel the sessions of a server
  sim      serve the built-in simulator as a local OpenAI/Anthropic/Gemini API
  usage    print the request log's usage per key, model or provider and hour or day
  version  print the version of Chorus this binary was built from

Every command registers the built-in simulator as provider "sim" (models
sim/<name>) and every provider whose key is in the environment
(OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY, ...). With no key set,
calls that name no model go to the simulator.

Run "chorus <command> -h" for the flags of a command.
`

// env is what a command gets from the process: its streams, its
// environment and its terminal (replaced in tests).
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	// stderrTTY reports whether stderr is a terminal (progress bar).
	stderrTTY bool
	// width is the terminal's width in columns (0 when unknown).
	width func() int
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The first signal stops the command gracefully; a second one kills it.
	context.AfterFunc(ctx, stop)
	fd := int(os.Stderr.Fd())
	e := env{
		stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv,
		stderrTTY: term.IsTerminal(fd),
		width: func() int {
			w, _, err := term.GetSize(fd)
			if err != nil {
				return 0
			}
			return w
		},
	}
	os.Exit(run(ctx, e, os.Args[1:]))
}

// run runs one command and returns its exit status.
func run(ctx context.Context, e env, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(e.stderr, usage)
		return 2
	}
	// OpenTelemetry from the standard OTEL_* variables (otel.go).
	shutdown, err := setupOTel(ctx, e.getenv)
	if err != nil {
		fmt.Fprintf(e.stderr, "chorus: %v\n", err)
		return 1
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), otelShutdownTimeout)
		defer cancel()
		if err := shutdown(sctx); err != nil {
			fmt.Fprintf(e.stderr, "chorus: OpenTelemetry: %v\n", err)
		}
	}()
	switch args[0] {
	case "batch":
		return cmdBatch(ctx, e, args[1:])
	case "chat":
		return cmdChat(ctx, e, args[1:])
	case "models":
		return cmdModels(ctx, e, args[1:])
	case "sim":
		return cmdSim(ctx, e, args[1:])
	case "node":
		return cmdNode(ctx, e, args[1:])
	case "serve":
		return cmdServe(ctx, e, args[1:])
	case "sessions":
		return cmdSessions(ctx, e, args[1:])
	case "keys":
		return cmdKeys(ctx, e, args[1:]) // keys.go
	case "usage":
		return cmdUsage(ctx, e, args[1:]) // requestlog.go
	case "version":
		return cmdVersion(e, args[1:])
	case "help", "-h", "-help", "--help":
		fmt.Fprint(e.stdout, usage)
		return 0
	}
	fmt.Fprintf(e.stderr, "chorus: unknown command %q\n\n%s", args[0], usage)
	return 2
}
