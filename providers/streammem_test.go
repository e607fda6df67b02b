package providers

import (
	"context"
	"io"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
)

// pipeTransport answers each request with an SSE body that a test writes
// through a pipe: one stream per request, held open as long as the test
// likes, with no HTTP connection (whose buffers every client pays alike).
type pipeTransport struct {
	mu      sync.Mutex
	writers []*io.PipeWriter
}

func (p *pipeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	pr, pw := io.Pipe()
	p.mu.Lock()
	p.writers = append(p.writers, pw)
	p.mu.Unlock()
	return &http.Response{
		StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"text/event-stream"}},
		Body:    pr,
		Request: req,
	}, nil
}

const pipeChunk = `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}` + "\n\n"

// openStreams opens n streams through c's channel face, each of which has
// received its first delta and is then held open, and reports the heap and
// goroutines they hold. close ends them all.
func openStreams(t testing.TB, n int) (heapPer, goroutinesPer float64, closeAll func()) {
	pt := &pipeTransport{}
	c, err := New(Config{ID: "openai", Format: FormatOpenAI, BaseURL: "http://pipe.invalid/v1", APIKey: "k"},
		WithHTTPClient(&http.Client{Transport: pt}), WithIdleTimeout(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	req := &llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("go")}}
	ctx, cancel := context.WithCancel(context.Background())

	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	g0 := runtime.NumGoroutine()

	streams := make([]*llm.Stream, n)
	for i := range streams {
		s, err := c.Stream(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		streams[i] = s
	}
	// Every stream gets its first delta, so each holds its body reader.
	var ws []*io.PipeWriter
	for {
		pt.mu.Lock()
		if len(pt.writers) >= n {
			ws = append(ws, pt.writers...)
		}
		pt.mu.Unlock()
		if ws != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	for _, w := range ws {
		if _, err := io.WriteString(w, pipeChunk); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range streams {
		if ev := <-s.Events(); ev.Type != llm.EventText || ev.Text != "hi" {
			t.Fatalf("first event %+v", ev)
		}
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	g1 := runtime.NumGoroutine()
	heapPer = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
	goroutinesPer = float64(g1-g0) / float64(n)

	closeAll = func() {
		for _, w := range ws {
			_ = w.CloseWithError(io.ErrUnexpectedEOF)
		}
		for _, s := range streams {
			_ = s.Close()
			for range s.Events() {
			}
		}
		cancel()
	}
	runtime.KeepAlive(streams)
	return heapPer, goroutinesPer, closeAll
}

// TestStreamMemoryPerStream holds 500 streams open through the channel
// face and checks the goroutines each costs: one, the goroutine that reads
// and decodes its body (the caller's is the caller's). It logs the heap
// each holds (request, decoder, body reader, event channel), which is
// reported, not asserted.
func TestStreamMemoryPerStream(t *testing.T) {
	heap, gs, closeAll := openStreams(t, 500)
	defer closeAll()
	t.Logf("per stream: %.0f B heap, %.2f goroutines", heap, gs)
	if gs < 0.99 || gs > 1.01 {
		t.Fatalf("%.2f goroutines per open stream, want 1", gs)
	}
}

// BenchmarkStreamMemory reports the heap and goroutines per open stream
// at 2,000 concurrent streams (b.N is ignored: one measurement per run).
func BenchmarkStreamMemory(b *testing.B) {
	for b.Loop() {
	}
	heap, gs, closeAll := openStreams(b, 2000)
	closeAll()
	b.ReportMetric(heap, "heapB/stream")
	b.ReportMetric(gs, "goroutines/stream")
}
