package providers

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/internal/testkit/fixture"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers/internal/sse"
	"github.com/chorusrt/chorus/providers/openai"
)

// recordedStream is a real recorded OpenAI Chat Completions stream
// (gpt-4o, ~300 content deltas, obfuscation padding included).
const recordedStream = "openai/vercel-ai/packages/openai/src/chat/__fixtures__/openai-text.chunks.txt"

func loadRecorded(b *testing.B, file string) []byte {
	b.Helper()
	dir := fixture.Require(b)
	entries, err := fixture.LoadIndex(dir)
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range entries {
		if e.File == file {
			exs, err := fixture.Load(dir, e)
			if err != nil {
				b.Fatal(err)
			}
			return exs[0].Response.Body
		}
	}
	b.Fatalf("%s not in the index", file)
	return nil
}

// perDelta reports ns and allocations per delta for a loop that handled
// deltas deltas per iteration.
func perDelta(b *testing.B, deltas int, run func()) {
	b.Helper()
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	n := 0
	for b.Loop() {
		run()
		n++
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	total := float64(n * deltas)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/total, "ns/delta")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/total, "allocs/delta")
}

// BenchmarkFramingFloor is the bare SSE framing loop over the recorded
// stream: the cost below which no decoder can go.
func BenchmarkFramingFloor(b *testing.B) {
	body := loadRecorded(b, recordedStream)
	deltas := bytes.Count(body, []byte(`"content":"`))
	perDelta(b, deltas, func() {
		r := sse.NewReader(bytes.NewReader(body), nil)
		for {
			if _, err := r.Next(); err != nil {
				return
			}
		}
	})
}

// BenchmarkDecodeRecordedOpenAIStream is the streaming decoder (framing plus
// decoding into typed events) on the recorded stream. Issue target: under
// 1 µs and at most 2 allocations per delta.
func BenchmarkDecodeRecordedOpenAIStream(b *testing.B) {
	body := loadRecorded(b, recordedStream)
	emit := func(llm.Event) bool { return true }
	var texts int
	{
		r := sse.NewReader(bytes.NewReader(body), nil)
		d := openai.Codec{}.NewStreamDecoder()
		for {
			ev, err := r.Next()
			if err != nil {
				break
			}
			_, _ = d.Feed(ev.Name, ev.Data, func(ev llm.Event) bool {
				if ev.Type == llm.EventText {
					texts++
				}
				return true
			})
		}
		if !d.Complete() || texts < 100 {
			b.Fatalf("recorded stream decoded to %d text events (complete=%v)", texts, d.Complete())
		}
	}
	perDelta(b, texts, func() {
		r := sse.NewReader(bytes.NewReader(body), nil)
		d := openai.Codec{}.NewStreamDecoder()
		for {
			ev, err := r.Next()
			if err != nil {
				return
			}
			if _, err := d.Feed(ev.Name, ev.Data, emit); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkClientStreamLoopback is a whole streamed call over loopback HTTP:
// request, the llmtest server writing 1,000 deltas, framing, decoding and
// the caller's channel. Both ends share the machine, so this is an upper
// bound on the client's cost per delta.
func BenchmarkClientStreamLoopback(b *testing.B) {
	deltas := make([]string, 1000)
	for i := range deltas {
		deltas[i] = "tok "
	}
	srv := llmtest.NewServer(llmtest.WithDefault(llmtest.Reply{Deltas: deltas}))
	defer srv.Close()
	c, err := New(Config{ID: "openai", Format: FormatOpenAI, BaseURL: srv.OpenAIBaseURL(), APIKey: "k"})
	if err != nil {
		b.Fatal(err)
	}
	req := &llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("go")}}
	perDelta(b, len(deltas), func() {
		s, err := c.Stream(context.Background(), req)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for ev := range s.Events() {
			if ev.Type == llm.EventText {
				n++
			}
		}
		if res, err := s.Result(); err != nil || n != len(deltas) || !strings.HasPrefix(res.Content, "tok") {
			b.Fatalf("%d deltas, %v", n, err)
		}
	})
	c.hc.CloseIdleConnections()
}
