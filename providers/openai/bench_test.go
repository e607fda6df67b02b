package openai

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/llm"
)

// benchDeltas is the number of content deltas in the benchmark stream.
const benchDeltas = 1000

// benchStream builds a realistic gpt-4o-mini stream: the role chunk, 1,000
// content deltas shaped exactly like a recorded chunk (obfuscation padding
// included, varying with the delta as OpenAI's does), the finish chunk,
// the include_usage chunk with empty choices, and [DONE].
func benchStream() [][]byte {
	const head = `{"id":"chatcmpl-DuLdOuviL2tiVxMim6HmX4YMnCorK","object":"chat.completion.chunk","created":1782321902,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_bbc23ca3d7","choices":[`
	words := []string{"Olá", "!", " Como", " posso", " ajudar", " você", " hoje", "?", " The", " quick", " brown", " fox", " \"jumps\"", " over", " the", " lazy", " dog", ".\n"}
	pads := []string{"TuWnytCa", "D1BuwrjA1C", "yS7A7FhhV", "cw1RS", "eScNPVmGYP3", "Qup1"}
	chunks := make([][]byte, 0, benchDeltas+4)
	chunks = append(chunks, []byte(head+`{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"yS7A7FhhV"}`))
	for i := 0; i < benchDeltas; i++ {
		w, _ := json.Marshal(words[i%len(words)])
		chunks = append(chunks, []byte(head+`{"index":0,"delta":{"content":`+string(w)+`},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"`+pads[i%len(pads)]+`"}`))
	}
	chunks = append(chunks,
		[]byte(head+`{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null,"obfuscation":"cw1RS"}`),
		[]byte(`{"id":"chatcmpl-DuLdOuviL2tiVxMim6HmX4YMnCorK","object":"chat.completion.chunk","created":1782321902,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_bbc23ca3d7","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":1000,"total_tokens":1020,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"obfuscation":"eScNPVmGYP3"}`),
		[]byte(`[DONE]`),
	)
	return chunks
}

func TestBenchStreamDecodes(t *testing.T) {
	chunks := benchStream()
	d := Codec{}.NewStreamDecoder()
	n := 0
	for _, c := range chunks {
		if _, err := d.Feed(nil, c, func(ev llm.Event) bool {
			if ev.Type == llm.EventText {
				n++
			}
			return true
		}); err != nil {
			t.Fatal(err)
		}
	}
	if n != benchDeltas {
		t.Fatalf("text events = %d, want %d", n, benchDeltas)
	}
	res := d.Result()
	if !d.Complete() || res.FinishReason != llm.FinishStop || res.Usage.CompletionTokens != 1000 {
		t.Fatalf("complete=%v finish=%q usage=%+v", d.Complete(), res.FinishReason, res.Usage)
	}
	if !strings.Contains(res.Content, `"jumps"`) {
		t.Fatalf("escaped delta not decoded: %q", res.Content[:80])
	}
}

// BenchmarkStreamDecoder feeds the whole 1,000-delta stream per iteration
// and reports the cost per content delta. allocs/op covers the whole stream
// (divide by 1,000 for allocations per delta; TestStreamDecoderAllocsPerDelta
// asserts the per-delta bound).
func BenchmarkStreamDecoder(b *testing.B) {
	chunks := benchStream()
	emit := func(llm.Event) bool { return true }
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		d := Codec{}.NewStreamDecoder()
		for _, c := range chunks {
			if _, err := d.Feed(nil, c, emit); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	reportPerDelta(b)
}

// encChunk is the minimal struct a conventional decoder would unmarshal a
// chunk into: only the fields the stream decoder reads.
type encChunk struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			Refusal          *string `json:"refusal"`
			ToolCalls        []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// BenchmarkStreamDecoderEncodingJSON decodes the same chunks with
// encoding/json into encChunk and folds the text into a ResultBuilder: the
// measured comparison that justifies walking chunks with jsonscan.
func BenchmarkStreamDecoderEncodingJSON(b *testing.B) {
	chunks := benchStream()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		var rb llm.ResultBuilder
		for _, c := range chunks {
			if string(c) == "[DONE]" {
				break
			}
			var ch encChunk
			if err := json.Unmarshal(c, &ch); err != nil {
				b.Fatal(err)
			}
			for i := range ch.Choices {
				if ch.Choices[i].Index == 0 && ch.Choices[i].Delta.Content != nil && *ch.Choices[i].Delta.Content != "" {
					ev := llm.Event{Type: llm.EventText, Text: *ch.Choices[i].Delta.Content}
					rb.Apply(&ev)
				}
			}
		}
	}
	b.StopTimer()
	reportPerDelta(b)
}

func reportPerDelta(b *testing.B) {
	if b.N == 0 {
		return
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchDeltas, "ns/delta")
}
