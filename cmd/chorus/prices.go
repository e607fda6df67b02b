package main

import (
	"math"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/chorusrt/chorus/llm"
)

// prices reads the prices: section of chorus.yaml, US dollars per million
// tokens per provider/model:
//
//	prices:
//	  openai/gpt-4.1-mini: {input: 0.40, cached_input: 0.10, output: 1.60, batch_discount: 0.5}
//	  anthropic/claude-haiku-4-5: {input: 1, cached_input: 0.10, cache_write: 1.25, output: 5, batch_discount: 0.5}
//
// Chorus ships no price: a model not listed has no cost ("-").
func (p *configParser) prices(n *yaml.Node, cfg *fileConfig) error {
	cfg.prices = llm.Prices{}
	return p.mapping(n, "prices", func(model string, k, v *yaml.Node) error {
		what := "prices." + model
		if id, m, ok := strings.Cut(model, "/"); !ok || id == "" || m == "" {
			return p.errf(k, "%s: want provider/model", what)
		}
		var pr llm.Price
		err := p.mapping(v, what, func(key string, k, v *yaml.Node) error {
			f, err := strconv.ParseFloat(strings.TrimSpace(v.Value), 64)
			if v.Kind != yaml.ScalarNode || err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
				return p.errf(v, "%s.%s: want a non-negative number, got %q", what, key, v.Value)
			}
			switch key {
			case "input":
				pr.Input = f
			case "cached_input":
				pr.CachedInput = f
			case "cache_write":
				pr.CacheWrite = f
			case "output":
				pr.Output = f
			case "batch_discount":
				if f > 1 {
					return p.errf(v, "%s.batch_discount: want a fraction between 0 and 1 (0.5: half price), got %q", what, v.Value)
				}
				pr.BatchDiscount = f
			default:
				return p.errf(k, "%s: unknown key %q (known: input, cached_input, cache_write, output, batch_discount)", what, key)
			}
			return nil
		})
		if err != nil {
			return err
		}
		cfg.prices[model] = pr
		return nil
	})
}
