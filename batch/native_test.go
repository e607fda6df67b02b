package batch

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
)

const testKey = "sk-native-0123456789abcdef"

// nativeClients are credentials of the three formats, all at srv.
func nativeClients(t *testing.T, srv *llmtest.Server) map[string]*providers.Client {
	t.Helper()
	out := map[string]*providers.Client{}
	for id, base := range map[string]string{"openai": srv.OpenAIBaseURL(), "anthropic": srv.AnthropicBaseURL(), "gemini": srv.GeminiBaseURL()} {
		cfg, ok := providers.Builtin(id)
		if !ok {
			t.Fatalf("no builtin %s", id)
		}
		cfg.BaseURL, cfg.APIKey = base, providers.Secret(testKey)
		c, err := providers.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		out[id] = c
	}
	return out
}

// outcomes errs custom_ids starting "e" and expires those starting "x".
func outcomes(id string, _ []byte) llmtest.BatchResult {
	switch {
	case strings.HasPrefix(id, "e"):
		return llmtest.BatchResult{Outcome: llmtest.BatchErrored, Fault: &llmtest.Fault{Status: 400, Message: "refused " + id}}
	case strings.HasPrefix(id, "x"):
		return llmtest.BatchResult{Outcome: llmtest.BatchExpired}
	}
	return llmtest.BatchResult{Reply: &llmtest.Reply{Text: "native " + id, Usage: &llm.Usage{PromptTokens: 100, CacheReadTokens: 50, CompletionTokens: 20}}}
}

func nativeInput() string {
	return strings.Join([]string{
		chatLine("oa1", "openai/gpt-x", "p"), chatLine("oa2", "openai/gpt-x", "p"), chatLine("e-oa", "openai/gpt-x", "p"), chatLine("x-oa", "openai/gpt-x", "p"),
		chatLine("an1", "anthropic/claude-x", "p"), chatLine("e-an", "anthropic/claude-x", "p"), chatLine("x-an", "anthropic/claude-x", "p"),
		chatLine("gm1", "gemini/gem-x", "p"), chatLine("e-gm", "gemini/gem-x", "p"),
		chatLine("live1", "sim/echo", "runs live"),
		`{"custom_id":"vec","method":"POST","url":"/v1/embeddings","body":{"model":"openai/emb","input":"x"}}`,
	}, "\n")
}

// TestNativeJob: a job whose lines name three providers sends each
// provider's chat lines to its own batch (one per provider) and the OpenAI
// embedding line to an embeddings batch, runs the others live (a provider
// without a client), writes one
// line per custom_id with usage mapped the Chorus way and the batch price
// applied, reports the expired lines as not run (nothing written), and a
// resumed job runs exactly those live, submitting nothing again.
func TestNativeJob(t *testing.T) {
	srv := llmtest.NewServer(llmtest.WithBatchAPI(llmtest.BatchAPIOptions{Run: 30 * time.Millisecond, Result: outcomes}))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "out.jsonl")
	out, _ := OpenOutput(path, Create)
	r := &fakeRunner{}
	prices := &Prices{Models: llm.Prices{"openai/gpt-x": {Input: 2, CachedInput: 1, Output: 8, BatchDiscount: 0.5}}}
	native := &Native{Clients: nativeClients(t, srv), Poll: 5 * time.Millisecond}
	rep, evs, err := runJob(t, context.Background(), Job{Input: strings.NewReader(nativeInput()), Output: out, Runner: r, Native: native, Prices: prices})
	if err != nil {
		t.Fatal(err)
	}
	got := readOutput(t, path)
	if len(got) != 9 {
		t.Fatalf("%d lines, want 9 (11 minus 2 expired): %v", len(got), keys(got))
	}
	for _, id := range []string{"oa1", "oa2", "an1", "gm1"} {
		var body struct {
			Model   string `json:"model"`
			Choices []struct {
				Message struct{ Content string }
			}
			Usage struct {
				PromptTokens        int `json:"prompt_tokens"`
				PromptTokensDetails struct {
					CachedTokens int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			}
		}
		l := got[id]
		if l.Response == nil {
			t.Fatalf("%s: %+v", id, l)
		}
		_ = json.Unmarshal(l.Response.Body, &body)
		if body.Choices[0].Message.Content != "native "+id || body.Usage.PromptTokens != 150 || body.Usage.PromptTokensDetails.CachedTokens != 50 {
			t.Errorf("%s: %s", id, l.Response.Body)
		}
	}
	for _, id := range []string{"e-oa", "e-an", "e-gm"} {
		if l := got[id]; l.Error == nil || !strings.Contains(l.Error.Message, "refused "+id) {
			t.Errorf("%s: want its error, got %+v", id, l)
		}
	}
	if _, ok := got["x-oa"]; ok {
		t.Error("an expired line was written")
	}
	if r.calls.Load() != 1 {
		t.Errorf("%d live calls, want 1 (the sim line)", r.calls.Load())
	}
	batches := srv.Batches()
	if len(batches) != 4 {
		t.Fatalf("%d batches, want one per provider and one for OpenAI embeddings: %+v", len(batches), batches)
	}
	var emb struct {
		Object string `json:"object"`
		Model  string `json:"model"`
		Data   []struct {
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	if l := got["vec"]; l.Response == nil || json.Unmarshal(l.Response.Body, &emb) != nil || emb.Object != "list" || emb.Model != "openai/emb" ||
		len(emb.Data) != 1 || len(emb.Data[0].Embedding) != llmtest.DefaultEmbeddingDimensions {
		t.Errorf("native embedding line: %+v %+v", got["vec"], got["vec"].Error)
	}
	if strings.Join(rep.NotRun, ",") != "x-an,x-oa" && strings.Join(rep.NotRun, ",") != "x-oa,x-an" {
		t.Errorf("not run: %v", rep.NotRun)
	}
	var oa ModelSummary
	for _, m := range rep.Models {
		if m.Model == "openai/gpt-x" {
			oa = m
		}
	}
	// Two answers priced at half of (100*2 + 50*1 + 20*8) per million.
	if want := 2 * 0.5 * 410 / 1e6; oa.Native != 3 || oa.Priced != 2 || math.Abs(oa.Cost.USD-want) > 1e-12 || math.Abs(oa.Saved.USD-want) > 1e-12 || oa.NotRun != 1 {
		t.Errorf("openai summary %+v, want 3 native, cost and saving %v", oa, want)
	}
	remote := 0
	for _, ev := range evs {
		if ev.Kind == EventRemote {
			remote++
		}
	}
	if remote < 6 {
		t.Errorf("%d remote events, want submitted and polled for each batch", remote)
	}
	if data, _ := os.ReadFile(JournalPath(path)); strings.Contains(string(data), testKey) {
		t.Fatal("the key is in the journal")
	}

	// Resume: the expired lines run live; nothing is submitted again.
	out, err = OpenOutput(path, Resume)
	if err != nil {
		t.Fatal(err)
	}
	r2 := &fakeRunner{}
	rep, _, err = runJob(t, context.Background(), Job{Input: strings.NewReader(nativeInput()), Output: out, Runner: r2, Native: native})
	if err != nil {
		t.Fatal(err)
	}
	if r2.calls.Load() != 2 || rep.Skipped != 9 || len(srv.Batches()) != 4 {
		t.Errorf("resume: %d live calls, %d skipped, %d batches; want 2, 9, 4", r2.calls.Load(), rep.Skipped, len(srv.Batches()))
	}
	if got := readOutput(t, path); len(got) != 11 {
		t.Errorf("%d custom_ids after resume, want 11", len(got))
	}
}

// TestNativeLostSubmitAnswer: the job ends (here: its context) after the
// provider created a batch but before the job learned its id. A resumed
// job finds that batch by the token it carries (OpenAI metadata, Gemini
// displayName) or by its creation time and size (Anthropic), and submits
// nothing twice.
func TestNativeLostSubmitAnswer(t *testing.T) {
	for _, provider := range []string{"openai", "anthropic", "gemini"} {
		t.Run(provider, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var once sync.Once
			srv := llmtest.NewServer(llmtest.WithBatchAPI(llmtest.BatchAPIOptions{Hook: func(s llmtest.BatchStage, _ string) {
				if s == llmtest.StageCreated {
					once.Do(cancel) // the client gives up before the answer
				}
			}}))
			defer srv.Close()
			model := map[string]string{"openai": "openai/gpt-x", "anthropic": "anthropic/claude-x", "gemini": "gemini/gem-x"}[provider]
			in := strings.Join([]string{chatLine("a", model, "p"), chatLine("b", model, "p")}, "\n")
			path := filepath.Join(t.TempDir(), "out.jsonl")
			out, _ := OpenOutput(path, Create)
			native := &Native{Clients: nativeClients(t, srv), Poll: 5 * time.Millisecond}
			rep, _, _ := runJob(t, ctx, Job{Input: strings.NewReader(in), Output: out, Runner: &fakeRunner{}, Native: native})
			if !rep.Interrupted || len(srv.Batches()) != 1 {
				t.Fatalf("first run: interrupted %v, %d batches", rep.Interrupted, len(srv.Batches()))
			}
			if _, err := OpenOutput(path, Create); !errors.Is(err, ErrOutputExists) {
				t.Fatalf("the output is empty, but its journal must refuse a fresh start: %v", err)
			}
			out, _ = OpenOutput(path, Resume)
			r := &fakeRunner{}
			if _, _, err := runJob(t, context.Background(), Job{Input: strings.NewReader(in), Output: out, Runner: r, Native: native}); err != nil {
				t.Fatal(err)
			}
			if n := len(srv.Batches()); n != 1 || r.calls.Load() != 0 {
				t.Errorf("%d batches, %d live calls; want 1 and 0", n, r.calls.Load())
			}
			if got := readOutput(t, path); len(got) != 2 || got["a"].Response == nil {
				t.Errorf("output %v", got)
			}
		})
	}
}

// TestNativeCancel: an interrupted job leaves its batch running and
// reports it; a Cancel run cancels it, writes what it finished, and the
// cancelled lines are given back (run live by the next resume).
func TestNativeCancel(t *testing.T) {
	var (
		mu   sync.Mutex
		base = time.Now()
		now  = base
	)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	srv := llmtest.NewServer(llmtest.WithClock(clock), llmtest.WithBatchAPI(llmtest.BatchAPIOptions{Run: 4 * time.Minute, Finalize: time.Minute}))
	defer srv.Close()
	var lines []string
	for _, id := range []string{"a", "b", "c", "d"} {
		lines = append(lines, chatLine(id, "openai/gpt-x", "p"))
	}
	in := strings.Join(lines, "\n")
	path := filepath.Join(t.TempDir(), "out.jsonl")
	out, _ := OpenOutput(path, Create)
	native := &Native{Clients: nativeClients(t, srv), Poll: 5 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	var polled sync.Once
	job := Job{Input: strings.NewReader(in), Output: out, Runner: &fakeRunner{}, Native: native}
	job.Observe = func(ev Event) {
		if ev.Kind == EventRemote && ev.Remote.State == "in_progress" {
			polled.Do(cancel)
		}
	}
	rep, err := Run(ctx, job)
	_ = out.Close()
	if err != nil || !rep.Interrupted || len(rep.Remote) != 1 || rep.Remote[0].BatchID == "" {
		t.Fatalf("interrupted run: %v %+v", err, rep)
	}
	advance(2 * time.Minute) // half done
	out, _ = OpenOutput(path, Resume)
	cn := *native
	cn.Cancel = true
	rep, _, err = runJob(t, context.Background(), Job{Input: strings.NewReader(in), Output: out, Runner: &fakeRunner{}, Native: &cn,
		Observe: func(ev Event) {
			if ev.Kind == EventRemote && ev.Remote.State == "cancelling" {
				advance(time.Minute) // the provider takes a while to stop
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	b := srv.Batches()
	if len(b) != 1 || !b[0].Cancelled {
		t.Fatalf("batches %+v", b)
	}
	got := readOutput(t, path)
	if len(got) != 2 || len(rep.NotRun) != 2 {
		t.Errorf("%d written, not run %v; want 2 and 2", len(got), rep.NotRun)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestNativeJournalGuards: while the journal records a batch not yet
// ended, a fresh job is refused and a live-only resume is refused (its
// lines would run twice); Overwrite forgets the journal.
func TestNativeJournalGuards(t *testing.T) {
	srv := llmtest.NewServer(llmtest.WithBatchAPI(llmtest.BatchAPIOptions{Run: time.Hour}))
	defer srv.Close()
	in := chatLine("a", "openai/gpt-x", "p")
	path := filepath.Join(t.TempDir(), "out.jsonl")
	out, _ := OpenOutput(path, Create)
	ctx, cancel := context.WithCancel(context.Background())
	native := &Native{Clients: nativeClients(t, srv), Poll: 5 * time.Millisecond}
	var once sync.Once
	rep, _, _ := runJob(t, ctx, Job{Input: strings.NewReader(in), Output: out, Runner: &fakeRunner{}, Native: native,
		Observe: func(ev Event) {
			if ev.Kind == EventRemote && ev.Remote.State == "in_progress" {
				once.Do(cancel)
			}
		}})
	if len(rep.Remote) != 1 {
		t.Fatalf("remote %+v", rep.Remote)
	}
	if _, err := OpenOutput(path, Create); !errors.Is(err, ErrOutputExists) {
		t.Errorf("Create over a pending journal: %v", err)
	}
	out, _ = OpenOutput(path, Resume)
	r := &fakeRunner{}
	var pe *PendingError
	if _, err := Run(context.Background(), Job{Input: strings.NewReader(in), Output: out, Runner: r}); !errors.As(err, &pe) || pe.Batches != 1 || r.calls.Load() != 0 {
		t.Errorf("live resume: %v, %d calls", err, r.calls.Load())
	}
	_ = out.Close()
	out, err := OpenOutput(path, Overwrite)
	if err != nil {
		t.Fatal(err)
	}
	_ = out.Close()
	if _, err := os.Stat(JournalPath(path)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Overwrite kept the journal: %v", err)
	}
}

// TestNativeSplits: a provider's lines above a batch's limit go to
// several batches, each line in exactly one, and every result is written
// once.
func TestNativeSplits(t *testing.T) {
	old := splitAt
	splitAt = 2
	t.Cleanup(func() { splitAt = old })
	srv := llmtest.NewServer(llmtest.WithBatchAPI(llmtest.BatchAPIOptions{}))
	defer srv.Close()
	var lines []string
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		lines = append(lines, chatLine(id, "anthropic/claude-x", "p"))
	}
	path := filepath.Join(t.TempDir(), "out.jsonl")
	out, _ := OpenOutput(path, Create)
	if _, _, err := runJob(t, context.Background(), Job{Input: strings.NewReader(strings.Join(lines, "\n")), Output: out, Runner: &fakeRunner{},
		Native: &Native{Clients: nativeClients(t, srv), Poll: 5 * time.Millisecond}}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, b := range srv.Batches() {
		for _, id := range b.CustomIDs {
			seen[id]++
		}
	}
	if n := len(srv.Batches()); n != 3 || len(seen) != 5 {
		t.Errorf("%d batches holding %v; want 3 batches, 5 lines once each", n, seen)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s submitted %d times", id, n)
		}
	}
	if got := readOutput(t, path); len(got) != 5 {
		t.Errorf("%d lines written", len(got))
	}
}

// TestObserveOneAtATime: the reader, the collector and the native poller
// all emit, yet Observe is never entered twice at once (an observer needs
// no lock of its own).
func TestObserveOneAtATime(t *testing.T) {
	srv := llmtest.NewServer(llmtest.WithBatchAPI(llmtest.BatchAPIOptions{Run: 20 * time.Millisecond, Result: outcomes}))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "out.jsonl")
	out, _ := OpenOutput(path, Create)
	var inside, overlaps, events int // plain ints: the race detector watches them too
	rep, err := Run(context.Background(), Job{Input: strings.NewReader(nativeInput()), Output: out, Runner: &fakeRunner{}, Concurrency: 4,
		DefaultModel: func(bool) (string, string, error) { return "sim/echo", "test", nil },
		Native:       &Native{Clients: nativeClients(t, srv), Poll: 2 * time.Millisecond},
		Observe: func(Event) {
			inside++
			if inside > 1 {
				overlaps++
			}
			events++
			time.Sleep(50 * time.Microsecond)
			inside--
		}})
	_ = out.Close()
	if err != nil || rep.Written != 9 {
		t.Fatalf("%v %+v", err, rep)
	}
	if overlaps > 0 || events == 0 {
		t.Errorf("%d overlapping calls among %d events", overlaps, events)
	}
}

// TestNativeUnknownBatch: a journal naming a batch the provider does not
// know (deleted, another key) ends the wait with an error naming it after
// a few polls, instead of polling forever; the journal keeps it.
func TestNativeUnknownBatch(t *testing.T) {
	srv := llmtest.NewServer(llmtest.WithBatchAPI(llmtest.BatchAPIOptions{}))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "out.jsonl")
	jn, err := openJournal(JournalPath(path), Create)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range []journalRecord{
		{Op: "intent", Key: "b1", Provider: "openai", Token: "chorus-x", IDs: []string{"a"}, At: time.Now()},
		{Op: "submitted", Key: "b1", BatchID: "batch_gone"},
	} {
		if err := jn.record(rec); err != nil {
			t.Fatal(err)
		}
	}
	_ = jn.close()
	out, _ := OpenOutput(path, Resume)
	_, _, err = runJob(t, context.Background(), Job{Input: strings.NewReader(chatLine("a", "openai/gpt-x", "p")), Output: out, Runner: &fakeRunner{},
		Native: &Native{Clients: nativeClients(t, srv), Poll: time.Millisecond}})
	if err == nil || !strings.Contains(err.Error(), "batch_gone") {
		t.Fatalf("err %v, want one naming batch_gone", err)
	}
	jn, _ = openJournalReadOnly(JournalPath(path))
	if len(jn.pending()) != 1 {
		t.Error("the journal lost the batch")
	}
}
