package openai

import (
	"testing"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// benchAnswer is the bench corpus's small buffered answer (bench
// module, corpus.BufferedOf).
const benchAnswer = `{"id":"chatcmpl-D8Z5oo6uDh67AD85p73ksdT1KxhE0","object":"chat.completion","created":1770933892,"model":"gpt-4.1-nano-2025-04-14","choices":[{"index":0,"message":{"role":"assistant","content":"Paris is the capital of France. It sits on the Seine.","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":11,"completion_tokens":14,"total_tokens":25,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default","system_fingerprint":"fp_de604bd877"}`

// BenchmarkParseChat decodes the small buffered answer of the bench's
// "inproc" scenario.
func BenchmarkParseChat(b *testing.B) {
	body := []byte(benchAnswer)
	b.ReportAllocs()
	for b.Loop() {
		res, err := Codec{}.ParseChat(body)
		if err != nil || res.Content == "" {
			b.Fatal(res, err)
		}
	}
}

// BenchmarkChatRequest encodes the bench's small buffered request (one
// user message, max_tokens).
func BenchmarkChatRequest(b *testing.B) {
	req := &llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("Say hi")}, MaxTokens: 1024}
	o := wire.BuildOptions{Provider: "openai"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := (Codec{}).ChatRequest(req, o); err != nil {
			b.Fatal(err)
		}
	}
}
