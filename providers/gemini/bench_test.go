package gemini

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/chorusrt/chorus/internal/testkit/cputime"
	"io"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/codectest"
	"github.com/chorusrt/chorus/providers/internal/sse"
	"github.com/chorusrt/chorus/providers/internal/wire"
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

// corpusVocabulary is the text of bench/internal/corpus's deltas (which
// this module cannot import): word pieces with a few JSON escapes and
// non-ASCII text.
var corpusVocabulary = []string{
	"The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", ".",
	" Chorus", " streams", " deltas", ",", " and", " every", " provider", " answers",
	" in", " its", " own", " format", ":\n\n", "**", "Holiday", " Name", "**", " café",
	" \"quoted\"", " 42", " tokens", " per", " second", ";", " naïve", " résumé",
	" —", " done", "!\n", " ok",
}

// corpusChunks builds the Gemini body of bench/internal/corpus (what
// bench/RESULTS.md's decode scenario reads): one text part per chunk with
// the same usageMetadata (prompt counts only) in every chunk until the
// last, which carries the finish and the final counts.
func corpusChunks() [][]byte {
	chunks := make([][]byte, benchDeltas)
	for i := range chunks {
		text, _ := json.Marshal(corpusVocabulary[i%len(corpusVocabulary)])
		if i < benchDeltas-1 {
			chunks[i] = fmt.Appendf(nil, `{"candidates": [{"content": {"parts": [{"text": %s}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 11,"totalTokenCount": 11,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 11}]},"modelVersion": "gemini-2.5-flash","responseId": "VwCzabneCuzPz7IP0aL64A0"}`, text)
			continue
		}
		chunks[i] = fmt.Appendf(nil, `{"candidates": [{"content": {"parts": [{"text": %s}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 11,"candidatesTokenCount": %d,"totalTokenCount": %d,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 11}],"candidatesTokensDetails": [{"modality": "TEXT","tokenCount": %d}]},"modelVersion": "gemini-2.5-flash","responseId": "VwCzabneCuzPz7IP0aL64A0"}`,
			text, benchDeltas, benchDeltas+11, benchDeltas)
	}
	return chunks
}

// decodeSSE reads body with the SSE reader and feeds every event to a new
// decoder: what the provider client does per stream, minus the HTTP call.
func decodeSSE(body []byte, emit wire.Emit) (*decoder, error) {
	d := Codec{}.NewStreamDecoder().(*decoder)
	r := sse.NewReader(bytes.NewReader(body), nil)
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return d, nil
		}
		if err != nil {
			return nil, err
		}
		if _, err := d.Feed(ev.Name, ev.Data, emit); err != nil {
			return nil, err
		}
	}
}

// textFloor is bench's floor-extract on a Gemini body (bench/internal/
// clients/floor.go): frame the lines, find each data line's "text": with
// bytes.Index, unescape the string without allocating and hand it out as a
// slice of the buffer. It returns the number of texts.
func textFloor(body []byte, scratch *[]byte, delta func(string)) (int, error) {
	texts := 0
	br := bufio.NewReaderSize(bytes.NewReader(body), 4<<10)
	err := codectest.FloorLines(br, nil, func(data []byte) bool {
		if t, ok := codectest.FloorString(data, []byte(`"text":`), scratch); ok && len(t) > 0 {
			texts++
			delta(unsafe.String(&t[0], len(t)))
		}
		return true
	})
	return texts, err
}

// BenchmarkStreamDecoder measures one streamed answer of 1,000 text deltas
// in two shapes. "corpus" is the body bench/RESULTS.md's decode scenario
// reads (usage repeated byte for byte until the last chunk): "floor" is
// bench's floor-extract on it, "sse" frames it with the SSE reader and
// decodes every event (the decoder's share of StreamTo's cost), "feed"
// decodes pre-split chunks only, and "vs-floor" runs the floor and "sse"
// by turns, timing each with the process's CPU clock, and reports their
// ratio as x-floor: the figure the issue holds at 1.5 or less, measured
// on one machine state. "usage" is a harder shape: every chunk carries
// new usage and escaped text, so each delta emits a text and a usage
// event; its floor also finds the three counts and the finish.
func BenchmarkStreamDecoder(b *testing.B) {
	b.Run("corpus", func(b *testing.B) {
		chunks := corpusChunks()
		body := benchSSE(chunks)
		var want strings.Builder
		for i := range benchDeltas {
			want.WriteString(corpusVocabulary[i%len(corpusVocabulary)])
		}
		texts := 0
		emit := func(ev llm.Event) bool {
			if ev.Type == llm.EventText {
				texts++
			}
			return true
		}
		check := func(b *testing.B, d *decoder) {
			b.Helper()
			res := d.Result()
			if !d.Complete() || res.Content != want.String() || res.Usage.CompletionTokens != benchDeltas || res.FinishReason != llm.FinishStop {
				b.Fatalf("decoder: complete %v, %d bytes of content, usage %+v, finish %q", d.Complete(), len(res.Content), res.Usage, res.FinishReason)
			}
		}
		b.Run("floor", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			var scratch []byte
			n := 0
			cpu0 := cputime.Process()
			for b.Loop() {
				var err error
				if n, err = textFloor(body, &scratch, func(string) {}); err != nil {
					b.Fatal(err)
				}
			}
			codectest.PerDelta(b, benchDeltas, cpu0)
			if n != benchDeltas {
				b.Fatalf("floor: %d texts", n)
			}
		})
		b.Run("sse", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			var d *decoder
			cpu0 := cputime.Process()
			for b.Loop() {
				var err error
				if d, err = decodeSSE(body, emit); err != nil {
					b.Fatal(err)
				}
			}
			codectest.PerDelta(b, benchDeltas, cpu0)
			check(b, d)
		})
		b.Run("feed", func(b *testing.B) {
			b.ReportAllocs()
			var d *decoder
			cpu0 := cputime.Process()
			for b.Loop() {
				d = Codec{}.NewStreamDecoder().(*decoder)
				for _, c := range chunks {
					if _, err := d.Feed(nil, c, emit); err != nil {
						b.Fatal(err)
					}
				}
			}
			codectest.PerDelta(b, benchDeltas, cpu0)
			check(b, d)
		})
		b.Run("vs-floor", func(b *testing.B) {
			if cputime.Process() == 0 {
				b.Skip("no process CPU clock on this platform")
			}
			var scratch []byte
			var floorCPU, decCPU time.Duration
			var d *decoder
			for b.Loop() {
				t0 := cputime.Process()
				n, err := textFloor(body, &scratch, func(string) {})
				t1 := cputime.Process()
				if err != nil || n != benchDeltas {
					b.Fatalf("floor: %d texts, %v", n, err)
				}
				if d, err = decodeSSE(body, emit); err != nil {
					b.Fatal(err)
				}
				floorCPU += t1 - t0
				decCPU += cputime.Process() - t1
			}
			check(b, d)
			n := float64(b.N) * benchDeltas
			b.ReportMetric(float64(floorCPU.Nanoseconds())/n, "floor-cpu-ns/delta")
			b.ReportMetric(float64(decCPU.Nanoseconds())/n, "cpu-ns/delta")
			if floorCPU > 0 {
				b.ReportMetric(float64(decCPU)/float64(floorCPU), "x-floor")
			}
		})
	})
	b.Run("usage", benchUsageShape)
}

// benchUsageShape is BenchmarkStreamDecoder's "usage" shape (benchChunks).
func benchUsageShape(b *testing.B) {
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
		cpu0 := cputime.Process()
		for i := 0; i < b.N; i++ {
			d, err := decodeSSE(body, emit)
			if err != nil {
				b.Fatal(err)
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
		cpu0 := cputime.Process()
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
		cpu0 := cputime.Process()
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
	cpu0 := cputime.Process()
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

// BenchmarkParseChat parses bench/internal/corpus's buffered Gemini answer
// (a batch job's short reply): the path of every buffered request.
func BenchmarkParseChat(b *testing.B) {
	body := []byte(`{"candidates": [{"content": {"parts": [{"text": "Paris is the capital of France. It sits on the Seine."}],"role": "model"},"finishReason": "STOP","avgLogprobs": -0.0213,"index": 0}],"usageMetadata": {"promptTokenCount": 11,"candidatesTokenCount": 14,"totalTokenCount": 25,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 11}],"candidatesTokensDetails": [{"modality": "TEXT","tokenCount": 14}]},"modelVersion": "gemini-2.5-flash","responseId": "VwCzabneCuzPz7IP0aL64A0"}`)
	b.ReportAllocs()
	var res *llm.ChatResult
	for b.Loop() {
		var err error
		if res, err = (Codec{}).ParseChat(body); err != nil {
			b.Fatal(err)
		}
	}
	if res.Content != "Paris is the capital of France. It sits on the Seine." || res.FinishReason != llm.FinishStop || res.Usage.CompletionTokens != 14 {
		b.Fatalf("parsed %+v", res)
	}
}
