package batch

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/internal/testkit/fixture"
	"github.com/chorusrt/chorus/llm"
)

// FuzzBatchInputLine: any input line parses to a request or an error naming
// what is wrong, never a panic; a parsed request either validates or fails
// validation with a *llm.ConfigError. Seeds: the sample batch and the
// request bodies of the recorded corpus when it is there (CHORUS_FIXTURES;
// wrapped as batch lines).
func FuzzBatchInputLine(f *testing.F) {
	if data, err := os.ReadFile(filepath.Join("..", "examples", "data", "prompts.jsonl")); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			f.Add(append([]byte(nil), sc.Bytes()...))
		}
	}
	dir, err := fixture.Dir()
	if err != nil && fixture.Required() {
		f.Fatal(err)
	}
	if err == nil {
		if entries, err := fixture.LoadIndex(dir); err == nil {
			for _, e := range entries {
				if e.Synthetic() {
					continue
				}
				exs, err := fixture.Load(dir, e)
				if err != nil {
					continue
				}
				for _, ex := range exs {
					url := ""
					switch {
					case strings.HasSuffix(ex.Request.URL, "/chat/completions"):
						url = URLChat
					case strings.HasSuffix(ex.Request.URL, "/embeddings"):
						url = URLEmbeddings
					}
					if url == "" || !json.Valid(ex.Request.Body) || len(ex.Request.Body) > 64<<10 {
						continue
					}
					line, _ := json.Marshal(map[string]any{"custom_id": "x", "method": "POST", "url": url, "body": json.RawMessage(ex.Request.Body)})
					f.Add(line)
				}
			}
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var l inputLine
		if json.Unmarshal(raw, &l) != nil || len(l.Body) == 0 {
			return
		}
		check := func(v interface{ Validate() error }, err error) {
			if err != nil {
				if err.Error() == "" {
					t.Fatal("an error that says nothing")
				}
				return
			}
			var ce *llm.ConfigError
			if verr := v.Validate(); verr != nil && !errors.As(verr, &ce) {
				t.Fatalf("validation error is %T, want *llm.ConfigError", verr)
			}
		}
		switch l.URL {
		case URLChat:
			req, err := chatFromOpenAI(l.Body)
			if err == nil && req.Model == "" {
				req.Model = "sim/echo"
			}
			check(req, err)
		case URLEmbeddings:
			req, _, err := embedFromOpenAI(l.Body)
			if err == nil && req.Model == "" {
				req.Model = "sim/embed"
			}
			check(req, err)
		}
	})
}
