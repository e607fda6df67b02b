package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/chorusrt/chorus/cache"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
	"github.com/chorusrt/chorus/sim"
)

// defaultModels are the models used for a provider when an input line or a
// chat call names none and that provider is the first one with a key.
// Providers missing here (or with an empty entry) have no default: name a
// model with --model or defaults: in chorus.yaml.
var defaultModels = []struct{ provider, chat, embed string }{
	{"openai", "gpt-4.1-mini", "text-embedding-3-small"},
	{"anthropic", "claude-haiku-4-5", ""},
	{"gemini", "gemini-2.5-flash", "gemini-embedding-001"},
	{"deepseek", "deepseek-chat", ""},
}

// The simulator's default models, used when no provider key is set.
const (
	simChatModel  = sim.ProviderID + "/echo"
	simEmbedModel = sim.ProviderID + "/embed"
)

// stack is the running simulator and runtime of one command.
type stack struct {
	sim *sim.Simulator
	rt  *runtime.Runtime
	// node is the cluster member whose runtime rt is (chorus serve
	// --cluster), nil otherwise: closing it closes rt.
	node     interface{ Close(context.Context) error }
	cfg      *fileConfig
	keyed    []string // provider ids with an API key, in registration order
	attempts *attemptStats
	cache    *cache.Cache // chorus.yaml's cache:, or nil
}

// openStack starts the simulator (always registered as provider "sim"),
// registers every credential of the environment and of the config file,
// and boots the runtime.
func openStack(e env, configPath string, extra ...runtime.Option) (*stack, error) {
	st, opts, err := buildStack(e, configPath)
	if err != nil {
		return nil, err
	}
	if st.cache, err = openCache(st.cfg); err != nil { // cache.go
		st.sim.Close()
		return nil, err
	}
	if st.cache != nil {
		opts = append(opts, cacheOption(st.cache))
	}
	rt, err := runtime.New(append(opts, extra...)...)
	if err != nil {
		st.sim.Close()
		if st.cache != nil {
			st.cache.Close()
		}
		if configPath != "" {
			return nil, fmt.Errorf("%s: %w", configPath, err)
		}
		return nil, err
	}
	st.rt = rt
	return st, nil
}

// buildStack starts the simulator and returns the runtime options of the
// environment and the config file, without booting a runtime (a cluster
// node boots its own from them).
func buildStack(e env, configPath string) (*stack, []runtime.Option, error) {
	cfg := &fileConfig{path: "chorus.yaml"}
	if configPath != "" {
		var err error
		if cfg, err = loadConfig(configPath); err != nil {
			return nil, nil, err
		}
	}
	simOpts, err := sim.FromEnvFunc(cfg.sim, e.getenv)
	if err != nil {
		return nil, nil, err
	}
	s, err := sim.Start(simOpts)
	if err != nil {
		return nil, nil, fmt.Errorf("starting the simulator: %w", err)
	}
	st := &stack{sim: s, cfg: cfg, attempts: &attemptStats{m: map[string]*attemptCount{}}}
	opts := []runtime.Option{
		runtime.WithProvider(s.Config()),
		runtime.WithClientOptions(providers.WithAttemptObserver(st.attempts.observe)),
	}
	var configs []providers.Config
	configs = append(configs, providers.FromEnvFunc(e.getenv)...)
	for _, ep := range cfg.providers {
		var keys []string
		if ep.keyEnv != "" {
			for _, k := range strings.Split(e.getenv(ep.keyEnv), ",") {
				if k = strings.TrimSpace(k); k != "" && !slices.Contains(keys, k) {
					keys = append(keys, k)
				}
			}
			if len(keys) == 0 {
				fmt.Fprintf(e.stderr, "chorus: %s:%d: provider %s: $%s is empty; the provider is not registered\n", cfg.path, ep.line, ep.id, ep.keyEnv)
				continue
			}
		}
		if len(keys) == 0 {
			configs = append(configs, providers.Compatible(ep.id, ep.baseURL, ""))
		}
		for _, k := range keys {
			configs = append(configs, providers.Compatible(ep.id, ep.baseURL, providers.Secret(k)))
		}
	}
	for _, c := range configs {
		opts = append(opts, runtime.WithProvider(c))
		if c.APIKey != "" && !slices.Contains(st.keyed, c.ID) {
			st.keyed = append(st.keyed, c.ID)
		}
	}
	registered := []string{sim.ProviderID}
	for _, c := range configs {
		registered = append(registered, c.ID)
	}
	for _, a := range cfg.aliases {
		for _, t := range a.targets {
			if id, _, _ := strings.Cut(t, "/"); !slices.Contains(registered, id) {
				s.Close()
				return nil, nil, &configError{path: cfg.path, line: a.line, msg: fmt.Sprintf("aliases.%s: provider %q of %s is not registered (set its key variable, or add it under providers:)", a.name, id, t)}
			}
		}
		if a.route != nil {
			opts = append(opts, runtime.WithRoutedAlias(a.name, *a.route))
			if len(cfg.prices) > 0 { // cheapest weighs them
				opts = append(opts, runtime.WithPrices(cfg.prices))
			}
			continue
		}
		opts = append(opts, runtime.WithAlias(a.name, a.targets...))
	}
	for id, l := range cfg.limits {
		opts = append(opts, runtime.WithLimits(id, l))
	}
	for _, mp := range cfg.patterns {
		if !slices.Contains(registered, mp.provider) {
			s.Close()
			return nil, nil, &configError{path: cfg.path, line: mp.line, msg: fmt.Sprintf("model_patterns: provider %q of %q is not registered (set its key variable, or add it under providers:)", mp.provider, mp.match)}
		}
		opts = append(opts, runtime.WithModelPattern(mp.match, mp.provider))
	}
	return st, opts, nil
}

// checkModel reports whether name can be resolved: an alias, or
// provider/model with a registered provider.
func (s *stack) checkModel(name string) error {
	if _, ok := s.rt.Aliases()[name]; ok {
		return nil
	}
	id, m, ok := strings.Cut(name, "/")
	if !ok || id == "" || m == "" {
		return fmt.Errorf("%q is neither provider/model nor an alias", name)
	}
	if !slices.Contains(s.rt.Providers(), id) {
		return fmt.Errorf("provider %q is not registered (registered: %s; set its key variable or add it to chorus.yaml)", id, strings.Join(s.rt.Providers(), ", "))
	}
	return nil
}

// close stops the runtime (letting calls in flight end for up to grace)
// and the simulator.
func (s *stack) close(grace time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if s.node != nil {
		_ = s.node.Close(ctx)
	} else {
		_ = s.rt.Close(ctx)
	}
	if s.cache != nil {
		_ = s.cache.Close()
	}
	s.sim.Close()
}

// defaultModel is the model for calls that name none (embed: embeddings),
// and where it comes from. The rule: defaults: in chorus.yaml if set;
// else, when no provider key is found, the simulator (sim/echo,
// sim/embed); else the default model of the first provider with a key
// that has one. An error says which flag to use.
func (s *stack) defaultModel(embed bool) (model, why string, err error) {
	flag, kind := "--model", "chat"
	if embed {
		flag, kind = "--embed-model", "embedding"
	}
	if m := s.cfg.defaults.chat; !embed && m != "" {
		return m, "defaults.chat in " + s.cfg.path, nil
	}
	if m := s.cfg.defaults.embed; embed && m != "" {
		return m, "defaults.embed in " + s.cfg.path, nil
	}
	if len(s.keyed) == 0 {
		if embed {
			return simEmbedModel, "no provider key is set", nil
		}
		return simChatModel, "no provider key is set", nil
	}
	for _, id := range s.keyed {
		for _, d := range defaultModels {
			if d.provider != id {
				continue
			}
			m := d.chat
			if embed {
				m = d.embed
			}
			if m != "" {
				return id + "/" + m, "first provider with a key", nil
			}
		}
	}
	return "", "", fmt.Errorf("no default %s model for the providers with keys (%s): pass %s provider/model or set defaults in chorus.yaml",
		kind, strings.Join(s.keyed, ", "), flag)
}

// attemptStats counts HTTP attempts and 429s per provider/model, from
// every credential's attempt observer.
type attemptStats struct {
	mu sync.Mutex
	m  map[string]*attemptCount
}

type attemptCount struct {
	attempts, rateLimited int64
}

func (a *attemptStats) observe(ev providers.AttemptEvent) {
	if ev.Op == "list_models" {
		return
	}
	key := ev.Provider + "/" + ev.Model
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.m[key]
	if c == nil {
		c = &attemptCount{}
		a.m[key] = c
	}
	c.attempts++
	if ev.Status == 429 || ev.Status == 529 {
		c.rateLimited++
	}
}

// of sums the counts of the given provider/model names.
func (a *attemptStats) of(names ...string) attemptCount {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out attemptCount
	for _, n := range names {
		if c := a.m[n]; c != nil {
			out.attempts += c.attempts
			out.rateLimited += c.rateLimited
		}
	}
	return out
}
