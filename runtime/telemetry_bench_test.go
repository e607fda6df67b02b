package runtime

import (
	"context"
	"net/http"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/telemetry"
)

// BenchmarkMemCallRuntimeTelemetryOn is BenchmarkMemCallRuntime with the
// OpenTelemetry SDK on: every span sampled and handed to an exporter that
// drops it, every metric aggregated. The difference is the on-cost per
// call.
func BenchmarkMemCallRuntimeTelemetryOn(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sdktrace.NewSimpleSpanProcessor(tracetest.NewNoopExporter())))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer tp.Shutdown(context.Background())
	defer mp.Shutdown(context.Background())
	benchMemCall(b, WithTelemetry(telemetry.New(telemetry.WithTracerProvider(tp), telemetry.WithMeterProvider(mp))))
}

// BenchmarkMemStreamRuntimeTelemetryOn is BenchmarkMemStreamRuntime (1,000
// deltas per call) with the SDK on: per delta it should stay the same.
func BenchmarkMemStreamRuntimeTelemetryOn(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sdktrace.NewSimpleSpanProcessor(tracetest.NewNoopExporter())))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer tp.Shutdown(context.Background())
	defer mp.Shutdown(context.Background())
	hc := &http.Client{Transport: memTransport{memBody(benchDeltas)}}
	rt, err := New(WithProvider(memCfg()), WithClientOptions(providers.WithHTTPClient(hc)),
		WithTelemetry(telemetry.New(telemetry.WithTracerProvider(tp), telemetry.WithMeterProvider(mp))))
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close(context.Background())
	r := &llm.ChatRequest{Model: "openai/m", Messages: []llm.Message{llm.UserText("go")}}
	perDelta(b, func() {
		s, err := rt.Stream(context.Background(), r)
		drain(b, s, err)
	})
}
