package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/chorusrt/chorus/runtime"
)

// routedAlias reads an aliases: entry in its mapping form, a routed alias
// (runtime.WithRoutedAlias):
//
//	aliases:
//	  spread:
//	    strategy: weighted           # fallback, weighted, least_busy, fastest, cheapest, cache_affinity
//	    targets:
//	      - {model: openai/gpt-4.1-mini, weight: 3}
//	      - local/llama-3.3-70b      # weight 1
//	    otherwise: least_busy        # cache_affinity's strategy for short prompts
//	    min_prefix_tokens: 1024      # cache_affinity's shortest prefix kept on one target
//	    eject: {threshold: 0.5, min_calls: 10, window: 30s, duration: 10s}
//
// The plain list form stays an ordered fallback list.
func (p *configParser) routedAlias(name string, k, v *yaml.Node, cfg *fileConfig, later *[]func() error) error {
	what := "aliases." + name
	var r runtime.Route
	var stratNode *yaml.Node
	var targetNodes []*yaml.Node
	err := p.mapping(v, what, func(key string, kk, vv *yaml.Node) error {
		switch key {
		case "strategy", "otherwise":
			s, err := p.str(vv, what+"."+key)
			if err != nil {
				return err
			}
			st := runtime.Strategy(s)
			if !strategyKnown(st) || (key == "otherwise" && st == runtime.StrategyCacheAffinity) {
				known := "fallback, weighted, least_busy, fastest, cheapest, cache_affinity"
				if key == "otherwise" {
					known = "fallback, weighted, least_busy, fastest, cheapest"
				}
				return p.errf(vv, "%s.%s: unknown strategy %q (known: %s)", what, key, s, known)
			}
			if key == "strategy" {
				r.Strategy, stratNode = st, vv
			} else {
				r.Otherwise = st
			}
		case "targets":
			if vv.Kind != yaml.SequenceNode || len(vv.Content) == 0 {
				return p.errf(vv, "%s.targets: want a list of provider/model or {model, weight}", what)
			}
			for i, tn := range vv.Content {
				tw := fmt.Sprintf("%s.targets[%d]", what, i)
				t := runtime.Target{}
				if tn.Kind == yaml.MappingNode {
					err := p.mapping(tn, tw, func(key string, _, tv *yaml.Node) error {
						switch key {
						case "model":
							s, err := p.str(tv, tw+".model")
							t.Model = s
							return err
						case "weight":
							f, err := strconv.ParseFloat(strings.TrimSpace(tv.Value), 64)
							if tv.Kind != yaml.ScalarNode || err != nil || !(f > 0) || math.IsInf(f, 0) {
								return p.errf(tv, "%s.weight: want a positive number, got %q", tw, tv.Value)
							}
							t.Weight = f
							return nil
						}
						return p.errf(tn, "%s: unknown key %q (known: model, weight)", tw, key)
					})
					if err != nil {
						return err
					}
					if t.Model == "" {
						return p.errf(tn, "%s: model is missing", tw)
					}
				} else {
					s, err := p.str(tn, tw)
					if err != nil {
						return err
					}
					t.Model = s
				}
				if id, m, ok := strings.Cut(t.Model, "/"); !ok || id == "" || m == "" {
					return p.errf(tn, "%s: %q is not provider/model", tw, t.Model)
				}
				for _, o := range r.Targets {
					if o.Model == t.Model {
						return p.errf(tn, "%s: %s appears twice", tw, t.Model)
					}
				}
				r.Targets = append(r.Targets, t)
				targetNodes = append(targetNodes, tn)
			}
		case "min_prefix_tokens":
			n, err := p.nonNegInt(vv, what+".min_prefix_tokens")
			r.MinPrefixTokens = n
			return err
		case "eject":
			return p.ejection(vv, what+".eject", &r.Eject)
		default:
			return p.errf(kk, "%s: unknown key %q (known: strategy, targets, otherwise, min_prefix_tokens, eject)", what, key)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if stratNode == nil {
		return p.errf(v, "%s: strategy is missing", what)
	}
	if len(r.Targets) == 0 {
		return p.errf(v, "%s: targets is missing", what)
	}
	// A weight left out is 1, which weighted needs spelled out no more
	// than any other strategy.
	for i := range r.Targets {
		if r.Targets[i].Weight == 0 {
			r.Targets[i].Weight = 1
		}
	}
	if r.Strategy == runtime.StrategyCheapest || (r.Strategy == runtime.StrategyCacheAffinity && r.Otherwise == runtime.StrategyCheapest) {
		*later = append(*later, func() error {
			for i, t := range r.Targets {
				if _, ok := cfg.prices[t.Model]; !ok {
					return p.errf(targetNodes[i], "%s.targets[%d]: strategy cheapest needs a price for %s under prices:", what, i, t.Model)
				}
			}
			return nil
		})
	}
	models := make([]string, len(r.Targets))
	for i, t := range r.Targets {
		models[i] = t.Model
	}
	cfg.aliases = append(cfg.aliases, aliasDef{name: name, targets: models, line: k.Line, route: &r})
	return nil
}

func strategyKnown(s runtime.Strategy) bool {
	switch s {
	case runtime.StrategyFallback, runtime.StrategyWeighted, runtime.StrategyLeastBusy, runtime.StrategyFastest, runtime.StrategyCheapest, runtime.StrategyCacheAffinity:
		return true
	}
	return false
}

// ejection reads a routed alias's eject: mapping.
func (p *configParser) ejection(n *yaml.Node, what string, e *runtime.Ejection) error {
	return p.mapping(n, what, func(key string, k, v *yaml.Node) error {
		switch key {
		case "threshold":
			f, err := strconv.ParseFloat(strings.TrimSpace(v.Value), 64)
			if v.Kind != yaml.ScalarNode || err != nil || !(f > 0 && f <= 1) {
				return p.errf(v, "%s.threshold: want a share in (0, 1], got %q", what, v.Value)
			}
			e.Threshold = f
		case "min_calls":
			n, err := p.nonNegInt(v, what+".min_calls")
			if err != nil {
				return err
			}
			e.MinCalls = n
		case "window", "duration":
			d, err := time.ParseDuration(strings.TrimSpace(v.Value))
			if v.Kind != yaml.ScalarNode || err != nil || d <= 0 {
				return p.errf(v, "%s.%s: want a duration like 10s, got %q", what, key, v.Value)
			}
			if key == "window" {
				e.Window = d
			} else {
				e.Duration = d
			}
		case "off":
			b, err := p.boolean(v, what+".off")
			e.Off = b
			return err
		default:
			return p.errf(k, "%s: unknown key %q (known: threshold, min_calls, window, duration, off)", what, key)
		}
		return nil
	})
}
