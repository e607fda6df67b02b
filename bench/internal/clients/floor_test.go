package clients

import (
	"bufio"
	"bytes"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/bench/internal/corpus"
)

// TestFloorExtracts checks that the extracting floor finds every delta's
// text, escapes undone, in every format, and that the bare floor frames
// at least one event per delta.
func TestFloorExtracts(t *testing.T) {
	for _, f := range corpus.Formats {
		for _, extract := range []bool{false, true} {
			st := corpus.StreamOf(f, 97)
			fl := newFloor(f, Options{}, extract)
			var got bytes.Buffer
			n := 0
			err := fl.loop(bufio.NewReader(bytes.NewReader(st.Body)), func(s string) { n++; got.WriteString(s) })
			if err != nil {
				t.Fatalf("%s extract=%v: %v", f, extract, err)
			}
			if !extract {
				if n < st.Deltas {
					t.Errorf("%s bare: %d events, want >= %d", f, n, st.Deltas)
				}
				continue
			}
			if n != st.Deltas || got.String() != corpus.Text(st.Deltas) {
				t.Errorf("%s: %d deltas %q, want %d %q", f, n, got.String(), st.Deltas, corpus.Text(st.Deltas))
			}
		}
	}
}

// TestFloorLongLines checks that lines longer than the floor's small
// buffer are gathered, not refused: every delta padded to three buffers.
func TestFloorLongLines(t *testing.T) {
	pad := strings.Repeat("p", 3*floorBuf)
	body := "data: {\"choices\":[{\"delta\":{\"content\":\"a\"},\"obfuscation\":\"" + pad + "\"}]}\n\n" +
		"data: {\"choices\":[{\"delta\":{\"content\":\"b\\n\"},\"obfuscation\":\"" + pad + "\"}]}\n\ndata: [DONE]\n\n"
	var got strings.Builder
	err := newFloor(corpus.OpenAI, Options{}, true).loop(bufio.NewReaderSize(strings.NewReader(body), floorBuf), func(s string) { got.WriteString(s) })
	if err != nil || got.String() != "ab\n" {
		t.Fatalf("got %q, %v", got.String(), err)
	}
}

// TestFloorAnthropicEventLine checks that the Anthropic floor ends at the
// message_stop event line, not at a text that merely mentions it.
func TestFloorAnthropicEventLine(t *testing.T) {
	body := "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"\\\"message_stop\\\"\"}}\n\n" +
		"event: ping\ndata: {\"type\": \"ping\", \"text\":\"not a delta\"}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"!\"}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	var got []string
	err := newFloor(corpus.Anthropic, Options{}, true).loop(bufio.NewReaderSize(strings.NewReader(body), floorBuf), func(s string) { got = append(got, s) })
	if err != nil || len(got) != 2 || got[0] != `"message_stop"` || got[1] != "!" {
		t.Fatalf("got %q, %v", got, err)
	}
}

// TestFloorNeedsEnd checks that a truncated OpenAI or Anthropic stream is
// an error for the floor too.
func TestFloorNeedsEnd(t *testing.T) {
	for _, f := range []corpus.Format{corpus.OpenAI, corpus.Anthropic} {
		st := corpus.StreamOf(f, 10)
		cut := st.Body[:st.Ends[st.FirstDelta+3]]
		if err := newFloor(f, Options{}, true).loop(bufio.NewReader(bytes.NewReader(cut)), func(string) {}); err == nil {
			t.Errorf("%s: truncated stream accepted", f)
		}
	}
}

func benchFloor(b *testing.B, f corpus.Format, extract bool) {
	st := corpus.StreamOf(f, 1000)
	fl := newFloor(f, Options{}, extract)
	br := bufio.NewReaderSize(nil, floorBuf)
	b.ReportAllocs()
	b.SetBytes(int64(len(st.Body)))
	for b.Loop() {
		br.Reset(bytes.NewReader(st.Body))
		if err := fl.loop(br, func(string) {}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/delta")
}

func BenchmarkFloorBareOpenAI(b *testing.B)       { benchFloor(b, corpus.OpenAI, false) }
func BenchmarkFloorExtractOpenAI(b *testing.B)    { benchFloor(b, corpus.OpenAI, true) }
func BenchmarkFloorExtractAnthropic(b *testing.B) { benchFloor(b, corpus.Anthropic, true) }
func BenchmarkFloorExtractGemini(b *testing.B)    { benchFloor(b, corpus.Gemini, true) }
