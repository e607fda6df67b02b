package llmtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llmtest"
)

// sseEvent is one parsed SSE event.
type sseEvent struct {
	Name string
	Data string
}

// parseSSE splits an SSE body into events (LF or CRLF line ends). It is a
// deliberately small reader, independent of the code under test; complete
// is false when the body does not end with a blank line.
func parseSSE(body []byte) (events []sseEvent, complete bool) {
	text := string(body)
	complete = text == "" || strings.HasSuffix(text, "\n\n") || strings.HasSuffix(text, "\r\n\r\n")
	var cur sseEvent
	var data []string
	has := false
	flush := func() {
		if has {
			cur.Data = strings.Join(data, "\n")
			events = append(events, cur)
		}
		cur, data, has = sseEvent{}, nil, false
	}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSuffix(line, "\r")
		switch {
		case line == "":
			flush()
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event:"):
			cur.Name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
			has = true
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
			has = true
		}
	}
	flush()
	return events, complete
}

// newClient returns a client with its own transport, closed at cleanup.
func newClient(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// result is what a request produced.
type result struct {
	resp    *http.Response
	body    []byte
	readErr error
	elapsed time.Duration
}

// post sends body to url and reads the whole answer.
func post(t *testing.T, c *http.Client, url, body string) result {
	t.Helper()
	return postCtx(t, context.Background(), c, url, body)
}

func postCtx(t *testing.T, ctx context.Context, c *http.Client, url, body string) result {
	t.Helper()
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, rerr := io.ReadAll(resp.Body)
	return result{resp: resp, body: b, readErr: rerr, elapsed: time.Since(start)}
}

// endpoint describes how to call one format.
type endpoint struct {
	format llmtest.Format
	url    func(s *llmtest.Server, stream bool) string
	body   func(stream bool) string
}

const model = "test-model"

var (
	openaiEP = endpoint{
		format: llmtest.FormatOpenAI,
		url:    func(s *llmtest.Server, _ bool) string { return s.OpenAIBaseURL() + "/chat/completions" },
		body: func(stream bool) string {
			if stream {
				return `{"model":"` + model + `","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
			}
			return `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]}`
		},
	}
	anthropicEP = endpoint{
		format: llmtest.FormatAnthropic,
		url:    func(s *llmtest.Server, _ bool) string { return s.AnthropicBaseURL() + "/v1/messages" },
		body: func(stream bool) string {
			return fmt.Sprintf(`{"model":"%s","max_tokens":100,"stream":%t,"messages":[{"role":"user","content":"hi"}]}`, model, stream)
		},
	}
	geminiEP = endpoint{
		format: llmtest.FormatGemini,
		url: func(s *llmtest.Server, stream bool) string {
			if stream {
				return s.GeminiBaseURL() + "/v1beta/models/" + model + ":streamGenerateContent?alt=sse"
			}
			return s.GeminiBaseURL() + "/v1beta/models/" + model + ":generateContent"
		},
		body: func(bool) string { return `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}` },
	}
	endpoints = []endpoint{openaiEP, anthropicEP, geminiEP}
)

// obj decodes a JSON object or fails the test.
func obj(t *testing.T, data string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(data), &m); err != nil {
		t.Fatalf("not a JSON object: %v: %.300q", err, data)
	}
	return m
}

// get walks a decoded JSON value along a path of keys and indexes.
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

func str(v any) string { s, _ := v.(string); return s }

func num(v any) int { f, _ := v.(float64); return int(f) }
