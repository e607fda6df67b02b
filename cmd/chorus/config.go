package main

import (
	"fmt"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
	"github.com/chorusrt/chorus/sim"
)

// fileConfig is chorus.yaml:
//
//	aliases:                  # name -> ordered fallback list (or one model)
//	  fast: [openai/gpt-4.1-mini, anthropic/claude-haiku-4-5]
//	  spread:                 # or a routed alias (routes.go)
//	    strategy: weighted    # weighted, least_busy, fastest, cheapest, cache_affinity, fallback
//	    targets: [{model: openai/gpt-4.1-mini, weight: 3}, {model: local/llama, weight: 1}]
//	providers:                # extra OpenAI-compatible endpoints
//	  - id: local
//	    base_url: http://127.0.0.1:8000/v1
//	    key_env: LOCAL_API_KEY   # optional; comma-separated keys are several credentials
//	limits:                   # static limits per credential of a provider
//	  openai: {rpm: 500, tpm: 200000, concurrency: 32}
//	  anthropic: {shared: true}  # its keys share one limit (an organisation's): paced as one budget
//	defaults:                 # models for input lines and chat calls that name none
//	  chat: openai/gpt-4.1-mini
//	  embed: openai/text-embedding-3-small
//	sim:                      # the built-in simulator (CHORUS_SIM_* variables override)
//	  latency: 20ms
//	  tokens_per_second: 200
//	  rpm: 600
//	  tpm: 100000
//	  window: 1m
//	mcp_servers:              # MCP servers for chat --mcp (see mcp.go)
//	  - {name: fs, command: [mcp-server-filesystem, /srv/data], trusted: true}
//	model_patterns:           # bare model names ("gpt-4o-mini") -> a provider; first match wins
//	  - {match: "gpt-*", provider: local}
//	prices:                   # USD per million tokens (see prices.go)
//	  openai/gpt-4.1-mini: {input: 0.4, cached_input: 0.1, output: 1.6, batch_discount: 0.5}
//	cache:                    # the response cache (see cache.go)
//	  {store: sqlite, path: chorus-cache.db, ttl: 24h, max_entries: 100000}
type fileConfig struct {
	path      string
	aliases   []aliasDef
	providers []extraProvider
	limits    map[string]runtime.Limits
	defaults  struct{ chat, embed string }
	sim       sim.Options
	mcp       []mcpServerDef // mcp.go
	prices    llm.Prices     // prices.go
	gateway   gatewayConfig  // serve.go
	patterns  []patternDef
	cache     cacheConfig // cache.go

	requestLog requestLogConfig // request_log: (requestlog.go)
}

// patternDef is one model_patterns entry: bare names matching match are
// served by provider (runtime.WithModelPattern).
type patternDef struct {
	match, provider string
	line            int
}

type aliasDef struct {
	name    string
	targets []string
	line    int
	// route is a routed alias's (routes.go); nil for a fallback list.
	route *runtime.Route
}

type extraProvider struct {
	id, baseURL, keyEnv string
	line                int
}

// configError names the file and line at fault.
type configError struct {
	path string
	line int
	msg  string
}

func (e *configError) Error() string {
	if e.line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.path, e.line, e.msg)
	}
	return e.path + ": " + e.msg
}

var providerIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// loadConfig reads and checks a chorus.yaml.
func loadConfig(path string) (*fileConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	return parseConfig(path, data)
}

func parseConfig(path string, data []byte) (*fileConfig, error) {
	cfg := &fileConfig{path: path, limits: map[string]runtime.Limits{}}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, &configError{path: path, msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	if len(doc.Content) == 0 {
		return cfg, nil // an empty file
	}
	p := &configParser{path: path}
	root := doc.Content[0]
	// later holds the checks that need the whole file (defaults naming an
	// alias, limits naming a provider).
	var later []func() error
	if err := p.mapping(root, "", func(key string, k, v *yaml.Node) error {
		switch key {
		case "aliases":
			return p.aliases(v, cfg, &later)
		case "providers":
			return p.providers(v, cfg)
		case "limits":
			return p.limits(v, cfg, &later)
		case "defaults":
			return p.mapping(v, "defaults", func(key string, k, v *yaml.Node) error {
				var dst *string
				switch key {
				case "chat":
					dst = &cfg.defaults.chat
				case "embed":
					dst = &cfg.defaults.embed
				default:
					return p.errf(k, "defaults.%s: unknown key (known: chat, embed)", key)
				}
				s, err := p.str(v, "defaults."+key)
				if err != nil {
					return err
				}
				*dst = s
				later = append(later, func() error {
					if !strings.Contains(s, "/") && !slices.ContainsFunc(cfg.aliases, func(a aliasDef) bool { return a.name == s }) {
						return p.errf(v, "defaults.%s: %q is neither provider/model nor an alias of this file", key, s)
					}
					return nil
				})
				return nil
			})
		case "sim":
			return p.simOptions(v, cfg)
		case "mcp_servers":
			return p.mcpServers(v, cfg) // mcp.go
		case "prices":
			return p.prices(v, cfg) // prices.go
		case "gateway":
			return p.gateway(v, cfg) // serve.go
		case "model_patterns":
			return p.modelPatterns(v, cfg)
		case "cache":
			return p.cache(v, cfg) // cache.go
		case "request_log":
			return p.requestLog(v, cfg) // requestlog.go
		}
		return p.errf(k, "unknown key %q (known: aliases, providers, limits, defaults, sim, prices, mcp_servers, gateway, model_patterns, cache, request_log)", key)
	}); err != nil {
		return nil, err
	}
	for _, check := range later {
		if err := check(); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// knows reports whether id is a provider Chorus can register: built in,
// the simulator, or one of the file's own.
func (c *fileConfig) knows(id string) bool {
	if _, ok := providers.Builtin(id); ok || id == sim.ProviderID {
		return true
	}
	return slices.ContainsFunc(c.providers, func(p extraProvider) bool { return p.id == id })
}

type configParser struct{ path string }

func (p *configParser) errf(n *yaml.Node, format string, args ...any) error {
	return &configError{path: p.path, line: n.Line, msg: fmt.Sprintf(format, args...)}
}

// mapping calls fn for each key of a mapping node, in file order.
func (p *configParser) mapping(n *yaml.Node, what string, fn func(key string, k, v *yaml.Node) error) error {
	if n.Kind != yaml.MappingNode {
		if what == "" {
			return p.errf(n, "the file must be a mapping of aliases, providers, limits, defaults and sim")
		}
		return p.errf(n, "%s: want a mapping", what)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if seen[k.Value] {
			return p.errf(k, "%s: appears twice", strings.TrimPrefix(what+"."+k.Value, "."))
		}
		seen[k.Value] = true
		if err := fn(k.Value, k, v); err != nil {
			return err
		}
	}
	return nil
}

func (p *configParser) str(n *yaml.Node, what string) (string, error) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" || strings.TrimSpace(n.Value) == "" {
		return "", p.errf(n, "%s: want a non-empty string", what)
	}
	return strings.TrimSpace(n.Value), nil
}

func (p *configParser) nonNegInt(n *yaml.Node, what string) (int, error) {
	v, err := strconv.Atoi(strings.TrimSpace(n.Value))
	if n.Kind != yaml.ScalarNode || err != nil || v < 0 {
		return 0, p.errf(n, "%s: want a non-negative integer, got %q", what, n.Value)
	}
	return v, nil
}

func (p *configParser) boolean(n *yaml.Node, what string) (bool, error) {
	if n.Kind == yaml.ScalarNode && (n.Tag == "!!bool" || n.Tag == "") {
		switch strings.TrimSpace(n.Value) {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
	}
	return false, p.errf(n, "%s: want true or false, got %q", what, n.Value)
}

func (p *configParser) aliases(n *yaml.Node, cfg *fileConfig, later *[]func() error) error {
	return p.mapping(n, "aliases", func(name string, k, v *yaml.Node) error {
		what := "aliases." + name
		if name == "" || strings.Contains(name, "/") {
			return p.errf(k, "%s: an alias name may not contain '/'", what)
		}
		var targets []string
		switch v.Kind {
		case yaml.ScalarNode:
			s, err := p.str(v, what)
			if err != nil {
				return err
			}
			targets = []string{s}
		case yaml.SequenceNode:
			for i, t := range v.Content {
				s, err := p.str(t, fmt.Sprintf("%s[%d]", what, i))
				if err != nil {
					return err
				}
				targets = append(targets, s)
			}
		case yaml.MappingNode:
			return p.routedAlias(name, k, v, cfg, later) // routes.go
		default:
			return p.errf(v, "%s: want a provider/model, a list of them, or {strategy, targets}", what)
		}
		if len(targets) == 0 {
			return p.errf(v, "%s: is empty", what)
		}
		for i, t := range targets {
			if id, m, ok := strings.Cut(t, "/"); !ok || id == "" || m == "" {
				node := v
				if v.Kind == yaml.SequenceNode {
					node = v.Content[i]
				}
				return p.errf(node, "%s: %q is not provider/model", what, t)
			}
		}
		cfg.aliases = append(cfg.aliases, aliasDef{name: name, targets: targets, line: k.Line})
		return nil
	})
}

func (p *configParser) providers(n *yaml.Node, cfg *fileConfig) error {
	if n.Kind != yaml.SequenceNode {
		return p.errf(n, "providers: want a list of {id, base_url, key_env}")
	}
	seen := map[string]bool{}
	for i, item := range n.Content {
		what := fmt.Sprintf("providers[%d]", i)
		ep := extraProvider{line: item.Line}
		err := p.mapping(item, what, func(key string, k, v *yaml.Node) error {
			var err error
			switch key {
			case "id":
				ep.id, err = p.str(v, what+".id")
				if err == nil && !providerIDPattern.MatchString(ep.id) {
					err = p.errf(v, "%s.id: %q must be lower-case letters, digits, '-' or '_'", what, ep.id)
				}
				if err == nil {
					if _, builtin := providers.Builtin(ep.id); builtin || ep.id == sim.ProviderID {
						err = p.errf(v, "%s.id: %q is built in (move a built-in provider with %s_BASE_URL instead)", what, ep.id, strings.ToUpper(ep.id))
					}
				}
			case "base_url":
				ep.baseURL, err = p.str(v, what+".base_url")
				if err == nil && !strings.HasPrefix(ep.baseURL, "http://") && !strings.HasPrefix(ep.baseURL, "https://") {
					err = p.errf(v, "%s.base_url: %q is not an http(s) URL", what, ep.baseURL)
				}
			case "key_env":
				ep.keyEnv, err = p.str(v, what+".key_env")
			case "format":
				var f string
				if f, err = p.str(v, what+".format"); err == nil && f != string(providers.FormatOpenAI) {
					err = p.errf(v, "%s.format: only %q (OpenAI-compatible) endpoints can be added", what, providers.FormatOpenAI)
				}
			default:
				err = p.errf(k, "%s: unknown key %q (known: id, base_url, key_env, format)", what, key)
			}
			return err
		})
		if err != nil {
			return err
		}
		switch {
		case ep.id == "":
			return p.errf(item, "%s: id is missing", what)
		case ep.baseURL == "":
			return p.errf(item, "%s: base_url is missing", what)
		case seen[ep.id]:
			return p.errf(item, "%s: id %q appears twice", what, ep.id)
		}
		seen[ep.id] = true
		cfg.providers = append(cfg.providers, ep)
	}
	return nil
}

func (p *configParser) limits(n *yaml.Node, cfg *fileConfig, later *[]func() error) error {
	return p.mapping(n, "limits", func(id string, k, v *yaml.Node) error {
		var l runtime.Limits
		what := "limits." + id
		*later = append(*later, func() error {
			if !cfg.knows(id) {
				return p.errf(k, "%s: no provider %q (built in: %s, %s; or one under providers:)", what, id, sim.ProviderID, strings.Join(providers.IDs(), ", "))
			}
			return nil
		})
		err := p.mapping(v, what, func(key string, k, v *yaml.Node) error {
			var err error
			switch key {
			case "rpm":
				l.RequestsPerMinute, err = p.nonNegInt(v, what+".rpm")
			case "tpm":
				l.TokensPerMinute, err = p.nonNegInt(v, what+".tpm")
			case "concurrency":
				l.MaxConcurrency, err = p.nonNegInt(v, what+".concurrency")
			case "shared":
				l.Shared, err = p.boolean(v, what+".shared")
			default:
				err = p.errf(k, "%s: unknown key %q (known: rpm, tpm, concurrency, shared)", what, key)
			}
			return err
		})
		if err != nil {
			return err
		}
		cfg.limits[id] = l
		return nil
	})
}

func (p *configParser) simOptions(n *yaml.Node, cfg *fileConfig) error {
	return p.mapping(n, "sim", func(key string, k, v *yaml.Node) error {
		what := "sim." + key
		dur := func(dst *time.Duration) error {
			d, err := time.ParseDuration(strings.TrimSpace(v.Value))
			if v.Kind != yaml.ScalarNode || err != nil || d < 0 {
				return p.errf(v, "%s: want a duration like 20ms, got %q", what, v.Value)
			}
			*dst = d
			return nil
		}
		var err error
		switch key {
		case "latency":
			err = dur(&cfg.sim.Latency)
		case "window":
			err = dur(&cfg.sim.Window)
		case "rpm":
			cfg.sim.RPM, err = p.nonNegInt(v, what)
		case "tpm":
			cfg.sim.TPM, err = p.nonNegInt(v, what)
		case "tokens_per_second":
			f, perr := strconv.ParseFloat(strings.TrimSpace(v.Value), 64)
			if v.Kind != yaml.ScalarNode || perr != nil || f < 0 || f != f || f > 1e9 {
				return p.errf(v, "%s: want a non-negative number, got %q", what, v.Value)
			}
			cfg.sim.TokensPerSecond = f
		default:
			err = p.errf(k, "%s: unknown key (known: latency, tokens_per_second, rpm, tpm, window)", what)
		}
		return err
	})
}

// modelPatterns reads model_patterns: a list of {match, provider}, match a
// glob (path.Match) over bare model names.
func (p *configParser) modelPatterns(n *yaml.Node, cfg *fileConfig) error {
	if n.Kind != yaml.SequenceNode {
		return p.errf(n, "model_patterns: want a list of {match, provider}")
	}
	for i, item := range n.Content {
		what := fmt.Sprintf("model_patterns[%d]", i)
		d := patternDef{line: item.Line}
		err := p.mapping(item, what, func(key string, k, v *yaml.Node) error {
			var err error
			switch key {
			case "match":
				if d.match, err = p.str(v, what+".match"); err == nil {
					if _, perr := path.Match(d.match, ""); perr != nil || d.match == "" {
						err = p.errf(v, "%s.match: %q is not a glob pattern", what, d.match)
					}
				}
			case "provider":
				d.provider, err = p.str(v, what+".provider")
			default:
				err = p.errf(k, "%s: unknown key %q (known: match, provider)", what, key)
			}
			return err
		})
		if err != nil {
			return err
		}
		if d.match == "" || d.provider == "" {
			return p.errf(item, "%s: give both match and provider", what)
		}
		cfg.patterns = append(cfg.patterns, d)
	}
	return nil
}
