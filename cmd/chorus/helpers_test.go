package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/chorusrt/chorus/internal/pgtest"
	"github.com/chorusrt/chorus/internal/testkit/syncbuf"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop() // the PostgreSQL of the fleet tests, when one was started
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// runCLI runs chorus in-process with the given environment (nothing else
// of the real environment is visible: no key leaks in from the machine).
func runCLI(t *testing.T, ctx context.Context, vars map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb syncbuf.Buffer
	e := env{
		stdin: strings.NewReader(""), stdout: &out, stderr: &errb,
		getenv: func(k string) string { return vars[k] },
		width:  func() int { return 0 },
	}
	code = run(ctx, e, args)
	return code, out.String(), errb.String()
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

// readOutput decodes every line of an output file, failing on any line
// that is not whole JSON, and returns them by custom_id (failing on a
// custom_id written twice).
func readOutput(t *testing.T, path string) map[string]outLine {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		t.Fatalf("%s does not end with a newline: %q", path, tail(data))
	}
	out := map[string]outLine{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 16<<20)
	for n := 1; sc.Scan(); n++ {
		var l outLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%s:%d is not whole JSON: %v: %q", path, n, err, sc.Text())
		}
		if _, dup := out[l.CustomID]; dup {
			t.Fatalf("%s:%d: custom_id %q written twice", path, n, l.CustomID)
		}
		if (l.Response == nil) == (l.Error == nil) {
			t.Fatalf("%s:%d: want exactly one of response and error: %s", path, n, sc.Text())
		}
		out[l.CustomID] = l
	}
	return out
}

func tail(b []byte) []byte {
	if len(b) > 80 {
		return b[len(b)-80:]
	}
	return b
}

// writeInput writes JSONL lines into a temp file.
func writeInput(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "in.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// chatLine is one chat input line asking model (empty: none) for prompt.
func chatLine(id, model, prompt string) string {
	body := map[string]any{"messages": []any{map[string]any{"role": "user", "content": prompt}}}
	if model != "" {
		body["model"] = model
	}
	b, _ := json.Marshal(map[string]any{"custom_id": id, "method": "POST", "url": "/v1/chat/completions", "body": body})
	return string(b)
}

// moduleRoot is the directory holding go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found")
		}
		dir = parent
	}
}
