package batch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/cache"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
)

// TestCachedRerun: a batch of 1,000 lines run twice on one cache: the
// second run sends nothing upstream, writes the same lines apart from ids
// and timing, marks each a cache hit and costs zero.
func TestCachedRerun(t *testing.T) {
	up := llmtest.NewServer(llmtest.WithDefault(llmtest.Reply{Text: "the answer", Usage: &llm.Usage{PromptTokens: 12, CompletionTokens: 3}}))
	defer up.Close()
	store, err := cache.NewMemory(cache.Limits{MaxEntries: 5000})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cache.New(store, cache.Options{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rt, err := runtime.New(
		runtime.WithProvider(providers.Config{ID: "openai", Format: providers.FormatOpenAI, BaseURL: up.OpenAIBaseURL(), APIKey: "sk-batch-cache"}),
		runtime.WithCache(c, runtime.CacheOptions{}),
		runtime.WithClientOptions(providers.WithIdleTimeout(2*time.Second)),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(context.Background())
	const n = 1000
	var in strings.Builder
	for i := range n {
		in.WriteString(chatLine(fmt.Sprint("line-", i), "openai/gpt-4o-mini", fmt.Sprint("question ", i)) + "\n")
	}
	prices := &Prices{Models: llm.Prices{"openai/gpt-4o-mini": {Input: 0.15, Output: 0.6}}}
	dir := t.TempDir()
	runOnce := func(name string) (*Report, []byte) {
		t.Helper()
		path := filepath.Join(dir, name)
		out, err := OpenOutput(path, Create)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := Run(context.Background(), Job{Input: strings.NewReader(in.String()), Output: out, Runner: rt, Prices: prices, Concurrency: 32})
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return rep, b
	}
	rep1, out1 := runOnce("first.jsonl")
	if up.Count() != n || rep1.Succeeded != n {
		t.Fatalf("first run: upstream %d, succeeded %d", up.Count(), rep1.Succeeded)
	}
	rep2, out2 := runOnce("second.jsonl")
	if up.Count() != n {
		t.Fatalf("second run sent %d requests upstream, want none", up.Count()-n)
	}
	if rep1.Cached != 0 || rep2.Cached != n {
		t.Fatalf("cached lines: %d then %d, want 0 then %d", rep1.Cached, rep2.Cached, n)
	}
	if rep2.Succeeded != n || len(rep2.Models) != 1 || rep2.Models[0].Cost.USD != 0 || rep2.Models[0].Priced != n {
		t.Fatalf("second run report %+v", rep2)
	}
	if rep1.Models[0].Cost.USD == 0 {
		t.Fatal("the first run cost nothing: the test proves nothing")
	}
	a, b := normalized(t, out1, false), normalized(t, out2, true)
	if len(a) != n || len(b) != n {
		t.Fatalf("lines %d and %d, want %d", len(a), len(b), n)
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("line %d differs:\nfirst:  %s\nsecond: %s", i, a[i], b[i])
		}
	}
}

// normalized decodes each output line, checks the cache mark and the
// cost (zero on a hit), drops the ids, timing and those two, and returns
// the lines re-encoded, sorted by custom_id.
func normalized(t *testing.T, out []byte, hits bool) []string {
	t.Helper()
	var lines []string
	for _, raw := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		if got := m["cache"]; hits && got != "hit" || !hits && got != nil {
			t.Fatalf("cache mark %v (hits %v): %s", got, hits, raw)
		}
		delete(m, "cache")
		resp := m["response"].(map[string]any)
		delete(resp, "request_id")
		body := resp["body"].(map[string]any)
		delete(body, "id")
		delete(body, "created")
		usage := body["usage"].(map[string]any)
		if cost := usage["cost"].(float64); hits && cost != 0 || !hits && cost == 0 {
			t.Fatalf("cost %v (hits %v): %s", cost, hits, raw)
		}
		delete(usage, "cost")
		b, _ := json.Marshal(m)
		lines = append(lines, string(b))
	}
	sort.Strings(lines)
	return lines
}

// TestCacheModeField: a line's "cache" field picks its mode; a mode that
// does not exist makes the line bad, naming the field.
func TestCacheModeField(t *testing.T) {
	up := llmtest.NewServer(llmtest.WithDefault(llmtest.Reply{Text: "a", Usage: &llm.Usage{PromptTokens: 2, CompletionTokens: 1}}))
	defer up.Close()
	store, _ := cache.NewMemory(cache.Limits{})
	c, _ := cache.New(store, cache.Options{})
	defer c.Close()
	rt, err := runtime.New(
		runtime.WithProvider(providers.Config{ID: "openai", Format: providers.FormatOpenAI, BaseURL: up.OpenAIBaseURL(), APIKey: "sk-batch-cache"}),
		runtime.WithCache(c, runtime.CacheOptions{}),
		runtime.WithClientOptions(providers.WithIdleTimeout(2*time.Second)),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(context.Background())
	withMode := func(id, mode string) string {
		l := chatLine(id, "openai/m", "same question")
		if mode == "" {
			return l
		}
		return strings.Replace(l, `{"body"`, `{"cache":"`+mode+`","body"`, 1)
	}
	// Stored by the first line, then: off and write_only ask again,
	// read_only and the default read it.
	var in strings.Builder
	for i, mode := range []string{"", "off", "write_only", "read_only", "", "sometimes"} {
		in.WriteString(withMode(fmt.Sprint("l", i), mode) + "\n")
	}
	out, err := OpenOutput(filepath.Join(t.TempDir(), "out.jsonl"), Create)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), Job{Input: strings.NewReader(in.String()), Output: out, Runner: rt, Concurrency: 1})
	out.Close()
	if err != nil {
		t.Fatal(err)
	}
	if up.Count() != 3 {
		t.Fatalf("upstream requests = %d, want 3 (the first line, off, write_only)", up.Count())
	}
	if len(rep.BadLines) != 1 || !strings.Contains(rep.BadLines[0].Err.Error(), "cache") || !strings.Contains(rep.BadLines[0].Err.Error(), "sometimes") {
		t.Fatalf("bad lines %+v", rep.BadLines)
	}
	if st := c.Stats(); st.Hits != 2 {
		t.Fatalf("cache stats %+v, want 2 hits (read_only and the default)", st)
	}
}
