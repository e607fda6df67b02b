package requestlog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"testing"
	"time"

	"github.com/chorusrt/chorus/requestlog"
)

// TestGatewayLogsBatchLines: each live line of a /v1/batches job is one
// record naming its batch and its custom_id, with its usage and cost.
func TestGatewayLogsBatchLines(t *testing.T) {
	st := openSQLite(t)
	defer st.Close()
	lg := requestlog.New(nopClose{st}, requestlog.Options{})
	gw, stop := newGateway(t, lg)
	do := func(req *http.Request, v any) {
		t.Helper()
		req.Header.Set("Authorization", "Bearer gk-a")
		resp, err := gw.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s %s: %d %s", req.Method, req.URL.Path, resp.StatusCode, b)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatal(err)
		}
	}
	var in bytes.Buffer
	const lines = 20
	for i := range lines {
		fmt.Fprintf(&in, `{"custom_id":"line-%d","method":"POST","url":"/v1/chat/completions","body":{"model":"openai/gpt-4.1-mini","messages":[{"role":"user","content":"req-%d-"}]}}`+"\n", i, 10000+i)
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	mw.WriteField("purpose", "batch")
	fw, _ := mw.CreateFormFile("file", "in.jsonl")
	fw.Write(in.Bytes())
	mw.Close()
	req, _ := http.NewRequest("POST", gw.URL+"/v1/files", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	var file struct{ ID string }
	do(req, &file)
	req, _ = http.NewRequest("POST", gw.URL+"/v1/batches", bytes.NewReader([]byte(`{"input_file_id":"`+file.ID+`","endpoint":"/v1/chat/completions","completion_window":"24h"}`)))
	req.Header.Set("Content-Type", "application/json")
	var b struct{ ID, Status string }
	do(req, &b)
	for deadline := time.Now().Add(30 * time.Second); b.Status != "completed"; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("batch %s is %s", b.ID, b.Status)
		}
		req, _ = http.NewRequest("GET", gw.URL+"/v1/batches/"+b.ID, nil)
		do(req, &b)
	}
	stop()
	if err := lg.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	p, err := st.List(context.Background(), requestlog.Query{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range p.Records {
		if r.ErrorType != "" { // 10007: the upstream fails it (failing)
			if r.LineID != "line-7" || r.BatchID != b.ID || r.ErrorType != "upstream" || seen[r.LineID] {
				t.Fatalf("failed line's record %+v", r)
			}
			seen[r.LineID] = true
			continue
		}
		n := r.InputTokens - 1000 - r.CachedTokens
		u := usageOf(n)
		if r.BatchID != b.ID || r.KeyName != "team-a" || r.Route != "POST /v1/chat/completions" || r.LineID != fmt.Sprintf("line-%d", n-10000) ||
			r.OutputTokens != u.CompletionTokens || r.Cost <= 0 || seen[r.LineID] {
			t.Fatalf("record %+v (batch %s)", r, b.ID)
		}
		seen[r.LineID] = true
	}
	if len(seen) != lines {
		t.Fatalf("%d lines recorded, want %d", len(seen), lines)
	}
}
