package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chorusrt/chorus/batch"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

const nativeKey = "sk-native-cli-0123456789abcdef"

func nativeVars(srv *llmtest.Server) map[string]string {
	return map[string]string{
		"OPENAI_API_KEY": nativeKey, "OPENAI_BASE_URL": srv.OpenAIBaseURL(),
		"ANTHROPIC_API_KEY": nativeKey, "ANTHROPIC_BASE_URL": srv.AnthropicBaseURL(),
	}
}

// nativeLines: OpenAI and Anthropic chat lines, a simulator line (live)
// and an embedding line (live).
func nativeLines(n int) ([]string, []string) {
	var lines, ids []string
	for i := range n {
		id := fmt.Sprintf("oa%03d", i)
		lines, ids = append(lines, chatLine(id, "openai/gpt-x", "p")), append(ids, id)
	}
	for i := range n {
		id := fmt.Sprintf("an%03d", i)
		lines, ids = append(lines, chatLine(id, "anthropic/claude-x", "p")), append(ids, id)
	}
	lines, ids = append(lines, chatLine("live", "sim/echo", "live")), append(ids, "live")
	return lines, ids
}

// TestBatchNativeCLI: chorus batch --native sends each provider's lines
// to its batch API, runs the others live, prints the submitted batches and
// their progress, and the summary adds up the cost from prices: in
// chorus.yaml ("-" for a model without a price); no output shows the key.
func TestBatchNativeCLI(t *testing.T) {
	srv := llmtest.NewServer(llmtest.WithBatchAPI(llmtest.BatchAPIOptions{Run: 40 * time.Millisecond,
		Result: func(id string, _ []byte) llmtest.BatchResult {
			return llmtest.BatchResult{Reply: &llmtest.Reply{Text: "ok", Usage: &llm.Usage{PromptTokens: 1000, CompletionTokens: 1000}}}
		}}))
	defer srv.Close()
	lines, ids := nativeLines(5)
	in := writeInput(t, lines...)
	cfg := filepath.Join(t.TempDir(), "chorus.yaml")
	if err := os.WriteFile(cfg, []byte("prices:\n  openai/gpt-x: {input: 2, output: 8, batch_discount: 0.5}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out.jsonl")
	code, stdout, stderr := runCLI(t, context.Background(), nativeVars(srv), "batch", "-i", in, "-o", out, "--native", "--poll", "10ms", "--config", cfg)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	if got := readOutput(t, out); len(got) != len(ids) {
		t.Fatalf("%d lines, want %d", len(got), len(ids))
	}
	if n := len(srv.Batches()); n != 2 {
		t.Errorf("%d batches, want one per provider", n)
	}
	// 5 answers of 1000 in + 1000 out at half of $2 / $8 per million: $0.025.
	for _, want := range []string{"submitted 5 line(s) to openai as batch", "submitted 5 line(s) to anthropic", "native", "$0.0250", "cost $0.0250 (2 model(s) without a price in prices: show -)", "$0.0250 saved so far"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	journal, _ := os.ReadFile(batch.JournalPath(out))
	if strings.Contains(stdout+stderr+string(journal), nativeKey) {
		t.Fatal("the key was printed")
	}
}

// TestBatchNativeSIGKILL is the crash suite of --native: a real chorus
// process is killed with SIGKILL during the upload, after the provider
// created the batch but before the process learned its id, while polling,
// and while downloading the results. Each time, chorus batch --resume
// finishes the job with every custom_id exactly once, and no line is ever
// submitted in two batches.
func TestBatchNativeSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildChorus(t)
	for _, stage := range []llmtest.BatchStage{llmtest.StageUpload, llmtest.StageCreated, llmtest.StagePoll, llmtest.StageResults} {
		t.Run(string(stage), func(t *testing.T) {
			reached, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			srv := llmtest.NewServer(llmtest.WithBatchAPI(llmtest.BatchAPIOptions{Run: 100 * time.Millisecond,
				Hook: func(s llmtest.BatchStage, _ string) {
					if s != stage {
						return
					}
					first := false
					once.Do(func() { first = true; close(reached) })
					if first {
						<-release // the process is killed while this call hangs
					}
				}}))
			defer srv.Close()
			defer func() {
				select {
				case <-release:
				default:
					close(release)
				}
			}()
			lines, ids := nativeLines(20)
			in := writeInput(t, lines...)
			out := filepath.Join(t.TempDir(), "out.jsonl")
			var env []string
			for k, v := range nativeVars(srv) {
				env = append(env, k+"="+v)
			}
			args := []string{"batch", "-i", in, "-o", out, "--native", "--poll", "20ms"}
			first := exec.Command(bin, args...)
			first.Env = cleanEnv(env...)
			var firstErr bytes.Buffer
			first.Stderr = &firstErr
			if err := first.Start(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-reached:
			case <-time.After(60 * time.Second):
				_ = first.Process.Kill()
				_ = first.Wait()
				t.Fatalf("stage %s never reached; stderr:\n%s", stage, firstErr.String())
			}
			if err := first.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = first.Wait()
			close(release)

			second := exec.Command(bin, append(args, "--resume")...)
			second.Env = cleanEnv(env...)
			var secondErr bytes.Buffer
			second.Stderr = &secondErr
			if err := second.Run(); err != nil {
				t.Fatalf("resume: %v\nfirst run:\n%s\nresume:\n%s", err, firstErr.String(), secondErr.String())
			}
			got := readOutput(t, out) // whole lines, no custom_id twice
			for _, id := range ids {
				if l, ok := got[id]; !ok || l.Response == nil {
					t.Errorf("custom_id %s: %+v", id, l)
				}
			}
			submitted := map[string]string{}
			perProvider := map[llmtest.Format]int{}
			for _, b := range srv.Batches() {
				perProvider[b.Format]++
				for _, id := range b.CustomIDs {
					if prev, dup := submitted[id]; dup {
						t.Errorf("custom_id %s submitted in %s and %s", id, prev, b.ID)
					}
					submitted[id] = b.ID
				}
			}
			if perProvider[llmtest.FormatOpenAI] != 1 || perProvider[llmtest.FormatAnthropic] != 1 {
				t.Errorf("batches per provider %v, want one each", perProvider)
			}
			t.Logf("killed at %s; resume said:\n%s", stage, secondErr.String())
		})
	}
}

// TestBatchNativeInterruptThenCancel: Ctrl-C leaves the remote batch
// running and says how to resume or cancel it; a fresh run over the same
// output is refused; --cancel cancels it.
func TestBatchNativeInterruptThenCancel(t *testing.T) {
	srv := llmtest.NewServer(llmtest.WithBatchAPI(llmtest.BatchAPIOptions{Run: time.Hour}))
	defer srv.Close()
	in := writeInput(t, chatLine("a", "openai/gpt-x", "p"), chatLine("b", "openai/gpt-x", "p"))
	out := filepath.Join(t.TempDir(), "out.jsonl")
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for len(srv.Batches()) == 0 {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond)
		cancel()
	}()
	code, _, stderr := runCLI(t, ctx, nativeVars(srv), "batch", "-i", in, "-o", out, "--native", "--poll", "10ms")
	cancel()
	if code != 130 || !strings.Contains(stderr, "keeps running remotely") || !strings.Contains(stderr, "--cancel") {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	code, _, stderr = runCLI(t, context.Background(), nativeVars(srv), "batch", "-i", in, "-o", out, "--native")
	if code != 2 || !strings.Contains(stderr, "interrupted --native run") {
		t.Fatalf("a fresh run over an interrupted one: exit %d:\n%s", code, stderr)
	}
	code, _, stderr = runCLI(t, context.Background(), nativeVars(srv), "batch", "-i", in, "-o", out, "--cancel", "--poll", "10ms")
	if code != 1 || !strings.Contains(stderr, "run them live") {
		t.Fatalf("--cancel: exit %d:\n%s", code, stderr)
	}
	if b := srv.Batches(); len(b) != 1 || !b[0].Cancelled {
		t.Errorf("batches after --cancel: %+v", b)
	}
	if got := readOutput(t, out); len(got) != 0 {
		t.Errorf("cancelled lines were written: %v", got)
	}
}
