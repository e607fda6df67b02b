package clients

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"

	"github.com/chorusrt/chorus/bench/internal/corpus"
)

// Client is one benchmarked client bound to one server and format.
type Client interface {
	// Stream sends one streamed chat request to model and calls delta with
	// the text of each text delta, in order. The string may be valid only
	// during the call.
	Stream(ctx context.Context, model string, delta func(text string)) error
	// Chat sends one buffered chat request and returns the answer's text.
	Chat(ctx context.Context, model string) (string, error)
	// Close releases what the client holds (runtimes, idle connections).
	Close()
}

// Options configure a client.
type Options struct {
	// BaseURL is the server's root URL ("http://127.0.0.1:port"); each
	// adapter adds the path prefix its library expects.
	BaseURL string
	// HTTP is the client every adapter uses.
	HTTP *http.Client
	// MaxTokens is sent as max_tokens (default 1024).
	MaxTokens int
	// Prompt is the user message (default "Say hi"). Every library keeps
	// its default retry behaviour: the benchmarks never change it.
	Prompt string
	// APIKeys are the keys to send (default one key, "k"). With several,
	// Chorus's runtime gets one credential per key; every other client is
	// built once per key and its calls go round-robin over them, as a user
	// with several keys writes it.
	APIKeys []string
}

// key is the first API key.
func (o Options) key() string {
	if len(o.APIKeys) == 0 {
		return "k"
	}
	return o.APIKeys[0]
}

func (o *Options) defaults() {
	if o.MaxTokens <= 0 {
		o.MaxTokens = 1024
	}
	if o.Prompt == "" {
		o.Prompt = "Say hi"
	}
	if o.HTTP == nil {
		o.HTTP = NewHTTPClient(1024)
	}
}

// NewHTTPClient is the transport every client shares in a run: keep-alive
// pools large enough for every stream in flight, no HTTP/2 (plain loopback
// HTTP/1.1), no timeouts beyond the request's context.
func NewHTTPClient(conns int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 0
	tr.MaxIdleConnsPerHost = conns
	tr.ForceAttemptHTTP2 = false
	tr.DisableCompression = true
	return &http.Client{Transport: tr}
}

// NewTLSHTTPClient is NewHTTPClient for a TLS server whose certificate is
// caPEM, trusted the way a user trusts a private CA (the transport's
// RootCAs); http2 lets the transport negotiate h2 (ForceAttemptHTTP2, as
// a custom TLS config otherwise turns HTTP/2 off).
func NewTLSHTTPClient(conns int, caPEM []byte, http2 bool) (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("clients: no certificate in the CA PEM")
	}
	hc := NewHTTPClient(conns)
	tr := hc.Transport.(*http.Transport)
	tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	tr.ForceAttemptHTTP2 = http2
	return hc, nil
}

// Spec names a client and a format it can speak.
type Spec struct {
	Name   string
	Format corpus.Format
}

// String is the label of the client in reports: its name, and its format
// when that is not OpenAI.
func (s Spec) String() string {
	if s.Format == corpus.OpenAI {
		return s.Name
	}
	return s.Name + " (" + string(s.Format) + ")"
}

// Label is the name used in reports.
func (s Spec) Label() string { return s.String() }

type factory struct {
	formats []corpus.Format
	kind    string // floor, chorus, peer
	module  string // module path whose version the report prints
	new     func(f corpus.Format, o Options) (Client, error)
}

var all = map[string]factory{
	"floor-bare":     {corpus.Formats, "floor", "", func(f corpus.Format, o Options) (Client, error) { return newFloor(f, o, false), nil }},
	"floor-extract":  {corpus.Formats, "floor", "", func(f corpus.Format, o Options) (Client, error) { return newFloor(f, o, true), nil }},
	"chorus":         {corpus.Formats, "chorus", "", func(f corpus.Format, o Options) (Client, error) { return newChorus(f, o, false) }},
	"chorus-cb":      {corpus.Formats, "chorus", "", func(f corpus.Format, o Options) (Client, error) { return newChorus(f, o, true) }},
	"chorus-runtime": {corpus.Formats, "chorus", "", newRuntime},
	"openai-go":      {[]corpus.Format{corpus.OpenAI}, "peer", "github.com/openai/openai-go/v3", newOpenAIGo},
	"go-openai":      {[]corpus.Format{corpus.OpenAI}, "peer", "github.com/sashabaranov/go-openai", newGoOpenAI},
	"langchaingo":    {[]corpus.Format{corpus.OpenAI}, "peer", "github.com/tmc/langchaingo", newLangchain},
	"eino":           {[]corpus.Format{corpus.OpenAI}, "peer", "github.com/cloudwego/eino-ext/components/model/openai", newEino},
	"anthropic-sdk":  {[]corpus.Format{corpus.Anthropic}, "peer", "github.com/anthropics/anthropic-sdk-go/v2", newAnthropic},
	"genai":          {[]corpus.Format{corpus.Gemini}, "peer", "google.golang.org/genai", newGenAI},
	// A framework on Chorus (integrations/<framework>), beside the same
	// framework on its own plugin (the peer of the same name).
	"eino-chorus":        {[]corpus.Format{corpus.OpenAI}, "framework", "", newEinoChorus},
	"langchaingo-chorus": {[]corpus.Format{corpus.OpenAI}, "framework", "", newLangchainChorus},
}

// Peers lists the peer clients in report order.
var Peers = []string{"openai-go", "go-openai", "langchaingo", "eino", "anthropic-sdk", "genai"}

// PeerModules are the modules whose versions the report prints, by peer.
func PeerModules() map[string]string {
	out := map[string]string{}
	for name, f := range all {
		if f.module != "" {
			out[name] = f.module
		}
	}
	return out
}

// Kind is "floor", "chorus", "peer" or "framework" (a framework on
// Chorus).
func Kind(name string) string { return all[name].kind }

// Supports reports whether client name speaks format f.
func Supports(name string, f corpus.Format) bool {
	fa, ok := all[name]
	return ok && slices.Contains(fa.formats, f)
}

// New builds client name for format f.
func New(name string, f corpus.Format, o Options) (Client, error) {
	fa, ok := all[name]
	if !ok {
		return nil, fmt.Errorf("clients: unknown client %q", name)
	}
	if !slices.Contains(fa.formats, f) {
		return nil, fmt.Errorf("clients: %s does not speak the %s format", name, f)
	}
	o.defaults()
	if len(o.APIKeys) <= 1 || name == "chorus-runtime" {
		return fa.new(f, o)
	}
	m := &multi{}
	for _, k := range o.APIKeys {
		ko := o
		ko.APIKeys = []string{k}
		c, err := fa.new(f, ko)
		if err != nil {
			m.Close()
			return nil, err
		}
		m.cs = append(m.cs, c)
	}
	return m, nil
}

// multi spreads calls round-robin over one client per API key.
type multi struct {
	cs   []Client
	next atomic.Uint64
}

func (m *multi) pick() Client { return m.cs[(m.next.Add(1)-1)%uint64(len(m.cs))] }

func (m *multi) Stream(ctx context.Context, model string, delta func(string)) error {
	return m.pick().Stream(ctx, model, delta)
}

func (m *multi) Chat(ctx context.Context, model string) (string, error) {
	return m.pick().Chat(ctx, model)
}

func (m *multi) Close() {
	for _, c := range m.cs {
		c.Close()
	}
}

// Exact reports whether the client reports exactly one delta per text
// delta (the bare floor reports every data event instead).
func Exact(name string) bool { return name != "floor-bare" }
