package sim

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
)

// ProviderID is the provider id the simulator is registered under: its
// models are "sim/<name>".
const ProviderID = "sim"

// Header is the response header every simulated answer carries, with the
// value "true".
const Header = "X-Chorus-Simulated"

// Models are the models the simulator lists. Any other name works as well
// (it answers like "prose").
var Models = []llmtest.Model{
	{ID: "echo", DisplayName: "Simulated echo: answers with the last user message", Capabilities: []string{"generateContent"}},
	{ID: "prose", DisplayName: "Simulated prose: deterministic text derived from the prompt", Capabilities: []string{"generateContent"}},
	{ID: "embed", DisplayName: "Simulated embeddings: hash vectors of the text", Capabilities: []string{"embedContent"}},
}

// DefaultWindow is the rate-limit window when Options.Window is zero.
const DefaultWindow = time.Minute

// Options configure a Simulator. The zero value answers at once, without
// limits, on a loopback port of its choosing.
type Options struct {
	// Addr, when set, is an extra address ("127.0.0.1:8088") on which the
	// simulator accepts connections, for clients outside the process.
	Addr string
	// Latency delays every answer before its response headers.
	Latency time.Duration
	// TokensPerSecond spreads each answer's completion tokens over time
	// (streamed and buffered answers alike); zero sends them at once.
	TokensPerSecond float64
	// RPM and TPM are the requests and tokens admitted per Window; past
	// them the simulator answers 429 with retry-after until the window
	// ends, and it reports its limits in x-ratelimit-* headers (and
	// anthropic-ratelimit-* on the Anthropic format). Zero is unlimited.
	RPM, TPM int
	// Window is the rate-limit window (DefaultWindow when zero).
	Window time.Duration
}

// Validate returns a *llm.ConfigError naming the first option at fault.
func (o Options) Validate() error {
	switch {
	case o.Latency < 0:
		return &llm.ConfigError{Field: "latency", Msg: fmt.Sprintf("%v is negative", o.Latency)}
	case o.TokensPerSecond < 0 || math.IsNaN(o.TokensPerSecond) || math.IsInf(o.TokensPerSecond, 0):
		return &llm.ConfigError{Field: "tokens_per_second", Msg: fmt.Sprintf("%v is not a non-negative number", o.TokensPerSecond)}
	case o.RPM < 0:
		return &llm.ConfigError{Field: "rpm", Msg: fmt.Sprintf("%d is negative", o.RPM)}
	case o.TPM < 0:
		return &llm.ConfigError{Field: "tpm", Msg: fmt.Sprintf("%d is negative", o.TPM)}
	case o.Window < 0:
		return &llm.ConfigError{Field: "window", Msg: fmt.Sprintf("%v is negative", o.Window)}
	}
	return nil
}

// Simulator is a running simulator. Close it when done.
type Simulator struct {
	srv  *llmtest.Server
	fwd  *forwarder
	opts Options
}

// Start starts a simulator.
func Start(opts Options) (s *Simulator, err error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Window == 0 {
		opts.Window = DefaultWindow
	}
	var llopts []llmtest.Option
	if opts.Latency > 0 {
		llopts = append(llopts, llmtest.WithLatency(opts.Latency, 0))
	}
	if opts.RPM > 0 || opts.TPM > 0 {
		llopts = append(llopts, llmtest.WithRateLimit(llmtest.RateLimit{Requests: opts.RPM, Tokens: opts.TPM, Window: opts.Window}))
	}
	defer func() {
		// llmtest.NewServer panics when no loopback port can be opened.
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("sim: %v", r)
		}
	}()
	srv := llmtest.NewServer(llopts...)
	srv.SetModels(0, Models...)
	srv.SetResponder(Responder(opts.TokensPerSecond))
	s = &Simulator{srv: srv, opts: opts}
	if opts.Addr != "" {
		fwd, err := listenForward(opts.Addr, strings.TrimPrefix(srv.URL, "http://"))
		if err != nil {
			srv.Close()
			return nil, err
		}
		s.fwd = fwd
	}
	return s, nil
}

// URL is the simulator's root URL ("http://127.0.0.1:port"): the Addr
// listener when Options.Addr was set, else the in-process server's.
func (s *Simulator) URL() string {
	if s.fwd != nil {
		return "http://" + s.fwd.ln.Addr().String()
	}
	return s.srv.URL
}

// OpenAIBaseURL is the base URL for an OpenAI-format client (URL + "/v1").
func (s *Simulator) OpenAIBaseURL() string { return s.URL() + "/v1" }

// AnthropicBaseURL is the base URL for an Anthropic client.
func (s *Simulator) AnthropicBaseURL() string { return s.URL() }

// GeminiBaseURL is the base URL for a Gemini client.
func (s *Simulator) GeminiBaseURL() string { return s.URL() }

// Config is the provider credential that reaches the simulator through the
// real OpenAI-format provider, under the id "sim" and with no key.
func (s *Simulator) Config() providers.Config {
	return providers.Config{ID: ProviderID, Format: providers.FormatOpenAI, BaseURL: s.srv.OpenAIBaseURL(), KeyOptional: true}
}

// Options returns the options the simulator runs with.
func (s *Simulator) Options() Options { return s.opts }

// Server is the llmtest server behind the simulator, for tests that
// inspect its requests or script a fault (a pushed step answers before the
// simulator's own replies).
func (s *Simulator) Server() *llmtest.Server { return s.srv }

// Requests is how many requests the simulator has received.
func (s *Simulator) Requests() int { return s.srv.Count() }

// RateLimited is how many 429 answers the simulator has sent.
func (s *Simulator) RateLimited() int { return s.srv.RateLimited() }

// Close stops the simulator and waits until none of its goroutines is
// left. It is safe to call twice.
func (s *Simulator) Close() {
	if s.fwd != nil {
		s.fwd.close()
	}
	s.srv.Close()
}

// forwarder accepts connections on an address of the user's choosing and
// relays each, byte for byte, to the in-process server.
type forwarder struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
	once   sync.Once
}

func listenForward(addr, target string) (*forwarder, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, &llm.ConfigError{Field: "addr", Msg: err.Error()}
	}
	f := &forwarder{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.serve()
	return f, nil
}

func (f *forwarder) serve() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		if !f.track(c) {
			_ = c.Close()
			return
		}
		f.wg.Add(1)
		go f.relay(c)
	}
}

// track registers c; it reports false once the forwarder is closing.
func (f *forwarder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *forwarder) untrack(cs ...net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range cs {
		delete(f.conns, c)
		_ = c.Close()
	}
}

func (f *forwarder) relay(client net.Conn) {
	defer f.wg.Done()
	server, err := net.DialTimeout("tcp", f.target, 5*time.Second)
	if err != nil {
		f.untrack(client)
		return
	}
	if !f.track(server) {
		_ = server.Close()
		f.untrack(client)
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(server, client)
	go pipe(client, server)
	<-done
	// One side ended: give the other a moment to drain, then close both
	// (which ends the second copy too).
	select {
	case <-done:
		f.untrack(client, server)
	case <-time.After(30 * time.Second):
		f.untrack(client, server)
		<-done
	}
}

func (f *forwarder) close() {
	f.once.Do(func() {
		f.mu.Lock()
		f.closed = true
		conns := make([]net.Conn, 0, len(f.conns))
		for c := range f.conns {
			conns = append(conns, c)
		}
		f.mu.Unlock()
		_ = f.ln.Close()
		for _, c := range conns {
			_ = c.Close()
		}
		f.wg.Wait()
	})
}
