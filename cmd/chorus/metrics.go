package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// metricsEndpoint is a Prometheus scrape endpoint over the process's
// OpenTelemetry metrics: OpenTelemetry's Prometheus exporter as a reader
// of the global meter provider, served at /metrics.
type metricsEndpoint struct {
	addr  string // the address it listens on
	srv   *http.Server
	done  chan error
	mp    *sdkmetric.MeterProvider
	ownMP bool // mp is not setupOTel's: restore prev on stop
}

// startMetrics serves /metrics on addr (HOST:PORT; port 0 picks one) from
// a meter provider it installs as the global one, before the command
// builds its runtime, so every chorus.* and gen_ai.* instrument the
// library packages make reads into it. When the environment also asks
// for OTLP metrics (setupOTel), the provider it installs has both
// readers, the OTLP one rebuilt from the same variables: one set of
// instruments, exported both ways. The registry is its own (no Go
// runtime or process collectors: what is scraped is Chorus's metrics).
func startMetrics(ctx context.Context, addr string) (*metricsEndpoint, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: Prometheus exporter: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	opts := []sdkmetric.Option{sdkmetric.WithReader(exp)}
	otelMeters.Lock()
	defer otelMeters.Unlock()
	var getenv func(string) string
	if otelMeters.mp != nil {
		getenv = otelMeters.getenv
		r, err := otlpMetricReader(ctx, getenv)
		if err != nil {
			ln.Close()
			return nil, err
		}
		opts = append(opts, sdkmetric.WithReader(r))
	}
	res, err := otelResource(ctx, func(k string) string {
		if getenv == nil {
			return ""
		}
		return getenv(k)
	})
	if err != nil {
		ln.Close()
		return nil, err
	}
	m := &metricsEndpoint{addr: ln.Addr().String(), done: make(chan error, 1)}
	m.mp = sdkmetric.NewMeterProvider(append(opts, sdkmetric.WithResource(res))...)
	if old := otelMeters.mp; old != nil {
		// setupOTel's provider made no instrument yet (the command had not
		// built its runtime); its shutdown flushes the new one instead.
		_ = old.Shutdown(ctx)
		otelMeters.mp = m.mp
	} else {
		m.ownMP = true
	}
	otel.SetMeterProvider(m.mp)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { m.done <- m.srv.Serve(ln) }()
	return m, nil
}

// stop closes the endpoint and, when the provider is its own, shuts it
// down (flushing nothing: Prometheus pulls) and leaves a no-op global, as
// setupOTel's shutdown does.
func (m *metricsEndpoint) stop(ctx context.Context) error {
	err := m.srv.Shutdown(ctx)
	if err != nil {
		m.srv.Close()
	}
	if serr := <-m.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	if m.ownMP {
		err = errors.Join(err, m.mp.Shutdown(ctx))
		otel.SetMeterProvider(metricnoop.NewMeterProvider())
	}
	return err
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
