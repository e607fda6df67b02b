package llmtest_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llmtest"
)

// batchOutcomes errs "e*" custom_ids and expires "x*" ones.
func batchOutcomes(id string, _ []byte) llmtest.BatchResult {
	switch {
	case strings.HasPrefix(id, "e"):
		return llmtest.BatchResult{Outcome: llmtest.BatchErrored, Fault: &llmtest.Fault{Status: 400, Message: "bad request " + id}}
	case strings.HasPrefix(id, "x"):
		return llmtest.BatchResult{Outcome: llmtest.BatchExpired}
	}
	return llmtest.BatchResult{}
}

func newBatchServer(clk *testClock) *llmtest.Server {
	return llmtest.NewServer(llmtest.WithClock(clk.Now), llmtest.WithBatchAPI(llmtest.BatchAPIOptions{
		Validate: time.Minute, Run: 4 * time.Minute, Finalize: time.Minute, Result: batchOutcomes}))
}

// bdo sends one request and decodes a JSON answer into out (when non-nil).
func bdo(t *testing.T, method, url, ctype string, body []byte, out any) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, bytes.NewReader(body))
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode == 200 {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, url, err, data)
		}
	}
	return resp.StatusCode, data
}

func jsonl(t *testing.T, data []byte) []map[string]json.RawMessage {
	t.Helper()
	var out []map[string]json.RawMessage
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("not JSONL: %v: %s", err, sc.Text())
		}
		out = append(out, m)
	}
	return out
}

// TestBatchAPIOpenAI: upload a JSONL (multipart, purpose batch), create a
// batch, watch it move validating -> in_progress -> finalizing ->
// expired on the test's clock with request_counts growing, then read the
// output file (succeeded lines) and the error file (an errored line with
// its status and error body, an expired line with batch_expired).
func TestBatchAPIOpenAI(t *testing.T) {
	clk := newTestClock()
	srv := newBatchServer(clk)
	defer srv.Close()
	var in bytes.Buffer
	for _, id := range []string{"a", "b", "e1", "x1"} {
		in.WriteString(`{"custom_id":"` + id + `","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-x","messages":[{"role":"user","content":"hi"}]}}` + "\n")
	}
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	_ = mw.WriteField("purpose", "batch")
	fw, _ := mw.CreateFormFile("file", "in.jsonl")
	_, _ = fw.Write(in.Bytes())
	_ = mw.Close()
	var file struct{ ID, Purpose string }
	if code, body := bdo(t, "POST", srv.URL+"/v1/files", mw.FormDataContentType(), form.Bytes(), &file); code != 200 || file.ID == "" || file.Purpose != "batch" {
		t.Fatalf("upload: %d %s", code, body)
	}
	var b struct {
		ID            string         `json:"id"`
		Status        string         `json:"status"`
		OutputFileID  *string        `json:"output_file_id"`
		ErrorFileID   *string        `json:"error_file_id"`
		RequestCounts map[string]int `json:"request_counts"`
		Metadata      map[string]string
	}
	create := `{"input_file_id":"` + file.ID + `","endpoint":"/v1/chat/completions","completion_window":"24h","metadata":{"job":"j1"}}`
	if code, body := bdo(t, "POST", srv.URL+"/v1/batches", "application/json", []byte(create), &b); code != 200 || b.Status != "validating" || b.Metadata["job"] != "j1" {
		t.Fatalf("create: %d %s", code, body)
	}
	poll := func() {
		t.Helper()
		if code, body := bdo(t, "GET", srv.URL+"/v1/batches/"+b.ID, "", nil, &b); code != 200 {
			t.Fatalf("poll: %d %s", code, body)
		}
	}
	steps := []struct {
		advance time.Duration
		status  string
		done    int
	}{{time.Minute, "in_progress", 0}, {2 * time.Minute, "in_progress", 2}, {2 * time.Minute, "finalizing", 4}, {time.Minute, "expired", 4}}
	for _, s := range steps {
		clk.Advance(s.advance)
		poll()
		if b.Status != s.status || b.RequestCounts["total"] != 4 || b.RequestCounts["completed"]+b.RequestCounts["failed"] < s.done-1 {
			t.Fatalf("after %v: %+v, want %s with about %d done", s.advance, b, s.status, s.done)
		}
	}
	if b.OutputFileID == nil || b.ErrorFileID == nil {
		t.Fatalf("ended batch without files: %+v", b)
	}
	_, out := bdo(t, "GET", srv.URL+"/v1/files/"+*b.OutputFileID+"/content", "", nil, nil)
	lines := jsonl(t, out)
	if len(lines) != 2 {
		t.Fatalf("output file: %s", out)
	}
	for _, l := range lines {
		var resp struct {
			StatusCode int `json:"status_code"`
			Body       struct {
				Object  string `json:"object"`
				Choices []struct {
					Message struct{ Content string }
				}
			}
		}
		_ = json.Unmarshal(l["response"], &resp)
		if resp.StatusCode != 200 || resp.Body.Object != "chat.completion" || !strings.HasPrefix(resp.Body.Choices[0].Message.Content, "batch reply to ") || string(l["error"]) != "null" {
			t.Errorf("output line: %v", l)
		}
	}
	_, errs := bdo(t, "GET", srv.URL+"/v1/files/"+*b.ErrorFileID+"/content", "", nil, nil)
	got := map[string]string{}
	for _, l := range jsonl(t, errs) {
		var id string
		_ = json.Unmarshal(l["custom_id"], &id)
		got[id] = string(l["response"]) + " " + string(l["error"])
	}
	if !strings.Contains(got["e1"], `"status_code":400`) || !strings.Contains(got["e1"], "bad request e1") || !strings.Contains(got["x1"], `"code":"batch_expired"`) {
		t.Errorf("error file: %s", errs)
	}
	// Documented error shapes.
	code, body := bdo(t, "GET", srv.URL+"/v1/batches/batch_nope", "", nil, nil)
	if code != 404 || !strings.Contains(string(body), `"type":"invalid_request_error"`) {
		t.Errorf("unknown batch: %d %s", code, body)
	}
	code, body = bdo(t, "POST", srv.URL+"/v1/batches", "application/json", []byte(`{"input_file_id":"`+file.ID+`","endpoint":"/v1/chat/completions","completion_window":"1h"}`), nil)
	if code != 400 || !strings.Contains(string(body), `"param":"completion_window"`) {
		t.Errorf("bad window: %d %s", code, body)
	}
	if n := len(srv.Batches()); n != 1 {
		t.Errorf("%d batches, want 1", n)
	}
}

// TestBatchAPIOpenAICancel: a cancelled batch goes cancelling ->
// cancelled; the requests done before the cancel are answered, the others
// are batch_cancelled.
func TestBatchAPIOpenAICancel(t *testing.T) {
	clk := newTestClock()
	srv := newBatchServer(clk)
	defer srv.Close()
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	_ = mw.WriteField("purpose", "batch")
	fw, _ := mw.CreateFormFile("file", "in.jsonl")
	for _, id := range []string{"a", "b", "c", "d"} {
		_, _ = fw.Write([]byte(`{"custom_id":"` + id + `","method":"POST","url":"/v1/chat/completions","body":{"model":"m","messages":[]}}` + "\n"))
	}
	_ = mw.Close()
	var file struct{ ID string }
	bdo(t, "POST", srv.URL+"/v1/files", mw.FormDataContentType(), form.Bytes(), &file)
	var b struct {
		ID           string  `json:"id"`
		Status       string  `json:"status"`
		OutputFileID *string `json:"output_file_id"`
		ErrorFileID  *string `json:"error_file_id"`
	}
	bdo(t, "POST", srv.URL+"/v1/batches", "application/json", []byte(`{"input_file_id":"`+file.ID+`","endpoint":"/v1/chat/completions","completion_window":"24h"}`), &b)
	clk.Advance(3 * time.Minute) // half the requests done
	if bdo(t, "POST", srv.URL+"/v1/batches/"+b.ID+"/cancel", "", nil, &b); b.Status != "cancelling" {
		t.Fatalf("after cancel: %+v", b)
	}
	clk.Advance(time.Minute)
	if bdo(t, "GET", srv.URL+"/v1/batches/"+b.ID, "", nil, &b); b.Status != "cancelled" || b.OutputFileID == nil || b.ErrorFileID == nil {
		t.Fatalf("after cancelling: %+v", b)
	}
	_, errs := bdo(t, "GET", srv.URL+"/v1/files/"+*b.ErrorFileID+"/content", "", nil, nil)
	if n := strings.Count(string(errs), `"code":"batch_cancelled"`); n != 2 {
		t.Errorf("%d cancelled lines, want 2: %s", n, errs)
	}
}

// TestBatchAPIAnthropic: a Message Batch stays in_progress while its
// request_counts move, ends, and its results (any order) hold succeeded,
// errored and expired items; results before the end and unknown ids get
// the documented error shape.
func TestBatchAPIAnthropic(t *testing.T) {
	clk := newTestClock()
	srv := newBatchServer(clk)
	defer srv.Close()
	params := `{"model":"claude-x","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`
	create := `{"requests":[{"custom_id":"a","params":` + params + `},{"custom_id":"e1","params":` + params + `},{"custom_id":"x1","params":` + params + `}]}`
	var b struct {
		ID               string         `json:"id"`
		Type             string         `json:"type"`
		ProcessingStatus string         `json:"processing_status"`
		RequestCounts    map[string]int `json:"request_counts"`
		ResultsURL       *string        `json:"results_url"`
	}
	if code, body := bdo(t, "POST", srv.URL+"/v1/messages/batches", "application/json", []byte(create), &b); code != 200 || b.Type != "message_batch" || b.ProcessingStatus != "in_progress" || b.RequestCounts["processing"] != 3 {
		t.Fatalf("create: %d %s", code, body)
	}
	code, body := bdo(t, "GET", srv.URL+"/v1/messages/batches/"+b.ID+"/results", "", nil, nil)
	if code != 400 || !strings.Contains(string(body), `"type":"error"`) || !strings.Contains(string(body), "invalid_request_error") {
		t.Errorf("results before the end: %d %s", code, body)
	}
	clk.Advance(6 * time.Minute)
	bdo(t, "GET", srv.URL+"/v1/messages/batches/"+b.ID, "", nil, &b)
	if b.ProcessingStatus != "ended" || b.ResultsURL == nil || b.RequestCounts["succeeded"] != 1 || b.RequestCounts["errored"] != 1 || b.RequestCounts["expired"] != 1 {
		t.Fatalf("ended: %+v", b)
	}
	_, res := bdo(t, "GET", *b.ResultsURL, "", nil, nil)
	types := map[string]string{}
	for _, l := range jsonl(t, res) {
		var id string
		var r struct {
			Type    string          `json:"type"`
			Message json.RawMessage `json:"message"`
			Error   struct {
				Type  string `json:"type"`
				Error struct{ Type, Message string }
			} `json:"error"`
		}
		_ = json.Unmarshal(l["custom_id"], &id)
		_ = json.Unmarshal(l["result"], &r)
		types[id] = r.Type
		if r.Type == "succeeded" && !strings.Contains(string(r.Message), `"type":"message"`) {
			t.Errorf("succeeded without a message: %s", l["result"])
		}
		if r.Type == "errored" && (r.Error.Type != "error" || r.Error.Error.Type != "invalid_request_error") {
			t.Errorf("errored shape: %s", l["result"])
		}
	}
	if types["a"] != "succeeded" || types["e1"] != "errored" || types["x1"] != "expired" {
		t.Errorf("result types %v", types)
	}
	code, body = bdo(t, "GET", srv.URL+"/v1/messages/batches/msgbatch_nope", "", nil, nil)
	if code != 404 || !strings.Contains(string(body), "not_found_error") {
		t.Errorf("unknown batch: %d %s", code, body)
	}
	code, body = bdo(t, "POST", srv.URL+"/v1/messages/batches", "application/json", []byte(`{"requests":[{"custom_id":"bad id!","params":`+params+`}]}`), nil)
	if code != 400 || !strings.Contains(string(body), "custom_id") {
		t.Errorf("bad custom_id: %d %s", code, body)
	}
}

// TestBatchAPIGemini: batchGenerateContent with inlined requests returns
// an Operation whose metadata.state goes PENDING -> RUNNING -> SUCCEEDED
// on the test's clock; the finished operation holds the inlined responses
// (a GenerateContentResponse or a google.rpc.Status error, each with its
// key).
func TestBatchAPIGemini(t *testing.T) {
	clk := newTestClock()
	srv := newBatchServer(clk)
	defer srv.Close()
	req := `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`
	create := `{"batch":{"displayName":"job-1","inputConfig":{"requests":{"requests":[{"request":` + req + `,"metadata":{"key":"a"}},{"request":` + req + `,"metadata":{"key":"e1"}}]}}}}`
	type op struct {
		Name     string `json:"name"`
		Done     bool   `json:"done"`
		Metadata struct {
			State       string            `json:"state"`
			DisplayName string            `json:"displayName"`
			BatchStats  map[string]string `json:"batchStats"`
		} `json:"metadata"`
		Response struct {
			InlinedResponses struct {
				InlinedResponses []struct {
					Response json.RawMessage     `json:"response"`
					Error    *struct{ Code int } `json:"error"`
					Metadata map[string]string   `json:"metadata"`
				} `json:"inlinedResponses"`
			} `json:"inlinedResponses"`
		} `json:"response"`
	}
	var o op
	if code, body := bdo(t, "POST", srv.URL+"/v1beta/models/gemini-x:batchGenerateContent", "application/json", []byte(create), &o); code != 200 || !strings.HasPrefix(o.Name, "batches/") || o.Metadata.State != "BATCH_STATE_PENDING" || o.Metadata.DisplayName != "job-1" {
		t.Fatalf("create: %d %s", code, body)
	}
	for _, s := range []struct {
		d     time.Duration
		state string
	}{{2 * time.Minute, "BATCH_STATE_RUNNING"}, {5 * time.Minute, "BATCH_STATE_SUCCEEDED"}} {
		clk.Advance(s.d)
		o = op{}
		if code, body := bdo(t, "GET", srv.URL+"/v1beta/"+srv.Batches()[0].ID, "", nil, &o); code != 200 || o.Metadata.State != s.state {
			t.Fatalf("after %v: %d %s", s.d, code, body)
		}
	}
	items := o.Response.InlinedResponses.InlinedResponses
	if !o.Done || len(items) != 2 || items[0].Metadata["key"] != "a" || !strings.Contains(string(items[0].Response), "candidates") || items[1].Error == nil || items[1].Error.Code != 3 {
		t.Fatalf("output: %+v", o)
	}
	code, body := bdo(t, "GET", srv.URL+"/v1beta/batches/nope", "", nil, nil)
	if code != 404 || !strings.Contains(string(body), `"status":"NOT_FOUND"`) {
		t.Errorf("unknown batch: %d %s", code, body)
	}
	code, body = bdo(t, "POST", srv.URL+"/v1beta/models/gemini-x:batchGenerateContent", "application/json", []byte(`{"batch":{"displayName":"d"}}`), nil)
	if code != 400 || !strings.Contains(string(body), "INVALID_ARGUMENT") {
		t.Errorf("no input: %d %s", code, body)
	}
}

// TestBatchAPIHook: the hook sees each stage with the id, in order.
func TestBatchAPIHook(t *testing.T) {
	var stages []string
	srv := llmtest.NewServer(llmtest.WithBatchAPI(llmtest.BatchAPIOptions{Hook: func(s llmtest.BatchStage, id string) {
		stages = append(stages, string(s)+":"+id)
	}}))
	defer srv.Close()
	params := `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"}]}`
	var b struct{ ID string }
	bdo(t, "POST", srv.URL+"/v1/messages/batches", "application/json", []byte(`{"requests":[{"custom_id":"a","params":`+params+`}]}`), &b)
	bdo(t, "GET", srv.URL+"/v1/messages/batches/"+b.ID, "", nil, nil)
	bdo(t, "GET", srv.URL+"/v1/messages/batches/"+b.ID+"/results", "", nil, nil)
	want := []string{"created:" + b.ID, "poll:" + b.ID, "results:" + b.ID}
	if strings.Join(stages, ",") != strings.Join(want, ",") {
		t.Errorf("stages %v, want %v", stages, want)
	}
}
