package runtime

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers"
)

// memTransport answers every request with the same pre-encoded SSE body,
// from memory: the benchmarks below then measure the client alone.
type memTransport struct{ body []byte }

func (m memTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	return &http.Response{
		StatusCode: 200,
		Header:     http.Header{"Content-Type": {"text/event-stream"}},
		Body:       io.NopCloser(bytes.NewReader(m.body)),
		Request:    r,
	}, nil
}

func memBody(n int) []byte {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"tok` + strconv.Itoa(i%10) + ` "},"finish_reason":null}]}` + "\n\n")
	}
	b.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n")
	return []byte(b.String())
}

func memCfg() providers.Config {
	return providers.Config{ID: "openai", Format: providers.FormatOpenAI, BaseURL: "http://mem.invalid/v1", APIKey: "k"}
}

// BenchmarkMemStreamDirect and BenchmarkMemStreamRuntime stream the same
// 1,000 deltas from memory (no server, no socket) through a bare
// providers.Client and through the runtime: their difference is the
// runtime's cost per delta, admission and report included (target: under
// 100 ns).
func BenchmarkMemStreamDirect(b *testing.B) {
	hc := &http.Client{Transport: memTransport{memBody(benchDeltas)}}
	c, err := providers.New(memCfg(), providers.WithHTTPClient(hc))
	if err != nil {
		b.Fatal(err)
	}
	r := &llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("go")}}
	perDelta(b, func() {
		s, err := c.Stream(context.Background(), r)
		drain(b, s, err)
	})
}

func BenchmarkMemStreamRuntime(b *testing.B) {
	hc := &http.Client{Transport: memTransport{memBody(benchDeltas)}}
	rt, err := New(WithProvider(memCfg()), WithClientOptions(providers.WithHTTPClient(hc)))
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close(context.Background())
	r := &llm.ChatRequest{Model: "openai/m", Messages: []llm.Message{llm.UserText("go")}}
	perDelta(b, func() {
		s, err := rt.Stream(context.Background(), r)
		drain(b, s, err)
	})
}
