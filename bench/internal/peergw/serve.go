package peergw

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"runtime/pprof"
	"time"

	"github.com/chorusrt/chorus/bench/internal/clients"
	"github.com/chorusrt/chorus/bench/internal/corpus"
	"github.com/chorusrt/chorus/gateway"
)

// serveEnv names the environment variable that turns a process started by
// Run into one of the scenario's servers: its value is a serveSpec.
const serveEnv = "CHORUS_BENCH_PEERGW_SERVE"

// serveSpec is what one server process is.
type serveSpec struct {
	Kind     string `json:"kind"`     // upstream, chorus, proxy
	Upstream string `json:"upstream"` // the upstream's URL (chorus, proxy)
	Deltas   int    `json:"deltas"`   // upstream: deltas per streamed answer
	Profile  string `json:"profile"`  // when set, a CPU profile written here on exit
}

// MaybeServe serves as one of the scenario's processes when the
// environment asks for one (a process Run started), and then returns
// true once its standard input is closed; otherwise it returns false at
// once. Call it first in main (and in TestMain).
func MaybeServe() bool {
	v := os.Getenv(serveEnv)
	if v == "" {
		return false
	}
	var spec serveSpec
	if err := json.Unmarshal([]byte(v), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "peergw server:", err)
		os.Exit(1)
	}
	if err := serve(spec); err != nil {
		fmt.Fprintln(os.Stderr, "peergw server:", err)
		os.Exit(1)
	}
	return true
}

func serve(spec serveSpec) error {
	var h http.Handler
	var closeFn func()
	switch spec.Kind {
	case "upstream":
		h = upstream(spec.Deltas)
	case "proxy":
		u, err := url.Parse(spec.Upstream)
		if err != nil {
			return err
		}
		rp := &httputil.ReverseProxy{
			Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(u) },
			Transport:     clients.NewHTTPClient(1024).Transport,
			FlushInterval: -1, // flush every write: a stream passes event by event
		}
		// Full duplex on HTTP/1.1: the request body stays readable after
		// the answer's headers are flushed. Without it, the upstream's
		// quick answer races the transport's last read of the body being
		// forwarded (net/http makes the body unreadable once headers are
		// flushed), the upstream connection is closed mid-answer and the
		// client gets an unexpected EOF (seen on one stream in a few).
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ProtoMajor == 1 {
				_ = http.NewResponseController(w).EnableFullDuplex()
			}
			rp.ServeHTTP(w, r)
		})
	case "chorus":
		up := clients.NewHTTPClient(1024)
		rt, err := clients.NewRuntime(corpus.OpenAI, spec.Upstream, clients.Options{HTTP: up})
		if err != nil {
			return err
		}
		g, err := gateway.New(rt, gateway.Options{})
		if err != nil {
			return err
		}
		h = g
		closeFn = func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = rt.Close(ctx)
			up.CloseIdleConnections()
		}
	default:
		return fmt.Errorf("unknown kind %q", spec.Kind)
	}
	if spec.Profile != "" {
		f, err := os.Create(spec.Profile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: time.Minute, Protocols: h1h2c()}
	go func() { _ = hs.Serve(ln) }()
	fmt.Println("http://" + ln.Addr().String())
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes it or exits
	_ = hs.Close()
	if closeFn != nil {
		closeFn()
	}
	return nil
}

// h1h2c is HTTP/1.1 and HTTP/2 without TLS (prior knowledge) on one port.
func h1h2c() *http.Protocols {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return p
}

// upstream is the fake provider: POST .../chat/completions answered with
// corpus's pre-encoded OpenAI bodies, at once (zero latency), a streamed
// answer flushed event by event.
func upstream(deltas int) http.Handler {
	buf := corpus.BufferedOf(corpus.OpenAI)
	st := corpus.StreamOf(corpus.OpenAI, max(deltas, 1))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		if r.Method != http.MethodPost || !bytes.HasSuffix([]byte(r.URL.Path), []byte("/chat/completions")) {
			http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
			return
		}
		if !isStream(body) {
			w.Header().Set("Content-Type", buf.ContentType)
			_, _ = w.Write(buf.Body)
			return
		}
		w.Header().Set("Content-Type", st.ContentType)
		fl, _ := w.(http.Flusher)
		prev := 0
		for _, end := range st.Ends {
			if _, err := w.Write(st.Body[prev:end]); err != nil {
				return
			}
			prev = end
			if fl != nil {
				fl.Flush()
			}
		}
	})
}

// isStream reports whether a chat request body asks for a stream.
func isStream(body []byte) bool {
	var v struct {
		Stream bool `json:"stream"`
	}
	return json.Unmarshal(body, &v) == nil && v.Stream
}
