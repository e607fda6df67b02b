package gateway_test

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/gateway"
	"github.com/chorusrt/chorus/keystore"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
)

// startFilesReplica is a replica of a fleet with its own files directory
// (a temporary one) and a fixture to call it with.
func startFilesReplica(t *testing.T, open func() *keystore.Store, up *llmtest.Server, opts gateway.Options) (*replica, *fixture) {
	t.Helper()
	rt, err := runtime.New(
		runtime.WithProvider(providers.Config{ID: "openai", Format: providers.FormatOpenAI, BaseURL: up.OpenAIBaseURL(), APIKey: providerKey}),
		runtime.WithClientOptions(providers.WithRetryPolicy(fast)),
	)
	if err != nil {
		t.Fatal(err)
	}
	st := open()
	opts.KeyStore = st
	h, err := gateway.New(rt, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	return &replica{h: h, rt: rt, st: st, srv: srv}, &fixture{up: up, rt: rt, h: h, gw: srv, url: srv.URL}
}

// slowUpstream answers every call after d.
func slowUpstream(t *testing.T, d time.Duration) *llmtest.Server {
	up := llmtest.NewServer()
	t.Cleanup(up.Close)
	up.SetResponder(func(llmtest.Recorded) llmtest.Step {
		time.Sleep(d)
		return llmtest.Step{Reply: &llmtest.Reply{Text: "ok", Usage: &llm.Usage{PromptTokens: 5, CompletionTokens: 5}}}
	})
	return up
}

func batchInput(n int) []byte {
	var in bytes.Buffer
	for i := range n {
		fmt.Fprintf(&in, `{"custom_id":"c%d","method":"POST","url":"/v1/chat/completions","body":{"model":"openai/gpt-4.1-mini","messages":[{"role":"user","content":"hi %d"}]}}`+"\n", i, i)
	}
	return in.Bytes()
}

const bearer = "Bearer gk-batcher"

// TestFleetFilesAndBatchesAnyReplica: on one PostgreSQL, a file uploaded
// through replica A is listed, read and downloaded through B, and deleted
// through B is gone on A; a batch created on A is listed and read on B,
// and cancelled through B stops on A within two seconds, cancelled as
// seen through either.
func TestFleetFilesAndBatchesAnyReplica(t *testing.T) {
	gateway.SetFleetTiming(t, 50*time.Millisecond, 200*time.Millisecond)
	open := pgOpener(t)
	up := slowUpstream(t, 100*time.Millisecond)
	opts := batchKeys()
	opts.BatchConcurrency = 1
	ra, a := startFilesReplica(t, open, up, opts)
	defer ra.close(t)
	rb, b := startFilesReplica(t, open, up, opts)
	defer rb.close(t)

	content := []byte("{\"custom_id\":\"x\"}\n" + strings.Repeat("z", 100_000))
	var file struct {
		ID    string
		Bytes int64
	}
	decode(t, a.upload(t, "gk-batcher", "batch", "data.jsonl", content).body, &file)
	if got := b.do(t, "GET", "/v1/files/"+file.ID, "", "Authorization", bearer); got.status != 200 || !strings.Contains(string(got.body), `"bytes":100018`) {
		t.Fatalf("file on B: %d %s", got.status, got.body)
	}
	if got := b.do(t, "GET", "/v1/files/"+file.ID+"/content", "", "Authorization", bearer); got.status != 200 || !bytes.Equal(got.body, content) {
		t.Fatalf("content on B: %d, %d bytes", got.status, len(got.body))
	}
	if got := b.do(t, "GET", "/v1/files", "", "Authorization", bearer); !strings.Contains(string(got.body), file.ID) {
		t.Fatalf("list on B: %s", got.body)
	}
	if got := b.do(t, "GET", "/v1/files/"+file.ID, "", "Authorization", "Bearer gk-other"); got.status != 404 {
		t.Fatalf("another key's file on B: %d", got.status)
	}
	if got := b.do(t, "DELETE", "/v1/files/"+file.ID, "", "Authorization", bearer); got.status != 200 {
		t.Fatalf("delete on B: %d %s", got.status, got.body)
	}
	for _, p := range []string{"", "/content"} {
		if got := a.do(t, "GET", "/v1/files/"+file.ID+p, "", "Authorization", bearer); got.status != 404 {
			t.Fatalf("deleted file%s on A: %d %s", p, got.status, got.body)
		}
	}

	// A batch of 40 lines at 100 ms each, created on A.
	decode(t, a.upload(t, "gk-batcher", "batch", "in.jsonl", batchInput(40)).body, &file)
	var created batchObj
	decode(t, a.do(t, "POST", "/v1/batches", `{"input_file_id":"`+file.ID+`","endpoint":"/v1/chat/completions","completion_window":"24h"}`, "Authorization", bearer).body, &created)
	if got := b.do(t, "GET", "/v1/batches", "", "Authorization", bearer); !strings.Contains(string(got.body), created.ID) {
		t.Fatalf("list on B: %s", got.body)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var bo batchObj
		decode(t, b.do(t, "GET", "/v1/batches/"+created.ID, "", "Authorization", bearer).body, &bo)
		if bo.Status == "in_progress" && bo.RequestCounts.Completed >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch on B: %+v", bo)
		}
	}
	if got := b.do(t, "GET", "/v1/batches/"+created.ID, "", "Authorization", "Bearer gk-other"); got.status != 404 {
		t.Fatalf("another key's batch on B: %d", got.status)
	}
	var cancelling batchObj
	decode(t, b.do(t, "POST", "/v1/batches/"+created.ID+"/cancel", "", "Authorization", bearer).body, &cancelling)
	if cancelling.Status != "cancelling" {
		t.Fatalf("cancel on B: %+v", cancelling)
	}
	at := time.Now()
	done := a.waitBatch(t, "gk-batcher", created.ID)
	took := time.Since(at)
	onB := b.waitBatch(t, "gk-batcher", created.ID)
	if done.Status != "cancelled" || onB.Status != "cancelled" || done.RequestCounts.Completed >= 40 {
		t.Fatalf("cancelled batch: on A %+v, on B %+v", done, onB)
	}
	if took > 2*time.Second {
		t.Errorf("the cancel through B took %v to end the batch on A", took)
	}
	t.Logf("cancelled through B after %d lines; ended on A %v later", done.RequestCounts.Completed, took.Round(time.Millisecond))
	if done.OutputFileID != nil {
		if got := b.do(t, "GET", "/v1/files/"+*done.OutputFileID+"/content", "", "Authorization", bearer); got.status != 200 || len(lines(got.body)) != done.RequestCounts.Completed {
			t.Fatalf("output of the cancelled batch on B: %d %d lines", got.status, len(lines(got.body)))
		}
	}
	if got := b.do(t, "POST", "/v1/batches/"+created.ID+"/cancel", "", "Authorization", bearer); got.status != 409 {
		t.Errorf("cancel of a cancelled batch: %d", got.status)
	}
}

// TestFleetBatchResumesAfterAKill: replica A is killed (its jobs and
// agent stop with nothing more reaching the store) while a batch it
// created runs; once the lease expires, replica B takes the batch,
// rebuilds the output from the lines in the store and finishes it: every
// custom_id exactly once in the output file, downloadable through either.
func TestFleetBatchResumesAfterAKill(t *testing.T) {
	gateway.SetFleetTiming(t, 50*time.Millisecond, 200*time.Millisecond)
	gateway.SetFleetBatchTiming(t, time.Second, 100*time.Millisecond, 50*time.Millisecond, 100*time.Millisecond)
	open := pgOpener(t)
	up := slowUpstream(t, 30*time.Millisecond)
	opts := batchKeys()
	opts.BatchConcurrency = 2
	ra, a := startFilesReplica(t, open, up, opts)
	defer ra.close(t)
	rb, b := startFilesReplica(t, open, up, opts)
	defer rb.close(t)
	const n = 60
	var file struct{ ID string }
	decode(t, a.upload(t, "gk-batcher", "batch", "in.jsonl", batchInput(n)).body, &file)
	var created batchObj
	decode(t, a.do(t, "POST", "/v1/batches", `{"input_file_id":"`+file.ID+`","endpoint":"/v1/chat/completions","completion_window":"24h"}`, "Authorization", bearer).body, &created)
	var before batchObj
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		decode(t, b.do(t, "GET", "/v1/batches/"+created.ID, "", "Authorization", bearer).body, &before)
		if before.RequestCounts.Completed >= 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch on B: %+v", before)
		}
	}
	gateway.Kill(ra.h)
	killedAt, callsAtKill := time.Now(), up.Count()
	done := b.waitBatch(t, "gk-batcher", created.ID)
	if done.Status != "completed" || done.RequestCounts.Completed != n || done.OutputFileID == nil {
		t.Fatalf("batch after the kill: %+v", done)
	}
	for _, f := range []*fixture{b, a} { // A's jobs are dead; its routes read the store
		ol := lines(f.do(t, "GET", "/v1/files/"+*done.OutputFileID+"/content", "", "Authorization", bearer).body)
		seen := map[string]int{}
		for _, l := range ol {
			seen[l["custom_id"].(string)]++
		}
		if len(ol) != n || len(seen) != n {
			t.Fatalf("output: %d lines, %d custom_ids, want %d each", len(ol), len(seen), n)
		}
	}
	extra := up.Count() - n
	t.Logf("killed after %d lines seen in the store (%d upstream calls); B finished %v later; %d lines ran twice (answered on A, not yet flushed, or in flight)",
		before.RequestCounts.Completed, callsAtKill, time.Since(killedAt).Round(time.Millisecond), extra)
	if extra > opts.BatchConcurrency+callsAtKill-before.RequestCounts.Completed {
		t.Errorf("%d lines ran twice: more than those in flight or unflushed at the kill", extra)
	}
}

// TestFleetImportsTheFilesDirectory: a gateway given a key store on a
// files directory a gateway without one used moves its files and batches
// into the store: they are listed and read from there, and the batch the
// earlier gateway left running resumes, every custom_id once.
func TestFleetImportsTheFilesDirectory(t *testing.T) {
	gateway.SetFleetTiming(t, 50*time.Millisecond, 200*time.Millisecond)
	gateway.SetFleetBatchTiming(t, time.Second, 100*time.Millisecond, 50*time.Millisecond, 100*time.Millisecond)
	opts := batchKeys()
	opts.FilesDir = t.TempDir()
	opts.BatchConcurrency = 1
	f, created := stopMidBatch(t, opts)
	st := sqliteOpener(t)()
	defer st.Close()
	opts.KeyStore = st
	h2, err := gateway.New(f.rt, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close(t.Context())
	f.cur.Store(h2)
	if got := f.do(t, "GET", "/v1/batches", "", "Authorization", bearer); !strings.Contains(string(got.body), created.ID) {
		t.Fatalf("batches from the store: %s", got.body)
	}
	b := f.waitBatch(t, "gk-batcher", created.ID)
	if b.Status != "completed" || b.RequestCounts.Completed != 3 || b.OutputFileID == nil {
		t.Fatalf("imported batch %+v", b)
	}
	seen := map[string]int{}
	for _, l := range lines(f.do(t, "GET", "/v1/files/"+*b.OutputFileID+"/content", "", "Authorization", bearer).body) {
		seen[l["custom_id"].(string)]++
	}
	if len(seen) != 3 || seen["a"] != 1 || seen["b"] != 1 || seen["c"] != 1 {
		t.Fatalf("output lines %v", seen)
	}
	if n := f.up.Count(); n != 4 {
		t.Errorf("%d upstream calls, want 4 (a once, b twice, c once)", n)
	}
	files, err := st.Files(t.Context(), "batcher", "batch")
	if err != nil || len(files) != 1 {
		t.Fatalf("the input file in the store: %v %v", files, err)
	}
}
