package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/internal/testkit/syncbuf"
)

// TestChatGroupsByModel: two models stream at once; each model's answer
// is printed as one whole group (a slow model's deltas never interleave
// with another's), each with its footer.
func TestChatGroupsByModel(t *testing.T) {
	vars := map[string]string{"CHORUS_SIM_TOKENS_PER_SECOND": "400"}
	code, stdout, stderr := runCLI(t, context.Background(), vars, "chat", "-m", "sim/echo", "-m", "sim/prose", "--max-tokens", "60", "Tell me about Go channels")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	groups := regexp.MustCompile(`(?m)^== (sim/\w+) ==\n`).FindAllStringSubmatchIndex(stdout, -1)
	if len(groups) != 2 {
		t.Fatalf("want 2 groups:\n%s", stdout)
	}
	for k, g := range groups {
		model := stdout[g[2]:g[3]]
		end := len(stdout)
		if k+1 < len(groups) {
			end = groups[k+1][0]
		}
		body := stdout[g[1]:end]
		want := "[simulated] Tell me about Go channels"
		if model == "sim/prose" {
			want = "[simulated prose] You wrote 5 word(s)"
		}
		if !strings.HasPrefix(body, want) {
			t.Errorf("group %s starts %q, want %q:\n%s", model, body, want, stdout)
		}
		if !regexp.MustCompile(`(?m)^-- (stop|length), \d+ in \+ \d+ out tokens`).MatchString(body) {
			t.Errorf("group %s has no footer:\n%s", model, body)
		}
	}
}

// TestChatJSONAndFailures: --json prints one JSON object per event, in
// order per model, ending with a "done" per model; a failing model makes
// the exit status 1 without hiding the other.
func TestChatJSONAndFailures(t *testing.T) {
	code, stdout, stderr := runCLI(t, context.Background(), nil, "chat", "--json", "-m", "sim/echo", "-m", "sim/prose", "hello [sim:status=400]")
	if code != 1 {
		t.Fatalf("exit %d, want 1 (both models fail on the directive):\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, context.Background(), nil, "chat", "--json", "-m", "sim/echo", "-m", "sim/prose", "hello")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	text := map[string]string{}
	done := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(stdout))
	for sc.Scan() {
		var ev jsonEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("not JSON: %q", sc.Text())
		}
		if done[ev.Model] {
			t.Errorf("event after done for %s: %s", ev.Model, sc.Text())
		}
		switch ev.Type {
		case "text":
			text[ev.Model] += ev.Text
		case "done":
			done[ev.Model] = true
			if ev.Content == nil || *ev.Content != text[ev.Model] || ev.Finish == nil || *ev.Finish != "stop" || ev.Usage == nil {
				t.Errorf("done for %s: %s (streamed %q)", ev.Model, sc.Text(), text[ev.Model])
			}
		}
	}
	if !done["sim/echo"] || !done["sim/prose"] || text["sim/echo"] != "[simulated] hello" {
		t.Errorf("events: %v %v\n%s", done, text, stdout)
	}
	// A bad flag value or a missing prompt is a usage error naming it.
	for args, want := range map[string]string{
		"chat -m nowhere/x hi":    `-m nowhere/x: provider "nowhere" is not registered`,
		"chat -m sim/echo":        "a PROMPT is required",
		"chat --max-tokens -1 hi": "--max-tokens must not be negative",
	} {
		code, _, stderr := runCLI(t, context.Background(), nil, strings.Fields(args)...)
		if code != 2 || !strings.Contains(stderr, want) {
			t.Errorf("%s: exit %d %q, want 2 and %q", args, code, stderr, want)
		}
	}
}

// TestChatDefaultsToSimulator: with no key and no -m, chat asks sim/echo;
// a prompt "-" is read from stdin.
func TestChatDefaultsToSimulator(t *testing.T) {
	var out syncbuf.Buffer
	e := env{stdin: strings.NewReader("from stdin\n"), stdout: &out, stderr: io.Discard,
		getenv: func(string) string { return "" }, width: func() int { return 0 }}
	if code := run(context.Background(), e, []string{"chat", "-"}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(out.String(), "== sim/echo ==\n[simulated] from stdin\n") {
		t.Errorf("stdout:\n%s", out.String())
	}
}

func TestModels(t *testing.T) {
	code, stdout, stderr := runCLI(t, context.Background(), nil, "models")
	if code != 0 || !strings.Contains(stdout, "sim/echo") || !strings.Contains(stdout, "sim/embed") || !strings.HasPrefix(stdout, "MODEL") {
		t.Fatalf("exit %d:\n%s%s", code, stdout, stderr)
	}
	code, stdout, _ = runCLI(t, context.Background(), nil, "models", "--json", "sim")
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var m struct {
		ID          string `json:"id"`
		DisplayName string `json:"display_name"`
	}
	if code != 0 || len(lines) != 3 || json.Unmarshal([]byte(lines[0]), &m) != nil || m.ID != "sim/echo" || !strings.HasPrefix(m.DisplayName, "Simulated") {
		t.Errorf("exit %d: %s", code, stdout)
	}
	code, _, stderr = runCLI(t, context.Background(), nil, "models", "openai")
	if code != 2 || !strings.Contains(stderr, `provider "openai" is not registered (registered: sim)`) {
		t.Errorf("exit %d: %s", code, stderr)
	}
}

// TestSimCommand: chorus sim serves the simulator on --addr until the
// context ends; bad flags are named.
func TestSimCommand(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncbuf.Buffer
	e := env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }, width: func() int { return 0 }}
	done := make(chan int)
	go func() { done <- run(ctx, e, []string{"sim", "--addr", "127.0.0.1:0", "--latency", "1ms"}) }()
	re := regexp.MustCompile(`OPENAI_BASE_URL=(\S+)`)
	var base string
	for deadline := time.Now().Add(5 * time.Second); base == "" && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
		}
	}
	if base == "" {
		cancel()
		<-done
		t.Fatalf("no URL printed:\n%s%s", out.String(), errb.String())
	}
	tr := &http.Transport{}
	resp, err := (&http.Client{Transport: tr}).Post(base+"/chat/completions", "application/json",
		strings.NewReader(`{"model":"echo","messages":[{"role":"user","content":"ping"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	tr.CloseIdleConnections()
	if !strings.Contains(string(body), `"content":"[simulated] ping"`) {
		t.Errorf("answer %s", body)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(errb.String(), "stopped after 1 request(s)") {
		t.Errorf("stderr: %s", errb.String())
	}
	for args, want := range map[string]string{
		"sim --rpm -1":               "--rpm: -1 is negative",
		"sim --tokens-per-second -3": "--tokens-per-second:",
		"sim --latency soon":         `invalid value "soon" for flag -latency`,
		"sim --addr 256.1.1.1:1":     "--addr:",
		"sim extra":                  `unexpected argument "extra"`,
	} {
		code, _, stderr := runCLI(t, context.Background(), nil, strings.Fields(args)...)
		if code != 2 || !strings.Contains(stderr, want) {
			t.Errorf("%s: exit %d %q, want 2 and %q", args, code, stderr, want)
		}
	}
}
