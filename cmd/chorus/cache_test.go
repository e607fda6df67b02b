package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCacheConfigErrors: a cache configuration that cannot hold fails at
// start, naming the field.
func TestCacheConfigErrors(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"cache:\n  store: redis\n", `chorus.yaml:2: cache.store: unknown store "redis" (known: memory, sqlite, postgres)`},
		{"cache:\n  ttl: -1h\n", `chorus.yaml:2: cache.ttl: want a non-negative duration like 24h, got "-1h"`},
		{"cache:\n  ttl: soon\n", `chorus.yaml:2: cache.ttl: want a non-negative duration`},
		{"cache:\n  max_entries: -3\n", `chorus.yaml:2: cache.max_entries: want a non-negative integer, got "-3"`},
		{"cache:\n  max_bytes: lots\n", `chorus.yaml:2: cache.max_bytes: want a non-negative integer`},
		{"cache:\n  mode: sometimes\n", `chorus.yaml:2: llm: invalid cache.mode: unknown cache mode "sometimes"`},
		{"cache:\n  share_across_keys: maybe\n", `chorus.yaml:2: cache.share_across_keys: want true or false`},
		{"cache:\n  store: sqlite\n", "chorus.yaml:2: cache.path: store sqlite needs the database file's path"},
		{"cache:\n  store: postgres\n", "chorus.yaml:2: cache.dsn: store postgres needs a DSN"},
		{"cache:\n  store: memory\n  path: x.db\n", "chorus.yaml:3: cache.path: only store sqlite has a path"},
		{"cache:\n  size: 5\n", `chorus.yaml:2: cache.size: unknown key`},
	} {
		_, err := parseConfig("chorus.yaml", []byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err %v, want %q", c.yaml, err, c.want)
		}
	}
	cfg, err := parseConfig("chorus.yaml", []byte("cache:\n  store: sqlite\n  path: c.db\n  ttl: 24h\n  max_entries: 10\n  max_bytes: 1000\n  mode: read_only\n  share_across_keys: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c := cfg.cache; !c.set || c.store != "sqlite" || c.path != "c.db" || c.ttl.Hours() != 24 || c.lim.MaxEntries != 10 || c.lim.MaxBytes != 1000 || c.mode != "read_only" || !c.share {
		t.Fatalf("parsed %+v", c)
	}
}

// TestCacheOpenFails: a store that cannot open fails the command at start.
func TestCacheOpenFails(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "chorus.yaml")
	os.WriteFile(conf, []byte("cache:\n  store: sqlite\n  path: "+filepath.Join(dir, "missing", "c.db")+"\n"), 0o644)
	in := writeInput(t, chatLine("a", "sim/echo", "hi"))
	code, _, stderr := runCLI(t, context.Background(), nil, "batch", "--config", conf, "-i", in, "-o", filepath.Join(dir, "out.jsonl"))
	if code == 0 || !strings.Contains(stderr, "path") {
		t.Fatalf("exit %d, stderr %s; want a failure naming path", code, stderr)
	}
}

// TestBatchCachedRerun: chorus batch twice on one chorus.yaml SQLite
// cache: every line of the second run is a hit.
func TestBatchCachedRerun(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "chorus.yaml")
	if err := os.WriteFile(conf, []byte("cache:\n  store: sqlite\n  path: "+filepath.Join(dir, "cache.db")+"\n  ttl: 1h\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for i := range 20 {
		lines = append(lines, chatLine("l"+string(rune('a'+i)), "sim/echo", "prompt "+string(rune('a'+i))))
	}
	in := writeInput(t, lines...)
	for run, want := range []string{"", "hit"} {
		out := filepath.Join(dir, "out"+string(rune('0'+run))+".jsonl")
		code, _, stderr := runCLI(t, context.Background(), nil, "batch", "--config", conf, "-i", in, "-o", out)
		if code != 0 {
			t.Fatalf("run %d: exit %d: %s", run, code, stderr)
		}
		if want == "hit" && !strings.Contains(stderr, "20 succeeded, 0 failed, 20 from the cache") {
			t.Errorf("run %d: stderr does not count the hits:\n%s", run, stderr)
		}
		data, _ := os.ReadFile(out)
		got := strings.Count(string(data), `"cache":"hit"`)
		if want == "" && got != 0 || want == "hit" && got != 20 {
			t.Fatalf("run %d: %d hits in\n%s", run, got, data)
		}
	}
}

// TestCacheGuideYAML: the cache guide's chorus.yaml block parses as
// written.
func TestCacheGuideYAML(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(moduleRoot(t), "docs", "cache.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```yaml\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/cache.md has no yaml block")
	}
	cfg, err := parseConfig("docs/cache.md", []byte(block))
	if err != nil {
		t.Fatal(err)
	}
	if c := cfg.cache; c.store != "postgres" || c.dsn == "" || c.ttl == 0 || c.lim.MaxEntries == 0 || c.mode != "on" {
		t.Fatalf("parsed %+v", c)
	}
}

// TestServeCache: chorus serve with cache: in chorus.yaml answers a
// repeated question from the cache (x-chorus-cache: hit), per gateway key.
func TestServeCache(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "chorus.yaml")
	const yml = `gateway:
  keys:
    - {name: a, key_env: CHORUS_TEST_KEY_A}
    - {name: b, key_env: CHORUS_TEST_KEY_B}
cache:
  store: sqlite
  path: ` + "CACHE_PATH" + `
  ttl: 1h
`
	if err := os.WriteFile(cfg, []byte(strings.Replace(yml, "CACHE_PATH", filepath.Join(dir, "cache.db"), 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	base, stop := startServe(t, map[string]string{"CHORUS_TEST_KEY_A": "gk-test-a", "CHORUS_TEST_KEY_B": "gk-test-b"}, "--addr", "127.0.0.1:0", "--config", cfg)
	ask := func(key string) string {
		t.Helper()
		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		req, _ := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader(`{"model":"sim/echo","messages":[{"role":"user","content":"ping"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !strings.Contains(string(b), "[simulated] ping") {
			t.Fatalf("answer %d %s", resp.StatusCode, b)
		}
		return resp.Header.Get("x-chorus-cache")
	}
	got := []string{ask("gk-test-a"), ask("gk-test-a"), ask("gk-test-b")}
	if want := []string{"miss", "hit", "miss"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("x-chorus-cache %q, want %q", got, want)
	}
	if exit, stderr := stop(); exit != 0 {
		t.Errorf("exit %d: %s", exit, stderr)
	}
}
