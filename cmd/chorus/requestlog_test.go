package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func getBody(t *testing.T, url string) (int, string) {
	t.Helper()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestServeRequestLog: chorus serve keeps a request log beside
// --files-dir by default; the console's usage API and chorus usage print
// the same figures; a bad filter is named.
func TestServeRequestLog(t *testing.T) {
	dir := t.TempDir()
	base, stop := startServe(t, nil, "--addr", "127.0.0.1:0", "--files-dir", dir)
	for _, m := range []string{"sim/echo", "sim/echo", "sim/echo", "sim/other"} {
		if code, b := post(t, base+"/v1/chat/completions", `{"model":"`+m+`","messages":[{"role":"user","content":"ping"}]}`); code != 200 {
			t.Fatalf("%d %s", code, b)
		}
	}
	var api string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		code, b := getBody(t, base+"/api/console/usage?group_by=model&format=csv")
		if code != 200 {
			t.Fatalf("usage API %d %s", code, b)
		}
		if strings.Contains(b, ",sim/echo,3,") && strings.Contains(b, ",sim/other,1,") {
			api = b
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log never held the 4 requests: %s", b)
		}
	}
	if code, b := getBody(t, base+"/api/console/requests?model=sim/echo&limit=2"); code != 200 || strings.Count(b, `"requested":"sim/echo"`) != 2 || !strings.Contains(b, `"next":`) ||
		strings.Contains(b, "request_body") || strings.Contains(b, "ping") {
		t.Errorf("requests API %d %s", code, b)
	}
	if code, b := getBody(t, base+"/api/console/requests?colour=red"); code != 400 || !strings.Contains(b, `"filter":"colour"`) {
		t.Errorf("bad filter %d %s", code, b)
	}
	exit, stderr := stop()
	if exit != 0 || !strings.Contains(stderr, "request log in "+filepath.Join(dir, "requests.db")) {
		t.Fatalf("exit %d: %s", exit, stderr)
	}
	code, out, errs := runCLI(t, context.Background(), nil, "usage", "--files-dir", dir, "--group-by", "model", "--csv")
	if code != 0 || out != api {
		t.Fatalf("chorus usage exit %d %s\n%s\nthe API said\n%s", code, errs, out, api)
	}
	code, out, _ = runCLI(t, context.Background(), nil, "usage", "--request-log", filepath.Join(dir, "requests.db"), "--group-by=model")
	if code != 0 || !strings.Contains(out, "sim/echo") || !strings.HasPrefix(out, "bucket") {
		t.Fatalf("table: exit %d %s", code, out)
	}
	if code, _, errs := runCLI(t, context.Background(), nil, "usage", "--files-dir", dir, "--group-by", "colour"); code != 2 || !strings.Contains(errs, "group_by") {
		t.Errorf("bad group: exit %d %s", code, errs)
	}
	if code, _, errs := runCLI(t, context.Background(), nil, "usage", "--files-dir", dir, "--bucket", "hour", "--from", "2026-01-01T00:00:00Z", "--to", "yesterday"); code != 2 || !strings.Contains(errs, `filter to="yesterday"`) {
		t.Errorf("bad range: exit %d %s", code, errs)
	}
}

// TestServeRequestLogConfig: chorus.yaml's request_log: names the file,
// turns content logging on (cut to content_bytes), turns the log off, and
// a bad entry is named with its line.
func TestServeRequestLogConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "chorus.yaml")
	db := filepath.Join(dir, "log.db")
	os.WriteFile(cfg, []byte("request_log:\n  path: "+db+"\n  retain: 1h\n  max_rows: 100\n  content: true\n  content_bytes: 24\n"), 0o600)
	base, stop := startServe(t, nil, "--addr", "127.0.0.1:0", "--config", cfg)
	post(t, base+"/v1/chat/completions", `{"model":"sim/echo","messages":[{"role":"user","content":"ping"}]}`)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		code, b := getBody(t, base+"/api/console/requests")
		if code == 200 && strings.Contains(b, `"request_body":"{\"model\":\"sim/echo\",\"mes"`) && strings.Contains(b, `"answer":"[simulated] ping"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no record with its content: %d %s", code, b)
		}
	}
	if exit, stderr := stop(); exit != 0 || !strings.Contains(stderr, "request log in "+db) || !strings.Contains(stderr, "request_log.content") {
		t.Fatalf("exit %d: %s", exit, stderr)
	}
	if code, out, errs := runCLI(t, context.Background(), nil, "usage", "--request-log", db, "--csv"); code != 0 || !strings.Contains(out, "\n,,1,0,") {
		t.Fatalf("usage exit %d %s %s", code, out, errs)
	}
	base, stop = startServe(t, nil, "--addr", "127.0.0.1:0", "--request-log", "off")
	if code, _ := getBody(t, base+"/api/console/usage"); code != 404 {
		t.Errorf("log off: usage API %d", code)
	}
	if exit, stderr := stop(); exit != 0 || strings.Contains(stderr, "request log in") {
		t.Fatalf("exit %d: %s", exit, stderr)
	}
	os.WriteFile(cfg, []byte("request_log:\n  store: mysql\n"), 0o600)
	if code, _, errs := runCLI(t, context.Background(), nil, "serve", "--config", cfg); code != 2 || !strings.Contains(errs, "chorus.yaml:2: request_log.store: want sqlite or postgres") {
		t.Errorf("bad store: exit %d %s", code, errs)
	}
}
