package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/runtime"
)

// TestConfigRoutedAliasErrors: a routed alias's mistakes are reported as
// file:line: the alias, the field and what is wrong.
func TestConfigRoutedAliasErrors(t *testing.T) {
	cases := []struct{ yaml, want string }{
		{"aliases:\n  s:\n    strategy: random\n    targets: [sim/a]\n", `chorus.yaml:3: aliases.s.strategy: unknown strategy "random"`},
		{"aliases:\n  s:\n    strategy: weighted\n    targets:\n      - {model: sim/a, weight: 0}\n", `chorus.yaml:5: aliases.s.targets[0].weight: want a positive number, got "0"`},
		{"aliases:\n  s:\n    strategy: weighted\n    targets:\n      - sim/a\n      - {model: sim/b, weight: -1}\n", `chorus.yaml:6: aliases.s.targets[1].weight: want a positive number, got "-1"`},
		{"aliases:\n  s:\n    strategy: cheapest\n    targets: [sim/a, sim/b]\nprices:\n  sim/a: {input: 1}\n", "chorus.yaml:4: aliases.s.targets[1]: strategy cheapest needs a price for sim/b under prices:"},
		{"aliases:\n  s:\n    targets: [sim/a]\n", "chorus.yaml:3: aliases.s: strategy is missing"},
		{"aliases:\n  s:\n    strategy: fastest\n", "chorus.yaml:3: aliases.s: targets is missing"},
		{"aliases:\n  s:\n    strategy: fastest\n    targets: [nope]\n", `chorus.yaml:4: aliases.s.targets[0]: "nope" is not provider/model`},
		{"aliases:\n  s:\n    strategy: fastest\n    targets: [sim/a]\n    weights: [1]\n", `chorus.yaml:5: aliases.s: unknown key "weights"`},
		{"aliases:\n  s:\n    strategy: cache_affinity\n    otherwise: cache_affinity\n    targets: [sim/a]\n", `chorus.yaml:4: aliases.s.otherwise: unknown strategy "cache_affinity"`},
		{"aliases:\n  s:\n    strategy: fastest\n    targets:\n      - {model: sim/a, wieght: 2}\n", `chorus.yaml:5: aliases.s.targets[0]: unknown key "wieght"`},
		{"aliases:\n  s:\n    strategy: fastest\n    targets: [sim/a]\n    eject: {threshold: 2}\n", `chorus.yaml:5: aliases.s.eject.threshold: want a share in (0, 1]`},
		{"aliases:\n  s:\n    strategy: fastest\n    targets: [sim/a]\n    eject: {duration: soon}\n", `chorus.yaml:5: aliases.s.eject.duration: want a duration`},
		{"aliases:\n  s:\n    strategy: fastest\n    targets:\n      - sim/a\n      - {model: sim/a, weight: 2}\n", "chorus.yaml:6: aliases.s.targets[1]: sim/a appears twice"},
	}
	for _, c := range cases {
		_, err := parseConfig("chorus.yaml", []byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err %v, want %q", c.yaml, err, c.want)
		}
	}
}

// TestConfigRoutedAliases: the mapping form is a routed alias, the list
// form stays a fallback list, and a chorus.yaml's weighted alias splits
// calls between two upstreams by its weights.
func TestConfigRoutedAliases(t *testing.T) {
	a := llmtest.NewServer()
	defer a.Close()
	b := llmtest.NewServer()
	defer b.Close()
	yaml := "providers:\n  - {id: up-a, base_url: " + a.OpenAIBaseURL() + "}\n  - {id: up-b, base_url: " + b.OpenAIBaseURL() + "}\n" + `
aliases:
  list: [up-a/m, up-b/m]
  spread:
    strategy: weighted
    targets:
      - {model: up-a/m, weight: 3}
      - up-b/m
    eject: {threshold: 0.6, min_calls: 4, window: 5s, duration: 2s}
  cheap:
    strategy: cache_affinity
    otherwise: cheapest
    min_prefix_tokens: 2048
    targets: [up-a/m, up-b/m]
prices:
  up-a/m: {input: 1, output: 2}
  up-b/m: {input: 2, output: 4}
`
	cfg, err := parseConfig("c.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.aliases[0].route != nil || len(cfg.aliases[0].targets) != 2 {
		t.Errorf("list: %+v", cfg.aliases[0])
	}
	r := cfg.aliases[1].route
	if r == nil || r.Strategy != runtime.StrategyWeighted || len(r.Targets) != 2 || r.Targets[0] != (runtime.Target{Model: "up-a/m", Weight: 3}) ||
		r.Targets[1].Weight != 1 || r.Eject != (runtime.Ejection{Threshold: 0.6, MinCalls: 4, Window: 5 * time.Second, Duration: 2 * time.Second}) {
		t.Errorf("spread: %+v", r)
	}
	if r := cfg.aliases[2].route; r == nil || r.Strategy != runtime.StrategyCacheAffinity || r.Otherwise != runtime.StrategyCheapest || r.MinPrefixTokens != 2048 {
		t.Errorf("cheap: %+v", r)
	}

	path := filepath.Join(t.TempDir(), "chorus.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := openStack(env{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close(5 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < 40; i++ {
		var rep runtime.CallReport
		if _, err := st.rt.Chat(runtime.WithCallReport(ctx, &rep), &llm.ChatRequest{Model: "spread", Messages: []llm.Message{llm.UserText("hi")}}); err != nil || rep.Strategy != "weighted" {
			t.Fatalf("call %d: %v %+v", i, err, rep)
		}
	}
	if a.Count() != 30 || b.Count() != 10 {
		t.Errorf("weights 3:1 split 40 calls %d:%d", a.Count(), b.Count())
	}
	if routes := st.rt.Routes(); len(routes) != 2 || routes[1].Alias != "spread" || routes[1].Targets[0].Served != 30 {
		t.Errorf("Routes %+v", routes)
	}
}

// TestConfigRoutedAliasesInDocs: the chorus.yaml block of docs/runtime.md's
// "Aliases that balance" parses, into the routes it describes.
func TestConfigRoutedAliasesInDocs(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "runtime.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(data), "## Aliases that balance")
	_, block, ok2 := strings.Cut(sec, "```yaml\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("no yaml block under ## Aliases that balance")
	}
	cfg, err := parseConfig("docs/runtime.md", []byte(block))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.aliases) != 3 || cfg.aliases[0].route != nil || cfg.aliases[1].route.Strategy != runtime.StrategyWeighted ||
		cfg.aliases[2].route.Otherwise != runtime.StrategyCheapest {
		t.Errorf("aliases %+v", cfg.aliases)
	}
}
