package main

import (
	"strings"
	"testing"
)

// TestConfigPrices: prices: reads USD per million tokens per
// provider/model, and refuses what is not a price, naming file:line.
func TestConfigPrices(t *testing.T) {
	cfg, err := parseConfig("c.yaml", []byte("prices:\n  openai/gpt-x: {input: 0.4, cached_input: 0.1, cache_write: 0.5, output: 1.6, batch_discount: 0.5}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.prices["openai/gpt-x"]; p.Input != 0.4 || p.CachedInput != 0.1 || p.CacheWrite != 0.5 || p.Output != 1.6 || p.BatchDiscount != 0.5 {
		t.Errorf("price %+v", p)
	}
	for yaml, want := range map[string]string{
		"prices:\n  gpt-x: {input: 1}\n":             "c.yaml:2: prices.gpt-x: want provider/model",
		"prices:\n  openai/m: {input: -1}\n":         "prices.openai/m.input: want a non-negative number",
		"prices:\n  openai/m: {input: cheap}\n":      `want a non-negative number, got "cheap"`,
		"prices:\n  openai/m: {batch_discount: 2}\n": "batch_discount: want a fraction between 0 and 1",
		"prices:\n  openai/m: {per_request: 1}\n":    `unknown key "per_request"`,
	} {
		if _, err := parseConfig("c.yaml", []byte(yaml)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", yaml, err, want)
		}
	}
}
