package llmtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Format names a wire format.
type Format string

// Wire formats the Server speaks. FormatUnknown marks a request to a path
// the server does not serve (answered with 404).
const (
	FormatUnknown   Format = ""
	FormatOpenAI    Format = "openai"
	FormatAnthropic Format = "anthropic"
	FormatGemini    Format = "gemini"
)

// maxBody caps how much of a request body the server reads.
const maxBody = 64 << 20

// oversizeLen is the length of the FaultOversizeLine padding.
const oversizeLen = 2 << 20

// padMark stands in the oversize frame where its padding goes; padPiece is
// a piece of the padding (plain letters: nothing to escape in any format).
const padMark = "LLMTESTPADDINGGOESHERE"

var padPiece = bytes.Repeat([]byte("x"), 64<<10)

// Recorded is one request the Server received.
type Recorded struct {
	Format Format
	Method string
	Path   string
	Query  url.Values
	Header http.Header
	Body   []byte
	// Stream says whether the request asked for a streamed answer
	// ("stream":true, or Gemini's streamGenerateContent).
	Stream bool
	// Model is the model the request named (body or Gemini path).
	Model string
	// At is when the server received it (its clock).
	At time.Time
}

// Server is a loopback HTTP server that speaks the OpenAI Chat
// Completions, Anthropic Messages and Gemini generateContent wire formats,
// answering from a script of Steps. It is safe for concurrent use.
type Server struct {
	// URL is the server's base URL, "http://127.0.0.1:port".
	URL string

	cfg       config
	srv       *http.Server
	serveDone chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	handlers  sync.WaitGroup
	limited   atomic.Int64

	mu     sync.Mutex
	closed bool
	script []Step
	reqs   []Recorded
	lim    limiter
	// limitedAt holds when each 429 was sent (the server's clock).
	limitedAt []time.Time
	respond   func(Recorded) Step // SetResponder

	connMu sync.Mutex
	conns  map[net.Conn]struct{}
}

// NewServer starts a Server on a loopback port. Call Close when done. Like
// httptest.NewServer, it panics if no loopback port can be opened.
func NewServer(opts ...Option) *Server {
	cfg := config{def: Reply{Text: "simulated reply"}}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.rl.Window <= 0 {
		cfg.rl.Window = defaultWindow
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		if ln, err = net.Listen("tcp6", "[::1]:0"); err != nil {
			panic(fmt.Sprintf("llmtest: failed to listen on a loopback port: %v", err))
		}
	}
	s := &Server{
		URL:       "http://" + ln.Addr().String(),
		cfg:       cfg,
		serveDone: make(chan struct{}),
		done:      make(chan struct{}),
		lim:       limiter{cfg: cfg.rl},
		conns:     make(map[net.Conn]struct{}),
	}
	s.srv = &http.Server{
		Handler:           http.HandlerFunc(s.handle),
		ConnState:         s.connState,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	go func() {
		defer close(s.serveDone)
		_ = s.srv.Serve(ln)
	}()
	return s
}

// OpenAIBaseURL is the base URL an OpenAI-format client needs (URL + "/v1").
func (s *Server) OpenAIBaseURL() string { return s.URL + "/v1" }

// AnthropicBaseURL is the base URL an Anthropic client needs.
func (s *Server) AnthropicBaseURL() string { return s.URL }

// GeminiBaseURL is the base URL a Gemini client needs.
func (s *Server) GeminiBaseURL() string { return s.URL }

// Push appends steps to the script. Each request consumes the first step
// left; when none is left, the default reply answers.
func (s *Server) Push(steps ...Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range steps {
		if st.Fault != nil && st.Fault.Kind == 0 {
			f := *st.Fault
			f.Kind = FaultStatus
			st.Fault = &f
		}
		s.script = append(s.script, st)
	}
}

// Pending is how many scripted steps are left.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.script)
}

// Requests returns a copy of every request received so far, in order.
func (s *Server) Requests() []Recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Recorded, len(s.reqs))
	for i, r := range s.reqs {
		r.Header = r.Header.Clone()
		r.Body = bytes.Clone(r.Body)
		r.Query = cloneValues(r.Query)
		out[i] = r
	}
	return out
}

// Count is how many requests the server received.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

// OpenConns is how many client connections are open right now.
func (s *Server) OpenConns() int {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	return len(s.conns)
}

// RateLimited is how many 429 responses the server sent, scripted or from
// the rate-limit emulation.
func (s *Server) RateLimited() int { return int(s.limited.Load()) }

// FirstRequestAt is when the server received its first request (zero:
// none yet): where a rate limit's first window begins.
func (s *Server) FirstRequestAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var first time.Time
	for _, r := range s.reqs {
		if first.IsZero() || r.At.Before(first) {
			first = r.At
		}
	}
	return first
}

// RateLimitedAt returns when each 429 was sent, oldest first, on the
// server's clock (WithClock's, else the wall clock): a pacing test counts
// the refusals after the first window.
func (s *Server) RateLimitedAt() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.limitedAt...)
}

// CloseClientConnections closes every open client connection; requests in
// flight fail on the client side.
func (s *Server) CloseClientConnections() {
	s.connMu.Lock()
	conns := make([]net.Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.connMu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// Close stops the server: it closes the listener and every connection,
// ends every stalled or sleeping handler, and returns once no handler or
// connection goroutine of the server is left. It is safe to call twice.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		// Connections close before the handlers are told to stop, so that
		// an interrupted answer can never end cleanly on the wire.
		_ = s.srv.Close()
		s.CloseClientConnections()
		close(s.done)
		<-s.serveDone
		s.handlers.Wait()
		deadline := time.Now().Add(5 * time.Second)
		for s.OpenConns() > 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	})
}

func (s *Server) connState(c net.Conn, st http.ConnState) {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	switch st {
	case http.StateNew:
		s.conns[c] = struct{}{}
	case http.StateClosed, http.StateHijacked:
		delete(s.conns, c)
	}
}

func cloneValues(v url.Values) url.Values {
	out := make(url.Values, len(v))
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// codec renders one wire format.
type codec interface {
	contentType() string
	buffered(p *plan) []byte
	frames(p *plan, x *exchange) []frame
	errorBody(status int, f *Fault) []byte
	streamError(f *Fault) frame
	malformed() frame
	oversize(p *plan, padding string) frame
	rateHeaders(h http.Header, st *rlState)
}

// exchange is one request being answered.
type exchange struct {
	format       Format
	codec        codec
	stream       bool
	sse          bool // Gemini alt=sse
	includeUsage bool
	model        string
	body         []byte
	seq          int
	key          string // the API key the request carried (rate-limit groups)
}

// route reads the format, model and streaming flags from the request.
func route(r *http.Request, body []byte) (*exchange, error) {
	x := &exchange{body: body}
	p := r.URL.Path
	switch {
	case strings.HasSuffix(p, "/chat/completions"):
		x.format, x.codec = FormatOpenAI, openAI{}
	case isResponsesPath(p):
		x.format, x.codec = FormatOpenAI, openAIResponses{}
	case p == "/v1/messages":
		x.format, x.codec = FormatAnthropic, anthropic{}
	case strings.HasPrefix(p, "/v1beta/models/") || strings.HasPrefix(p, "/v1/models/"):
		rest := p[strings.Index(p, "/models/")+len("/models/"):]
		model, action, ok := strings.Cut(rest, ":")
		if !ok || (action != "generateContent" && action != "streamGenerateContent") {
			return x, nil
		}
		x.format, x.codec, x.model = FormatGemini, gemini{}, model
		x.stream = action == "streamGenerateContent"
		x.sse = x.stream && r.URL.Query().Get("alt") == "sse"
		return x, nil
	default:
		return x, nil
	}
	var req struct {
		Model         string `json:"model"`
		Stream        bool   `json:"stream"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return x, fmt.Errorf("llmtest: request body is not JSON: %w", err)
	}
	x.model, x.stream = req.Model, req.Stream
	x.includeUsage = req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	return x, nil
}

func (s *Server) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.handlers.Add(1)
	return true
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	if !s.enter() {
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	defer s.handlers.Done()
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		return
	}
	if op := s.opHandler(r, body); op != nil {
		op(w, r, body)
		return
	}
	x, rerr := route(r, body)
	x.key = requestKey(r)
	rec := Recorded{Format: x.format, Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(),
		Header: r.Header.Clone(), Body: body, Stream: x.stream, Model: x.model, At: s.now()}
	s.mu.Lock()
	s.reqs = append(s.reqs, rec)
	x.seq = len(s.reqs)
	s.mu.Unlock()

	switch {
	case x.codec == nil:
		s.writeError(w, openAI{}, http.StatusNotFound, &Fault{Message: "llmtest: no endpoint at " + r.URL.Path})
		return
	case r.Method != http.MethodPost:
		s.writeError(w, x.codec, http.StatusMethodNotAllowed, &Fault{Message: "llmtest: use POST"})
		return
	case rerr != nil:
		s.writeError(w, x.codec, http.StatusBadRequest, &Fault{Message: rerr.Error()})
		return
	}

	step, p, st, ok := s.take(x)
	if st != nil {
		x.codec.rateHeaders(w.Header(), st)
	}
	if !ok {
		s.writeError(w, x.codec, http.StatusTooManyRequests, st.fault(x.format, p.model))
		return
	}
	s.setRequestID(w.Header(), x)
	if !s.sleep(r.Context(), s.cfg.first) {
		return
	}
	f := step.Fault
	if step.Reply != nil {
		setHeaders(w.Header(), step.Reply.Header)
	}
	if f != nil {
		setHeaders(w.Header(), f.Header)
		if f.Reply != nil {
			setHeaders(w.Header(), f.Reply.Header)
		}
	}
	switch {
	case f == nil:
		s.answer(w, r, x, p, nil)
	case f.Kind == FaultStatus:
		status := f.Status
		if status == 0 {
			status = http.StatusInternalServerError
		}
		s.writeError(w, x.codec, status, f)
	case f.Kind == FaultResetBeforeHeaders:
		s.reset(w)
	default:
		s.answer(w, r, x, p, f)
	}
}

// take consumes the next step (or the default) and charges the rate
// limit. A request the limit refuses consumes neither a step nor budget.
func (s *Server) take(x *exchange) (Step, *plan, *rlState, bool) {
	dyn, hasDyn := s.dynamicStep(x)
	s.mu.Lock()
	defer s.mu.Unlock()
	var step Step
	if len(s.script) > 0 {
		step = s.script[0]
	} else if hasDyn {
		step = dyn
	}
	reply := step.Reply
	output := true
	if f := step.Fault; f != nil {
		if f.Reply != nil {
			reply = f.Reply
		}
		output = f.Kind != FaultStatus && f.Kind != FaultResetBeforeHeaders
	}
	if reply == nil {
		reply = &s.cfg.def
	}
	p := newPlan(reply, len(x.body), x.model, x.seq)
	if c := s.cfg.cache; c != nil && reply.Usage == nil && x.format == FormatAnthropic {
		if u, ok := c.usage(x.body); ok {
			u.CompletionTokens, u.ReasoningTokens = p.usage.CompletionTokens, p.usage.ReasoningTokens
			p.usage = u
		}
	}
	var st *rlState
	if s.lim.enabled() {
		out := 0
		if output {
			out = p.usage.CompletionTokens
		}
		var ok bool
		if ok, st = s.lim.admit(s.now(), x.key, len(x.body)/4, out); !ok {
			return step, p, st, false
		}
	}
	if len(s.script) > 0 {
		s.script = s.script[1:]
	}
	return step, p, st, true
}

func (s *Server) setRequestID(h http.Header, x *exchange) {
	switch x.format {
	case FormatOpenAI:
		h.Set("x-request-id", fmt.Sprintf("req_llmtest_%d", x.seq))
	case FormatAnthropic:
		h.Set("request-id", fmt.Sprintf("req_llmtest_%d", x.seq))
	}
}

func setHeaders(h http.Header, extra map[string]string) {
	for k, v := range extra {
		h.Set(k, v)
	}
}

// writeError sends status with the format's error body and, for a
// positive f.RetryAfter outside Gemini, the retry-after headers.
func (s *Server) writeError(w http.ResponseWriter, c codec, status int, f *Fault) {
	h := w.Header()
	if f.RetryAfter > 0 {
		if _, isGemini := c.(gemini); !isGemini {
			h.Set("retry-after", retryAfterSeconds(f.RetryAfter))
			h.Set("retry-after-ms", retryAfterMillis(f.RetryAfter))
		}
	}
	body := c.errorBody(status, f)
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", itoa(len(body)))
	if status == http.StatusTooManyRequests {
		s.limited.Add(1)
		s.mu.Lock()
		s.limitedAt = append(s.limitedAt, s.now())
		s.mu.Unlock()
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// sleep waits d; it returns false if the request or the server ended first.
func (s *Server) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-s.done:
		return false
	}
}

// reset aborts the connection: a TCP reset (SO_LINGER 0) when the
// connection can be hijacked, else the handler abort that net/http turns
// into a closed connection.
func (s *Server) reset(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// answer writes a successful (possibly faulty) answer.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, x *exchange, p *plan, f *Fault) {
	if !x.stream || (f != nil && f.Kind == FaultNonSSE200) {
		s.writeBuffered(w, r, x, p, f)
		return
	}
	s.writeStream(w, r, x, p, f)
}

func (s *Server) writeBuffered(w http.ResponseWriter, r *http.Request, x *exchange, p *plan, f *Fault) {
	w.Header().Set("Content-Type", "application/json")
	if f != nil && f.Kind == FaultStall && !s.sleep(r.Context(), f.Stall) {
		return
	}
	s.writeOpBody(w, r, x.codec, x.codec.buffered(p), f)
}

// midStream reports whether kind acts at a point inside the stream.
func midStream(kind FaultKind) bool {
	switch kind {
	case FaultResetMidStream, FaultStall, FaultMalformedLine, FaultTruncatedJSON,
		FaultPrematureClose, FaultInStreamError, FaultOversizeLine:
		return true
	}
	return false
}

func (s *Server) writeStream(w http.ResponseWriter, r *http.Request, x *exchange, p *plan, f *Fault) {
	ctx := r.Context()
	h := w.Header()
	fr := &framer{mode: modeData}
	switch {
	case x.format == FormatAnthropic:
		fr.mode = modeEvent
	case x.format == FormatGemini && x.sse:
		fr.mode = modeDataCRLF
	case x.format == FormatGemini:
		fr.mode = modeArray
	}
	if fr.mode == modeArray {
		h.Set("Content-Type", "application/json; charset=UTF-8")
	} else {
		h.Set("Content-Type", x.codec.contentType())
		h.Set("Cache-Control", "no-cache")
	}
	frames := x.codec.frames(p, x)
	deltas := 0
	for _, fm := range frames {
		if fm.kind == fDelta {
			deltas++
		}
	}
	perDelta := s.cfg.perDelta
	if f != nil && f.Kind == FaultSlowDrip {
		perDelta += f.Stall / time.Duration(max(deltas, 1))
	}
	rc := http.NewResponseController(w)
	w.WriteHeader(http.StatusOK)
	if rc.Flush() != nil {
		return
	}
	write := func(b []byte) bool {
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	armed := f != nil && midStream(f.Kind)
	sent := 0
	for _, fm := range frames {
		if armed && sent >= f.After && (fm.kind == fDelta || fm.kind == fTail) {
			armed = false
			switch f.Kind {
			case FaultResetMidStream:
				s.reset(w)
				return
			case FaultStall:
				if !s.sleep(ctx, f.Stall) {
					return
				}
			case FaultMalformedLine:
				if !write(fr.wrap(x.codec.malformed())) {
					return
				}
			case FaultTruncatedJSON:
				cut := fm
				cut.data = fm.data[:len(fm.data)/2]
				write(fr.wrap(cut))
				return
			case FaultPrematureClose:
				return
			case FaultInStreamError:
				write(fr.wrap(x.codec.streamError(f)))
				return
			case FaultOversizeLine:
				// The line goes out in pieces as it is made, so that only its
				// length is at fault: a server that took long to build 2 MiB
				// (under the race detector) would look like a stalled stream.
				b := fr.wrap(x.codec.oversize(p, padMark))
				i := bytes.Index(b, []byte(padMark))
				if !write(b[:i]) {
					return
				}
				for n := 0; n < oversizeLen; n += len(padPiece) {
					if !write(padPiece[:min(len(padPiece), oversizeLen-n)]) {
						return
					}
				}
				if !write(b[i+len(padMark):]) {
					return
				}
			}
		}
		if fm.kind == fDelta && !s.sleep(ctx, perDelta) {
			return
		}
		if !write(fr.wrap(fm)) {
			return
		}
		if fm.kind == fDelta {
			sent++
		}
	}
	if end := fr.end(); end != nil {
		write(end)
	}
}

// now is the rate-limit emulation's clock: WithClock's, else the wall clock.
func (s *Server) now() time.Time {
	if s.cfg.now != nil {
		return s.cfg.now()
	}
	return time.Now()
}
