package main

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/batch"
	"github.com/chorusrt/chorus/internal/testkit/syncbuf"
	"github.com/chorusrt/chorus/llmtest"
)

// TestBatchBadLinesFile: the README's bad-line sample: a line cut in half,
// an endpoint the batch does not serve and a repeated custom_id are each
// reported by number and written as an error line where they have an id;
// the good lines around them run, and the exit status is 1.
func TestBatchBadLinesFile(t *testing.T) {
	in := filepath.Join(moduleRoot(t), "examples", "data", "bad-lines.jsonl")
	out := filepath.Join(t.TempDir(), "results.jsonl")
	code, _, stderr := runCLI(t, context.Background(), nil, "batch", "-i", in, "-o", out)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (bad lines); stderr:\n%s", code, stderr)
	}
	for _, want := range []string{
		"bad-lines.jsonl:2: not a valid batch input line",
		`bad-lines.jsonl:4: url: "/v1/images/generations" is not served`,
		`bad-lines.jsonl:5: custom_id "good-1" repeats line 1`,
		"3 succeeded, 0 failed, 3 bad input line(s) (line 2, line 4, line 5)",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	lines := readOutput(t, out)
	for _, id := range []string{"good-1", "good-2", "good-3"} {
		if l, ok := lines[id]; !ok || l.Response == nil || l.Response.StatusCode != 200 {
			t.Errorf("%s: %+v", id, l)
		}
	}
	if l, ok := lines["no-such-endpoint"]; !ok || l.Error == nil {
		t.Errorf("no-such-endpoint: want an error line, got %+v", l)
	}
	if len(lines) != 4 {
		t.Errorf("%d output lines, want 4 (3 answers, 1 error line)", len(lines))
	}
}

// TestBatchSampleFile: the README's main job on the sample file, with no
// key: a newcomer's first command exits 0 with 200 results, each custom_id
// once, and no bad line.
func TestBatchSampleFile(t *testing.T) {
	in := filepath.Join(moduleRoot(t), "examples", "data", "prompts.jsonl")
	out := filepath.Join(t.TempDir(), "results.jsonl")
	code, _, stderr := runCLI(t, context.Background(), nil, "batch", "-i", in, "-o", out)
	if code != 0 {
		t.Fatalf("exit %d, want 0 (the sample is all good lines); stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "200 succeeded, 0 failed") || strings.Contains(stderr, "bad input line") {
		t.Errorf("counts not reported, or a bad line reported:\n%s", stderr)
	}
	for _, want := range []string{"sim/echo", "sim/embed", "requests", "429s", "wall"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("summary lacks %q:\n%s", want, stderr)
		}
	}
	lines := readOutput(t, out)
	if len(lines) != 200 {
		t.Fatalf("%d lines, want 200", len(lines))
	}
	chats, embeds, tools := 0, 0, 0
	for id, l := range lines {
		if l.Response == nil || l.Response.StatusCode != 200 || l.Response.RequestID == "" || l.ID != batch.LineID(id) {
			t.Fatalf("%s: %+v", id, l)
		}
		var body struct {
			Object  string `json:"object"`
			Model   string `json:"model"`
			Choices []struct {
				Message struct {
					Content   string            `json:"content"`
					ToolCalls []json.RawMessage `json:"tool_calls"`
				} `json:"message"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Data []struct {
				Embedding []float32 `json:"embedding"`
			} `json:"data"`
		}
		if err := json.Unmarshal(l.Response.Body, &body); err != nil {
			t.Fatal(err)
		}
		switch body.Object {
		case "chat.completion":
			chats++
			c := body.Choices[0]
			if body.Model != "sim/echo" || !strings.HasPrefix(c.Message.Content, "[simulated") {
				t.Errorf("%s: model %s content %q", id, body.Model, c.Message.Content)
			}
			if len(c.Message.ToolCalls) > 0 {
				tools++
				if c.FinishReason != "tool_calls" {
					t.Errorf("%s: tool call with finish %q", id, c.FinishReason)
				}
			}
		case "list":
			embeds++
			if body.Model != "sim/embed" || len(body.Data) == 0 || len(body.Data[0].Embedding) != llmtest.DefaultEmbeddingDimensions {
				t.Errorf("%s: embedding body %+v", id, body)
			}
		default:
			t.Errorf("%s: object %q", id, body.Object)
		}
	}
	if chats != 150 || embeds != 50 || tools == 0 {
		t.Errorf("%d chats, %d embedding lists, %d tool calls; want 150, 50, some", chats, embeds, tools)
	}
}

// TestBatchOutputShapes: a failed item is "response": null with an error
// code and message; base64 embeddings decode to the simulator's vectors;
// --model fills lines that name no model and leaves the others alone.
func TestBatchOutputShapes(t *testing.T) {
	in := writeInput(t,
		chatLine("ok", "", "hello"),
		chatLine("prose", "sim/prose", "hello"),
		chatLine("fails", "sim/echo", "no [sim:status=400]"),
		`{"custom_id":"emb","method":"POST","url":"/v1/embeddings","body":{"model":"sim/e","input":["a","b"],"encoding_format":"base64","dimensions":4}}`,
	)
	out := filepath.Join(t.TempDir(), "out.jsonl")
	code, _, stderr := runCLI(t, context.Background(), nil, "batch", "-i", in, "-o", out, "--model", "sim/custom", "-c", "2")
	if code != 1 {
		t.Fatalf("exit %d, want 1 (one failed item):\n%s", code, stderr)
	}
	lines := readOutput(t, out)
	if f := lines["fails"]; f.Error == nil || f.Response != nil || f.Error.Code != "invalid_request_error" || !strings.Contains(f.Error.Message, "400") {
		t.Errorf("failed item: %+v", f)
	}
	var chat struct {
		Model   string `json:"model"`
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	_ = json.Unmarshal(lines["ok"].Response.Body, &chat)
	if chat.Model != "sim/custom" || !strings.HasPrefix(chat.Choices[0].Message.Content, "[simulated custom] ") {
		t.Errorf("--model did not fill the line: %+v", chat)
	}
	_ = json.Unmarshal(lines["prose"].Response.Body, &chat)
	if chat.Model != "sim/prose" {
		t.Errorf("a line's own model was replaced: %s", chat.Model)
	}
	var emb struct {
		Data []struct {
			Index     int    `json:"index"`
			Embedding string `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(lines["emb"].Response.Body, &emb); err != nil || len(emb.Data) != 2 {
		t.Fatalf("embeddings: %v %s", err, lines["emb"].Response.Body)
	}
	for _, d := range emb.Data {
		raw, err := base64.StdEncoding.DecodeString(d.Embedding)
		if err != nil || len(raw) != 16 {
			t.Fatalf("base64 vector %q: %v", d.Embedding, err)
		}
		want := llmtest.EmbeddingFor([]string{"a", "b"}[d.Index], 4)
		for i := range want {
			if got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])); got != want[i] {
				t.Fatalf("vector %d[%d] = %v, want %v", d.Index, i, got, want[i])
			}
		}
	}
}

// TestBatchBadLines: each bad line is reported with its line number and
// the field at fault, does not stop the batch, and, when it has a
// custom_id, gets an error line under it.
func TestBatchBadLines(t *testing.T) {
	cases := []struct {
		line    string
		report  string // in stderr
		written bool   // an error line under custom_id "x<n>"
	}{
		{`{not json`, "not a valid batch input line", false},
		{`{"method":"POST","url":"/v1/chat/completions","body":{}}`, "custom_id: is missing", false},
		{`{"custom_id":"x3","method":"GET","url":"/v1/chat/completions","body":{}}`, `method: want "POST"`, true},
		{`{"custom_id":"x4","method":"POST","url":"/v1/completions","body":{}}`, `url: "/v1/completions" is not served`, true},
		{`{"custom_id":"x5","method":"POST","url":"/v1/chat/completions","body":{"messages":[{"role":"robot","content":"hi"}]}}`, `body.messages[0].role: unknown role "robot"`, true},
		{`{"custom_id":"x6","method":"POST","url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"hi"}],"n":2}}`, "body.n: only n=1 is served", true},
		{`{"custom_id":"x7","method":"POST","url":"/v1/embeddings","body":{"input":[]}}`, "body.input: is empty", true},
		{`{"custom_id":"x8","method":"POST","url":"/v1/chat/completions","body":{"messages":[]}}`, "body.messages: is empty", true},
		{chatLine("x8", "", "duplicate id"), `custom_id "x8" repeats line 8`, false},
		{`{"custom_id":"x10","method":"POST","url":"/v1/chat/completions","body":{"model":"nowhere/m","messages":[{"role":"user","content":"hi"}]}}`, "", true},
	}
	lines := []string{}
	for _, c := range cases {
		lines = append(lines, c.line)
	}
	lines = append(lines, chatLine("good", "", "still runs"))
	in := writeInput(t, lines...)
	out := filepath.Join(t.TempDir(), "out.jsonl")
	code, _, stderr := runCLI(t, context.Background(), nil, "batch", "-i", in, "-o", out)
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, stderr)
	}
	got := readOutput(t, out)
	if g, ok := got["good"]; !ok || g.Response == nil {
		t.Fatalf("the good line did not run: %+v\n%s", got, stderr)
	}
	for i, c := range cases {
		n := i + 1
		if c.report != "" && !strings.Contains(stderr, fmt.Sprintf("in.jsonl:%d: %s", n, c.report)) {
			t.Errorf("line %d: stderr lacks %q:\n%s", n, c.report, stderr)
		}
		id := fmt.Sprintf("x%d", n)
		l, ok := got[id]
		if c.written != ok {
			t.Errorf("line %d: written=%v, want %v", n, ok, c.written)
			continue
		}
		if ok && (l.Error == nil || l.Error.Code == "") {
			t.Errorf("line %d: want an error line, got %+v", n, l)
		}
		if ok && c.report != "" && !strings.Contains(l.Error.Message, fmt.Sprintf("input line %d", n)) {
			t.Errorf("line %d: error message %q does not name the line", n, l.Error.Message)
		}
	}
	if l := got["x10"]; l.Error == nil || l.Error.Code != "invalid_request" || !strings.Contains(l.Error.Message, `provider "nowhere" is not registered`) {
		t.Errorf("unknown provider: %+v", l.Error)
	}
}

// TestBatchResumeCutsPartialTail: --resume cuts an unterminated last line,
// skips the custom_ids already written and finishes the rest, so every
// custom_id ends up exactly once.
func TestBatchResumeCutsPartialTail(t *testing.T) {
	var lines []string
	for i := range 30 {
		lines = append(lines, chatLine(fmt.Sprintf("r%02d", i), "", fmt.Sprintf("prompt %d", i)))
	}
	in := writeInput(t, lines...)
	dir := t.TempDir()
	full := filepath.Join(dir, "full.jsonl")
	if code, _, stderr := runCLI(t, context.Background(), nil, "batch", "-i", in, "-o", full); code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	data, _ := os.ReadFile(full)
	// Keep 10 whole lines and half of the 11th, as a killed writer might.
	cut, n := 0, 0
	for i, b := range data {
		if b == '\n' {
			n++
			if n == 10 {
				cut = i + 1
				break
			}
		}
	}
	next := strings.IndexByte(string(data[cut:]), '\n')
	partial := filepath.Join(dir, "partial.jsonl")
	if err := os.WriteFile(partial, data[:cut+next/2], 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, context.Background(), nil, "batch", "-i", in, "-o", partial, "--resume")
	if code != 0 {
		t.Fatalf("resume exit %d:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "cut an unterminated last line") || !strings.Contains(stderr, "20 succeeded") || !strings.Contains(stderr, "10 already done") {
		t.Errorf("resume report:\n%s", stderr)
	}
	if got := readOutput(t, partial); len(got) != 30 {
		t.Errorf("%d custom_ids after resume, want 30", len(got))
	}
	// Resuming a finished file does nothing.
	code, _, stderr = runCLI(t, context.Background(), nil, "batch", "-i", in, "-o", partial, "--resume")
	if code != 0 || !strings.Contains(stderr, "0 succeeded") || !strings.Contains(stderr, "30 already done") {
		t.Errorf("second resume: exit %d:\n%s", code, stderr)
	}
}

// TestBatchOutputExists: an existing non-empty output is refused without
// --resume or --overwrite; --overwrite starts again.
func TestBatchOutputExists(t *testing.T) {
	in := writeInput(t, chatLine("a", "", "hi"))
	out := filepath.Join(t.TempDir(), "out.jsonl")
	if err := os.WriteFile(out, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, context.Background(), nil, "batch", "-i", in, "-o", out)
	if code != 2 || !strings.Contains(stderr, "already holds results: pass --resume") {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	if b, _ := os.ReadFile(out); string(b) != "precious\n" {
		t.Fatal("the existing output was touched")
	}
	code, _, stderr = runCLI(t, context.Background(), nil, "batch", "-i", in, "-o", out, "--resume")
	if code != 2 || !strings.Contains(stderr, "out.jsonl:1: not a batch output line") {
		t.Fatalf("resume into a foreign file: exit %d:\n%s", code, stderr)
	}
	if code, _, stderr = runCLI(t, context.Background(), nil, "batch", "-i", in, "-o", out, "--overwrite"); code != 0 {
		t.Fatalf("--overwrite: exit %d:\n%s", code, stderr)
	}
	if got := readOutput(t, out); len(got) != 1 {
		t.Errorf("after --overwrite: %v", got)
	}
}

// TestBatchFlagErrors: usage errors exit 2 and name the flag at fault.
func TestBatchFlagErrors(t *testing.T) {
	in := writeInput(t, chatLine("a", "", "hi"))
	out := filepath.Join(t.TempDir(), "out.jsonl")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"batch", "-o", out}, "-i is required"},
		{[]string{"batch", "-i", in}, "-o is required"},
		{[]string{"batch", "-i", in, "-o", out, "-c", "0"}, "-c must be at least 1"},
		{[]string{"batch", "-i", in, "-o", out, "-c", "many"}, `invalid value "many" for flag -c`},
		{[]string{"batch", "-i", in, "-o", out, "--frobnicate"}, "flag provided but not defined: -frobnicate"},
		{[]string{"batch", "-i", in, "-o", out, "--model", "nowhere/m"}, `--model nowhere/m: provider "nowhere" is not registered`},
		{[]string{"batch", "-i", in, "-o", out, "--embed-model", "plain"}, `--embed-model plain: "plain" is neither provider/model nor an alias`},
		{[]string{"batch", "-i", in, "-o", out, "--resume", "--overwrite"}, "--resume and --overwrite exclude each other"},
		{[]string{"batch", "-i", in, "-o", in}, "is the input file"},
		{[]string{"batch", "-i", filepath.Join(t.TempDir(), "missing.jsonl"), "-o", out}, "-i: open"},
		{[]string{"batch", "-i", in, "-o", out, "--config", filepath.Join(t.TempDir(), "none.yaml")}, "--config: open"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"batch", "-i", in, "-o", out, "--peers", "127.0.0.1:7101"}, "--peers and --bind need --cluster"},
		{[]string{"batch", "-i", in, "-o", out, "--cluster", "c"}, "--cluster needs --peers"},
		{[]string{"batch", "-i", in, "-o", out, "--cluster", "c", "--peers", "nohost"}, `cluster.Peers[0]: "nohost" is not host:port`},
		{[]string{"node", "--cluster", "c"}, "--cluster, --bind and --peers are required"},
		{[]string{"node", "--cluster", "c", "--bind", "127.0.0.1:x", "--peers", "127.0.0.1:7101"}, `cluster.Bind: "127.0.0.1:x" has no valid port`},
		{[]string{"node", "--cluster", "c", "--bind", "127.0.0.1:7101", "--peers", "127.0.0.1:7101", "extra"}, `unexpected argument "extra"`},
	}
	for _, c := range cases {
		code, _, stderr := runCLI(t, context.Background(), nil, c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr, c.want)
		}
	}
	for _, v := range []map[string]string{{"CHORUS_SIM_LATENCY": "soon"}, {"CHORUS_SIM_RPM": "-1"}} {
		code, _, stderr := runCLI(t, context.Background(), v, "batch", "-i", in, "-o", out)
		for k := range v {
			if code != 2 || !strings.Contains(stderr, k) {
				t.Errorf("%v: exit %d, stderr %q; want 2 naming the variable", v, code, stderr)
			}
		}
	}
}

// TestBatchPacedByActors: against a simulator admitting 20 requests per
// 500ms window, 120 items at concurrency 40 all succeed with few 429s:
// the credential actor learns the limit from the headers and paces.
func TestBatchPacedByActors(t *testing.T) {
	var lines []string
	for i := range 120 {
		lines = append(lines, chatLine(fmt.Sprintf("p%03d", i), "", fmt.Sprintf("prompt %d", i)))
	}
	in := writeInput(t, lines...)
	out := filepath.Join(t.TempDir(), "out.jsonl")
	vars := map[string]string{"CHORUS_SIM_RPM": "20", "CHORUS_SIM_WINDOW": "500ms"}
	begin := time.Now()
	code, _, stderr := runCLI(t, context.Background(), vars, "batch", "-i", in, "-o", out, "-c", "40")
	took := time.Since(begin)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	if got := readOutput(t, out); len(got) != 120 {
		t.Fatalf("%d lines", len(got))
	}
	if took < 2500*time.Millisecond {
		t.Errorf("120 requests at 20 per 500ms took %v: the limit was not applied", took)
	}
	// The summary row: requests, failed, tokens, retries, 429s.
	var reqs, failed, tokens, retries, limited int
	for _, l := range strings.Split(stderr, "\n") {
		if f := strings.Fields(l); len(f) == 7 && f[0] == "sim/echo" {
			fmt.Sscan(strings.Join(f[1:6], " "), &reqs, &failed, &tokens, &retries, &limited)
		}
	}
	if reqs != 120 || failed != 0 || limited > 6 {
		t.Errorf("summary: %d requests, %d failed, %d 429s (want 120, 0, at most a few):\n%s", reqs, failed, limited, stderr)
	}
	t.Logf("120 items in %v, %d 429s, %d retries", took, limited, retries)
}

// TestBatchInterruptedThenResumed: cancelling a batch (SIGINT) writes only
// finished items, exits 130, and --resume completes it.
func TestBatchInterruptedThenResumed(t *testing.T) {
	var lines []string
	for i := range 60 {
		lines = append(lines, chatLine(fmt.Sprintf("i%02d", i), "", fmt.Sprintf("prompt %d", i)))
	}
	in := writeInput(t, lines...)
	out := filepath.Join(t.TempDir(), "out.jsonl")
	vars := map[string]string{"CHORUS_SIM_LATENCY": "40ms"}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for {
			if b, _ := os.ReadFile(out); strings.Count(string(b), "\n") >= 10 {
				cancel()
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	code, _, stderr := runCLI(t, ctx, vars, "batch", "-i", in, "-o", out, "-c", "4")
	cancel()
	if code != 130 || !strings.Contains(stderr, "--resume") {
		t.Fatalf("exit %d, want 130:\n%s", code, stderr)
	}
	first := readOutput(t, out)
	if len(first) < 10 || len(first) >= 60 {
		t.Fatalf("%d lines after the interruption", len(first))
	}
	for id, l := range first {
		if l.Error != nil {
			t.Errorf("%s: a cancelled call was written as an error: %+v", id, l.Error)
		}
	}
	code, _, stderr = runCLI(t, context.Background(), vars, "batch", "-i", in, "-o", out, "-c", "8", "--resume")
	if code != 0 {
		t.Fatalf("resume exit %d:\n%s", code, stderr)
	}
	if got := readOutput(t, out); len(got) != 60 {
		t.Errorf("%d custom_ids after resume, want 60", len(got))
	}
}

// TestBatchRealProviderWhenKeyed: with a provider key in the environment,
// lines that name no model go to that provider's default model (here an
// OpenAI-format fake standing in for api.openai.com), and no output or
// log shows the key.
func TestBatchRealProviderWhenKeyed(t *testing.T) {
	srv := llmtest.NewServer(llmtest.WithDefault(llmtest.Reply{Text: "from the provider"}))
	defer srv.Close()
	const key = "sk-test-0123456789abcdef"
	vars := map[string]string{"OPENAI_API_KEY": key, "OPENAI_BASE_URL": srv.OpenAIBaseURL()}
	in := writeInput(t, chatLine("a", "", "hi"), chatLine("b", "sim/echo", "hi"),
		`{"custom_id":"e","method":"POST","url":"/v1/embeddings","body":{"input":"x"}}`)
	out := filepath.Join(t.TempDir(), "out.jsonl")
	code, stdout, stderr := runCLI(t, context.Background(), vars, "batch", "-i", in, "-o", out)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	data, _ := os.ReadFile(out)
	if strings.Contains(string(data)+stdout+stderr, key) || strings.Contains(string(data)+stderr, key[3:]) {
		t.Fatal("the key was printed")
	}
	got := readOutput(t, out)
	var body struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(got["a"].Response.Body, &body)
	if body.Model != "openai/gpt-4.1-mini" || !strings.Contains(string(got["a"].Response.Body), "from the provider") {
		t.Errorf("a: %s", got["a"].Response.Body)
	}
	_ = json.Unmarshal(got["e"].Response.Body, &body)
	if body.Model != "openai/text-embedding-3-small" {
		t.Errorf("e: %s", got["e"].Response.Body)
	}
	_ = json.Unmarshal(got["b"].Response.Body, &body)
	if body.Model != "sim/echo" {
		t.Errorf("b: a line naming the simulator left it: %s", got["b"].Response.Body)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || reqs[0].Header.Get("Authorization") != "Bearer "+key {
		t.Errorf("provider saw %d requests", len(reqs))
	}
	if !strings.Contains(stderr, "use openai/gpt-4.1-mini (first provider with a key)") {
		t.Errorf("the default was not announced:\n%s", stderr)
	}
	// A keyed provider with no default model: lines without one fail and
	// say which flag to use.
	vars = map[string]string{"ZAI_API_KEY": key, "ZAI_BASE_URL": srv.OpenAIBaseURL()}
	out2 := filepath.Join(t.TempDir(), "out.jsonl")
	code, _, stderr = runCLI(t, context.Background(), vars, "batch", "-i", in, "-o", out2)
	got = readOutput(t, out2)
	if code != 1 || got["a"].Error == nil || !strings.Contains(got["a"].Error.Message, "pass --model provider/model") ||
		!strings.Contains(got["e"].Error.Message, "pass --embed-model") || got["b"].Response == nil {
		t.Errorf("exit %d, lines %+v\n%s", code, got, stderr)
	}
}

// TestBatchFromStdin: "-i -" reads the input from stdin (no total, so no
// ETA), and a concurrency above the runtime's default queue still runs.
func TestBatchFromStdin(t *testing.T) {
	var lines []string
	for i := range 40 {
		lines = append(lines, chatLine(fmt.Sprintf("s%02d", i), "", "from stdin"))
	}
	out := filepath.Join(t.TempDir(), "out.jsonl")
	var errb syncbuf.Buffer
	e := env{stdin: strings.NewReader(strings.Join(lines, "\n")), stdout: &errb, stderr: &errb,
		getenv: func(string) string { return "" }, width: func() int { return 0 }}
	if code := run(context.Background(), e, []string{"batch", "-i", "-", "-o", out, "-c", "2000"}); code != 0 {
		t.Fatalf("exit %d:\n%s", code, errb.String())
	}
	if got := readOutput(t, out); len(got) != 40 {
		t.Errorf("%d lines", len(got))
	}
}

// TestBatchGeminiPerMinuteQuota: a batch on a Gemini-format model whose
// server refuses past a per-minute quota (no limit headers; each 429 is a
// RESOURCE_EXHAUSTED naming a per-minute QuotaFailure and a RetryInfo
// delay) paces from those 429s and retries: every line succeeds, none is
// written as insufficient_quota, and the server saw each line's request
// plus its refusals, no more.
func TestBatchGeminiPerMinuteQuota(t *testing.T) {
	const total, limit = 160, 40
	srv := llmtest.NewServer(llmtest.WithDefault(llmtest.Reply{Text: "paced"}),
		llmtest.WithRateLimit(llmtest.RateLimit{Requests: limit, Window: 500 * time.Millisecond}))
	defer srv.Close()
	code, stderr, got := geminiBatch(t, srv, total, 64)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	if len(got) != total {
		t.Fatalf("%d lines written, want %d", len(got), total)
	}
	for id, l := range got {
		if l.Error != nil || l.Response == nil || l.Response.StatusCode != 200 || !strings.Contains(string(l.Response.Body), "paced") {
			t.Errorf("%s: %+v", id, l)
		}
	}
	limited := srv.RateLimited()
	if limited == 0 {
		t.Error("the server refused nothing: its quota was not in force")
	}
	if n := len(srv.Requests()); n != total+limited {
		t.Errorf("server saw %d requests with %d 429s: want each line's one request plus the refused ones (%d)", n, limited, total+limited)
	}
	t.Logf("%d lines, %d 429s at the server", total, limited)
}

// TestBatchGeminiDailyQuotaIsFinal: past a per-day quota (a QuotaFailure
// naming a per-day quota id, no RetryInfo) retrying cannot help: the lines
// beyond it are written as insufficient_quota errors, the batch exits 1,
// and no refused request is sent again.
func TestBatchGeminiDailyQuotaIsFinal(t *testing.T) {
	const total, limit = 12, 5
	srv := llmtest.NewServer(llmtest.WithDefault(llmtest.Reply{Text: "served"}),
		llmtest.WithRateLimit(llmtest.RateLimit{Requests: limit, Window: 24 * time.Hour}))
	defer srv.Close()
	code, stderr, got := geminiBatch(t, srv, total, 1)
	var served, exhausted int
	for id, l := range got {
		switch {
		case l.Response != nil && l.Response.StatusCode == 200:
			served++
		case l.Error != nil && l.Error.Code == "insufficient_quota":
			exhausted++
		default:
			t.Errorf("%s: neither served nor insufficient_quota: %+v", id, l)
		}
	}
	if code != 1 || served != limit || exhausted != total-limit {
		t.Errorf("exit %d, %d served, %d insufficient_quota; want 1, %d, %d\n%s", code, served, exhausted, limit, total-limit, stderr)
	}
	if n, refused := len(srv.Requests()), srv.RateLimited(); n > total || refused > total-limit {
		t.Errorf("server saw %d requests, %d refused: a request past the daily quota was sent again", n, refused)
	}
}

// geminiBatch runs a batch of total chat lines on a Gemini model at
// concurrency c, the gemini provider keyed and pointed at srv, and returns
// its exit status, stderr and output lines by custom_id.
func geminiBatch(t *testing.T, srv *llmtest.Server, total, c int) (code int, stderr string, got map[string]outLine) {
	t.Helper()
	vars := map[string]string{"GEMINI_API_KEY": "gm-test-key-0123456789", "GEMINI_BASE_URL": srv.GeminiBaseURL()}
	var lines []string
	for i := range total {
		lines = append(lines, chatLine(fmt.Sprintf("g%03d", i), "gemini/gemini-2.5-flash", fmt.Sprintf("prompt %d", i)))
	}
	out := filepath.Join(t.TempDir(), "out.jsonl")
	code, _, stderr = runCLI(t, context.Background(), vars, "batch", "-i", writeInput(t, lines...), "-o", out, "-c", strconv.Itoa(c))
	return code, stderr, readOutput(t, out)
}

// TestBatchBareOpenAIModelNames: a batch file as OpenAI's own tools write
// it names bare OpenAI models; each line runs on provider openai, and a
// bare name with no provider to serve it is a bad line naming it.
func TestBatchBareOpenAIModelNames(t *testing.T) {
	srv := llmtest.NewServer(llmtest.WithDefault(llmtest.Reply{Text: "from the provider"}))
	defer srv.Close()
	vars := map[string]string{"OPENAI_API_KEY": "sk-test-0123456789abcdef", "OPENAI_BASE_URL": srv.OpenAIBaseURL()}
	in := writeInput(t, chatLine("a", "gpt-4o-mini", "hi"), chatLine("b", "gpt-4.1", "hi"),
		`{"custom_id":"e","method":"POST","url":"/v1/embeddings","body":{"model":"text-embedding-3-small","input":"x"}}`)
	out := filepath.Join(t.TempDir(), "out.jsonl")
	code, _, stderr := runCLI(t, context.Background(), vars, "batch", "-i", in, "-o", out)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	got := readOutput(t, out)
	if len(got) != 3 {
		t.Fatalf("%d lines answered, want 3:\n%s", len(got), stderr)
	}
	models := map[string]bool{}
	for _, r := range srv.Requests() {
		models[r.Model] = true
	}
	for _, m := range []string{"gpt-4o-mini", "gpt-4.1", "text-embedding-3-small"} {
		if !models[m] {
			t.Errorf("provider openai never saw model %q (saw %v)", m, models)
		}
	}

	// Without an OpenAI key, a bare name has no provider: a bad line.
	in = writeInput(t, chatLine("a", "gpt-4o-mini", "hi"), chatLine("b", "sim/echo", "hi"))
	out = filepath.Join(t.TempDir(), "out.jsonl")
	code, _, stderr = runCLI(t, context.Background(), map[string]string{}, "batch", "-i", in, "-o", out)
	got = readOutput(t, out)
	if code != 1 || got["b"].Error != nil || got["a"].Error == nil || got["a"].Error.Code != "invalid_request" ||
		!strings.Contains(got["a"].Error.Message, `model "gpt-4o-mini" is not served`) || !strings.Contains(got["a"].Error.Message, `provider "openai" (not registered)`) {
		t.Fatalf("exit %d: %+v %+v\n%s", code, got["a"].Error, got["b"].Error, stderr)
	}
}
