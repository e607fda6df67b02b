package requestlog_test

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/chorusrt/chorus/requestlog"
)

// TestLoggerMetrics: what overflowed is a metric too
// (chorus.request_log.records{outcome=dropped}), equal to Stats.Dropped.
func TestLoggerMetrics(t *testing.T) {
	rd := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(rd))
	defer mp.Shutdown(context.Background())
	inner := openSQLite(t)
	defer inner.Close()
	fs := &faultyStore{Store: nopClose{inner}}
	fs.block()
	lg := requestlog.New(fs, requestlog.Options{Queue: 10, Batch: 5, MeterProvider: mp})
	for i := range 100 {
		lg.Log(sample(i))
	}
	var rm metricdata.ResourceMetrics
	if err := rd.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if s, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "chorus.request_log.records" {
				for _, dp := range s.DataPoints {
					v, _ := dp.Attributes.Value("outcome")
					got[v.AsString()] = dp.Value
				}
			}
		}
	}
	s := lg.Stats()
	if s.Dropped < 85 || got["dropped"] != s.Dropped || got["written"] != 0 {
		t.Fatalf("metrics %v, stats %+v", got, s)
	}
	fs.release()
	if err := lg.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
