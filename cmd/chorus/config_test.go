package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/runtime"
)

// TestConfigErrorsNameFileAndLine: every mistake is reported as
// file:line: the key path and what is wrong.
func TestConfigErrorsNameFileAndLine(t *testing.T) {
	cases := []struct {
		yaml string
		want string
	}{
		{"alias:\n  fast: sim/echo\n", `chorus.yaml:1: unknown key "alias"`},
		{"model_patterns:\n  - {match: \"[\", provider: sim}\n", `chorus.yaml:2: model_patterns[0].match: "[" is not a glob pattern`},
		{"model_patterns:\n  - {match: \"gpt-*\"}\n", "chorus.yaml:2: model_patterns[0]: give both match and provider"},
		{"model_patterns:\n  - {match: \"gpt-*\", to: sim}\n", `chorus.yaml:2: model_patterns[0]: unknown key "to"`},
		{"model_patterns: gpt\n", "chorus.yaml:1: model_patterns: want a list of {match, provider}"},
		{"gateway:\n  default_providers:\n    cohere: sim\n", `chorus.yaml:3: gateway.default_providers: unknown format "cohere"`},
		{"gateway:\n  default_providers:\n    openai: nope\n", `chorus.yaml:3: gateway.default_providers.openai: provider "nope" is unknown`},
		{"aliases:\n  fast: [sim/echo, nope]\n", `chorus.yaml:2: aliases.fast: "nope" is not provider/model`},
		{"aliases:\n  a/b: sim/echo\n", "chorus.yaml:2: aliases.a/b: an alias name may not contain '/'"},
		{"aliases:\n  fast: []\n", "chorus.yaml:2: aliases.fast: is empty"},
		{"providers:\n  - id: local\n", "chorus.yaml:2: providers[0]: base_url is missing"},
		{"providers:\n  - id: local\n    base_url: ftp://x\n", `chorus.yaml:3: providers[0].base_url: "ftp://x" is not an http(s) URL`},
		{"providers:\n  - id: openai\n    base_url: http://x\n", `chorus.yaml:2: providers[0].id: "openai" is built in`},
		{"providers:\n  - id: Local\n    base_url: http://x\n", `chorus.yaml:2: providers[0].id: "Local" must be lower-case`},
		{"providers:\n  - id: a\n    base_url: http://x\n    keyenv: K\n", `chorus.yaml:4: providers[0]: unknown key "keyenv"`},
		{"providers:\n  - id: a\n    base_url: http://x\n  - id: a\n    base_url: http://y\n", `chorus.yaml:4: providers[1]: id "a" appears twice`},
		{"providers:\n  - id: a\n    base_url: http://x\n    format: anthropic\n", "chorus.yaml:4: providers[0].format: only \"openai\""},
		{"limits:\n  openai:\n    rpm: -5\n", `chorus.yaml:3: limits.openai.rpm: want a non-negative integer, got "-5"`},
		{"limits:\n  openai:\n    rps: 5\n", `chorus.yaml:3: limits.openai: unknown key "rps"`},
		{"limits:\n  opnai:\n    rpm: 5\n", `chorus.yaml:2: limits.opnai: no provider "opnai"`},
		{"limits:\n  openai:\n    shared: yes\n", `chorus.yaml:3: limits.openai.shared: want true or false, got "yes"`},
		{"limits:\n  openai:\n    shared: 1\n", `chorus.yaml:3: limits.openai.shared: want true or false, got "1"`},
		{"sim:\n  latency: fast\n", `chorus.yaml:2: sim.latency: want a duration like 20ms, got "fast"`},
		{"sim:\n  tokens_per_second: -1\n", "chorus.yaml:2: sim.tokens_per_second: want a non-negative number"},
		{"defaults:\n  chat: fast\n", `chorus.yaml:2: defaults.chat: "fast" is neither provider/model nor an alias`},
		{"defaults:\n  embedding: sim/e\n", "chorus.yaml:2: defaults.embedding: unknown key"},
		{"aliases: {fast: sim/echo}\naliases: {slow: sim/echo}\n", "chorus.yaml:2: aliases: appears twice"},
		{"- just\n- a list\n", "chorus.yaml:1: the file must be a mapping"},
		{"aliases:\n  fast: [sim/echo\n", "chorus.yaml: "},
	}
	for _, c := range cases {
		_, err := parseConfig("chorus.yaml", []byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err %v, want %q", c.yaml, err, c.want)
		}
	}
}

func TestConfigParses(t *testing.T) {
	cfg, err := parseConfig("c.yaml", []byte(`
defaults:
  chat: fast            # an alias defined further down
  embed: sim/embed
aliases:
  fast: [openai/gpt-4.1-mini, sim/echo]
  one: sim/prose
providers:
  - id: local
    base_url: http://127.0.0.1:1/v1
    key_env: LOCAL_KEY
limits:
  local: {rpm: 60, tpm: 1000, concurrency: 2, shared: true}
sim:
  latency: 5ms
  tokens_per_second: 250.5
  rpm: 100
  tpm: 0
  window: 2s
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.aliases) != 2 || cfg.aliases[0].name != "fast" || len(cfg.aliases[0].targets) != 2 || cfg.aliases[1].targets[0] != "sim/prose" {
		t.Errorf("aliases %+v", cfg.aliases)
	}
	if len(cfg.providers) != 1 || cfg.providers[0].keyEnv != "LOCAL_KEY" || cfg.providers[0].line != 9 {
		t.Errorf("providers %+v", cfg.providers)
	}
	if cfg.limits["local"] != (runtime.Limits{RequestsPerMinute: 60, TokensPerMinute: 1000, MaxConcurrency: 2, Shared: true}) {
		t.Errorf("limits %+v", cfg.limits)
	}
	if cfg.sim.Latency != 5*time.Millisecond || cfg.sim.TokensPerSecond != 250.5 || cfg.sim.RPM != 100 || cfg.sim.Window != 2*time.Second {
		t.Errorf("sim %+v", cfg.sim)
	}
	if cfg.defaults.chat != "fast" || cfg.defaults.embed != "sim/embed" {
		t.Errorf("defaults %+v", cfg.defaults)
	}
}

// TestConfigDrivesBatch: a chorus.yaml's extra provider (key from its
// key_env), alias and defaults take effect in a batch, and the key is
// never printed.
func TestConfigDrivesBatch(t *testing.T) {
	srv := llmtest.NewServer(llmtest.WithDefault(llmtest.Reply{Text: "local answer"}))
	defer srv.Close()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "chorus.yaml")
	yaml := "providers:\n  - id: local\n    base_url: " + srv.OpenAIBaseURL() + "\n    key_env: LOCAL_KEY\n" +
		"aliases:\n  best: [local/big, sim/echo]\ndefaults:\n  chat: best\n"
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	in := writeInput(t, chatLine("a", "", "hi"), chatLine("b", "best", "hi"))
	out := filepath.Join(dir, "out.jsonl")
	const key = "local-secret-key-123"
	code, _, stderr := runCLI(t, context.Background(), map[string]string{"LOCAL_KEY": key}, "batch", "-i", in, "-o", out, "--config", cfgPath)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	data, _ := os.ReadFile(out)
	if strings.Contains(string(data)+stderr, key) {
		t.Fatal("the key was printed")
	}
	for id, l := range readOutput(t, out) {
		var body struct {
			Model string `json:"model"`
		}
		_ = json.Unmarshal(l.Response.Body, &body)
		if body.Model != "local/big" || !strings.Contains(string(l.Response.Body), "local answer") {
			t.Errorf("%s: %s", id, l.Response.Body)
		}
	}
	if reqs := srv.Requests(); len(reqs) != 2 || reqs[0].Header.Get("Authorization") != "Bearer "+key {
		t.Errorf("local provider saw %d requests", len(reqs))
	}
	if !strings.Contains(stderr, "best") || !strings.Contains(stderr, "defaults.chat in "+cfgPath) {
		t.Errorf("summary or default note missing:\n%s", stderr)
	}
	// Without its key the provider is skipped with a warning naming the
	// file and line, and the alias that needs it is refused, by line.
	code, _, stderr = runCLI(t, context.Background(), nil, "batch", "-i", in, "-o", filepath.Join(dir, "o2.jsonl"), "--config", cfgPath)
	if code != 2 || !strings.Contains(stderr, cfgPath+":2: provider local: $LOCAL_KEY is empty") ||
		!strings.Contains(stderr, cfgPath+`:6: aliases.best: provider "local" of local/big is not registered`) {
		t.Errorf("exit %d:\n%s", code, stderr)
	}
}

// TestConfigModelNamesAndFidelity: model_patterns, gateway.default_providers
// and drop_unsupported (global and per key) are read as docs/gateway.md
// shows them.
func TestConfigModelNamesAndFidelity(t *testing.T) {
	cfg, err := parseConfig("chorus.yaml", []byte(`
model_patterns:
  - {match: "gpt-*", provider: sim}
gateway:
  default_providers:
    anthropic: ""
    openai: sim
  drop_unsupported: true
  keys:
    - {name: a, sha256: "`+strings.Repeat("ab", 32)+`", drop_unsupported: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.patterns) != 1 || cfg.patterns[0].match != "gpt-*" || cfg.patterns[0].provider != "sim" {
		t.Errorf("patterns %+v", cfg.patterns)
	}
	if p, ok := cfg.gateway.providers["anthropic"]; !ok || p != "" || cfg.gateway.providers["openai"] != "sim" {
		t.Errorf("default providers %+v", cfg.gateway.providers)
	}
	if !cfg.gateway.drop || len(cfg.gateway.keys) != 1 || !cfg.gateway.keys[0].key.DropUnsupported {
		t.Errorf("drop_unsupported: %v %+v", cfg.gateway.drop, cfg.gateway.keys)
	}
}
