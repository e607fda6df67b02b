package runtime

import (
	"context"
	"net/http"
	"testing"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers"
)

// BenchmarkMemCallRuntime is the runtime's cost per call: a streamed
// call of one delta from memory (no server, no socket), admission and
// report included, with no OpenTelemetry SDK installed (the default).
func BenchmarkMemCallRuntime(b *testing.B) {
	benchMemCall(b)
}

func benchMemCall(b *testing.B, opts ...Option) {
	hc := &http.Client{Transport: memTransport{memBody(1)}}
	rt, err := New(append([]Option{WithProvider(memCfg()), WithClientOptions(providers.WithHTTPClient(hc))}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close(context.Background())
	r := &llm.ChatRequest{Model: "openai/m", Messages: []llm.Message{llm.UserText("go")}}
	b.ReportAllocs()
	for b.Loop() {
		s, err := rt.Stream(context.Background(), r)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Result(); err != nil {
			b.Fatal(err)
		}
	}
}
