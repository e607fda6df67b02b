package main

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeBatchesInFilesDir: with --files-dir, an uploaded batch input
// and the batch's state and output live in that directory, and a batch on
// the simulator completes.
func TestServeBatchesInFilesDir(t *testing.T) {
	dir := t.TempDir()
	base, stop := startServe(t, nil, "--addr", "127.0.0.1:0", "--files-dir", dir)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("file", "in.jsonl")
	_, _ = io.WriteString(fw, `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"sim/echo","messages":[{"role":"user","content":"ping"}]}}`+"\n")
	_ = mw.WriteField("purpose", "batch")
	_ = mw.Close()
	resp, err := hc.Post(base+"/v1/files", mw.FormDataContentType(), &body)
	if err != nil {
		t.Fatal(err)
	}
	var file struct{ ID string }
	_ = json.NewDecoder(resp.Body).Decode(&file)
	resp.Body.Close()
	if _, err := os.Stat(filepath.Join(dir, file.ID)); err != nil || file.ID == "" {
		t.Fatalf("the upload %q is not in --files-dir: %v", file.ID, err)
	}
	code, out := post(t, base+"/v1/batches", `{"input_file_id":"`+file.ID+`","endpoint":"/v1/chat/completions","completion_window":"24h"}`)
	var b struct {
		ID, Status   string
		OutputFileID *string `json:"output_file_id"`
	}
	_ = json.Unmarshal([]byte(out), &b)
	if code != 200 || b.ID == "" {
		t.Fatalf("create %d %s", code, out)
	}
	for deadline := time.Now().Add(20 * time.Second); b.Status != "completed"; time.Sleep(20 * time.Millisecond) {
		resp, err := hc.Get(base + "/v1/batches/" + b.ID)
		if err != nil {
			t.Fatal(err)
		}
		_ = json.NewDecoder(resp.Body).Decode(&b)
		resp.Body.Close()
		if time.Now().After(deadline) || b.Status == "failed" {
			t.Fatalf("batch %+v", b)
		}
	}
	if b.OutputFileID == nil {
		t.Fatalf("no output file: %+v", b)
	}
	content, err := os.ReadFile(filepath.Join(dir, *b.OutputFileID))
	if err != nil || !strings.Contains(string(content), `[simulated] ping`) {
		t.Fatalf("output %s %v", content, err)
	}
	if _, err := os.Stat(filepath.Join(dir, b.ID+".json")); err != nil {
		t.Errorf("the batch's state is not in --files-dir: %v", err)
	}
	if exit, stderr := stop(); exit != 0 {
		t.Errorf("exit %d: %s", exit, stderr)
	}
}
