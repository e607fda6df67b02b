package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/providers"
)

// buildChorus compiles the real chorus binary into a temp dir.
func buildChorus(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command on PATH: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "chorus")
	if goruntime.GOOS == "windows" {
		bin += ".exe"
	}
	cmd := exec.Command(goBin, "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// cleanEnv is the test process's environment without provider keys, base
// URLs or simulator settings, plus extra.
func cleanEnv(extra ...string) []string {
	drop := providers.EnvVars()
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if slices.Contains(drop, k) || strings.HasPrefix(k, "CHORUS_") {
			continue
		}
		out = append(out, kv)
	}
	return append(out, extra...)
}

// TestResumeAfterSIGKILL is the resume guarantee end to end: a real chorus
// batch process, slowed by the simulator's latency, is killed with SIGKILL
// mid-run; every line it left is whole JSON; run again with --resume it
// finishes the missing items only, keeps what was written byte for byte,
// and every custom_id appears exactly once. The bad input line and the
// failed item are reported.
func TestResumeAfterSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildChorus(t)
	const n = 400
	var lines []string
	var want []string
	for i := range n {
		id := fmt.Sprintf("k%03d", i)
		prompt := fmt.Sprintf("item %d", i)
		if i == 120 {
			id, prompt = "fails", "this one fails [sim:status=400]"
		}
		lines = append(lines, chatLine(id, "", prompt))
		want = append(want, id)
		if i == 49 {
			lines = append(lines, `{"custom_id":"torn","method":"POST","url":"/v1/chat/completions","body":{"messa`) // line 51
		}
	}
	in := writeInput(t, lines...)
	out := filepath.Join(t.TempDir(), "results.jsonl")

	// First run: ~30ms per request, 4 at a time: about 3 s for 400 items.
	first := exec.Command(bin, "batch", "-i", in, "-o", out, "-c", "4")
	first.Env = cleanEnv("CHORUS_SIM_LATENCY=30ms")
	var firstErr bytes.Buffer
	first.Stderr = &firstErr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(out)
		if bytes.Count(b, []byte("\n")) >= 60 {
			break
		}
		if time.Now().After(deadline) {
			_ = first.Process.Kill()
			_ = first.Wait()
			t.Fatalf("no progress after 30s; stderr:\n%s", firstErr.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err := first.Process.Kill(); err != nil { // SIGKILL on Unix
		t.Fatal(err)
	}
	err := first.Wait()
	if err == nil || first.ProcessState.Success() {
		t.Fatalf("the first run was not killed: %v", err)
	}

	killed, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	whole := killed[:bytes.LastIndexByte(killed, '\n')+1]
	if tail := len(killed) - len(whole); tail > 0 {
		t.Logf("the kill left an unterminated tail of %d bytes (resume cuts it)", tail)
	}
	wholeLines := bytes.Count(whole, []byte("\n"))
	if wholeLines >= n {
		t.Fatalf("the batch finished (%d lines) before the kill: nothing was tested", wholeLines)
	}
	check := filepath.Join(t.TempDir(), "whole.jsonl")
	if err := os.WriteFile(check, whole, 0o644); err != nil {
		t.Fatal(err)
	}
	readOutput(t, check) // every line whole JSON, no custom_id twice
	t.Logf("killed after %d whole lines", wholeLines)

	second := exec.Command(bin, "batch", "-i", in, "-o", out, "-c", "16", "--resume")
	second.Env = cleanEnv("CHORUS_SIM_LATENCY=5ms")
	var secondErr bytes.Buffer
	second.Stderr = &secondErr
	err = second.Run()
	if code := second.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("resume exit %d (%v), want 1 (a bad line and a failed item); stderr:\n%s", code, err, secondErr.String())
	}
	stderr := secondErr.String()
	if !strings.Contains(stderr, "in.jsonl:51: ") || !strings.Contains(stderr, fmt.Sprintf("%d already done", wholeLines)) {
		t.Errorf("resume did not report the bad line 51 and the %d done items:\n%s", wholeLines, stderr)
	}

	final, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(final, whole) {
		t.Fatal("resume changed the lines the first run wrote")
	}
	got := readOutput(t, out)
	if len(got) != len(want) {
		t.Errorf("%d custom_ids, want %d", len(got), len(want))
	}
	for _, id := range want {
		l, ok := got[id]
		switch {
		case !ok:
			t.Errorf("custom_id %s missing", id)
		case id == "fails" && (l.Error == nil || l.Error.Code == ""):
			t.Errorf("the failed item has no error: %+v", l)
		case id != "fails" && (l.Response == nil || l.Response.StatusCode != 200):
			t.Errorf("%s: %+v", id, l)
		}
	}
	if _, ok := got["torn"]; ok {
		t.Error("the torn input line produced an output line")
	}
}
