package batch

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
)

// fakeRunner answers every chat with the prompt echoed, fails a prompt
// containing "fail", and counts the calls per custom prompt.
type fakeRunner struct {
	calls atomic.Int64
	mu    sync.Mutex
	seen  map[string]int
	usage llm.Usage
	block chan struct{} // when set, calls wait on it (or ctx)
}

func (f *fakeRunner) Chat(ctx context.Context, req *llm.ChatRequest) (*llm.ChatResult, error) {
	f.calls.Add(1)
	prompt := req.Messages[len(req.Messages)-1].Content
	f.mu.Lock()
	if f.seen == nil {
		f.seen = map[string]int{}
	}
	f.seen[prompt]++
	f.mu.Unlock()
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if strings.Contains(prompt, "fail") {
		return nil, &llm.APIError{Status: 400, Code: "bad_prompt", Message: "refused"}
	}
	provider, model, _ := strings.Cut(req.Model, "/")
	u := f.usage
	if u.IsZero() {
		u = llm.Usage{PromptTokens: 10, CompletionTokens: 5}
	}
	return &llm.ChatResult{Content: "echo: " + prompt, FinishReason: llm.FinishStop, Usage: u,
		Meta: llm.ResponseMeta{Provider: provider, Model: model, RequestID: "req-" + prompt}}, nil
}

func (f *fakeRunner) Embed(ctx context.Context, req *llm.EmbedRequest) (*llm.EmbedResult, error) {
	f.calls.Add(1)
	provider, model, _ := strings.Cut(req.Model, "/")
	vs := make([][]float32, len(req.Inputs))
	for i := range vs {
		vs[i] = []float32{1, 2}
	}
	return &llm.EmbedResult{Vectors: vs, Usage: llm.Usage{PromptTokens: 3}, Meta: llm.ResponseMeta{Provider: provider, Model: model}}, nil
}

func chatLine(id, model, prompt string) string {
	body := map[string]any{"messages": []any{map[string]any{"role": "user", "content": prompt}}}
	if model != "" {
		body["model"] = model
	}
	b, _ := json.Marshal(map[string]any{"custom_id": id, "method": "POST", "url": URLChat, "body": body})
	return string(b)
}

// outLine is a decoded output line.
type outLine struct {
	ID       string `json:"id"`
	CustomID string `json:"custom_id"`
	Response *struct {
		StatusCode int             `json:"status_code"`
		RequestID  string          `json:"request_id"`
		Body       json.RawMessage `json:"body"`
	} `json:"response"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// readOutput decodes every line of path, failing on a torn line or a
// custom_id written twice.
func readOutput(t *testing.T, path string) map[string]outLine {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		t.Fatalf("%s does not end with a newline", path)
	}
	out := map[string]outLine{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 16<<20)
	for n := 1; sc.Scan(); n++ {
		var l outLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%s:%d is not whole JSON: %v", path, n, err)
		}
		if _, dup := out[l.CustomID]; dup {
			t.Fatalf("%s:%d: custom_id %q written twice", path, n, l.CustomID)
		}
		if (l.Response == nil) == (l.Error == nil) {
			t.Fatalf("%s:%d: want exactly one of response and error", path, n)
		}
		out[l.CustomID] = l
	}
	return out
}

func runJob(t *testing.T, ctx context.Context, j Job) (*Report, []Event, error) {
	t.Helper()
	var mu sync.Mutex
	var evs []Event
	inner := j.Observe
	j.Observe = func(ev Event) {
		mu.Lock()
		evs = append(evs, ev)
		mu.Unlock()
		if inner != nil {
			inner(ev)
		}
	}
	rep, err := Run(ctx, j)
	if cerr := j.Output.Close(); cerr != nil {
		t.Fatal(cerr)
	}
	return rep, evs, err
}

// TestRunFromGo is the library face: a Go program runs a job on its own
// Runner and gets one output line per custom_id, bad lines reported by
// number (and written under their id when they have one), progress events
// for every item, the default model announced once, and the per-model
// summary.
func TestRunFromGo(t *testing.T) {
	in := strings.Join([]string{
		chatLine("a", "p/m1", "one"),
		chatLine("b", "", "two"),
		`{"custom_id":"torn","method":"POST","url":"/v1/chat/c`,
		chatLine("c", "", "three fail"),
		chatLine("a", "p/m1", "again"),
		`{"custom_id":"e","method":"POST","url":"/v1/embeddings","body":{"model":"p/emb","input":["x","y"]}}`,
		`{"custom_id":"img","method":"POST","url":"/v1/images/generations","body":{}}`,
	}, "\n")
	out, err := OpenOutput(filepath.Join(t.TempDir(), "out.jsonl"), Create)
	if err != nil {
		t.Fatal(err)
	}
	r := &fakeRunner{}
	asked := 0
	rep, evs, err := runJob(t, context.Background(), Job{
		Input: strings.NewReader(in), InputName: "in.jsonl", Output: out, Runner: r, Concurrency: 3,
		DefaultModel: func(embed bool) (string, string, error) { asked++; return "p/dflt", "the test says so", nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Succeeded != 3 || rep.Failed != 1 || rep.Written != 5 || len(rep.BadLines) != 3 {
		t.Errorf("report %+v", rep)
	}
	wantBad := map[int]string{3: "not a valid batch input line", 5: `custom_id "a" repeats line 1`, 7: `url: "/v1/images/generations" is not served`}
	for _, b := range rep.BadLines {
		if w := wantBad[b.Line]; w == "" || !strings.Contains(b.Err.Error(), w) {
			t.Errorf("bad line %d: %v", b.Line, b.Err)
		}
	}
	if asked != 1 {
		t.Errorf("DefaultModel asked %d times, want once", asked)
	}
	got := readOutput(t, out.Path())
	if len(got) != 5 {
		t.Fatalf("%d lines: %v", len(got), got)
	}
	if got["c"].Error == nil || got["c"].Error.Code != "bad_prompt" {
		t.Errorf("failed item: %+v", got["c"])
	}
	if got["img"].Error == nil || !strings.Contains(got["img"].Error.Message, "input line 7") {
		t.Errorf("bad line with an id: %+v", got["img"])
	}
	if got["b"].ID != LineID("b") || !strings.Contains(string(got["b"].Response.Body), `"model":"p/dflt"`) {
		t.Errorf("default model line: %s", got["b"].Response.Body)
	}
	var done, bad, dflt int
	for _, ev := range evs {
		switch ev.Kind {
		case EventDone:
			done++
		case EventBadLine:
			bad++
		case EventDefaultModel:
			dflt++
			if ev.Model != "p/dflt" || ev.Why != "the test says so" {
				t.Errorf("default event %+v", ev)
			}
		}
	}
	if done != 7 || bad != 3 || dflt != 1 {
		t.Errorf("events: %d done, %d bad, %d default; want 7, 3, 1", done, bad, dflt)
	}
	models := map[string]ModelSummary{}
	for _, m := range rep.Models {
		models[m.Model] = m
	}
	if m := models["p/dflt"]; m.Requests != 2 || m.Failed != 1 || m.Tokens != 15 {
		t.Errorf("p/dflt summary %+v", m)
	}
	if m := models["p/emb"]; m.Requests != 1 || m.Tokens != 3 {
		t.Errorf("p/emb summary %+v", m)
	}
}

// TestRunResumeSkipsDone: a job over an output opened with Resume skips
// the custom_ids it holds (never calling the runner for them), cuts a torn
// tail, and ends with each custom_id exactly once.
func TestRunResumeSkipsDone(t *testing.T) {
	var lines []string
	for i := range 20 {
		lines = append(lines, chatLine(fmt.Sprintf("r%02d", i), "p/m", fmt.Sprintf("prompt %d", i)))
	}
	path := filepath.Join(t.TempDir(), "out.jsonl")
	out, _ := OpenOutput(path, Create)
	if _, _, err := runJob(t, context.Background(), Job{Input: strings.NewReader(strings.Join(lines[:8], "\n")), Output: out, Runner: &fakeRunner{}}); err != nil {
		t.Fatal(err)
	}
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	_, _ = f.WriteString(`{"id":"batch_req_x","custom_id":"r08","respon`) // a torn tail
	_ = f.Close()

	if _, err := OpenOutput(path, Create); !errors.Is(err, ErrOutputExists) {
		t.Fatalf("Create over results: %v, want ErrOutputExists", err)
	}
	out, err := OpenOutput(path, Resume)
	if err != nil {
		t.Fatal(err)
	}
	if out.Cut() == 0 || out.DoneCount() != 8 {
		t.Errorf("cut %d, done %d; want a cut and 8 done", out.Cut(), out.DoneCount())
	}
	r := &fakeRunner{}
	rep, evs, err := runJob(t, context.Background(), Job{Input: strings.NewReader(strings.Join(lines, "\n")), Output: out, Runner: r})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Skipped != 8 || rep.Succeeded != 12 || r.calls.Load() != 12 {
		t.Errorf("skipped %d, succeeded %d, calls %d; want 8, 12, 12", rep.Skipped, rep.Succeeded, r.calls.Load())
	}
	skips := 0
	for _, ev := range evs {
		if ev.Kind == EventSkipped {
			skips++
		}
	}
	if skips != 8 {
		t.Errorf("%d skip events", skips)
	}
	if got := readOutput(t, path); len(got) != 20 {
		t.Errorf("%d custom_ids, want 20", len(got))
	}
}

// TestRunInterruptedWritesNothingInFlight: when the context ends, calls in
// flight are not written (so a resumed job runs them) and the report says
// interrupted.
func TestRunInterruptedWritesNothingInFlight(t *testing.T) {
	var lines []string
	for i := range 10 {
		lines = append(lines, chatLine(fmt.Sprintf("i%d", i), "p/m", fmt.Sprintf("p%d", i)))
	}
	out, _ := OpenOutput(filepath.Join(t.TempDir(), "out.jsonl"), Create)
	r := &fakeRunner{block: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	var once sync.Once
	j := Job{Input: strings.NewReader(strings.Join(lines, "\n")), Output: out, Runner: r, Concurrency: 2}
	go func() {
		for r.calls.Load() < 2 {
			time.Sleep(time.Millisecond)
		}
		once.Do(func() { close(started) })
		cancel()
	}()
	rep, _, err := runJob(t, ctx, j)
	<-started
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Interrupted || rep.Written != 0 {
		t.Errorf("report %+v", rep)
	}
	if got := readOutput(t, out.Path()); len(got) != 0 {
		t.Errorf("%d lines written by an interrupted job", len(got))
	}
}

// TestRunCost: a priced model's answers carry their cost (events, summary);
// an unpriced model has none, never a guess.
func TestRunCost(t *testing.T) {
	in := strings.Join([]string{chatLine("a", "p/priced", "x"), chatLine("b", "p/priced", "y"), chatLine("c", "p/free", "z")}, "\n")
	out, _ := OpenOutput(filepath.Join(t.TempDir(), "out.jsonl"), Create)
	r := &fakeRunner{usage: llm.Usage{PromptTokens: 1000, CacheReadTokens: 2000, CacheWriteTokens: 100, CompletionTokens: 500}}
	prices := &Prices{Models: llm.Prices{"p/priced": {Input: 3, CachedInput: 0.3, CacheWrite: 3.75, Output: 15, BatchDiscount: 0.5}}}
	rep, evs, err := runJob(t, context.Background(), Job{Input: strings.NewReader(in), Output: out, Runner: r, Prices: prices})
	if err != nil {
		t.Fatal(err)
	}
	// 1000*3 + 2000*0.3 + 100*3.75 + 500*15 = 3000+600+375+7500 = 11475 per 1M.
	const each = 0.011475
	for _, ev := range evs {
		if ev.Kind != EventDone {
			continue
		}
		switch ev.CustomID {
		case "a", "b":
			if ev.Cost == nil || math.Abs(ev.Cost.USD-each) > 1e-12 {
				t.Errorf("%s: cost %v, want %v", ev.CustomID, ev.Cost, each)
			}
		case "c":
			if ev.Cost != nil {
				t.Errorf("unpriced model has a cost: %v", ev.Cost)
			}
		}
	}
	lines := readOutput(t, out.Path())
	for id, want := range map[string]string{"a": `"cost":0.011475`, "c": ""} {
		body := string(lines[id].Response.Body)
		if want != "" && !strings.Contains(body, want) || want == "" && strings.Contains(body, `"cost"`) {
			t.Errorf("%s: usage.cost in %s, want %q", id, body, want)
		}
	}
	for _, m := range rep.Models {
		switch m.Model {
		case "p/priced":
			if m.Priced != 2 || math.Abs(m.Cost.USD-2*each) > 1e-12 {
				t.Errorf("priced summary %+v", m)
			}
		case "p/free":
			if m.Priced != 0 || m.Cost.USD != 0 {
				t.Errorf("unpriced summary %+v", m)
			}
		}
	}
}

// TestInputPromptCache: prompt_cache_key and prompt_cache_retention in a
// batch line become the request's prompt-cache options.
func TestInputPromptCache(t *testing.T) {
	req, err := chatFromOpenAI([]byte(`{"messages":[{"role":"user","content":"x"}],"prompt_cache_key":"k1","prompt_cache_retention":"24h"}`))
	if err != nil {
		t.Fatal(err)
	}
	if req.Cache == nil || req.Cache.Key != "k1" || req.Cache.Retention != "24h" {
		t.Errorf("cache %+v", req.Cache)
	}
	if _, err := chatFromOpenAI([]byte(`{"messages":[{"role":"user","content":"x"}],"prompt_cache_key":7}`)); err == nil || !strings.Contains(err.Error(), "body.prompt_cache_key: is a JSON number, want a string") {
		t.Errorf("a number key: %v", err)
	}
}

// TestInputCacheControl: cache_control on a content part marks its
// message, on a tool marks the tool (as gateways accept it in the OpenAI
// format); a bad one names its JSON path.
func TestInputCacheControl(t *testing.T) {
	req, err := chatFromOpenAI([]byte(`{"messages":[
		{"role":"system","content":[{"type":"text","text":"long","cache_control":{"type":"ephemeral","ttl":"1h"}}]},
		{"role":"user","content":"q"}],
		"tools":[{"type":"function","function":{"name":"f"},"cache_control":{"type":"ephemeral"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if m := req.Messages[0]; m.Cache == nil || m.Cache.TTL != llm.CacheTTL1h || m.Content != "long" || req.Messages[1].Cache != nil {
		t.Errorf("messages %+v", req.Messages)
	}
	if req.Tools[0].Cache == nil {
		t.Errorf("tool not marked")
	}
	_, err = chatFromOpenAI([]byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"x","cache_control":{"type":"ephemeral","ttl":"2h"}}]}]}`))
	if err == nil || !strings.Contains(err.Error(), "body.messages[0].content[0].cache_control.ttl: unknown TTL") {
		t.Errorf("bad TTL: %v", err)
	}
}
