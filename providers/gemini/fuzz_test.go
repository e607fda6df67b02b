package gemini

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/internal/testkit/fixture"
	"github.com/chorusrt/chorus/providers/internal/codectest"
)

// Fuzz targets of the Gemini generateContent format (issue 8), seeded from
// every recorded Gemini body of the fixture corpus: whole streamed bodies
// (alt=sse SSE, and JSON arrays streamed without it) for the stream decoder,
// whole JSON bodies (objects and arrays) for the buffered parser. For any
// input: no panic; errors are typed (*llm.DecodeError or *llm.APIError);
// every tool event points at a call already opened, and starts come in
// position order; finish reasons are canonical; the events and Result()
// agree; and the memory allocated, like the result's size, is bounded by the
// input's size. The seeding and the checks are package codectest's; which
// fixtures seed which target, and the JSON-array framing, are decided here.
//
// FuzzStreamDecoder (stream_test.go) fuzzes pairs of chunks; these fuzz
// whole bodies.

// fzOpen frames a whole streamed body the way package providers does: a
// JSON-array body element by element, anything else as SSE event by event.
func fzOpen(body []byte) codectest.Source {
	if fzFirstByte(body) == '[' {
		return fzArrayElements(body)
	}
	return codectest.SSESource(body)
}

// errFzArray ends a JSON-array body that is not well formed: package
// providers reports it as a transport failure, not a decoder error.
var errFzArray = fmt.Errorf("malformed JSON array stream: %w", codectest.ErrTransport)

func fzFirstByte(b []byte) byte {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

// fzArrayElements walks a streamed JSON array as providers.pumpJSONArray
// does: one raw element per call, io.EOF after the closing bracket.
func fzArrayElements(body []byte) codectest.Source {
	jd := json.NewDecoder(bytes.NewReader(body))
	opened := false
	return func() ([]byte, []byte, error) {
		if !opened {
			opened = true
			if _, err := jd.Token(); err != nil {
				return nil, nil, errFzArray
			}
		}
		if !jd.More() {
			if _, err := jd.Token(); err != nil {
				return nil, nil, errFzArray
			}
			return nil, nil, io.EOF
		}
		var raw json.RawMessage
		if err := jd.Decode(&raw); err != nil {
			return nil, nil, errFzArray
		}
		return nil, raw, nil
	}
}

func fzGemini(p string) bool { return p == "gemini" }

// fzIsGenerate: a generateContent or streamGenerateContent exchange
// (payload-only recordings holding candidates included).
func fzIsGenerate(_ fixture.Entry, ex fixture.Exchange) bool {
	u := ex.Request.URL
	if u == "" {
		return bytes.Contains(ex.Response.Body, []byte(`"candidates"`)) || bytes.Contains(ex.Response.Body, []byte(`"error"`))
	}
	return strings.Contains(u, ":generateContent") || strings.Contains(u, ":streamGenerateContent")
}

func FuzzGeminiStream(f *testing.F) {
	for _, b := range codectest.Seeds(f, fzGemini, func(e fixture.Entry, ex fixture.Exchange) bool {
		return fzIsGenerate(e, ex) && (ex.Response.Stream || (strings.Contains(ex.Request.URL, ":streamGenerateContent") && fzFirstByte(ex.Response.Body) == '['))
	}) {
		f.Add(b)
	}
	f.Add([]byte("data: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"f\",\"partialArgs\":[{\"jsonPath\":\"$.a[3]\",\"numberValue\":1,\"willContinue\":true}],\"willContinue\":true}}]}}]}\r\n\r\n"))
	f.Add([]byte(`[{"candidates":[{"content":{"parts":[{"text":"a"}]}}]},{"error":{"code":503,"status":"UNAVAILABLE","message":"m"}}]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		codectest.StreamFrom(t, Codec{}.NewStreamDecoder(), body, fzOpen)
	})
}

func FuzzGeminiBuffered(f *testing.F) {
	for _, b := range codectest.Seeds(f, fzGemini, func(e fixture.Entry, ex fixture.Exchange) bool {
		return !ex.Response.Stream && fzIsGenerate(e, ex)
	}) {
		f.Add(b)
	}
	f.Add([]byte(`{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","message":"m","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"3s"}]}}`))
	f.Add([]byte(`{"promptFeedback":{"blockReason":"SAFETY"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		codectest.Buffered(t, body, Codec{}.ParseChat, Codec{}.ParseError)
	})
}
