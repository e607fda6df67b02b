package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/internal/version"
)

// TestVersion: chorus version prints the build's version and toolchain, the
// same one chorus serve's GET /version answers; it takes no arguments.
func TestVersion(t *testing.T) {
	code, out, stderr := runCLI(t, context.Background(), nil, "version")
	v := version.Get()
	if code != 0 || out != "chorus "+v.String()+" "+v.Go+"\n" || stderr != "" {
		t.Fatalf("chorus version: %d %q %q", code, out, stderr)
	}
	if code, _, stderr := runCLI(t, context.Background(), nil, "version", "extra"); code != 2 || !strings.Contains(stderr, "takes no arguments") {
		t.Fatalf("chorus version extra: %d %q", code, stderr)
	}

	base, stop := startServe(t, nil, "--addr", "127.0.0.1:0")
	defer stop()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(base + "/version")
	if err != nil {
		t.Fatal(err)
	}
	var got version.Info
	err = json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if err != nil || got != v {
		t.Fatalf("GET /version: %+v %v; want %+v", got, err, v)
	}
}

// TestServeRootIsTheConsole: a browser opening chorus serve's address is
// sent to the console, whose page answers; curl's */* gets the listing.
func TestServeRootIsTheConsole(t *testing.T) {
	base, stop := startServe(t, nil, "--addr", "127.0.0.1:0")
	defer stop()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest("GET", base+"/", nil)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")
	resp, err := (&http.Client{Transport: tr}).Do(req) // follows the redirects
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Request.URL.Path, "/console/") || !strings.Contains(string(body), "Chorus console") {
		t.Fatalf("browser at /: %d at %s: %.200s", resp.StatusCode, resp.Request.URL, body)
	}
	req, _ = http.NewRequest("GET", base+"/", nil)
	req.Header.Set("Accept", "*/*")
	resp, err = (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"families"`) || !strings.Contains(string(body), `"console":"/console/"`) {
		t.Fatalf("curl at /: %d %s", resp.StatusCode, body)
	}
}
