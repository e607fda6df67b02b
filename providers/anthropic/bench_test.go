package anthropic

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/sse"
)

const benchDeltas = 1000

// benchStream is an Anthropic stream of benchDeltas text deltas, framed and
// padded the way the API sends them.
func benchStream() []byte {
	var b strings.Builder
	b.WriteString("event: message_start\ndata: " + evMessageStart + "       }\n\n")
	b.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}    }\n\n")
	b.WriteString("event: ping\ndata: {\"type\": \"ping\"}\n\n")
	for i := 0; i < benchDeltas; i++ {
		fmt.Fprintf(&b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" word%d, and\"}%s}\n\n",
			i, strings.Repeat(" ", i%12))
	}
	b.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0   }\n\n")
	b.WriteString("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":3000}   }\n\n")
	b.WriteString("event: message_stop\ndata: {\"type\":\"message_stop\"  }\n\n")
	return []byte(b.String())
}

func TestBenchStreamDecodes(t *testing.T) {
	d, evs, _, err := decodeStream(t, benchStream())
	if err != nil || !d.Complete() {
		t.Fatalf("err %v complete %v", err, d.Complete())
	}
	texts := 0
	for _, e := range evs {
		if e.Type == llm.EventText {
			texts++
		}
	}
	if texts != benchDeltas || !strings.HasPrefix(d.Result().Content, " word0, and word1, and") {
		t.Fatalf("%d text events, content %.40q", texts, d.Result().Content)
	}
}

// BenchmarkStreamDecoder reads the 1,000-delta stream with the SSE reader
// and decodes every event, as a provider stream does.
func BenchmarkStreamDecoder(b *testing.B) {
	body := benchStream()
	emit := func(llm.Event) bool { return true }
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		d := Codec{}.NewStreamDecoder()
		rd := sse.NewReader(bytes.NewReader(body), nil)
		for {
			ev, err := rd.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			if _, err := d.Feed(ev.Name, ev.Data, emit); err != nil {
				b.Fatal(err)
			}
		}
		if !d.Complete() {
			b.Fatal("incomplete")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchDeltas), "ns/delta")
}

// BenchmarkStreamDecoderFeedOnly isolates the decoder from SSE framing.
func BenchmarkStreamDecoderFeedOnly(b *testing.B) {
	var events [][]byte
	rd := sse.NewReader(bytes.NewReader(benchStream()), nil)
	for {
		ev, err := rd.Next()
		if err != nil {
			break
		}
		events = append(events, append([]byte(nil), ev.Data...))
	}
	emit := func(llm.Event) bool { return true }
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		d := Codec{}.NewStreamDecoder()
		for _, data := range events {
			if _, err := d.Feed(nil, data, emit); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchDeltas), "ns/delta")
}
