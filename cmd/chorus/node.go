package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/chorusrt/chorus/cluster"
	"github.com/chorusrt/chorus/console"
	"github.com/chorusrt/chorus/runtime"
	"github.com/chorusrt/chorus/session"
	"github.com/chorusrt/chorus/store"
)

const nodeUsage = `usage: chorus node --cluster NAME --bind HOST:PORT --peers A,B,... [flags]

Runs one member of a Chorus cluster until interrupted. Members share the
budgets of the provider keys they hold (one budget owner per key in the
cluster), run the model calls that clients spread over them (chorus batch
--cluster), and, with --journal, host durable sessions whose journal is
PostgreSQL.

  --cluster NAME      the cluster's name (members of other names never talk)
  --bind HOST:PORT    this member's actor address; PORT+1 serves membership
  --peers LIST        actor addresses of the members, comma-separated (this
                      member's own may be included): the static member list
  --journal DSN       host sessions, journaled in this PostgreSQL database
  --model M           the sessions' model (default: as chorus batch picks it)
  --lease-ttl D       how long a dead member's sessions wait before moving
                      (default 3s)
  --config FILE       chorus.yaml: aliases, providers, limits, defaults, sim
  --metrics-addr H:P  serve Prometheus metrics at http://H:P/metrics
  --console-addr H:P  serve the console at http://H:P/console/ (credentials,
                      cluster, and with --journal the sessions and approvals)
  --token T           the console's operator token (default
                      $CHORUS_CONSOLE_TOKEN, else one made and printed)

Every member must hold the same provider keys (environment or --config).
Exit status: 0 after a clean leave on SIGINT/SIGTERM, 2 usage or setup error.
`

type nodeOpts struct {
	name, bind, peers, journal, model, config string
	metricsAddr, consoleAddr, token           string
	leaseTTL                                  time.Duration
}

func cmdNode(ctx context.Context, e env, args []string) int {
	o := &nodeOpts{}
	fs := flag.NewFlagSet("chorus node", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() { fmt.Fprint(e.stderr, nodeUsage) }
	fs.StringVar(&o.name, "cluster", "", "")
	fs.StringVar(&o.bind, "bind", "", "")
	fs.StringVar(&o.peers, "peers", "", "")
	fs.StringVar(&o.journal, "journal", "", "")
	fs.StringVar(&o.model, "model", "", "")
	fs.StringVar(&o.config, "config", "", "")
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", "")
	fs.StringVar(&o.consoleAddr, "console-addr", "", "")
	fs.StringVar(&o.token, "token", "", "")
	fs.DurationVar(&o.leaseTTL, "lease-ttl", 3*time.Second, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	fail := func(format string, args ...any) int {
		fmt.Fprintf(e.stderr, "chorus node: "+format+"\n", args...)
		return 2
	}
	if fs.NArg() > 0 {
		return fail("unexpected argument %q", fs.Arg(0))
	}
	if o.name == "" || o.bind == "" || o.peers == "" {
		return fail("--cluster, --bind and --peers are required")
	}
	if o.metricsAddr != "" { // metrics.go; before the runtime makes its instruments
		stop, err := serveMetrics(ctx, e, "chorus node", o.metricsAddr)
		if err != nil {
			return fail("%v", err)
		}
		defer stop()
	}
	st, ropts, err := buildStack(e, o.config)
	if err != nil {
		return fail("%v", err)
	}
	defer st.sim.Close()
	cfg := cluster.Config{Name: o.name, Bind: o.bind, Peers: splitList(o.peers), Runtime: ropts, LeaseTTL: o.leaseTTL}
	var journal store.Journal
	if o.journal != "" {
		j, err := store.OpenPostgres(ctx, o.journal)
		if err != nil {
			return fail("--journal: %v", err)
		}
		journal = j
		defer j.Close()
		model := o.model
		if model == "" {
			if model, _, err = st.defaultModel(false); err != nil {
				return fail("%v", err)
			}
		}
		cfg.Sessions = &session.Options{Journal: j, ModelName: model}
	}
	n, err := cluster.Join(ctx, cfg)
	if err != nil {
		return fail("%v", err)
	}
	fmt.Fprintf(e.stdout, "chorus node: member of %q at %s (peers %s)\n", o.name, n.Address(), o.peers)
	if o.consoleAddr != "" { // consolecmd.go
		token, made := consoleToken(e, o.token)
		copt := console.Options{Runtime: n.Runtime(), Cluster: n, Token: token, BudgetOwners: budgetOwners(n)}
		if journal != nil {
			copt.ClusterSessions, copt.Journal = n.Sessions(), journal
		}
		stop, err := serveConsole(e, "chorus node", o.consoleAddr, copt, made)
		if err != nil {
			_ = n.Close(context.Background())
			return fail("%v", err)
		}
		defer stop()
	}
	<-ctx.Done()
	cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.Close(cctx); err != nil {
		fmt.Fprintf(e.stderr, "chorus node: leaving: %v\n", err)
		return 1
	}
	fmt.Fprintf(e.stdout, "chorus node: left %q\n", o.name)
	return 0
}

// splitList splits a comma-separated list, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// freeBind picks a loopback actor address for a client that names none.
func freeBind() (string, error) {
	addrs, err := cluster.LocalAddrs(1)
	if err != nil {
		return "", err
	}
	return addrs[0], nil
}

// openClusterStack is openStack for a process that is a member of a
// cluster (chorus serve --cluster): the runtime is the node's, built from
// the same options, so its provider keys' budgets are the cluster's.
func openClusterStack(ctx context.Context, e env, configPath string, cfg cluster.Config, extra ...runtime.Option) (*stack, *cluster.Node, error) {
	st, opts, err := buildStack(e, configPath)
	if err != nil {
		return nil, nil, err
	}
	if st.cache, err = openCache(st.cfg); err != nil { // cache.go
		st.sim.Close()
		return nil, nil, err
	}
	if st.cache != nil {
		opts = append(opts, cacheOption(st.cache))
	}
	cfg.Runtime = append(opts, extra...)
	n, err := cluster.Join(ctx, cfg)
	if err != nil {
		st.sim.Close()
		if st.cache != nil {
			st.cache.Close()
		}
		return nil, nil, err
	}
	st.rt, st.node = n.Runtime(), n
	return st, n, nil
}

// budgetOwners adapts a node's budget owners for the console.
func budgetOwners(n *cluster.Node) func() []console.BudgetOwner {
	return func() []console.BudgetOwner {
		var out []console.BudgetOwner
		for _, o := range n.BudgetOwners() {
			out = append(out, console.BudgetOwner{Provider: o.Provider, Fingerprint: o.KeyID, Member: o.Member})
		}
		return out
	}
}
