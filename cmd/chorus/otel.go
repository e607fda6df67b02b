package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// setupOTel installs the OpenTelemetry SDK as the global providers when
// the standard environment asks for an OTLP export: an
// OTEL_EXPORTER_OTLP_ENDPOINT (or its _TRACES_/_METRICS_ form), or
// OTEL_TRACES_EXPORTER / OTEL_METRICS_EXPORTER set to otlp. The exporters
// read the rest of the OTEL_EXPORTER_OTLP_* variables themselves;
// OTEL_EXPORTER_OTLP_PROTOCOL picks grpc or http/protobuf (the default);
// OTEL_TRACES_SAMPLER, OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES are
// the SDK's own; OTEL_SDK_DISABLED=true turns it all off. The service name
// defaults to "chorus". The library packages export through the global
// providers (package telemetry); shutdown flushes and restores the
// previous globals. With nothing asked for it installs nothing.
func setupOTel(ctx context.Context, getenv func(string) string) (shutdown func(context.Context) error, err error) {
	nop := func(context.Context) error { return nil }
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return nop, nil
	}
	anyEndpoint := getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
	traces := exporterAsked(getenv("OTEL_TRACES_EXPORTER"), anyEndpoint || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "")
	metrics := exporterAsked(getenv("OTEL_METRICS_EXPORTER"), anyEndpoint || getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") != "")
	if !traces && !metrics {
		return nop, nil
	}
	res, err := otelResource(ctx, getenv)
	if err != nil {
		return nil, err
	}
	var closers []func(context.Context) error
	if traces {
		var exp sdktrace.SpanExporter
		grpc := strings.EqualFold(protocolOf(getenv, "TRACES"), "grpc")
		url := endpointOf(getenv, "TRACES", "/v1/traces", grpc)
		switch {
		case grpc && url != "":
			exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(url))
		case grpc:
			exp, err = otlptracegrpc.New(ctx)
		case url != "":
			exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(url))
		default:
			exp, err = otlptracehttp.New(ctx)
		}
		if err != nil {
			return nil, fmt.Errorf("OTLP trace exporter: %w", err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)) // sampler from OTEL_TRACES_SAMPLER
		otel.SetTracerProvider(tp)
		closers = append(closers, tp.Shutdown)
	}
	if metrics {
		reader, err := otlpMetricReader(ctx, getenv)
		if err != nil {
			for _, c := range closers {
				_ = c(ctx)
			}
			otel.SetTracerProvider(tracenoop.NewTracerProvider())
			return nil, err
		}
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithResource(res)) // interval from OTEL_METRIC_EXPORT_INTERVAL
		otel.SetMeterProvider(mp)
		otelMeters.Lock()
		otelMeters.mp, otelMeters.getenv = mp, getenv
		otelMeters.Unlock()
		closers = append(closers, func(ctx context.Context) error {
			// chorus node --metrics-addr may have replaced it (metrics.go).
			otelMeters.Lock()
			mp := otelMeters.mp
			otelMeters.mp, otelMeters.getenv = nil, nil
			otelMeters.Unlock()
			if mp == nil {
				return nil
			}
			return mp.Shutdown(ctx)
		})
	}
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return func(ctx context.Context) error {
		var errs []error
		for _, c := range closers {
			errs = append(errs, c(ctx))
		}
		// The API's own default cannot be set back: a no-op stands in.
		otel.SetTracerProvider(tracenoop.NewTracerProvider())
		otel.SetMeterProvider(metricnoop.NewMeterProvider())
		return errors.Join(errs...)
	}, nil
}

// otelMeters is the OTLP meter provider setupOTel installed, and the
// environment it read, so that a command adding a reader of its own
// (chorus node --metrics-addr: Prometheus) can replace it by one provider
// with both readers: an SDK provider takes its readers when it is made.
// The command replacing it sets mp to the new one, which setupOTel's
// shutdown then flushes, or to nil when it shut it down itself.
var otelMeters struct {
	sync.Mutex
	mp     *sdkmetric.MeterProvider
	getenv func(string) string
}

// otelResource is the service's resource: service.name "chorus" unless
// OTEL_SERVICE_NAME says otherwise, OTEL_RESOURCE_ATTRIBUTES, and the SDK's
// own attributes.
func otelResource(ctx context.Context, getenv func(string) string) (*resource.Resource, error) {
	ropts := []resource.Option{
		resource.WithAttributes(semconv.ServiceName("chorus")),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES win
		resource.WithTelemetrySDK(),
	}
	if name := getenv("OTEL_SERVICE_NAME"); name != "" {
		ropts = append(ropts, resource.WithAttributes(semconv.ServiceName(name)))
	}
	res, err := resource.New(ctx, ropts...)
	if err != nil && res == nil {
		return nil, fmt.Errorf("OpenTelemetry resource: %w", err)
	}
	return res, nil
}

// otlpMetricReader is a periodic reader exporting over OTLP (gRPC or
// HTTP) as the environment says.
func otlpMetricReader(ctx context.Context, getenv func(string) string) (sdkmetric.Reader, error) {
	var exp sdkmetric.Exporter
	var err error
	grpc := strings.EqualFold(protocolOf(getenv, "METRICS"), "grpc")
	url := endpointOf(getenv, "METRICS", "/v1/metrics", grpc)
	switch {
	case grpc && url != "":
		exp, err = otlpmetricgrpc.New(ctx, otlpmetricgrpc.WithEndpointURL(url))
	case grpc:
		exp, err = otlpmetricgrpc.New(ctx)
	case url != "":
		exp, err = otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(url))
	default:
		exp, err = otlpmetrichttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP metric exporter: %w", err)
	}
	return sdkmetric.NewPeriodicReader(exp), nil
}

// exporterAsked: OTEL_*_EXPORTER names otlp, or is unset while an
// endpoint is set; "none" (or any other exporter) turns it off.
func exporterAsked(v string, endpoint bool) bool {
	if v == "" {
		return endpoint
	}
	for _, e := range strings.Split(v, ",") {
		if strings.TrimSpace(strings.ToLower(e)) == "otlp" {
			return true
		}
	}
	return false
}

// protocolOf is OTEL_EXPORTER_OTLP_<SIGNAL>_PROTOCOL, else
// OTEL_EXPORTER_OTLP_PROTOCOL.
func protocolOf(getenv func(string) string, signal string) string {
	if p := getenv("OTEL_EXPORTER_OTLP_" + signal + "_PROTOCOL"); p != "" {
		return p
	}
	return getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
}

// endpointOf is the signal's endpoint URL from the command's environment
// (the exporters would read the process's): OTEL_EXPORTER_OTLP_<SIGNAL>_ENDPOINT
// as is, else OTEL_EXPORTER_OTLP_ENDPOINT with the signal's path appended
// over HTTP, as the specification says; "" when neither is set.
func endpointOf(getenv func(string) string, signal, path string, grpc bool) string {
	if u := getenv("OTEL_EXPORTER_OTLP_" + signal + "_ENDPOINT"); u != "" {
		return u
	}
	u := getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	if u == "" || grpc {
		return u
	}
	return strings.TrimRight(u, "/") + path
}

// otelShutdownTimeout bounds the flush at the end of a command.
const otelShutdownTimeout = 10 * time.Second
