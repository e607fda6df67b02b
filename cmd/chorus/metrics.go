package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/chorusrt/chorus/gateway"
)

// promMetrics is OpenTelemetry's Prometheus exporter as a reader of the
// global meter provider, and its /metrics handler.
type promMetrics struct {
	handler http.Handler
	mp      *sdkmetric.MeterProvider
	ownMP   bool // mp is not setupOTel's: shut it down and leave a no-op
}

// newPromMetrics installs a meter provider as the global one, before the
// command builds its runtime, so that every chorus.* and gen_ai.*
// instrument the library packages make reads into it. When the
// environment also asks for OTLP metrics (setupOTel), the provider it
// installs has both readers, the OTLP one rebuilt from the same
// variables: one set of instruments, exported both ways. The registry is
// its own (no Go runtime or process collectors: what is scraped is
// Chorus's metrics).
func newPromMetrics(ctx context.Context) (*promMetrics, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("the Prometheus exporter: %w", err)
	}
	opts := []sdkmetric.Option{sdkmetric.WithReader(exp)}
	otelMeters.Lock()
	defer otelMeters.Unlock()
	getenv := func(string) string { return "" }
	if otelMeters.mp != nil {
		getenv = otelMeters.getenv
		r, err := otlpMetricReader(ctx, getenv)
		if err != nil {
			return nil, err
		}
		opts = append(opts, sdkmetric.WithReader(r))
	}
	res, err := otelResource(ctx, getenv)
	if err != nil {
		return nil, err
	}
	p := &promMetrics{handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}
	p.mp = sdkmetric.NewMeterProvider(append(opts, sdkmetric.WithResource(res))...)
	if old := otelMeters.mp; old != nil {
		// setupOTel's provider made no instrument yet (the command had not
		// built its runtime); its shutdown flushes the new one instead.
		_ = old.Shutdown(ctx)
		otelMeters.mp = p.mp
	} else {
		p.ownMP = true
	}
	otel.SetMeterProvider(p.mp)
	return p, nil
}

// shutdown shuts the provider down when it is its own (flushing nothing:
// Prometheus pulls) and leaves a no-op global, as setupOTel's shutdown
// does; setupOTel's shutdown flushes one it shares.
func (p *promMetrics) shutdown(ctx context.Context) error {
	if !p.ownMP {
		return nil
	}
	err := p.mp.Shutdown(ctx)
	otel.SetMeterProvider(metricnoop.NewMeterProvider())
	return err
}

// metricsEndpoint is /metrics served on an address of its own.
type metricsEndpoint struct {
	addr string // the address it listens on
	srv  *http.Server
	done chan error
	p    *promMetrics
}

// startMetrics serves /metrics on addr (HOST:PORT; port 0 picks one).
func startMetrics(ctx context.Context, addr string) (*metricsEndpoint, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	p, err := newPromMetrics(ctx)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", p.handler)
	m := &metricsEndpoint{addr: ln.Addr().String(), done: make(chan error, 1), p: p}
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { m.done <- m.srv.Serve(ln) }()
	return m, nil
}

// stop closes the endpoint and shuts its provider down.
func (m *metricsEndpoint) stop(ctx context.Context) error {
	err := m.srv.Shutdown(ctx)
	if err != nil {
		m.srv.Close()
	}
	if serr := <-m.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return errors.Join(err, m.p.shutdown(ctx))
}

// serveMetricsOn is chorus serve's --metrics: h with GET /metrics added in
// front of it. With gateway keys configured, /metrics asks for one of
// them, sent as a bearer token or x-api-key, as the gateway's routes do;
// without, it is open (serve then listens on loopback only). It returns
// the handler and the provider's stop.
func serveMetricsOn(ctx context.Context, e env, keys []gateway.Key) (wrap func(http.Handler) http.Handler, stop func(), err error) {
	p, err := newPromMetrics(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("--metrics: %w", err)
	}
	stop = func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := p.shutdown(sctx); err != nil {
			fmt.Fprintf(e.stderr, "chorus serve: metrics: %v\n", err)
		}
	}
	wrap = func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/metrics" {
				h.ServeHTTP(w, r)
				return
			}
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				w.Header().Set("Allow", "GET, HEAD")
				http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
				return
			}
			if len(keys) > 0 && !knownKey(keys, r) {
				w.Header().Set("WWW-Authenticate", "Bearer")
				http.Error(w, "a gateway key is required", http.StatusUnauthorized)
				return
			}
			p.handler.ServeHTTP(w, r)
		})
	}
	return wrap, stop, nil
}

// knownKey reports whether r carries one of the gateway keys (compared by
// their SHA-256, in constant time).
func knownKey(keys []gateway.Key, r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		tok = r.Header.Get("X-Api-Key")
	}
	if tok = strings.TrimSpace(tok); tok == "" {
		return false
	}
	sum := gateway.HashKey(tok)
	found := 0
	for _, k := range keys {
		found |= subtle.ConstantTimeCompare(sum[:], k.SHA256[:])
	}
	return found == 1
}

// serveMetrics is chorus node's --metrics-addr: it starts the endpoint,
// says where it listens on stdout, and returns its stop.
func serveMetrics(ctx context.Context, e env, cmd, addr string) (stop func(), err error) {
	m, err := startMetrics(ctx, addr)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(e.stdout, "%s: metrics at http://%s/metrics\n", cmd, m.addr)
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := m.stop(sctx); err != nil {
			fmt.Fprintf(e.stderr, "%s: metrics: %v\n", cmd, err)
		}
	}, nil
}
