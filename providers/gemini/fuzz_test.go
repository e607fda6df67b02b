package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"runtime/metrics"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest/fixture"
	"github.com/chorusrt/chorus/providers/internal/sse"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// Fuzz targets of the Gemini generateContent format (issue 8), seeded from
// every recorded Gemini body of the fixture corpus: whole streamed bodies
// (alt=sse SSE, and JSON arrays streamed without it) for the stream decoder,
// whole JSON bodies (objects and arrays) for the buffered parser. For any
// input: no panic; errors are typed (*llm.DecodeError or *llm.APIError);
// every tool event points at a call already opened, and starts come in
// position order; finish reasons are canonical; the events and Result()
// agree; and the memory allocated, like the result's size, is bounded by the
// input's size.
//
// FuzzStreamDecoder (stream_test.go) fuzzes pairs of chunks; these fuzz
// whole bodies.

// fzMaxSeed keeps the seed corpus small enough for the mutator.
const fzMaxSeed = 64 << 10

// fzSeeds returns the recorded response bodies of the non-synthetic
// fixtures that keep accepts, deduplicated, at most fzMaxSeed bytes each.
func fzSeeds(tb testing.TB, provider func(string) bool, keep func(e fixture.Entry, ex fixture.Exchange) bool) [][]byte {
	tb.Helper()
	dir, err := fixture.Dir()
	if err != nil {
		tb.Fatalf("fixtures: %v", err)
	}
	idx, err := fixture.LoadIndex(dir)
	if err != nil {
		tb.Fatalf("fixtures: %v", err)
	}
	seen := map[string]bool{}
	var out [][]byte
	for _, e := range idx {
		if e.Synthetic() || !provider(e.Provider) {
			continue
		}
		exs, err := fixture.Load(dir, e)
		if err != nil {
			tb.Fatalf("load %s: %v", e.File, err)
		}
		for _, ex := range exs {
			b := ex.Response.Body
			if len(b) == 0 || len(b) > fzMaxSeed || seen[string(b)] || !keep(e, ex) {
				continue
			}
			seen[string(b)] = true
			out = append(out, b)
		}
	}
	if len(out) == 0 {
		tb.Fatal("fixtures: no seed body")
	}
	return out
}

var fzAllocSample = []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}

// fzAllocated is the heap allocated by the process so far.
func fzAllocated() uint64 {
	metrics.Read(fzAllocSample)
	return fzAllocSample[0].Value.Uint64()
}

// fzAllocBudget bounds what decoding n input bytes may allocate: a
// generous multiple of the input plus the fixed buffers (the SSE reader's
// 32 KiB, decoder state).
func fzAllocBudget(n int) uint64 { return uint64(64*n) + 4<<20 }

// fzSizeBudget bounds the size of a result decoded from n input bytes
// (escapes re-encoded by a parser can grow a little).
func fzSizeBudget(n int) int { return 8*n + 1024 }

func fzResultSize(res *llm.ChatResult) int {
	if res == nil {
		return 0
	}
	n := len(res.Content) + len(res.Reasoning) + len(res.Refusal) + len(res.ID) + len(res.Model)
	for _, tc := range res.ToolCalls {
		n += len(tc.ID) + len(tc.Name) + len(tc.Arguments) + len(tc.Signature)
	}
	for _, tb := range res.ThinkingBlocks {
		n += len(tb.Text) + len(tb.Signature) + len(tb.Data)
	}
	return n
}

// fzTypedError fails unless err is one of the decoders' typed errors.
func fzTypedError(t *testing.T, err error) {
	t.Helper()
	var de *llm.DecodeError
	var ae *llm.APIError
	if err != nil && !errors.As(err, &de) && !errors.As(err, &ae) {
		t.Fatalf("untyped error %T: %v", err, err)
	}
}

// fzCheckResult checks what is true of any result, buffered or streamed.
func fzCheckResult(t *testing.T, in int, res *llm.ChatResult) {
	t.Helper()
	if res == nil {
		return
	}
	if !res.FinishReason.Valid() {
		t.Fatalf("finish %q is not canonical", res.FinishReason)
	}
	if n := fzResultSize(res); n > fzSizeBudget(in) {
		t.Fatalf("result of %d bytes from %d input bytes", n, in)
	}
}

// fzStream feeds a whole streamed body to dec the way package providers
// does (an SSE body event by event, a JSON-array body element by element)
// and checks the events, the error and the result.
func fzStream(t *testing.T, dec wire.StreamDecoder, body []byte) {
	before := fzAllocated()
	var next func() ([]byte, []byte, error)
	if fzFirstByte(body) == '[' {
		next = fzArrayElements(body)
	} else {
		r := sse.NewReader(bytes.NewReader(body), nil)
		next = func() ([]byte, []byte, error) {
			ev, err := r.Next()
			return ev.Name, ev.Data, err
		}
	}
	var text, reasoning strings.Builder
	opened, events := 0, 0
	emit := func(ev llm.Event) bool {
		events++
		switch ev.Type {
		case llm.EventText:
			text.WriteString(ev.Text)
		case llm.EventReasoning:
			reasoning.WriteString(ev.Text)
		case llm.EventToolCallStart:
			if ev.ToolIndex != opened {
				t.Fatalf("tool call start at %d with %d calls open", ev.ToolIndex, opened)
			}
			opened++
		case llm.EventToolCallDelta:
			if ev.ToolIndex < 0 || ev.ToolIndex >= opened {
				t.Fatalf("tool delta for call %d with %d open", ev.ToolIndex, opened)
			}
		case llm.EventFinish:
			if !ev.Finish.Valid() {
				t.Fatalf("finish event %q is not canonical", ev.Finish)
			}
		}
		return true
	}
	for {
		name, data, err := next()
		if err == io.EOF || errors.Is(err, sse.ErrTooLarge) || errors.Is(err, errFzArray) {
			break
		}
		if err != nil {
			t.Fatalf("sse over a byte slice: %v", err)
		}
		done, err := dec.Feed(name, data, emit)
		if err != nil {
			fzTypedError(t, err)
			break
		}
		if done {
			break
		}
	}
	res := dec.Result()
	if res == nil {
		t.Fatal("Result() is nil")
	}
	if got := fzAllocated() - before; got > fzAllocBudget(len(body)) {
		t.Fatalf("decoding %d bytes allocated %d bytes", len(body), got)
	}
	fzCheckResult(t, len(body), res)
	if len(res.ToolCalls) != opened {
		t.Fatalf("result holds %d tool calls, the events opened %d", len(res.ToolCalls), opened)
	}
	if res.Content != text.String() || res.Reasoning != reasoning.String() {
		t.Fatalf("result text %q / reasoning %q, events carried %q / %q", res.Content, res.Reasoning, text.String(), reasoning.String())
	}
	if dec.Started() != (events > 0) {
		t.Fatalf("Started() = %v after %d events", dec.Started(), events)
	}
}

// fzBuffered parses a whole body with parse and checks the outcome; the
// same bytes go through parseError, which must not panic either.
func fzBuffered(t *testing.T, body []byte, parse func([]byte) (*llm.ChatResult, error), parseError func(int, []byte) wire.ErrorInfo) {
	before := fzAllocated()
	res, err := parse(body)
	info := parseError(400, body)
	if got := fzAllocated() - before; got > fzAllocBudget(len(body)) {
		t.Fatalf("parsing %d bytes allocated %d bytes", len(body), got)
	}
	if len(info.Message)+len(info.Code)+len(info.Type) > fzSizeBudget(len(body)) {
		t.Fatalf("error info of %d bytes from %d", len(info.Message), len(body))
	}
	if err != nil {
		fzTypedError(t, err)
		return
	}
	if res == nil {
		t.Fatal("nil result without an error")
	}
	fzCheckResult(t, len(body), res)
	for i, tc := range res.ToolCalls {
		if tc.Name == "" && tc.ID == "" && tc.Arguments == "" {
			t.Fatalf("tool call %d is empty: %+v", i, res.ToolCalls)
		}
	}
}

// errFzArray ends a JSON-array body that is not well formed: package
// providers reports it as a transport failure, not a decoder error.
var errFzArray = errors.New("malformed JSON array stream")

func fzFirstByte(b []byte) byte {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

// fzArrayElements walks a streamed JSON array as providers.pumpJSONArray
// does: one raw element per call, io.EOF after the closing bracket.
func fzArrayElements(body []byte) func() ([]byte, []byte, error) {
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
	for _, b := range fzSeeds(f, fzGemini, func(e fixture.Entry, ex fixture.Exchange) bool {
		return fzIsGenerate(e, ex) && (ex.Response.Stream || (strings.Contains(ex.Request.URL, ":streamGenerateContent") && fzFirstByte(ex.Response.Body) == '['))
	}) {
		f.Add(b)
	}
	f.Add([]byte("data: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"f\",\"partialArgs\":[{\"jsonPath\":\"$.a[3]\",\"numberValue\":1,\"willContinue\":true}],\"willContinue\":true}}]}}]}\r\n\r\n"))
	f.Add([]byte(`[{"candidates":[{"content":{"parts":[{"text":"a"}]}}]},{"error":{"code":503,"status":"UNAVAILABLE","message":"m"}}]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		fzStream(t, Codec{}.NewStreamDecoder(), body)
	})
}

func FuzzGeminiBuffered(f *testing.F) {
	for _, b := range fzSeeds(f, fzGemini, func(e fixture.Entry, ex fixture.Exchange) bool {
		return !ex.Response.Stream && fzIsGenerate(e, ex)
	}) {
		f.Add(b)
	}
	f.Add([]byte(`{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","message":"m","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"3s"}]}}`))
	f.Add([]byte(`{"promptFeedback":{"blockReason":"SAFETY"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		fzBuffered(t, body, Codec{}.ParseChat, Codec{}.ParseError)
	})
}
