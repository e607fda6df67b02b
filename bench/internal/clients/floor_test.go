package clients

import (
	"bufio"
	"bytes"
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
	br := bufio.NewReaderSize(nil, 16<<10)
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
