package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/internal/pgtest"
	"github.com/chorusrt/chorus/keystore"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

// gw is a client of one chorus serve process under one gateway key.
type gw struct {
	t   *testing.T
	url string
	key string
	hc  *http.Client
}

func (g gw) do(method, path, body string) (int, []byte) {
	g.t.Helper()
	req, _ := http.NewRequest(method, g.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+g.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := g.hc.Do(req)
	if err != nil {
		g.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (g gw) upload(name string, content []byte) string {
	g.t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("file", name)
	_, _ = fw.Write(content)
	_ = mw.WriteField("purpose", "batch")
	_ = mw.Close()
	req, _ := http.NewRequest("POST", g.url+"/v1/files", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+g.key)
	resp, err := g.hc.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	var f struct{ ID string }
	if err := json.NewDecoder(resp.Body).Decode(&f); err != nil || f.ID == "" {
		g.t.Fatalf("upload: %d %v", resp.StatusCode, err)
	}
	return f.ID
}

type serveBatch struct {
	ID            string
	Status        string
	OutputFileID  *string `json:"output_file_id"`
	RequestCounts struct {
		Total, Completed, Failed int
	} `json:"request_counts"`
}

func (g gw) batch(id string) serveBatch {
	g.t.Helper()
	code, b := g.do("GET", "/v1/batches/"+id, "")
	var sb serveBatch
	if err := json.Unmarshal(b, &sb); err != nil || code != 200 {
		g.t.Fatalf("batch %s: %d %s", id, code, b)
	}
	return sb
}

// waitFor polls batch id until cond holds, for up to d.
func (g gw) waitFor(id string, d time.Duration, what string, cond func(serveBatch) bool) serveBatch {
	g.t.Helper()
	for end := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		sb := g.batch(id)
		if cond(sb) {
			return sb
		}
		if sb.Status == "failed" || time.Now().After(end) {
			g.t.Fatalf("batch %s not %s within %v: %+v", id, what, d, sb)
		}
	}
}

// onceEach checks that the output file of a completed batch holds every
// custom_id of n exactly once.
func (g gw) onceEach(sb serveBatch, n int) {
	g.t.Helper()
	if sb.Status != "completed" || sb.OutputFileID == nil || sb.RequestCounts.Completed != n {
		g.t.Fatalf("batch %+v, want completed with %d lines", sb, n)
	}
	code, out := g.do("GET", "/v1/files/"+*sb.OutputFileID+"/content", "")
	seen := map[string]int{}
	total := 0
	for l := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		var line struct {
			CustomID string `json:"custom_id"`
		}
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			g.t.Fatalf("output line %q: %v", l, err)
		}
		seen[line.CustomID]++
		total++
	}
	for i := range n {
		if c := seen["c"+strconv.Itoa(i)]; c != 1 {
			g.t.Errorf("custom_id c%d is %d times in the output", i, c)
		}
	}
	if code != 200 || total != n {
		g.t.Fatalf("output: %d, %d lines, want %d", code, total, n)
	}
}

func linesOf(n int) []byte {
	var in bytes.Buffer
	for i := range n {
		fmt.Fprintf(&in, `{"custom_id":"c%d","method":"POST","url":"/v1/chat/completions","body":{"model":"up/m","max_tokens":20,"messages":[{"role":"user","content":"line %d"}]}}`+"\n", i, i)
	}
	return in.Bytes()
}

// slowUp is an upstream answering every call after d.
func slowUp(t *testing.T, d time.Duration) *llmtest.Server {
	up := llmtest.NewServer()
	t.Cleanup(up.Close)
	up.SetResponder(func(llmtest.Recorded) llmtest.Step {
		time.Sleep(d)
		return llmtest.Step{Reply: &llmtest.Reply{Text: "ok", Usage: &llm.Usage{PromptTokens: 20, CompletionTokens: 10}}}
	})
	return up
}

func writeConfig(t *testing.T, up *llmtest.Server, store, keys string) string {
	cfg := filepath.Join(t.TempDir(), "chorus.yaml")
	yml := `providers:
  - id: up
    base_url: ` + up.OpenAIBaseURL() + `
    key_env: UP_KEY
defaults:
  chat: up/m
prices:
  up/m: {input: 2, output: 8}
gateway:
` + store + `  keys:
` + keys
	if err := os.WriteFile(cfg, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestFleetBatchSurvivesSIGKILL: two chorus serve processes on one
// PostgreSQL, each with its own --files-dir. A batch created on A, with A
// killed (SIGKILL) while it runs, completes on B once A's lease on it
// expires: every custom_id exactly once in the output file.
func TestFleetBatchSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and two chorus serve processes")
	}
	bin := buildChorus(t)
	dsn := pgtest.SchemaDSN(t)
	up := slowUp(t, 250*time.Millisecond)
	cfg := writeConfig(t, up, "  store: "+dsn+"\n", "    - name: batcher\n      key_env: GK_BATCHER\n")
	env := cleanEnv("UP_KEY=sk-up-secret", "GK_BATCHER=gk-batcher-fleet")
	pa := startServeProc(t, bin, env, "--config", cfg, "--files-dir", t.TempDir())
	pb := startServeProc(t, bin, env, "--config", cfg, "--files-dir", t.TempDir())
	hc := &http.Client{Timeout: 30 * time.Second}
	a := gw{t: t, url: pa.url, key: "gk-batcher-fleet", hc: hc}
	b := gw{t: t, url: pb.url, key: "gk-batcher-fleet", hc: hc}
	const n = 400 // 32 at once, 250 ms each: about 3 s
	in := a.upload("in.jsonl", linesOf(n))
	code, body := a.do("POST", "/v1/batches", `{"input_file_id":"`+in+`","endpoint":"/v1/chat/completions","completion_window":"24h"}`)
	var created serveBatch
	if err := json.Unmarshal(body, &created); err != nil || code != 200 {
		t.Fatalf("create on A: %d %s", code, body)
	}
	before := b.waitFor(created.ID, 30*time.Second, "a quarter done as B sees it", func(sb serveBatch) bool { return sb.RequestCounts.Completed >= n/4 })
	callsAtKill := up.Count()
	pa.kill()
	killed := time.Now()
	if sb := b.batch(created.ID); sb.Status != "in_progress" {
		t.Fatalf("the batch at the kill: %+v", sb)
	}
	done := b.waitFor(created.ID, 60*time.Second, "completed on B", func(sb serveBatch) bool { return sb.Status == "completed" })
	b.onceEach(done, n)
	extra := up.Count() - n
	t.Logf("A killed after %d lines seen through B (%d upstream calls); B completed it %v later; %d lines ran twice (in flight or not yet flushed at the kill)",
		before.RequestCounts.Completed, callsAtKill, time.Since(killed).Round(time.Millisecond), extra)
	if extra > callsAtKill-before.RequestCounts.Completed+32 {
		t.Errorf("%d lines ran twice: more than were in flight or unflushed at the kill", extra)
	}
	if strings.Contains(pb.out.String(), "gk-batcher-fleet") || strings.Contains(pb.out.String(), "sk-up-secret") {
		t.Error("a key in B's output")
	}
	pb.stop(t)
}

// TestServeKeepsStateAcrossSIGKILL: the single-server default (no
// --store: SQLite in --files-dir, no cluster) keeps keys, spend, files and
// batches across a SIGKILL: the restarted server accepts a key made with
// chorus keys before the kill, keeps the spend of the configured one,
// serves the files, and finishes the batch it was running, every
// custom_id exactly once.
func TestServeKeepsStateAcrossSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts chorus serve twice")
	}
	bin := buildChorus(t)
	up := slowUp(t, 250*time.Millisecond)
	cfg := writeConfig(t, up, "", "    - name: batcher\n      key_env: GK_BATCHER\n    - name: spender\n      key_env: GK_SPENDER\n      budget_usd: 1\n")
	env := cleanEnv("UP_KEY=sk-up-secret", "GK_BATCHER=gk-batcher-one", "GK_SPENDER=gk-spender-one")
	dir := t.TempDir()
	p1 := startServeProc(t, bin, env, "--config", cfg, "--files-dir", dir, "--token", "op-token-one")
	hc := &http.Client{Timeout: 30 * time.Second}
	code, secret, stderr := runCLI(t, context.Background(), nil, "keys", "create", "--name", "late", "--addr", p1.url, "--token", "op-token-one")
	secret = strings.TrimSpace(secret)
	if code != 0 || !strings.HasPrefix(secret, "sk-chorus-") {
		t.Fatalf("chorus keys create: exit %d, %s", code, stderr)
	}
	chat := func(url, key string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(`{"model":"up/m","max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	g := gw{t: t, url: p1.url, key: "gk-batcher-one", hc: hc}
	var told keystore.NanoUSD
	for range 5 {
		resp := chat(p1.url, "gk-spender-one")
		c, err := strconv.ParseFloat(resp.Header.Get("x-chorus-cost-usd"), 64)
		if resp.StatusCode != 200 || err != nil {
			t.Fatalf("chat: %d %q", resp.StatusCode, resp.Header.Get("x-chorus-cost-usd"))
		}
		told += keystore.ToNano(c)
	}
	kept := []byte(`{"custom_id":"kept"}` + "\n")
	keptID := g.upload("kept.jsonl", kept)
	const n = 400
	in := g.upload("in.jsonl", linesOf(n))
	code, body := g.do("POST", "/v1/batches", `{"input_file_id":"`+in+`","endpoint":"/v1/chat/completions","completion_window":"24h"}`)
	var created serveBatch
	if err := json.Unmarshal(body, &created); err != nil || code != 200 {
		t.Fatalf("create: %d %s", code, body)
	}
	g.waitFor(created.ID, 30*time.Second, "a quarter done", func(sb serveBatch) bool { return sb.RequestCounts.Completed >= n/4 })
	time.Sleep(500 * time.Millisecond) // the spend's settlement (every 250 ms)
	p1.kill()

	p2 := startServeProc(t, bin, env, "--config", cfg, "--files-dir", dir)
	g.url = p2.url
	if resp := chat(p2.url, secret); resp.StatusCode != 200 {
		t.Fatalf("a key made with chorus keys, after the SIGKILL: %d", resp.StatusCode)
	}
	if code, b := g.do("GET", "/v1/files/"+keptID+"/content", ""); code != 200 || !bytes.Equal(b, kept) {
		t.Fatalf("a file after the restart: %d %q", code, b)
	}
	if code, b := g.do("GET", "/v1/files", ""); code != 200 || !strings.Contains(string(b), keptID) {
		t.Fatalf("the files after the restart: %d %s", code, b)
	}
	done := g.waitFor(created.ID, 60*time.Second, "completed after the restart", func(sb serveBatch) bool { return sb.Status == "completed" })
	g.onceEach(done, n)
	p2.stop(t)
	st, err := keystore.OpenSQLite(filepath.Join(dir, "gateway.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	k, err := st.ByName(context.Background(), "spender")
	if err != nil {
		t.Fatal(err)
	}
	sp, err := st.SpendOf(context.Background(), k.ID, keystore.Total.ID(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("spend told $%.6f; kept across the SIGKILL: spent $%.6f, reserved $%.6f", keystore.FromNano(told), keystore.FromNano(sp.Spent), keystore.FromNano(sp.Reserved))
	if sp.Spent+sp.Reserved < told || sp.Calls < 5 {
		t.Fatalf("spend after the SIGKILL and restart: %+v, told %d", sp, told)
	}
}
