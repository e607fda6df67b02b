package gemini

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"testing"
	"unsafe"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/codectest"
	"github.com/chorusrt/chorus/providers/internal/sse"
)

const benchDeltas = 1000

// benchChunks builds a 1,000-text-delta answer shaped like gemini-2.5-flash's
// alt=sse chunks: one text part per chunk, cumulative usageMetadata, model
// version and response id on every chunk, a finishReason on the last.
func benchChunks() [][]byte {
	chunks := make([][]byte, benchDeltas)
	for i := range chunks {
		finish := ""
		if i == benchDeltas-1 {
			finish = `"finishReason": "STOP",`
		}
		chunks[i] = fmt.Appendf(nil, `{"candidates": [{"content": {"parts": [{"text": "token %d, \"quoted\" "}],"role": "model"},%s"index": 0}],"usageMetadata": {"promptTokenCount": 11,"candidatesTokenCount": %d,"totalTokenCount": %d,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 11}],"thoughtsTokenCount": 206},"modelVersion": "gemini-2.5-flash","responseId": "NgCzaZz6I6nUz7IPhsKmmQw"}`,
			i, finish, i+1, i+218)
	}
	return chunks
}

func benchSSE(chunks [][]byte) []byte {
	var b bytes.Buffer
	for _, c := range chunks {
		b.WriteString("data: ")
		b.Write(c)
		b.WriteString("\r\n\r\n")
	}
	return b.Bytes()
}

// BenchmarkStreamDecoder measures one streamed answer of 1,000 text deltas:
// "sse" reads the SSE body and decodes every event (the real per-delta cost
// on top of the network), "feed" decodes pre-split chunks only. Each chunk
// also carries new usage, so each delta emits a text and a usage event.
func BenchmarkStreamDecoder(b *testing.B) {
	chunks := benchChunks()
	body := benchSSE(chunks)
	emitted := 0
	emit := func(ev llm.Event) bool {
		emitted++
		return true
	}
	check := func(b *testing.B, d interface {
		Complete() bool
		Result() *llm.ChatResult
	}) {
		if !d.Complete() || d.Result().Usage.CompletionTokens != benchDeltas+206 {
			b.Fatal("decoder did not finish the stream")
		}
	}

	b.Run("sse", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		cpu0 := codectest.ProcessCPU()
		for i := 0; i < b.N; i++ {
			d := Codec{}.NewStreamDecoder()
			r := sse.NewReader(bytes.NewReader(body), nil)
			for {
				ev, err := r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					b.Fatal(err)
				}
				if _, err := d.Feed(ev.Name, ev.Data, emit); err != nil {
					b.Fatal(err)
				}
			}
			if i == 0 {
				check(b, d)
			}
		}
		codectest.PerDelta(b, benchDeltas, cpu0)
	})

	// The floor produces the same events from the same body with the least
	// work (codectest's floor helpers): the text by searching for "text":,
	// the usage by searching for its three counts (emitted when they
	// change), the finish by searching for "finishReason":.
	b.Run("floor", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		var (
			scratch []byte
			u, last llm.Usage
			texts   int
		)
		cpu0 := codectest.ProcessCPU()
		for i := 0; i < b.N; i++ {
			last = llm.Usage{}
			texts = 0
			br := bufio.NewReaderSize(bytes.NewReader(body), 4<<10)
			err := codectest.FloorLines(br, nil, func(data []byte) bool {
				if t, ok := codectest.FloorString(data, []byte(`"text":`), &scratch); ok && len(t) > 0 {
					texts++
					emit(llm.Event{Type: llm.EventText, Text: unsafe.String(&t[0], len(t))})
				}
				p, _ := codectest.FloorInt(data, []byte(`"promptTokenCount":`))
				c, _ := codectest.FloorInt(data, []byte(`"candidatesTokenCount":`))
				t, _ := codectest.FloorInt(data, []byte(`"thoughtsTokenCount":`))
				u = llm.Usage{PromptTokens: p, CompletionTokens: c + t, ReasoningTokens: t}
				if u != last {
					last = u
					emit(llm.Event{Type: llm.EventUsage, Usage: &u})
				}
				if bytes.Contains(data, []byte(`"finishReason":`)) {
					emit(llm.Event{Type: llm.EventFinish, Finish: llm.FinishStop})
				}
				return true
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		if texts != benchDeltas || last.CompletionTokens != benchDeltas+206 {
			b.Fatalf("floor: %d texts, usage %+v", texts, last)
		}
		codectest.PerDelta(b, benchDeltas, cpu0)
	})

	b.Run("feed", func(b *testing.B) {
		b.ReportAllocs()
		cpu0 := codectest.ProcessCPU()
		for i := 0; i < b.N; i++ {
			d := Codec{}.NewStreamDecoder()
			for _, c := range chunks {
				if _, err := d.Feed(nil, c, emit); err != nil {
					b.Fatal(err)
				}
			}
			if i == 0 {
				check(b, d)
			}
		}
		codectest.PerDelta(b, benchDeltas, cpu0)
	})
	_ = emitted
}

// BenchmarkStreamDecoderEncodingJSON is the baseline the jsonscan decoder is
// measured against: the same chunks unmarshalled with encoding/json into the
// reference structs, text still handed out per delta.
func BenchmarkStreamDecoderEncodingJSON(b *testing.B) {
	chunks := benchChunks()
	b.ReportAllocs()
	n := 0
	cpu0 := codectest.ProcessCPU()
	for i := 0; i < b.N; i++ {
		for _, c := range chunks {
			var ch refChunk
			if err := json.Unmarshal(c, &ch); err != nil {
				b.Fatal(err)
			}
			for _, p := range ch.Candidates[0].Content.Parts {
				if p.Text != nil {
					n += len(*p.Text)
				}
			}
		}
	}
	codectest.PerDelta(b, benchDeltas, cpu0)
	_ = n
}
