package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/chorusrt/chorus/batch"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/gateway"
	"github.com/chorusrt/chorus/llmtest"
)

func batchKeys() gateway.Options {
	return gateway.Options{Keys: []gateway.Key{
		{Name: "batcher", SHA256: gateway.HashKey("gk-batcher"), Models: []string{"openai/*"}},
		{Name: "other", SHA256: gateway.HashKey("gk-other")},
	}}
}

// upload posts a file the way the OpenAI SDKs do (file first, then
// purpose) and returns the answer.
func (f *fixture) upload(t *testing.T, key, purpose, name string, content []byte) answer {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("file", name)
	_, _ = fw.Write(content)
	_ = mw.WriteField("purpose", purpose)
	_ = mw.Close()
	req, _ := http.NewRequest("POST", f.url+"/v1/files", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := f.gw.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: b.Bytes()}
}

type batchObj struct {
	ID            string  `json:"id"`
	Object        string  `json:"object"`
	Status        string  `json:"status"`
	OutputFileID  *string `json:"output_file_id"`
	ErrorFileID   *string `json:"error_file_id"`
	RequestCounts struct {
		Total, Completed, Failed int
	} `json:"request_counts"`
	Errors *struct {
		Data []struct {
			Code    string `json:"code"`
			Line    int    `json:"line"`
			Message string `json:"message"`
		} `json:"data"`
	} `json:"errors"`
}

// waitBatch polls a batch until it is final.
func (f *fixture) waitBatch(t *testing.T, key, id string) batchObj {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		a := f.do(t, "GET", "/v1/batches/"+id, "", "Authorization", "Bearer "+key)
		var b batchObj
		decode(t, a.body, &b)
		switch b.Status {
		case "completed", "failed", "cancelled", "expired":
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch %s still %s", id, b.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func lines(b []byte) []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// TestBatches: an OpenAI batch job through /v1/files and /v1/batches runs
// on the runtime; its output and error files are OpenAI's; files and
// batches are their key's only; a line naming a model the key may not
// call fails the batch's validation.
func TestBatches(t *testing.T) {
	f := newFixture(t, batchKeys())
	const auth = "Bearer gk-batcher"
	input := `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"openai/gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}}
{"custom_id":"b","method":"POST","url":"/v1/chat/completions","body":{"model":"openai/gpt-4.1-mini","messages":[{"role":"user","content":"yo"}]}}
{"custom_id":"c","method":"POST","url":"/v1/chat/completions","body":{"model":"openai/gpt-4.1-mini","messages":[{"role":"wizard","content":"?"}]}}
`
	a := f.upload(t, "gk-batcher", "batch", "in.jsonl", []byte(input))
	var file struct {
		ID, Object, Purpose, Filename string
		Bytes                         int
	}
	decode(t, a.body, &file)
	if a.status != 200 || !strings.HasPrefix(file.ID, "file-") || len(file.ID) != 31 || file.Object != "file" || file.Purpose != "batch" || file.Bytes != len(input) || file.Filename != "in.jsonl" {
		t.Fatalf("upload %d %s", a.status, a.body)
	}
	a = f.do(t, "POST", "/v1/batches", `{"input_file_id":"`+file.ID+`","endpoint":"/v1/chat/completions","completion_window":"24h","metadata":{"job":"t"}}`, "Authorization", auth)
	var created batchObj
	decode(t, a.body, &created)
	if a.status != 200 || !strings.HasPrefix(created.ID, "batch_") || created.Object != "batch" || created.Status != "validating" {
		t.Fatalf("create %d %s", a.status, a.body)
	}
	b := f.waitBatch(t, "gk-batcher", created.ID)
	if b.Status != "completed" || b.RequestCounts.Total != 3 || b.RequestCounts.Completed != 2 || b.RequestCounts.Failed != 1 || b.OutputFileID == nil || b.ErrorFileID == nil {
		t.Fatalf("batch %+v", b)
	}
	out := f.do(t, "GET", "/v1/files/"+*b.OutputFileID+"/content", "", "Authorization", auth)
	ol := lines(out.body)
	if out.status != 200 || len(ol) != 2 {
		t.Fatalf("output %d %s", out.status, out.body)
	}
	for _, l := range ol {
		resp := l["response"].(map[string]any)
		body := resp["body"].(map[string]any)
		msg := body["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
		if resp["status_code"] != 200.0 || msg["content"] != "simulated reply" || l["error"] != nil {
			t.Errorf("output line %v", l)
		}
	}
	el := lines(f.do(t, "GET", "/v1/files/"+*b.ErrorFileID+"/content", "", "Authorization", auth).body)
	if len(el) != 1 || el[0]["custom_id"] != "c" || el[0]["error"] == nil {
		t.Fatalf("error file %v", el)
	}
	// The list holds it; another key sees neither the batch nor the files.
	if a := f.do(t, "GET", "/v1/batches?limit=5", "", "Authorization", auth); !strings.Contains(string(a.body), created.ID) || !strings.Contains(string(a.body), `"object":"list"`) {
		t.Errorf("list %s", a.body)
	}
	for _, p := range []string{"/v1/batches/" + created.ID, "/v1/files/" + file.ID, "/v1/files/" + *b.OutputFileID + "/content"} {
		if a := f.do(t, "GET", p, "", "Authorization", "Bearer gk-other"); a.status != 404 {
			t.Errorf("another key's GET %s: %d %s", p, a.status, a.body)
		}
	}
	if a := f.do(t, "GET", "/v1/files/../../etc/passwd/content", "", "Authorization", auth); a.status != 404 {
		t.Errorf("a path for an id: %d", a.status)
	}
	if f.up.Count() != 2 {
		t.Errorf("%d upstream calls, want 2 (the bad line runs nowhere)", f.up.Count())
	}

	// A model the key may not call fails validation, naming the line.
	bad := strings.Replace(input, `"model":"openai/gpt-4.1-mini","messages":[{"role":"user","content":"yo"}]`, `"model":"anthropic/claude-haiku-4-5","messages":[{"role":"user","content":"yo"}]`, 1)
	decode(t, f.upload(t, "gk-batcher", "batch", "bad.jsonl", []byte(bad)).body, &file)
	decode(t, f.do(t, "POST", "/v1/batches", `{"input_file_id":"`+file.ID+`","endpoint":"/v1/chat/completions","completion_window":"24h"}`, "Authorization", auth).body, &created)
	b = f.waitBatch(t, "gk-batcher", created.ID)
	if b.Status != "failed" || b.Errors == nil || len(b.Errors.Data) != 1 || b.Errors.Data[0].Code != "model_not_allowed" || b.Errors.Data[0].Line != 2 {
		t.Fatalf("disallowed model: %+v", b)
	}
	if f.up.Count() != 2 {
		t.Errorf("a refused batch reached the provider")
	}
	// Bad requests.
	for _, c := range []struct {
		body   string
		status int
	}{
		{`{"input_file_id":"` + file.ID + `","endpoint":"/v1/responses","completion_window":"24h"}`, 400},
		{`{"input_file_id":"` + file.ID + `","endpoint":"/v1/chat/completions","completion_window":"1h"}`, 400},
		{`{"input_file_id":"file-nope","endpoint":"/v1/chat/completions","completion_window":"24h"}`, 404},
	} {
		if a := f.do(t, "POST", "/v1/batches", c.body, "Authorization", auth); a.status != c.status {
			t.Errorf("%s: %d %s", c.body, a.status, a.body)
		}
	}
	if a := f.upload(t, "gk-batcher", "fine-tune", "x.jsonl", []byte("{}")); a.status != 400 {
		t.Errorf("purpose fine-tune: %d %s", a.status, a.body)
	}
}

// TestBatchFileCapAndCancel: an upload past MaxFileBytes is a 413; a
// cancelled batch stops its upstream calls at once and ends cancelled.
func TestBatchFileCapAndCancel(t *testing.T) {
	opts := batchKeys()
	opts.MaxFileBytes = 1024
	f := newFixture(t, opts)
	if a := f.upload(t, "gk-batcher", "batch", "big.jsonl", bytes.Repeat([]byte("x"), 2048)); a.status != 413 {
		t.Fatalf("oversized upload: %d %s", a.status, a.body)
	}
	f.up.Push(llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultStall, Stall: 5 * time.Minute}))
	in := `{"custom_id":"slow","method":"POST","url":"/v1/chat/completions","body":{"model":"openai/gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}}` + "\n"
	var file struct{ ID string }
	decode(t, f.upload(t, "gk-batcher", "batch", "in.jsonl", []byte(in)).body, &file)
	var created batchObj
	decode(t, f.do(t, "POST", "/v1/batches", `{"input_file_id":"`+file.ID+`","endpoint":"/v1/chat/completions","completion_window":"24h"}`, "Authorization", "Bearer gk-batcher").body, &created)
	for deadline := time.Now().Add(10 * time.Second); f.up.Count() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the batch's line never reached the provider")
		}
	}
	a := f.do(t, "POST", "/v1/batches/"+created.ID+"/cancel", "", "Authorization", "Bearer gk-batcher")
	var c batchObj
	decode(t, a.body, &c)
	if a.status != 200 || (c.Status != "cancelling" && c.Status != "cancelled") {
		t.Fatalf("cancel %d %s", a.status, a.body)
	}
	b := f.waitBatch(t, "gk-batcher", created.ID)
	if b.Status != "cancelled" || b.RequestCounts.Completed != 0 || b.OutputFileID != nil {
		t.Fatalf("cancelled batch %+v", b)
	}
	waitNoneInFlight(t, f)
	if a := f.do(t, "POST", "/v1/batches/"+created.ID+"/cancel", "", "Authorization", "Bearer gk-batcher"); a.status != 409 {
		t.Errorf("cancelling a cancelled batch: %d %s", a.status, a.body)
	}
}

// stopMidBatch starts a batch of three lines (a, b, c) on a gateway of
// opts whose upstream answers a and stalls on b, and closes that gateway
// while b is in flight: line a answered, c never started.
func stopMidBatch(t *testing.T, opts gateway.Options) (*fixture, batchObj) {
	t.Helper()
	f := newFixture(t, opts)
	f.up.Push(llmtest.Text("first"), llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultStall, Stall: 5 * time.Minute}))
	var in strings.Builder
	for _, id := range []string{"a", "b", "c"} {
		in.WriteString(`{"custom_id":"` + id + `","method":"POST","url":"/v1/chat/completions","body":{"model":"openai/gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}}` + "\n")
	}
	var file struct{ ID string }
	decode(t, f.upload(t, "gk-batcher", "batch", "in.jsonl", []byte(in.String())).body, &file)
	var created batchObj
	decode(t, f.do(t, "POST", "/v1/batches", `{"input_file_id":"`+file.ID+`","endpoint":"/v1/chat/completions","completion_window":"24h"}`, "Authorization", "Bearer gk-batcher").body, &created)
	for deadline := time.Now().Add(10 * time.Second); f.up.Count() < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the second line never reached the provider")
		}
	}
	// The gateway stops mid-batch (line a answered, b in flight).
	if err := f.h.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitNoneInFlight(t, f)
	return f, created
}

// TestBatchResumesAfterRestart: a gateway closed while a batch runs
// leaves it in its files directory; a new gateway on the directory
// resumes it, runs only the lines not yet answered, and never writes a
// custom_id twice.
func TestBatchResumesAfterRestart(t *testing.T) {
	opts := batchKeys()
	opts.FilesDir = t.TempDir()
	opts.BatchConcurrency = 1
	f, created := stopMidBatch(t, opts)
	h2, err := gateway.New(f.rt, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close(t.Context())
	f.cur.Store(h2)
	b := f.waitBatch(t, "gk-batcher", created.ID)
	if b.Status != "completed" || b.RequestCounts.Completed != 3 || b.OutputFileID == nil {
		t.Fatalf("resumed batch %+v", b)
	}
	ol := lines(f.do(t, "GET", "/v1/files/"+*b.OutputFileID+"/content", "", "Authorization", "Bearer gk-batcher").body)
	seen := map[string]int{}
	for _, l := range ol {
		seen[l["custom_id"].(string)]++
	}
	if len(ol) != 3 || seen["a"] != 1 || seen["b"] != 1 || seen["c"] != 1 {
		t.Fatalf("output lines %v", ol)
	}
	if n := f.up.Count(); n != 4 {
		t.Errorf("%d upstream calls, want 4 (a once, b twice, c once)", n)
	}
}

// With Options.Batches, a batch job's progress is published to the
// registry (the console's Batches page): its total, what succeeded and
// failed, and its end.
func TestBatchesPublishProgress(t *testing.T) {
	opts := batchKeys()
	opts.Batches = batch.NewRegistry(5)
	f := newFixture(t, opts)
	input := `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"openai/gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}}
{"custom_id":"b","method":"POST","url":"/v1/chat/completions","body":{"model":"openai/gpt-4.1-mini","messages":[{"role":"wizard","content":"?"}]}}
`
	var file struct{ ID string }
	decode(t, f.upload(t, "gk-batcher", "batch", "in.jsonl", []byte(input)).body, &file)
	var created batchObj
	decode(t, f.do(t, "POST", "/v1/batches", `{"input_file_id":"`+file.ID+`","endpoint":"/v1/chat/completions","completion_window":"24h"}`, "Authorization", "Bearer gk-batcher").body, &created)
	if b := f.waitBatch(t, "gk-batcher", created.ID); b.Status != "completed" {
		t.Fatalf("batch %+v", b)
	}
	jobs := opts.Batches.Jobs()
	if len(jobs) != 1 {
		t.Fatalf("registry holds %d jobs, want 1", len(jobs))
	}
	if p := jobs[0]; p.Name != created.ID || p.Total != 2 || p.Succeeded != 1 || p.Failed != 1 || p.Finished.IsZero() {
		t.Fatalf("progress %+v, want the batch's 2 lines (1 succeeded, 1 failed), finished", p)
	}
}

// TestListPages: GET /v1/files and GET /v1/batches answer OpenAI list pages
// (writeList): JSON, first_id and last_id the page's first and last items,
// has_more when a limit cut it, null ids on an empty page.
func TestListPages(t *testing.T) {
	f := newFixture(t, batchKeys())
	const auth = "Bearer gk-batcher"
	type page struct {
		Object  string                `json:"object"`
		Data    []struct{ ID string } `json:"data"`
		FirstID *string               `json:"first_id"`
		LastID  *string               `json:"last_id"`
		HasMore bool                  `json:"has_more"`
	}
	check := func(name string, a answer, n int, more bool) page {
		t.Helper()
		var p page
		decode(t, a.body, &p)
		if a.status != 200 || a.header.Get("Content-Type") != "application/json" || p.Object != "list" || len(p.Data) != n || p.HasMore != more {
			t.Fatalf("%s: %d %v %s", name, a.status, a.header, a.body)
		}
		if n == 0 && (p.FirstID != nil || p.LastID != nil) || n > 0 && (p.FirstID == nil || p.LastID == nil || *p.FirstID != p.Data[0].ID || *p.LastID != p.Data[n-1].ID) {
			t.Fatalf("%s: first/last ids of %s", name, a.body)
		}
		return p
	}
	check("no files", f.do(t, "GET", "/v1/files", "", "Authorization", auth), 0, false)
	check("no batches", f.do(t, "GET", "/v1/batches", "", "Authorization", auth), 0, false)
	input := `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"openai/gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}}` + "\n"
	var ids []string
	for i := range 2 {
		var file struct{ ID string }
		decode(t, f.upload(t, "gk-batcher", "batch", fmt.Sprintf("in%d.jsonl", i), []byte(input)).body, &file)
		var b batchObj
		decode(t, f.do(t, "POST", "/v1/batches", `{"input_file_id":"`+file.ID+`","endpoint":"/v1/chat/completions","completion_window":"24h"}`, "Authorization", auth).body, &b)
		ids = append(ids, b.ID)
	}
	for _, id := range ids {
		f.waitBatch(t, "gk-batcher", id)
	}
	check("files", f.do(t, "GET", "/v1/files", "", "Authorization", auth), 4, false) // two inputs, two outputs
	check("batches", f.do(t, "GET", "/v1/batches", "", "Authorization", auth), 2, false)
	p := check("first batch", f.do(t, "GET", "/v1/batches?limit=1", "", "Authorization", auth), 1, true)
	check("rest", f.do(t, "GET", "/v1/batches?limit=1&after="+p.Data[0].ID, "", "Authorization", auth), 1, false)
	check("another key's files", f.do(t, "GET", "/v1/files", "", "Authorization", "Bearer gk-other"), 0, false)
}

// TestBatchExpires: a batch's completion window is kept. At expires_at
// the job stops (its call in flight is cancelled upstream), the batch is
// expired with expired_at, the answered line is in the output file and
// every line not answered is in the error file with OpenAI's
// batch_expired code.
func TestBatchExpires(t *testing.T) {
	opts := batchKeys()
	opts.BatchConcurrency = 1 // a, then b (stalls), and c never starts
	f := newFixture(t, opts)
	gateway.SetBatchWindow(f.h, 3*time.Second)
	f.up.Push(llmtest.Text("one"), llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultStall, Stall: 5 * time.Minute}))
	var in strings.Builder
	for _, id := range []string{"a", "b", "c"} {
		fmt.Fprintf(&in, `{"custom_id":%q,"method":"POST","url":"/v1/chat/completions","body":{"model":"openai/gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}}`+"\n", id)
	}
	auth := "Bearer gk-batcher"
	var file struct{ ID string }
	decode(t, f.upload(t, "gk-batcher", "batch", "in.jsonl", []byte(in.String())).body, &file)
	var created struct {
		ID        string `json:"id"`
		CreatedAt int64  `json:"created_at"`
		ExpiresAt int64  `json:"expires_at"`
	}
	decode(t, f.do(t, "POST", "/v1/batches", `{"input_file_id":"`+file.ID+`","endpoint":"/v1/chat/completions","completion_window":"24h"}`, "Authorization", auth).body, &created)
	if created.ExpiresAt <= created.CreatedAt {
		t.Fatalf("expires_at %d, created_at %d", created.ExpiresAt, created.CreatedAt)
	}
	b := f.waitBatch(t, "gk-batcher", created.ID)
	var whole struct {
		ExpiredAt *int64 `json:"expired_at"`
	}
	decode(t, f.do(t, "GET", "/v1/batches/"+created.ID, "", "Authorization", auth).body, &whole)
	if b.Status != "expired" || whole.ExpiredAt == nil || *whole.ExpiredAt < created.ExpiresAt ||
		b.RequestCounts.Total != 3 || b.RequestCounts.Completed != 1 || b.RequestCounts.Failed != 2 || b.OutputFileID == nil || b.ErrorFileID == nil {
		t.Fatalf("batch %+v, expired_at %v", b, whole.ExpiredAt)
	}
	waitNoneInFlight(t, f) // b's stalled call was cancelled
	out := lines(f.do(t, "GET", "/v1/files/"+*b.OutputFileID+"/content", "", "Authorization", auth).body)
	if len(out) != 1 || out[0]["custom_id"] != "a" {
		t.Errorf("output file %v", out)
	}
	errs := lines(f.do(t, "GET", "/v1/files/"+*b.ErrorFileID+"/content", "", "Authorization", auth).body)
	var ids []string
	for _, l := range errs {
		e, _ := l["error"].(map[string]any)
		if e["code"] != "batch_expired" || l["response"] != nil || l["id"] != batch.LineID(l["custom_id"].(string)) {
			t.Errorf("error line %v", l)
		}
		ids = append(ids, l["custom_id"].(string))
	}
	if strings.Join(ids, ",") != "b,c" {
		t.Errorf("expired lines %v, want b,c", ids)
	}
	if n := f.up.Count(); n != 2 {
		t.Errorf("%d upstream calls, want 2 (c never ran)", n)
	}
	if a := f.do(t, "POST", "/v1/batches/"+created.ID+"/cancel", "", "Authorization", auth); a.status != 409 {
		t.Errorf("cancelling an expired batch: %d %s", a.status, a.body)
	}
}

// TestBatchExpiresAcrossRestart: a batch a stopped gateway left running is
// expired by the next one when its expires_at has passed meanwhile: no
// line runs again, the unanswered ones go to the error file.
func TestBatchExpiresAcrossRestart(t *testing.T) {
	opts := batchKeys()
	opts.FilesDir = t.TempDir()
	opts.BatchConcurrency = 1
	f, created := stopMidBatch(t, opts)
	later := opts
	later.Now = func() time.Time { return time.Now().Add(25 * time.Hour) } // the window has passed
	h2, err := gateway.New(f.rt, later)
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close(t.Context())
	f.cur.Store(h2)
	b := f.waitBatch(t, "gk-batcher", created.ID)
	if b.Status != "expired" || b.RequestCounts.Completed != 1 || b.RequestCounts.Failed != 2 || b.OutputFileID == nil || b.ErrorFileID == nil {
		t.Fatalf("batch %+v", b)
	}
	el := lines(f.do(t, "GET", "/v1/files/"+*b.ErrorFileID+"/content", "", "Authorization", "Bearer gk-batcher").body)
	if len(el) != 2 || el[0]["custom_id"] != "b" || el[1]["custom_id"] != "c" || el[0]["error"].(map[string]any)["code"] != "batch_expired" {
		t.Fatalf("error lines %v", el)
	}
	if n := f.up.Count(); n != 2 {
		t.Errorf("%d upstream calls, want 2 (nothing ran after the window)", n)
	}
}
