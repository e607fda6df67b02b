package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

const modelsUsage = `usage: chorus models [flags] [PROVIDER]

Lists the models of every registered provider (the simulator "sim" and each
provider with a key), or of PROVIDER only, as the provider reports them.

      --json          print one JSON object per model
      --config FILE   chorus.yaml: aliases, providers, limits, defaults, sim
`

func cmdModels(ctx context.Context, e env, args []string) int {
	fs := flag.NewFlagSet("chorus models", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() { fmt.Fprint(e.stderr, modelsUsage) }
	asJSON := fs.Bool("json", false, "")
	config := fs.String("config", "", "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 1 {
		fmt.Fprintf(e.stderr, "chorus models: one PROVIDER at most, got %q\n", fs.Args())
		return 2
	}
	st, err := openStack(e, *config)
	if err != nil {
		fmt.Fprintf(e.stderr, "chorus models: %v\n", err)
		return 2
	}
	defer st.close(2 * time.Second)
	ids := st.rt.Providers()
	if fs.NArg() == 1 {
		id := fs.Arg(0)
		if !slices.Contains(ids, id) {
			fmt.Fprintf(e.stderr, "chorus models: provider %q is not registered (registered: %s)\n", id, strings.Join(ids, ", "))
			return 2
		}
		ids = []string{id}
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	if !*asJSON {
		fmt.Fprintln(tw, "MODEL\tCONTEXT\tMAX OUTPUT\tNAME")
	}
	failed := false
	for _, id := range ids {
		models, err := st.rt.ListModels(ctx, id)
		if err != nil {
			failed = true
			fmt.Fprintf(e.stderr, "chorus models: %s: %v\n", id, err)
			continue
		}
		for _, m := range models {
			if *asJSON {
				b, _ := json.Marshal(map[string]any{
					"id": id + "/" + m.ID, "provider": id, "model": m.ID, "display_name": m.DisplayName,
					"context_window": m.ContextWindow, "max_output_tokens": m.MaxOutputTokens, "capabilities": m.Capabilities,
				})
				fmt.Fprintf(e.stdout, "%s\n", b)
				continue
			}
			fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%s\n", id, m.ID, count(m.ContextWindow), count(m.MaxOutputTokens), m.DisplayName)
		}
	}
	_ = tw.Flush()
	if failed {
		return 1
	}
	return 0
}

// count prints a token count, "-" when the provider did not report it.
func count(n int) string {
	if n <= 0 {
		return "-"
	}
	return fmt.Sprint(n)
}
