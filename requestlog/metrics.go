package requestlog

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// registerMetrics reports the Logger's counts as OpenTelemetry
// observables on mp (the global provider when nil): the counter
// chorus.request_log.records with outcome written, dropped or
// write_error (failed inserts), and the gauge chorus.request_log.queued.
// With no SDK installed they cost nothing. It returns the unregistering
// function (Close calls it).
func (l *Logger) registerMetrics(mp metric.MeterProvider) func() {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter("github.com/chorusrt/chorus/requestlog")
	records, err1 := m.Int64ObservableCounter("chorus.request_log.records",
		metric.WithDescription("Request log records by outcome: written to the store, dropped (never written), write_error (failed inserts, retried)"))
	queued, err2 := m.Int64ObservableGauge("chorus.request_log.queued", metric.WithDescription("Request log records waiting to be written"))
	if err1 != nil || err2 != nil {
		return func() {}
	}
	written := metric.WithAttributes(attribute.String("outcome", "written"))
	dropped := metric.WithAttributes(attribute.String("outcome", "dropped"))
	failed := metric.WithAttributes(attribute.String("outcome", "write_error"))
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := l.Stats()
		o.ObserveInt64(records, s.Written, written)
		o.ObserveInt64(records, s.Dropped, dropped)
		o.ObserveInt64(records, s.WriteErrors, failed)
		o.ObserveInt64(queued, int64(s.Queued))
		return nil
	}, records, queued)
	if err != nil {
		return func() {}
	}
	return func() { _ = reg.Unregister() }
}
