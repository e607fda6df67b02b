package server

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chorusrt/chorus/bench/internal/corpus"
)

// Mode is what the server does for the requests of one run.
type Mode struct {
	// Deltas is the number of text deltas per streamed answer (default 1000).
	Deltas int
	// FlushEvery is how many events are written per flush (default 1).
	FlushEvery int
	// Interval is a pause between two flushes (default none).
	Interval time.Duration
	// FanStep is the extra time to first byte per step of a "fan<k>" model.
	FanStep time.Duration
	// FaultRate is the probability that a request meets a fault (soak only).
	FaultRate float64
	// Stall is how long a stall fault stays silent mid-stream.
	Stall time.Duration
}

// Fault kinds injected with Mode.FaultRate, in the order they are drawn.
const (
	Fault429 = iota
	Fault500
	Fault503
	FaultResetBeforeHeaders
	FaultResetMidStream
	FaultPrematureEnd
	FaultMalformed
	FaultStall
	numFaults
)

// FaultNames names the fault kinds for reports.
var FaultNames = [numFaults]string{"429 retry-after", "500", "503", "reset before headers", "reset mid-stream", "premature end", "malformed line", "stall"}

// Server is a running loopback server.
type Server struct {
	URL string

	srv  *http.Server
	ln   net.Listener
	mode atomic.Pointer[Mode]

	gateMu sync.Mutex
	gate   chan struct{}

	requests atomic.Int64
	h2       atomic.Int64
	faults   [numFaults]atomic.Int64
	wg       sync.WaitGroup
}

// Start listens on a fresh loopback port.
func Start() (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{ln: ln, URL: "http://" + ln.Addr().String(), gate: make(chan struct{})}
	s.mode.Store(&Mode{})
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: time.Minute}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// SetMode sets the behaviour for the following requests and closes the
// gate again.
func (s *Server) SetMode(m Mode) {
	if m.Deltas <= 0 {
		m.Deltas = 1000
	}
	if m.FlushEvery <= 0 {
		m.FlushEvery = 1
	}
	// Build the bodies now, not under the first request.
	for _, f := range corpus.Formats {
		corpus.StreamOf(f, m.Deltas)
		corpus.BufferedOf(f)
	}
	s.mode.Store(&m)
	s.gateMu.Lock()
	s.gate = make(chan struct{})
	s.gateMu.Unlock()
}

// Release opens the gate: every held stream goes on.
func (s *Server) Release() {
	s.gateMu.Lock()
	defer s.gateMu.Unlock()
	select {
	case <-s.gate:
	default:
		close(s.gate)
	}
}

func (s *Server) gateChan() chan struct{} {
	s.gateMu.Lock()
	defer s.gateMu.Unlock()
	return s.gate
}

// Requests is the number of chat requests served since Start.
func (s *Server) Requests() int64 { return s.requests.Load() }

// HTTP2Requests is the number of chat requests served over HTTP/2.
func (s *Server) HTTP2Requests() int64 { return s.h2.Load() }

// Faults returns how many faults of each kind were injected.
func (s *Server) Faults() [numFaults]int64 {
	var out [numFaults]int64
	for i := range out {
		out[i] = s.faults[i].Load()
	}
	return out
}

// Close stops the server and closes every connection.
func (s *Server) Close() {
	s.Release()
	_ = s.srv.Close()
	s.wg.Wait()
}

// Route tells the format, streaming flag and model of a request.
func Route(path string, body []byte) (f corpus.Format, stream bool, model string, ok bool) {
	switch {
	case strings.HasSuffix(path, "/chat/completions"):
		f = corpus.OpenAI
	case strings.HasSuffix(path, "/v1/messages"):
		f = corpus.Anthropic
	case strings.Contains(path, "/models/") && strings.Contains(path, "enerateContent"):
		i := strings.Index(path, "/models/") + len("/models/")
		j := strings.LastIndexByte(path, ':')
		if j < i {
			return "", false, "", false
		}
		return corpus.Gemini, strings.HasSuffix(path, ":streamGenerateContent"), path[i:j], true
	default:
		return "", false, "", false
	}
	return f, jsonTrue(body, "stream"), jsonString(body, "model"), true
}

// jsonString finds the first "key": "value" in body (top-level keys come
// first in every client's encoding of these small requests).
func jsonString(body []byte, key string) string {
	i := bytes.Index(body, []byte(`"`+key+`"`))
	if i < 0 {
		return ""
	}
	rest := bytes.TrimLeft(body[i+len(key)+2:], " \t\r\n:")
	if len(rest) == 0 || rest[0] != '"' {
		return ""
	}
	end := bytes.IndexByte(rest[1:], '"')
	if end < 0 {
		return ""
	}
	return string(rest[1 : 1+end])
}

func jsonTrue(body []byte, key string) bool {
	i := bytes.Index(body, []byte(`"`+key+`"`))
	if i < 0 {
		return false
	}
	rest := bytes.TrimLeft(body[i+len(key)+2:], " \t\r\n:")
	return bytes.HasPrefix(rest, []byte("true"))
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// ServeHTTP answers one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/_ctl/release") {
		s.Release()
		w.WriteHeader(http.StatusNoContent)
		return
	}
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer bufPool.Put(buf)
	if _, err := io.Copy(buf, r.Body); err != nil {
		return
	}
	f, stream, model, ok := Route(r.URL.Path, buf.Bytes())
	if !ok {
		http.Error(w, `{"error":{"message":"unknown path"}}`, http.StatusNotFound)
		return
	}
	s.requests.Add(1)
	if r.ProtoMajor == 2 {
		s.h2.Add(1)
	}
	m := s.mode.Load()
	fault := -1
	if m.FaultRate > 0 && rand.Float64() < m.FaultRate {
		fault = rand.IntN(numFaults)
		if !stream && fault >= FaultResetMidStream {
			fault = Fault500
		}
		s.faults[fault].Add(1)
	}
	if len(model) == 4 && strings.HasPrefix(model, "fan") && model[3] >= '1' && model[3] <= '9' {
		if !sleep(r.Context(), time.Duration(model[3]-'0')*m.FanStep) {
			return
		}
	}
	h := w.Header()
	h.Set("X-Request-Id", "req_bench_"+strconv.FormatInt(s.requests.Load(), 10))
	switch fault {
	case Fault429:
		h.Set("Retry-After", "1")
		h.Set("Retry-After-Ms", "20")
		writeError(w, f, http.StatusTooManyRequests)
		return
	case Fault500:
		writeError(w, f, http.StatusInternalServerError)
		return
	case Fault503:
		writeError(w, f, http.StatusServiceUnavailable)
		return
	case FaultResetBeforeHeaders:
		reset(w)
		return
	}
	if !stream {
		b := corpus.BufferedOf(f)
		h.Set("Content-Type", b.ContentType)
		h.Set("Content-Length", strconv.Itoa(len(b.Body)))
		_, _ = w.Write(b.Body)
		return
	}
	s.writeStream(w, r, corpus.StreamOf(f, m.Deltas), m, strings.HasPrefix(model, "gate"), fault)
}

func (s *Server) writeStream(w http.ResponseWriter, r *http.Request, st *corpus.Stream, m *Mode, gated bool, fault int) {
	h := w.Header()
	h.Set("Content-Type", st.ContentType)
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	// The prelude and the first text delta go out together.
	pos := st.Ends[st.FirstDelta]
	if _, err := w.Write(st.Body[:pos]); err != nil {
		return
	}
	if rc.Flush() != nil {
		return
	}
	if gated {
		select {
		case <-s.gateChan():
		case <-r.Context().Done():
			return
		}
	}
	// Mid-stream faults strike before the event about a third of the way in.
	faultAt := -1
	if fault >= FaultResetMidStream {
		faultAt = st.FirstDelta + max(st.Deltas/3, 1)
	}
	for i := st.FirstDelta + 1; i < len(st.Ends); {
		j := min(i+m.FlushEvery, len(st.Ends))
		if faultAt >= i && faultAt < j {
			j = faultAt
		}
		if j > i {
			end := st.Ends[j-1]
			if _, err := w.Write(st.Body[pos:end]); err != nil {
				return
			}
			if rc.Flush() != nil {
				return
			}
			pos, i = end, j
		}
		if i == faultAt {
			switch fault {
			case FaultResetMidStream:
				reset(w)
				return
			case FaultPrematureEnd:
				return
			case FaultMalformed:
				_, _ = w.Write([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"x\"}\n\n"))
				_ = rc.Flush()
				return
			case FaultStall:
				if !sleep(r.Context(), m.Stall) {
					return
				}
			}
			faultAt = -1
			continue
		}
		if m.Interval > 0 && i < len(st.Ends) && !sleep(r.Context(), m.Interval) {
			return
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// reset closes the connection abruptly (RST), before or after headers.
func reset(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

func writeError(w http.ResponseWriter, f corpus.Format, status int) {
	var body string
	switch f {
	case corpus.Anthropic:
		typ := "api_error"
		if status == http.StatusTooManyRequests {
			typ = "rate_limit_error"
		} else if status == http.StatusServiceUnavailable {
			typ = "overloaded_error"
		}
		body = `{"type":"error","error":{"type":"` + typ + `","message":"injected fault"},"request_id":"req_bench"}`
	case corpus.Gemini:
		st := "INTERNAL"
		if status == http.StatusTooManyRequests {
			st = "RESOURCE_EXHAUSTED"
			body = `{"error":{"code":429,"message":"injected fault","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"0.020s"}]}}`
			break
		} else if status == http.StatusServiceUnavailable {
			st = "UNAVAILABLE"
		}
		body = `{"error":{"code":` + strconv.Itoa(status) + `,"message":"injected fault","status":"` + st + `"}}`
	default:
		typ, code := "server_error", "null"
		if status == http.StatusTooManyRequests {
			typ, code = "requests", `"rate_limit_exceeded"`
		}
		body = `{"error":{"message":"injected fault","type":"` + typ + `","param":null,"code":` + code + `}}`
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}
