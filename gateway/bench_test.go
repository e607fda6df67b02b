package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/chorusrt/chorus/internal/testkit/cputime"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chorusrt/chorus/gateway"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
)

// The benchmarks here measure what the gateway adds, the way bench/'s
// gateway scenario does (bench/internal/scenario/gateway.go), without its
// upstream server: the runtime's provider is an in-memory OpenAI-format
// upstream (memUpstream), so the figures hold the runtime's decoding, the
// gateway and, for the loopback variants, net/http on both sides of a
// loopback hop and a minimal SSE reader, and nothing else.
//
// Each reports, besides ns/op, the process's CPU time per unit (getrusage:
// every goroutine, the loopback client's included), which a loaded
// machine distorts less than wall time, and allocations per unit:
//
//	go test -run '^$' -bench 'Stream|Chat' -benchmem -count 6 -cpu 2 ./gateway/

const (
	benchDeltas = 1000 // deltas per stream, as bench/'s scenario
	benchFlush  = 10   // events per upstream read, as its upstream's flushes
	benchModel  = "openai/gpt-4.1-mini"
)

// memUpstream is an OpenAI-format provider in memory. A streamed answer
// is benchDeltas content deltas, read benchFlush events per Read (as a
// body read from a socket the upstream flushes every benchFlush events); a
// buffered one is a small chat.completion.
type memUpstream struct {
	stream   []byte
	ends     []int // offsets of the read boundaries in stream
	buffered []byte
}

func newMemUpstream() *memUpstream {
	const head = `data: {"id":"chatcmpl-D8Z5oo6uDh67AD85p73ksdT1KxhE0","object":"chat.completion.chunk","created":1770933892,"model":"gpt-4.1-nano-2025-04-14","system_fingerprint":"fp_de604bd877","choices":[`
	u := &memUpstream{}
	var b bytes.Buffer
	b.WriteString(head + `{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n")
	for i := range benchDeltas {
		fmt.Fprintf(&b, head+`{"index":0,"delta":{"content":"tok%d "},"logprobs":null,"finish_reason":null}],"usage":null}`+"\n\n", i)
		if (i+1)%benchFlush == 0 {
			u.ends = append(u.ends, b.Len())
		}
	}
	b.WriteString(head + `{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}` + "\n\n")
	fmt.Fprintf(&b, head+`],"usage":{"prompt_tokens":11,"completion_tokens":%d,"total_tokens":%d}}`+"\n\n", benchDeltas, benchDeltas+11)
	b.WriteString("data: [DONE]\n\n")
	u.ends = append(u.ends, b.Len())
	u.stream = b.Bytes()
	u.buffered = []byte(`{"id":"chatcmpl-D8Z5oo6uDh67AD85p73ksdT1KxhE0","object":"chat.completion","created":1770933892,"model":"gpt-4.1-nano-2025-04-14","choices":[{"index":0,"message":{"role":"assistant","content":"Hi! How can I help you today?","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":11,"completion_tokens":9,"total_tokens":20,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}},"system_fingerprint":"fp_de604bd877"}`)
	return u
}

func (u *memUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(r.Body)
	_ = r.Body.Close()
	if err != nil {
		return nil, err
	}
	resp := &http.Response{StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{}, Request: r}
	if bytes.Contains(body, []byte(`"stream":true`)) {
		resp.Header.Set("Content-Type", "text/event-stream; charset=utf-8")
		resp.Body = &segmentReader{b: u.stream, ends: u.ends}
		resp.ContentLength = -1
		return resp, nil
	}
	resp.Header.Set("Content-Type", "application/json")
	resp.Body = io.NopCloser(bytes.NewReader(u.buffered))
	resp.ContentLength = int64(len(u.buffered))
	return resp, nil
}

// segmentReader returns b up to the next of ends per Read.
type segmentReader struct {
	b    []byte
	ends []int
	pos  int
}

func (s *segmentReader) Read(p []byte) (int, error) {
	if s.pos >= len(s.b) {
		return 0, io.EOF
	}
	end := len(s.b)
	for len(s.ends) > 0 && s.ends[0] <= s.pos {
		s.ends = s.ends[1:]
	}
	if len(s.ends) > 0 {
		end = s.ends[0]
	}
	n := copy(p, s.b[s.pos:end])
	s.pos += n
	return n, nil
}

func (s *segmentReader) Close() error { return nil }

// ServeHTTP serves memUpstream's answers over a real connection, the
// stream flushed at its read boundaries (every benchFlush events), as
// bench/'s upstream server does.
func (u *memUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if !bytes.Contains(body, []byte(`"stream":true`)) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(u.buffered)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	rc := http.NewResponseController(w)
	pos := 0
	for _, end := range u.ends {
		if _, err := w.Write(u.stream[pos:end]); err != nil {
			return
		}
		if rc.Flush() != nil {
			return
		}
		pos = end
	}
}

// benchRuntime is a runtime whose provider "openai" is a memUpstream: in
// memory (tcp false) or behind a loopback HTTP server.
func benchRuntime(b *testing.B, tcp bool) *runtime.Runtime {
	b.Helper()
	u := newMemUpstream()
	base, hc := "http://upstream.invalid/v1", &http.Client{Transport: u}
	if tcp {
		srv := httptest.NewServer(u)
		b.Cleanup(srv.Close)
		base, hc = srv.URL+"/v1", srv.Client()
		b.Cleanup(hc.CloseIdleConnections)
	}
	rt, err := runtime.New(
		runtime.WithProvider(providers.Config{ID: "openai", Format: providers.FormatOpenAI, BaseURL: base, APIKey: providerKey}),
		runtime.WithClientOptions(providers.WithHTTPClient(hc)),
		runtime.WithQueueSize(1<<16),
	)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = rt.Close(context.Background()) })
	return rt
}

func benchHandler(b *testing.B, rt *runtime.Runtime, opts gateway.Options) *gateway.Handler {
	b.Helper()
	h, err := gateway.New(rt, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = h.Close(context.Background()) })
	return h
}

// perUnit measures b.N iterations of units each, reporting CPU time and
// allocations per unit besides the benchmark's own figures.
type perUnit struct {
	b       *testing.B
	name    string
	units   int
	cpu0    time.Duration
	mallocs uint64
}

func startPerUnit(b *testing.B, name string, units int) *perUnit {
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	b.ResetTimer()
	return &perUnit{b: b, name: name, units: units, cpu0: cputime.Process(), mallocs: ms.Mallocs}
}

func (p *perUnit) stop() {
	p.b.StopTimer()
	cpu := cputime.Process() - p.cpu0
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	n := float64(p.b.N * p.units)
	p.b.ReportMetric(float64(cpu.Nanoseconds())/n, "cpu-ns/"+p.name)
	p.b.ReportMetric(float64(ms.Mallocs-p.mallocs)/n, "allocs/"+p.name)
}

// BenchmarkStream measures one stream of benchDeltas deltas from the
// upstream (in memory: "mem"; over loopback, flushed every benchFlush
// events: "tcp") three ways: "inprocess", the runtime's own stream ranged
// over (the reference); "gateway", through the handler as OpenAI
// chat.completion.chunk SSE over a loopback HTTP server, read by a minimal
// SSE line loop (what bench/ measures); "handler", through the handler
// into an in-memory ResponseWriter that discards (the handler's own CPU,
// no socket), and the same in Anthropic's and Gemini's formats. Added per delta: gateway's cpu-ns/delta minus inprocess's.
func BenchmarkStream(b *testing.B) {
	for _, up := range []struct {
		name string
		tcp  bool
	}{{"mem", false}, {"tcp", true}} {
		b.Run(up.name, func(b *testing.B) {
			b.Run("inprocess", func(b *testing.B) { benchStreamInProcess(b, up.tcp) })
			b.Run("gateway", func(b *testing.B) { benchStreamLoopback(b, up.tcp) })
			b.Run("handler", func(b *testing.B) { benchStreamHandler(b, up.tcp, "/v1/chat/completions", benchStreamBody) })
			if !up.tcp {
				b.Run("handler-anthropic", func(b *testing.B) { benchStreamHandler(b, false, "/v1/messages", benchAnthropicBody) })
				b.Run("handler-gemini", func(b *testing.B) {
					benchStreamHandler(b, false, "/v1beta/models/"+benchModel+":streamGenerateContent?alt=sse", benchGeminiBody)
				})
			}
		})
	}
}

func benchStreamInProcess(b *testing.B, tcp bool) {
	rt := benchRuntime(b, tcp)
	ctx := context.Background()
	req := &llm.ChatRequest{Model: benchModel, Messages: []llm.Message{llm.UserText("Say hi")}, MaxTokens: 1024}
	stream := func() error {
		s, err := rt.Stream(ctx, req)
		if err != nil {
			return err
		}
		n := 0
		for ev := range s.Events() {
			if ev.Type == llm.EventText && ev.Text != "" {
				n++
			}
		}
		if _, err := s.Result(); err != nil {
			return err
		}
		if n != benchDeltas {
			return fmt.Errorf("%d deltas, want %d", n, benchDeltas)
		}
		return nil
	}
	if err := stream(); err != nil { // warm-up
		b.Fatal(err)
	}
	p := startPerUnit(b, "delta", benchDeltas)
	for b.Loop() {
		if err := stream(); err != nil {
			b.Fatal(err)
		}
	}
	p.stop()
}

const benchStreamBody = `{"model":"` + benchModel + `","messages":[{"role":"user","content":"Say hi"}],"max_tokens":1024,"stream":true}`

func benchStreamLoopback(b *testing.B, tcp bool) {
	h := benchHandler(b, benchRuntime(b, tcp), gateway.Options{})
	var flushes, writes, firstFlush atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&flushCounter{ResponseWriter: w, n: &flushes, first: &firstFlush, start: time.Now()}, r)
	}))
	srv.Listener = &writeCountListener{Listener: srv.Listener, n: &writes}
	srv.Start()
	defer srv.Close()
	hc := srv.Client()
	defer hc.CloseIdleConnections()
	br := bufio.NewReaderSize(nil, 4096)
	var firstDelta time.Duration // summed over the streams timed
	stream := func() error {
		t0 := time.Now()
		resp, err := benchPost(hc, srv.URL, benchStreamBody)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		br.Reset(resp.Body)
		return countSSE(br, func() { firstDelta += time.Since(t0) })
	}
	if err := stream(); err != nil {
		b.Fatal(err)
	}
	flushes.Store(0)
	writes.Store(0)
	firstFlush.Store(0)
	firstDelta = 0
	p := startPerUnit(b, "delta", benchDeltas)
	for b.Loop() {
		if err := stream(); err != nil {
			b.Fatal(err)
		}
	}
	p.stop()
	b.ReportMetric(float64(flushes.Load())/float64(b.N*benchDeltas), "flushes/delta")
	b.ReportMetric(float64(writes.Load())/float64(b.N*benchDeltas), "writes/delta")
	// Wall time from the request's send to its first delta's line, on an
	// idle connection: what a client waits for the first token (the
	// in-process upstream answers at once).
	b.ReportMetric(float64(firstDelta.Nanoseconds())/float64(b.N), "first-delta-ns")
	// The handler's own part of it, from its start to the end of its first
	// flush (the client, in this process, may wait longer for a processor).
	b.ReportMetric(float64(firstFlush.Load())/float64(b.N), "first-flush-ns")
}

// writeCountListener counts the writes to its connections: the server's
// write system calls.
type writeCountListener struct {
	net.Listener
	n *atomic.Int64
}

func (l *writeCountListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &writeCountConn{Conn: c, n: l.n}, nil
}

type writeCountConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *writeCountConn) Write(p []byte) (int, error) {
	c.n.Add(1)
	return c.Conn.Write(p)
}

const (
	benchAnthropicBody = `{"model":"` + benchModel + `","max_tokens":1024,"messages":[{"role":"user","content":"Say hi"}],"stream":true}`
	benchGeminiBody    = `{"contents":[{"role":"user","parts":[{"text":"Say hi"}]}],"generationConfig":{"maxOutputTokens":1024}}`
)

func benchStreamHandler(b *testing.B, tcp bool, path, body string) {
	h := benchHandler(b, benchRuntime(b, tcp), gateway.Options{})
	flushes := 0
	stream := func() error {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := &sseSink{header: http.Header{}}
		h.ServeHTTP(w, req)
		if w.status != http.StatusOK || w.deltas != benchDeltas || !w.done {
			return fmt.Errorf("status %d, %d deltas, [DONE] %t", w.status, w.deltas, w.done)
		}
		flushes += w.flushes
		return nil
	}
	if err := stream(); err != nil {
		b.Fatal(err)
	}
	flushes = 0
	p := startPerUnit(b, "delta", benchDeltas)
	for b.Loop() {
		if err := stream(); err != nil {
			b.Fatal(err)
		}
	}
	p.stop()
	b.ReportMetric(float64(flushes)/float64(b.N*benchDeltas), "flushes/delta")
}

// flushCounter counts a ResponseWriter's flushes.
type flushCounter struct {
	http.ResponseWriter
	n *atomic.Int64
	// first, when set, adds the time from start to the end of the first
	// flush: the gateway's own time to its first frame on the wire.
	first *atomic.Int64
	start time.Time
}

func (f *flushCounter) Flush() {
	f.n.Add(1)
	f.ResponseWriter.(http.Flusher).Flush()
	if f.first != nil {
		f.first.Add(int64(time.Since(f.start)))
		f.first = nil
	}
}

// countSSE reads an OpenAI chunk stream to its [DONE], checking that it
// held benchDeltas content deltas.
func countSSE(br *bufio.Reader, first func()) error {
	n := 0
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return fmt.Errorf("after %d deltas: %w", n, err)
		}
		d, ok := bytes.CutPrefix(line, []byte("data: "))
		if !ok {
			continue
		}
		if bytes.HasPrefix(d, []byte("[DONE]")) {
			break
		}
		if i := bytes.Index(d, []byte(`"content":"`)); i >= 0 && d[i+len(`"content":"`)] != '"' {
			if n == 0 {
				first()
			}
			n++
		}
	}
	if n != benchDeltas {
		return fmt.Errorf("%d deltas, want %d", n, benchDeltas)
	}
	return nil
}

// sseSink is a ResponseWriter (and Flusher) that counts a stream's deltas
// as it is written (OpenAI, Anthropic or Gemini SSE), keeping nothing.
type sseSink struct {
	header  http.Header
	status  int
	deltas  int
	done    bool
	partial []byte
	flushes int
}

func (s *sseSink) Header() http.Header { return s.header }
func (s *sseSink) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
}
func (s *sseSink) Flush() { s.flushes++ }
func (s *sseSink) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	n := len(p)
	if len(s.partial) > 0 {
		p = append(s.partial, p...)
		s.partial = s.partial[:0]
	}
	for {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.partial = append(s.partial, p...)
			return n, nil
		}
		line := p[:i]
		p = p[i+1:]
		if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			switch {
			case bytes.HasPrefix(d, []byte("[DONE]")), bytes.Contains(d, []byte(`"message_stop"`)), bytes.Contains(d, []byte(`"finishReason"`)):
				s.done = true // OpenAI, Anthropic, Gemini
			case bytes.Contains(d, []byte(`"tok`)): // every delta is "tok<i> "
				s.deltas++
			}
		}
	}
}

// manyKeys is n gateway keys, k among them.
func manyKeys(n int, k gateway.Key) []gateway.Key {
	keys := make([]gateway.Key, 0, n)
	for i := range n - 1 {
		keys = append(keys, gateway.Key{Name: "other-" + strconv.Itoa(i), SHA256: gateway.HashKey("other-key-" + strconv.Itoa(i))})
	}
	return append(keys, k)
}

const benchChatBody = `{"model":"` + benchModel + `","messages":[{"role":"user","content":"Say hi"}],"max_tokens":1024}`

// BenchmarkChatInProcess is the reference for a small buffered request:
// rt.Chat in-process.
func BenchmarkChatInProcess(b *testing.B) {
	rt := benchRuntime(b, false)
	ctx := context.Background()
	req := &llm.ChatRequest{Model: benchModel, Messages: []llm.Message{llm.UserText("Say hi")}, MaxTokens: 1024}
	p := startPerUnit(b, "req", 1)
	for b.Loop() {
		res, err := rt.Chat(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if res.Content == "" {
			b.Fatal("no content")
		}
	}
	p.stop()
}

// BenchmarkChatGateway is a small buffered POST /v1/chat/completions
// through the handler: into an httptest.ResponseRecorder, with and
// without a gateway key (authentication, limits, x-ratelimit-* headers;
// one key configured, or a thousand), and over a loopback HTTP server with
// the answer read whole.
func BenchmarkChatGateway(b *testing.B) {
	const key = "gw-bench-key"
	for _, c := range []struct {
		name string
		opts gateway.Options
		hdr  string
	}{
		{"handler", gateway.Options{}, ""},
		{"handler-keyed", gateway.Options{Keys: []gateway.Key{{Name: "bench", SHA256: gateway.HashKey(key), RPM: 1 << 30, TPM: 1 << 40, Concurrency: 1 << 20}}}, "Bearer " + key},
		{"handler-keyed-1000", gateway.Options{Keys: manyKeys(1000, gateway.Key{Name: "bench", SHA256: gateway.HashKey(key), RPM: 1 << 30, TPM: 1 << 40, Concurrency: 1 << 20})}, "Bearer " + key},
	} {
		b.Run(c.name, func(b *testing.B) {
			h := benchHandler(b, benchRuntime(b, false), c.opts)
			body := strings.NewReader(benchChatBody)
			p := startPerUnit(b, "req", 1)
			for b.Loop() {
				body.Reset(benchChatBody)
				// http.NewRequest, not httptest's, which allocates a 4 KiB
				// bufio.Reader per request: half the harness's bytes.
				req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:8080/v1/chat/completions", body)
				if err != nil {
					b.Fatal(err)
				}
				req.RemoteAddr = "127.0.0.1:50000"
				req.Header.Set("Content-Type", "application/json")
				if c.hdr != "" {
					req.Header.Set("Authorization", c.hdr)
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
			p.stop()
		})
	}
	b.Run("loopback", func(b *testing.B) {
		srv := httptest.NewServer(benchHandler(b, benchRuntime(b, false), gateway.Options{}))
		defer srv.Close()
		hc := srv.Client()
		defer hc.CloseIdleConnections()
		buf := make([]byte, 0, 4096)
		do := func() error {
			resp, err := benchPost(hc, srv.URL, benchChatBody)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			buf = buf[:0]
			for {
				if len(buf) == cap(buf) {
					buf = append(buf, 0)[:len(buf)]
				}
				n, err := resp.Body.Read(buf[len(buf):cap(buf)])
				buf = buf[:len(buf)+n]
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					return err
				}
			}
			if resp.StatusCode != http.StatusOK || !bytes.Contains(buf, []byte(`"content":"Hi!`)) {
				return errors.New("status " + strconv.Itoa(resp.StatusCode) + ": " + string(buf))
			}
			return nil
		}
		if err := do(); err != nil {
			b.Fatal(err)
		}
		p := startPerUnit(b, "req", 1)
		for b.Loop() {
			if err := do(); err != nil {
				b.Fatal(err)
			}
		}
		p.stop()
	})
}

// benchPost sends body to the gateway's /v1/chat/completions at base.
func benchPost(hc *http.Client, base, body string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return hc.Do(req)
}
