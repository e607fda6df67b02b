package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/sim"
)

const simUsage = `usage: chorus sim [flags]

Serves the built-in simulator as a local OpenAI-, Anthropic- and
Gemini-compatible API until interrupted, for your own tests. Any key is
accepted. Every answer says it is simulated (see "The simulator" in the
README for the conventions: echo, prose, tool calls, [sim:status=NNN]).

      --addr HOST:PORT          listen address (default 127.0.0.1:8088)
      --latency D               delay before each answer's headers (e.g. 50ms)
      --tokens-per-second N     completion tokens per second (0: at once)
      --rpm N                   requests admitted per window (0: unlimited)
      --tpm N                   tokens admitted per window (0: unlimited)
      --window D                rate-limit window (default 1m)
`

func cmdSim(ctx context.Context, e env, args []string) int {
	fs := flag.NewFlagSet("chorus sim", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() { fmt.Fprint(e.stderr, simUsage) }
	var o sim.Options
	fs.StringVar(&o.Addr, "addr", "127.0.0.1:8088", "")
	fs.DurationVar(&o.Latency, "latency", 0, "")
	fs.Float64Var(&o.TokensPerSecond, "tokens-per-second", 0, "")
	fs.IntVar(&o.RPM, "rpm", 0, "")
	fs.IntVar(&o.TPM, "tpm", 0, "")
	fs.DurationVar(&o.Window, "window", 0, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(e.stderr, "chorus sim: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	s, err := sim.Start(o)
	if err != nil {
		var ce *llm.ConfigError
		if errors.As(err, &ce) {
			flagName := map[string]string{"tokens_per_second": "tokens-per-second"}[ce.Field]
			if flagName == "" {
				flagName = ce.Field
			}
			fmt.Fprintf(e.stderr, "chorus sim: --%s: %s\n", flagName, ce.Msg)
			return 2
		}
		fmt.Fprintf(e.stderr, "chorus sim: %v\n", err)
		return 2
	}
	defer s.Close()
	limits := "no rate limit"
	if o.RPM > 0 || o.TPM > 0 {
		w := o.Window
		if w == 0 {
			w = sim.DefaultWindow
		}
		limits = fmt.Sprintf("%d requests and %d tokens per %v (0: unlimited)", o.RPM, o.TPM, w)
	}
	fmt.Fprintf(e.stdout, `chorus sim: serving simulated OpenAI, Anthropic and Gemini APIs on %s
  latency %v, %v tokens/s (0: at once), %s
  OPENAI_BASE_URL=%s
  ANTHROPIC_BASE_URL=%s
  GEMINI_BASE_URL=%s
Any key is accepted. Stop with Ctrl-C.
`, s.URL(), o.Latency, o.TokensPerSecond, limits, s.OpenAIBaseURL(), s.AnthropicBaseURL(), s.GeminiBaseURL())
	<-ctx.Done()
	start := time.Now()
	n, limited := s.Requests(), s.RateLimited()
	s.Close()
	fmt.Fprintf(e.stderr, "chorus sim: stopped after %d request(s), %d answered 429 (closed in %v)\n", n, limited, time.Since(start).Round(time.Millisecond))
	return 0
}
