package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/chorusrt/chorus/batch"
	"github.com/chorusrt/chorus/cluster"
	"github.com/chorusrt/chorus/console"
	"github.com/chorusrt/chorus/gateway"
	"github.com/chorusrt/chorus/keystore"
	"github.com/chorusrt/chorus/runtime"
)

const serveUsage = `usage: chorus serve [flags]

Serves the OpenAI, Anthropic and Gemini APIs (/v1/chat/completions,
/v1/responses, /v1/embeddings, /v1/models, /v1/files, /v1/batches,
/v1/messages, /v1beta/models/...) over the runtime: every registered provider, the simulator ("sim/<model>") and the
aliases of the config file, with Chorus's pacing and fallbacks. Prints
"listening http://HOST:PORT" once it accepts connections.

Clients authenticate with the gateway keys of the config file (gateway:
keys:, each with its models, rpm, tpm, concurrency and budget_usd), sent
the way their SDK sends its key. With no gateway key the gateway serves
loopback only and refuses any other address. Provider keys are never
taken from clients. gateway: fan_out: names fan-out aliases, answered on
/v1/chat/completions with a choice per model.

      --addr HOST:PORT   listen address (default 127.0.0.1:8080)
      --config FILE      chorus.yaml (aliases, providers, limits, gateway keys)
      --files-dir DIR    where /v1/files and /v1/batches keep their files and
                         state (default: a temporary directory, removed on
                         exit); a restart on the same DIR resumes its batches
      --native-batches   run /v1/batches lines on the providers' own batch
                         APIs (openai, anthropic, gemini keys of the
                         environment) where they have one; otherwise live
      --token T          the console's operator token (default
                         $CHORUS_CONSOLE_TOKEN, else one made and printed)
      --journal FILE     the sessions' SQLite journal (default: one in a
                         temporary directory, removed on exit)
      --session-model M  the sessions' model (default: the default model)
      --metrics          serve Prometheus metrics at /metrics (a gateway key
                         is asked for when keys are configured)
      --request-log P    the request log: a SQLite file, a postgres:// DSN or
                         off (default: chorus.yaml's request_log:, else
                         requests.db in --files-dir, else a temporary file)
      --cluster NAME     join the Proto.Actor cluster NAME (with --bind and
                         --peers, as chorus node): provider keys' budgets
                         are shared with its members
      --bind HOST:PORT   this member's actor address (--cluster)
      --peers A,B,...    the members' actor addresses (--cluster)
      --lease-ttl D      the cluster's lease TTL (default 3s)
      --store P          the gateway keys, their limits, the spend ledger,
                         files and batches (then --files-dir is a cache of
                         the store's): a SQLite file, a postgres:// DSN (every
                         replica of a fleet on one), or memory (default:
                         gateway.store: of the config, else gateway.db in
                         --files-dir, else a temporary file); used once a
                         key is configured or P is given. Keys of the
                         config seed it; then it is the truth, and keys
                         are managed with chorus keys or the console.

The console (pages under /console/, its API under /api/console/) is served
on the same port: credentials, batches, sessions and their approvals.
`

// gatewayConfig is the gateway: section of chorus.yaml:
//
//	gateway:
//	  keys:
//	    - name: team-a
//	      sha256: 9f86d0...     # SHA-256 of the key (hex), or:
//	      key_env: TEAM_A_KEY   # the key itself, read from the environment
//	      models: [openai/*, fast]   # default: every model
//	      rpm: 60
//	      tpm: 100000
//	      concurrency: 4
//	      budget_usd: 50        # spent from the prices: section's costs
//	      budget_period: month  # total (default), day or month (UTC)
//	  fan_out:                  # one request to each model, a choice per model
//	    compare: [openai/gpt-4.1-mini, anthropic/claude-haiku-4-5]
//	  default_providers:        # the provider of a bare model name per client format
//	    openai: local           # (default: the format's own provider; "" serves none)
//	  drop_unsupported: true    # send without the fields an upstream cannot honour (default: 400)
//	  store: postgres://...     # keys and spend ledger: a SQLite file or a DSN (see --store)
type gatewayConfig struct {
	store     string // store: a SQLite path or a postgres:// DSN
	keys      []gatewayKeyDef
	fanOut    map[string][]string // fan_out: name -> models
	providers map[string]string   // default_providers: format -> provider
	drop      bool                // drop_unsupported
}

type gatewayKeyDef struct {
	key    gateway.Key
	keyEnv string
	line   int
}

func (p *configParser) gateway(n *yaml.Node, cfg *fileConfig) error {
	return p.mapping(n, "gateway", func(key string, k, v *yaml.Node) error {
		switch key {
		case "fan_out":
			return p.fanOut(v, cfg)
		case "default_providers":
			cfg.gateway.providers = map[string]string{}
			return p.mapping(v, "gateway.default_providers", func(format string, k, v *yaml.Node) error {
				switch format {
				case "openai", "anthropic", "gemini":
				default:
					return p.errf(k, "gateway.default_providers: unknown format %q (known: openai, anthropic, gemini)", format)
				}
				var id string
				var err error
				if v.Kind != yaml.ScalarNode || v.Value != "" { // "" serves no bare name
					id, err = p.str(v, "gateway.default_providers."+format)
				}
				if err == nil && id != "" && !cfg.knows(id) {
					err = p.errf(v, "gateway.default_providers.%s: provider %q is unknown (built in, sim, or one under providers:)", format, id)
				}
				cfg.gateway.providers[format] = id
				return err
			})
		case "drop_unsupported":
			b, err := p.boolean(v, "gateway.drop_unsupported")
			cfg.gateway.drop = b
			return err
		case "store":
			var err error
			cfg.gateway.store, err = p.str(v, "gateway.store")
			return err
		case "keys":
		default:
			return p.errf(k, "gateway: unknown key %q (known: keys, fan_out, default_providers, drop_unsupported, store)", key)
		}
		if v.Kind != yaml.SequenceNode {
			return p.errf(v, "gateway.keys: want a list of {name, sha256 or key_env, models, rpm, tpm, concurrency, budget_usd}")
		}
		names := map[string]bool{}
		for i, item := range v.Content {
			what := fmt.Sprintf("gateway.keys[%d]", i)
			d := gatewayKeyDef{line: item.Line}
			hasHash := false
			err := p.mapping(item, what, func(key string, k, v *yaml.Node) error {
				var err error
				switch key {
				case "name":
					d.key.Name, err = p.str(v, what+".name")
				case "sha256":
					var s string
					if s, err = p.str(v, what+".sha256"); err == nil {
						if d.key.SHA256, err = gateway.ParseKeyHash(s); err != nil {
							err = p.errf(v, "%s.sha256: want 64 hex digits", what)
						}
						hasHash = true
					}
				case "key_env":
					d.keyEnv, err = p.str(v, what+".key_env")
				case "models":
					if v.Kind != yaml.SequenceNode {
						return p.errf(v, "%s.models: want a list of models", what)
					}
					for j, m := range v.Content {
						s, err := p.str(m, fmt.Sprintf("%s.models[%d]", what, j))
						if err != nil {
							return err
						}
						d.key.Models = append(d.key.Models, s)
					}
				case "rpm":
					d.key.RPM, err = p.nonNegInt(v, what+".rpm")
				case "tpm":
					d.key.TPM, err = p.nonNegInt(v, what+".tpm")
				case "concurrency":
					d.key.Concurrency, err = p.nonNegInt(v, what+".concurrency")
				case "budget_usd":
					f, perr := strconv.ParseFloat(strings.TrimSpace(v.Value), 64)
					if v.Kind != yaml.ScalarNode || perr != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
						return p.errf(v, "%s.budget_usd: want an amount of US dollars (zero or more), got %q", what, v.Value)
					}
					d.key.BudgetUSD = f
				case "budget_period":
					var s string
					if s, err = p.str(v, what+".budget_period"); err == nil {
						if d.key.BudgetPeriod, err = keystore.ParsePeriod(s); err != nil {
							err = p.errf(v, "%s.budget_period: want total, day or month, got %q", what, s)
						}
					}
				case "drop_unsupported":
					d.key.DropUnsupported, err = p.boolean(v, what+".drop_unsupported")
				default:
					err = p.errf(k, "%s: unknown key %q (known: name, sha256, key_env, models, rpm, tpm, concurrency, budget_usd, budget_period, drop_unsupported)", what, key)
				}
				return err
			})
			if err != nil {
				return err
			}
			switch {
			case d.key.Name == "":
				return p.errf(item, "%s: name is missing", what)
			case names[d.key.Name]:
				return p.errf(item, "%s: name %q appears twice", what, d.key.Name)
			case hasHash == (d.keyEnv != ""):
				return p.errf(item, "%s: give exactly one of sha256 and key_env", what)
			}
			names[d.key.Name] = true
			cfg.gateway.keys = append(cfg.gateway.keys, d)
		}
		return nil
	})
}

// fanOut reads gateway.fan_out: fan-out aliases, each a name and its
// models (see gateway.Options.FanOut).
func (p *configParser) fanOut(n *yaml.Node, cfg *fileConfig) error {
	cfg.gateway.fanOut = map[string][]string{}
	return p.mapping(n, "gateway.fan_out", func(name string, k, v *yaml.Node) error {
		what := "gateway.fan_out." + name
		if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
			return p.errf(v, "%s: want a list of models", what)
		}
		for _, a := range cfg.aliases {
			if a.name == name {
				return p.errf(k, "%s: %q is an alias of aliases: too", what, name)
			}
		}
		for j, m := range v.Content {
			s, err := p.str(m, fmt.Sprintf("%s[%d]", what, j))
			if err != nil {
				return err
			}
			cfg.gateway.fanOut[name] = append(cfg.gateway.fanOut[name], s)
		}
		return nil
	})
}

// gatewayKeys resolves the configured keys; a key_env that is empty is an
// error (a key that silently vanished would open the gateway).
func gatewayKeys(e env, cfg *fileConfig) ([]gateway.Key, error) {
	var out []gateway.Key
	for _, d := range cfg.gateway.keys {
		k := d.key
		if k.BudgetUSD > 0 && len(cfg.prices) == 0 {
			// Without prices no answer costs anything: the budget would never be spent.
			return nil, &configError{path: cfg.path, line: d.line, msg: fmt.Sprintf("gateway key %q: budget_usd needs prices: (USD per million tokens of each model it may call)", k.Name)}
		}
		if d.keyEnv != "" {
			v := strings.TrimSpace(e.getenv(d.keyEnv))
			if v == "" {
				return nil, &configError{path: cfg.path, line: d.line, msg: fmt.Sprintf("gateway key %q: $%s is empty", k.Name, d.keyEnv)}
			}
			k.SHA256 = gateway.HashKey(v)
		}
		out = append(out, k)
	}
	return out, nil
}

// loopbackAddr reports whether addr binds loopback only.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func cmdServe(ctx context.Context, e env, args []string) int {
	fs := flag.NewFlagSet("chorus serve", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() { fmt.Fprint(e.stderr, serveUsage) }
	addr := fs.String("addr", "127.0.0.1:8080", "")
	configPath := fs.String("config", "", "")
	filesDir := fs.String("files-dir", "", "")
	nativeBatches := fs.Bool("native-batches", false, "")
	token := fs.String("token", "", "")
	journalPath := fs.String("journal", "", "")
	sessionModel := fs.String("session-model", "", "")
	metrics := fs.Bool("metrics", false, "")
	requestLogFlag := fs.String("request-log", "", "")
	storeFlag := fs.String("store", "", "")
	clusterName := fs.String("cluster", "", "")
	bind := fs.String("bind", "", "")
	peers := fs.String("peers", "", "")
	leaseTTL := fs.Duration("lease-ttl", 3*time.Second, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(e.stderr, "chorus serve: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	cfg := &fileConfig{path: "chorus.yaml"}
	if *configPath != "" {
		var err error
		if cfg, err = loadConfig(*configPath); err != nil {
			fmt.Fprintf(e.stderr, "chorus serve: %v\n", err)
			return 2
		}
	}
	keys, err := gatewayKeys(e, cfg)
	if err != nil {
		fmt.Fprintf(e.stderr, "chorus serve: %v\n", err)
		return 2
	}
	keyStore, storeWhere, closeStore, err := openKeyStore(ctx, *storeFlag, *filesDir, cfg.gateway.store, len(keys) > 0) // gatewaystore.go
	if err != nil {
		fmt.Fprintf(e.stderr, "chorus serve: %v\n", err)
		return 2
	}
	defer closeStore()
	if len(keys) == 0 && keyStore == nil && !loopbackAddr(*addr) {
		fmt.Fprintf(e.stderr, "chorus serve: --addr %s is not a loopback address and no gateway key is configured: anyone who can reach it would spend your provider keys (add gateway: keys: to the config, or listen on 127.0.0.1)\n", *addr)
		return 2
	}
	withMetrics := func(h http.Handler) http.Handler { return h }
	if *metrics { // metrics.go; before the runtime makes its instruments
		wrap, stop, err := serveMetricsOn(ctx, e, keys)
		if err != nil {
			fmt.Fprintf(e.stderr, "chorus serve: %v\n", err)
			return 2
		}
		defer stop()
		withMetrics = wrap
	}
	var extra []runtime.Option
	if len(cfg.prices) > 0 { // x-chorus-cost-usd
		extra = append(extra, runtime.WithPrices(cfg.prices))
	}
	var st *stack
	var node *cluster.Node
	if *clusterName != "" { // node.go: the runtime is a cluster member's
		if *bind == "" || *peers == "" {
			fmt.Fprintln(e.stderr, "chorus serve: --cluster needs --bind and --peers")
			return 2
		}
		st, node, err = openClusterStack(ctx, e, *configPath, cluster.Config{Name: *clusterName, Bind: *bind, Peers: splitList(*peers), LeaseTTL: *leaseTTL}, extra...)
		if err == nil {
			fmt.Fprintf(e.stderr, "chorus serve: member of %q at %s (peers %s): provider keys' budgets are the cluster's\n", *clusterName, node.Address(), *peers)
		}
	} else {
		st, err = openStack(e, *configPath, extra...)
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "chorus serve: %v\n", err)
		return 2
	}
	defer st.close(5 * time.Second)
	// The gateway's batch jobs show on the console's Batches page.
	batches := batch.NewRegistry(20)
	gopts := gateway.Options{Keys: keys, Logger: slog.New(slog.NewTextHandler(e.stderr, nil)), FilesDir: *filesDir, Batches: batches, FanOut: cfg.gateway.fanOut,
		DefaultProviders: cfg.gateway.providers, DropUnsupported: cfg.gateway.drop, CacheShareAcrossKeys: cfg.cache.share, KeyStore: keyStore,
		Console: console.PagePrefix} // a browser at / lands on the console
	if *nativeBatches {
		gopts.BatchNative = &batch.Native{Clients: nativeClients(e)}
	}
	rlog, closeLog, err := serveRequestLog(ctx, e, *requestLogFlag, *filesDir, cfg, &gopts) // requestlog.go
	if err != nil {
		fmt.Fprintf(e.stderr, "chorus serve: %v\n", err)
		return 2
	}
	defer closeLog()
	h, err := gateway.New(st.rt, gopts)
	if err != nil {
		fmt.Fprintf(e.stderr, "chorus serve: %v\n", err)
		return 2
	}
	defer func() {
		// Running batches stop; a restart on the same --files-dir resumes them.
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = h.Close(cctx)
	}()
	// The console beside the gateway, with its sessions (consolecmd.go).
	mux, announce, closeConsole, err := serveConsoleMux(e, st, node, h, batches, rlog, keyStore, *addr, *journalPath, *sessionModel, *token)
	if err != nil {
		fmt.Fprintf(e.stderr, "chorus serve: %v\n", err)
		return 2
	}
	defer closeConsole()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(e.stderr, "chorus serve: --addr: %v\n", err)
		return 2
	}
	srv := &http.Server{Handler: withMetrics(mux), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	switch {
	case keyStore != nil:
		fmt.Fprintf(e.stderr, "chorus serve: gateway keys and spend ledger in %s (%d key(s) configured)\n", storeWhere, len(keys))
	case len(keys) == 0:
		fmt.Fprintln(e.stderr, "chorus serve: no gateway key configured: serving loopback only, without authentication")
	default:
		fmt.Fprintf(e.stderr, "chorus serve: %d gateway key(s), limits and spend in memory\n", len(keys))
	}
	fmt.Fprintf(e.stdout, "listening http://%s\n", ln.Addr())
	announce("http://" + ln.Addr().String())
	select {
	case <-ctx.Done():
	case err := <-served:
		fmt.Fprintf(e.stderr, "chorus serve: %v\n", err)
		return 1
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	<-served
	return 0
}
