package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/chorusrt/chorus/llm"
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
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchDeltas), "ns/delta")
	})

	b.Run("feed", func(b *testing.B) {
		b.ReportAllocs()
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
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchDeltas), "ns/delta")
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
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchDeltas), "ns/delta")
	_ = n
}
