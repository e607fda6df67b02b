//go:build unix

package runtime

import (
	"bytes"
	"context"
	"github.com/chorusrt/chorus/internal/testkit/cputime"
	"io"
	"net/http"
	"strconv"
	"testing"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers"
)

// chatBody is a small buffered Chat Completions answer, as a batch job's
// classification or extraction call gets (the bench corpus's).
const chatBody = `{"id":"chatcmpl-D8Z5oo6uDh67AD85p73ksdT1KxhE0","object":"chat.completion","created":1770933892,"model":"gpt-4.1-nano-2025-04-14","choices":[{"index":0,"message":{"role":"assistant","content":"Paris is the capital of France. It sits on the Seine.","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":11,"completion_tokens":14,"total_tokens":25,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default","system_fingerprint":"fp_de604bd877"}`

// memJSON answers every request with chatBody, from memory, as the bench
// module's "inproc" scenario does (bench/internal/scenario/inproc.go): a
// fresh header with Content-Type and Content-Length, a body reader of its
// own.
type memJSON struct{}

func (memJSON) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(chatBody)))
	return &http.Response{
		Status: "200 OK", StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader([]byte(chatBody))),
		ContentLength: int64(len(chatBody)),
		Request:       r,
	}, nil
}

// inprocRequest is the scenario's request (bench/internal/clients: the
// default prompt and output allowance).
func inprocRequest(model string) *llm.ChatRequest {
	return &llm.ChatRequest{Model: model, Messages: []llm.Message{llm.UserText("Say hi")}, MaxTokens: 1024}
}

// BenchmarkMemChatRuntime is the whole in-process cost of one small
// buffered request through the runtime (admission through the credential
// actor, request encoding, response decoding, the report after the call),
// the transport excluded: an http.RoundTripper answers from memory. The
// issue's target is under 20 µs of CPU per request on 2 cores
// (cpu-ns/op counts every goroutine of the process: the caller's, the
// actor's and the runtime's). It is the bench module's "inproc" scenario
// for chorus-runtime: the same request, answer, queue size and transport
// shape, requests one after another.
func BenchmarkMemChatRuntime(b *testing.B) {
	rt, err := New(WithProvider(memCfg()), WithClientOptions(providers.WithHTTPClient(&http.Client{Transport: memJSON{}})), WithQueueSize(1<<16))
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close(context.Background())
	r := inprocRequest("openai/m")
	ctx := context.Background()
	b.ReportAllocs()
	cpu0 := cputime.Process()
	var res *llm.ChatResult
	for b.Loop() {
		res, err = rt.Chat(ctx, r)
		if err != nil {
			b.Fatal(err)
		}
	}
	if b.N > 0 {
		b.ReportMetric(float64((cputime.Process()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
	if res.Content == "" || res.FinishReason != llm.FinishStop {
		b.Fatalf("result %+v", res)
	}
}

// BenchmarkMemChatDirect is the same request through a bare
// providers.Client: the difference is the runtime's share.
func BenchmarkMemChatDirect(b *testing.B) {
	c, err := providers.New(memCfg(), providers.WithHTTPClient(&http.Client{Transport: memJSON{}}))
	if err != nil {
		b.Fatal(err)
	}
	r := inprocRequest("m")
	ctx := context.Background()
	b.ReportAllocs()
	cpu0 := cputime.Process()
	for b.Loop() {
		if _, err := c.Chat(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
	if b.N > 0 {
		b.ReportMetric(float64((cputime.Process()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}
