package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/chorusrt/chorus/console"
)

const keysUsage = `usage: chorus keys <list|show|create|update|rotate|revoke> [flags] [args]

Manages the gateway keys of a running chorus serve through its console's
admin API (/api/console/keys): what is changed holds on every replica of
the fleet within a second. A key's text is printed once, by create and
rotate (the store keeps its hash); everything else names it by its id and
fingerprint.

  list                         the keys, with their spend of this period
  show ID                      one key: settings, spend, ledger
  create --name N [settings]   a new key; prints its text (shown once)
  update ID [settings]         change the settings named (the rest stay)
  rotate ID [--grace 1h]       a new text for the key (same id, settings and
                               ledger); the old one keeps working for the
                               grace period (default 0: not at all)
  revoke ID                    refuse the key from now on (kept, with its
                               ledger)

Settings (create and update):
  --name N                     the key's name, unique
  --models a,b                 the models it may call (empty: every model)
  --rpm N --tpm N              requests and tokens per minute (0: no limit)
  --concurrency N              calls at once (0: no limit)
  --budget USD                 what it may spend per period (0: no budget)
  --budget-period P            total, day or month (UTC; default total)
  --drop-unsupported[=false]   drop parameters a model does not support

Flags (before or after the arguments):
  --addr URL     the server (default $CHORUS_CONSOLE_ADDR, else
                 http://127.0.0.1:8080)
  --token T      the operator token (default $CHORUS_CONSOLE_TOKEN)
  --json         print the API's JSON instead of text

Exit status: 0 done; 1 refused (a duplicate name, an unknown or revoked
key, a field not valid, no token...); 2 usage error.
`

// keySettings are the flags of create and update.
var keySettings = []string{"name", "models", "rpm", "tpm", "concurrency", "budget", "budget-period", "drop-unsupported"}

func cmdKeys(ctx context.Context, e env, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(e.stderr, keysUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	sub := args[0]
	fs := flag.NewFlagSet("chorus keys "+sub, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() { fmt.Fprint(e.stderr, keysUsage) }
	addr := fs.String("addr", "", "")
	token := fs.String("token", "", "")
	asJSON := fs.Bool("json", false, "")
	name := fs.String("name", "", "")
	models := fs.String("models", "", "")
	rpm := fs.Int("rpm", 0, "")
	tpm := fs.Int("tpm", 0, "")
	conc := fs.Int("concurrency", 0, "")
	budget := fs.Float64("budget", 0, "")
	period := fs.String("budget-period", "", "")
	drop := fs.Bool("drop-unsupported", false, "")
	grace := fs.Duration("grace", 0, "")
	pos, code, ok := parseInterspersed(fs, args[1:])
	if !ok {
		return code
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(e.stderr, "chorus keys %s: "+format+"\n", append([]any{sub}, a...)...)
		return code
	}
	want := map[string]int{"list": 0, "show": 1, "create": 0, "update": 1, "rotate": 1, "revoke": 1}
	n, ok := want[sub]
	if !ok {
		fmt.Fprintf(e.stderr, "chorus keys: unknown subcommand %q\n\n%s", sub, keysUsage)
		return 2
	}
	if len(pos) != n {
		return fail(2, "want %d argument(s), got %d (see chorus keys -h)", n, len(pos))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, s := range keySettings {
		if set[s] && sub != "create" && sub != "update" {
			return fail(2, "--%s is for create and update", s)
		}
	}
	if set["grace"] && sub != "rotate" {
		return fail(2, "--grace is for rotate")
	}
	if sub == "create" && !set["name"] {
		return fail(2, "--name is required")
	}
	c, err := newConsoleClient(e, *addr, *token)
	if err != nil {
		return fail(2, "%v", err)
	}
	defer c.http.CloseIdleConnections()

	// The settings named on the command line, and those only.
	var q console.KeyRequest
	if set["name"] {
		q.Name = name
	}
	if set["models"] {
		ms := []string{}
		for _, m := range strings.Split(*models, ",") {
			if m = strings.TrimSpace(m); m != "" {
				ms = append(ms, m)
			}
		}
		q.Models = &ms
	}
	if set["rpm"] {
		q.RPM = rpm
	}
	if set["tpm"] {
		q.TPM = tpm
	}
	if set["concurrency"] {
		q.Concurrency = conc
	}
	if set["budget"] {
		q.BudgetUSD = budget
	}
	if set["budget-period"] {
		q.BudgetPeriod = period
	}
	if set["drop-unsupported"] {
		q.DropUnsupported = drop
	}

	var kb console.KeyBody
	var raw []byte
	path := "keys"
	if len(pos) == 1 {
		path += "/" + url.PathEscape(pos[0])
	}
	switch sub {
	case "list":
		err = keysList(ctx, e, c, *asJSON)
	case "show":
		err = keysShow(ctx, e, c, path, *asJSON)
	case "create":
		raw, err = c.do(ctx, http.MethodPost, path, q, &kb)
	case "update":
		raw, err = c.do(ctx, http.MethodPatch, path, q, &kb)
	case "rotate":
		var body console.RotateRequest
		if set["grace"] {
			body.Grace = grace.String()
		}
		raw, err = c.do(ctx, http.MethodPost, path+"/rotate", body, &kb)
	case "revoke":
		raw, err = c.do(ctx, http.MethodPost, path+"/revoke", struct{}{}, &kb)
	}
	if err != nil {
		return fail(1, "%v", err)
	}
	if raw == nil { // list and show printed theirs
		return 0
	}
	if *asJSON {
		e.stdout.Write(raw)
		return 0
	}
	k := kb.Key
	switch sub {
	case "create", "rotate":
		verb := map[string]string{"create": "created", "rotate": "rotated"}[sub]
		fmt.Fprintf(e.stderr, "%s %s (%s, fingerprint %s); its key, shown once:\n", verb, oneLine(k.Name), k.ID, k.Fingerprint)
		if k.PreviousValidUntil != nil {
			fmt.Fprintf(e.stderr, "the previous key works until %s\n", k.PreviousValidUntil.UTC().Format(time.RFC3339))
		}
		fmt.Fprintln(e.stdout, kb.Secret)
	case "update":
		fmt.Fprintf(e.stdout, "updated %s (%s): %s\n", oneLine(k.Name), k.ID, keySummary(k))
	case "revoke":
		fmt.Fprintf(e.stdout, "revoked %s (%s, fingerprint %s)\n", oneLine(k.Name), k.ID, k.Fingerprint)
	}
	return 0
}

// keySummary is a key's settings on one line.
func keySummary(k console.KeyView) string {
	ms := "every model"
	if len(k.Models) > 0 {
		ms = strings.Join(k.Models, ",")
	}
	b := "no budget"
	if k.BudgetUSD > 0 {
		b = fmt.Sprintf("budget $%g per %s", k.BudgetUSD, k.BudgetPeriod)
		if k.BudgetPeriod == "total" {
			b = fmt.Sprintf("budget $%g in total", k.BudgetUSD)
		}
	}
	s := fmt.Sprintf("models %s, %d rpm, %d tpm, %d at once, %s", oneLine(ms), k.RPM, k.TPM, k.Concurrency, b)
	if k.DropUnsupported {
		s += ", drops unsupported parameters"
	}
	return s
}

func spendText(k console.KeyView) string {
	s := fmt.Sprintf("$%.4f", k.Spend.SpentUSD)
	if k.BudgetUSD > 0 {
		s += fmt.Sprintf(" of $%g", k.BudgetUSD)
	}
	return s
}

func keysList(ctx context.Context, e env, c *consoleClient, asJSON bool) error {
	var v console.KeysBody
	raw, err := c.do(ctx, http.MethodGet, "keys", nil, &v)
	if err != nil {
		return err
	}
	if asJSON {
		_, err = e.stdout.Write(raw)
		return err
	}
	tw := tabwriter.NewWriter(e.stdout, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tFINGERPRINT\tMODELS\tRPM\tTPM\tCONCURRENCY\tSPENT\tPERIOD\tCALLS\tSTATUS")
	for _, k := range v.Keys {
		ms := "*"
		if len(k.Models) > 0 {
			ms = strings.Join(k.Models, ",")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%d\t%s\n", k.ID, oneLine(k.Name), k.Fingerprint, oneLine(ms), k.RPM, k.TPM, k.Concurrency,
			spendText(k), orDash(k.Spend.Period), k.Spend.Calls, k.Status)
	}
	return tw.Flush()
}

func keysShow(ctx context.Context, e env, c *consoleClient, path string, asJSON bool) error {
	var v console.KeyBody
	raw, err := c.do(ctx, http.MethodGet, path, nil, &v)
	if err != nil {
		return err
	}
	if asJSON {
		_, err = e.stdout.Write(raw)
		return err
	}
	k, w := v.Key, e.stdout
	fmt.Fprintf(w, "key %s (%s): %s, fingerprint %s\n", oneLine(k.Name), k.ID, k.Status, k.Fingerprint)
	fmt.Fprintf(w, "settings: %s\n", keySummary(k))
	fmt.Fprintf(w, "spend: %s (period %s), $%.4f reserved, %d calls", spendText(k), orDash(k.Spend.Period), k.Spend.ReservedUSD, k.Spend.Calls)
	if k.Spend.Resets != nil {
		fmt.Fprintf(w, ", resets %s", k.Spend.Resets.UTC().Format(time.RFC3339))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "created %s, updated %s\n", k.Created.UTC().Format(time.RFC3339), k.Updated.UTC().Format(time.RFC3339))
	if k.PreviousValidUntil != nil {
		fmt.Fprintf(w, "the previous key works until %s\n", k.PreviousValidUntil.UTC().Format(time.RFC3339))
	}
	if k.Revoked != nil {
		fmt.Fprintf(w, "revoked %s\n", k.Revoked.UTC().Format(time.RFC3339))
	}
	if len(v.Ledger) > 0 {
		fmt.Fprintln(w, "\nledger:")
		tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  PERIOD\tSPENT\tCALLS")
		for _, l := range v.Ledger {
			p := l.Period
			if p == "" {
				p = "total"
			}
			fmt.Fprintf(tw, "  %s\t$%.4f\t%d\n", p, l.SpentUSD, l.Calls)
		}
		tw.Flush()
	}
	return nil
}
