package runtime

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/chorusrt/chorus/actors"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/telemetry"
)

// telRig is an in-memory OpenTelemetry SDK: spans in a recorder, metrics
// in a manual reader.
type telRig struct {
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	tel    *telemetry.Telemetry
}

func newTelRig(t *testing.T, opts ...telemetry.Option) *telRig {
	t.Helper()
	r := &telRig{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	t.Cleanup(func() { tp.Shutdown(context.Background()); mp.Shutdown(context.Background()) })
	r.tel = telemetry.New(append([]telemetry.Option{telemetry.WithTracerProvider(tp), telemetry.WithMeterProvider(mp)}, opts...)...)
	return r
}

func (r *telRig) ended() []sdktrace.ReadOnlySpan { return r.spans.Ended() }

func (r *telRig) metrics(t *testing.T) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return rm
}

func attrs(s sdktrace.ReadOnlySpan) map[string]attribute.Value {
	m := map[string]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value
	}
	return m
}

// histSum adds up the histogram name's points whose attributes include want.
func histSum(rm metricdata.ResourceMetrics, name string, want ...attribute.KeyValue) (count uint64, sumI int64, sumF float64, found bool) {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			found = true
			match := func(set attribute.Set) bool {
				for _, kv := range want {
					if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
						return false
					}
				}
				return true
			}
			switch d := m.Data.(type) {
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						count += p.Count
						sumI += p.Sum
					}
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						count += p.Count
						sumF += p.Sum
					}
				}
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						count++
						sumI += p.Value
					}
				}
			}
		}
	}
	return
}

func geminiCfg(srv *llmtest.Server) providers.Config {
	return providers.Config{ID: "gemini", Format: providers.FormatGemini, BaseURL: srv.GeminiBaseURL(), APIKey: key}
}

// TestTelemetryInferenceSpanPerFormat: one CLIENT span per call, never per
// delta, named and attributed by the GenAI conventions, with the usage the
// result reports (cached input included in input tokens), for each wire
// format, streamed and buffered; the GenAI metrics agree with it.
func TestTelemetryInferenceSpanPerFormat(t *testing.T) {
	usage := llm.Usage{PromptTokens: 11, CacheReadTokens: 5, CacheWriteTokens: 2, CompletionTokens: 9, ReasoningTokens: 3}
	for _, tc := range []struct {
		name, provider string
		cfg            func(*llmtest.Server) providers.Config
	}{
		{"openai", "openai", func(s *llmtest.Server) providers.Config { return openaiCfg(s, key) }},
		{"anthropic", "anthropic", anthropicCfg},
		{"gemini", "gcp.gemini", geminiCfg},
	} {
		for _, stream := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/stream=%v", tc.name, stream), func(t *testing.T) {
				srv := llmtest.NewServer()
				defer srv.Close()
				rig := newTelRig(t)
				cfg := tc.cfg(srv)
				rt := newRT(t, WithProvider(cfg), WithTelemetry(rig.tel))
				u := usage
				srv.Push(llmtest.Step{Reply: &llmtest.Reply{Deltas: []string{"one ", "two ", "three ", "four"}, Usage: &u}})
				temp := 0.25
				r := req(cfg.ID + "/model-x")
				r.Temperature, r.MaxTokens = &temp, 100
				var res *llm.ChatResult
				var err error
				if stream {
					var s *llm.Stream
					if s, err = rt.Stream(ctxT(t, 5*time.Second), r); err == nil {
						res, err = s.Result()
					}
				} else {
					res, err = rt.Chat(ctxT(t, 5*time.Second), r)
				}
				if err != nil {
					t.Fatal(err)
				}
				spans := rig.ended()
				if len(spans) != 1 {
					t.Fatalf("%d spans, want one per call", len(spans))
				}
				sp := spans[0]
				a := attrs(sp)
				if sp.Name() != "chat model-x" || sp.SpanKind() != trace.SpanKindClient {
					t.Fatalf("span %q kind %v", sp.Name(), sp.SpanKind())
				}
				host, port := serverOf(cfg.BaseURL)
				want := map[string]any{
					"gen_ai.operation.name":                    "chat",
					"gen_ai.provider.name":                     tc.provider,
					"gen_ai.request.model":                     "model-x",
					"gen_ai.request.stream":                    stream,
					"gen_ai.request.temperature":               0.25,
					"gen_ai.request.max_tokens":                int64(100),
					"gen_ai.usage.input_tokens":                int64(res.Usage.InputTokens()),
					"gen_ai.usage.output_tokens":               int64(res.Usage.CompletionTokens),
					"gen_ai.usage.cache_read.input_tokens":     int64(res.Usage.CacheReadTokens),
					"gen_ai.usage.cache_creation.input_tokens": int64(res.Usage.CacheWriteTokens),
					"gen_ai.usage.reasoning.output_tokens":     int64(res.Usage.ReasoningTokens),
					"gen_ai.response.id":                       res.ID,
					"server.address":                           host,
					"server.port":                              int64(port),
					"chorus.credential.fingerprint":            fingerprint(key),
					"chorus.attempts":                          int64(1),
				}
				for k, v := range want {
					got, ok := a[k]
					if !ok || got.AsInterface() != v {
						t.Errorf("%s = %v (present %v), want %v", k, got.AsInterface(), ok, v)
					}
				}
				if res.Usage.InputTokens() <= res.Usage.PromptTokens || res.ID == "" {
					t.Errorf("the reply should carry cached input and an id: %+v %q", res.Usage, res.ID)
				}
				if fr := a["gen_ai.response.finish_reasons"].AsStringSlice(); len(fr) != 1 || fr[0] != "stop" {
					t.Errorf("finish reasons %v", fr)
				}
				if _, ok := a["gen_ai.response.model"]; !ok {
					t.Error("no gen_ai.response.model")
				}
				if ttfc, ok := a["gen_ai.response.time_to_first_chunk"]; stream != ok || (ok && ttfc.AsFloat64() <= 0) {
					t.Errorf("time_to_first_chunk %v present %v on stream=%v", ttfc.AsFloat64(), ok, stream)
				}
				for k := range a {
					if k == "gen_ai.input.messages" || k == "gen_ai.output.messages" || k == "error.type" {
						t.Errorf("unexpected %s", k)
					}
				}
				rm := rig.metrics(t)
				if n, sum, _, _ := histSum(rm, "gen_ai.client.token.usage", attribute.String("gen_ai.token.type", "input"), attribute.String("gen_ai.provider.name", tc.provider)); n != 1 || sum != int64(res.Usage.InputTokens()) {
					t.Errorf("input token usage: %d points, sum %d", n, sum)
				}
				if n, sum, _, _ := histSum(rm, "gen_ai.client.token.usage", attribute.String("gen_ai.token.type", "output")); n != 1 || sum != int64(res.Usage.CompletionTokens) {
					t.Errorf("output token usage: %d points, sum %d", n, sum)
				}
				if n, _, _, _ := histSum(rm, "gen_ai.client.operation.duration", attribute.String("gen_ai.request.model", "model-x")); n != 1 {
					t.Errorf("duration points %d", n)
				}
				n, _, _, _ := histSum(rm, "gen_ai.client.operation.time_to_first_chunk")
				if stream != (n == 1) {
					t.Errorf("ttfc points %d on stream=%v", n, stream)
				}
			})
		}
	}
}

// TestTelemetryFailedCall: a failed call's span has error.type and an
// error status; the duration metric carries error.type too.
func TestTelemetryFailedCall(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rig := newTelRig(t)
	rt := newRT(t, WithProvider(openaiCfg(srv, key)), WithTelemetry(rig.tel))
	srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 400, Message: "bad request"}})
	if _, err := rt.Chat(ctxT(t, 5*time.Second), req("openai/m")); err == nil {
		t.Fatal("no error")
	}
	spans := rig.ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	a := attrs(spans[0])
	if a["error.type"].AsString() != "client" || spans[0].Status().Code != codes.Error {
		t.Fatalf("error.type %q status %v", a["error.type"].AsString(), spans[0].Status())
	}
	if n, _, _, _ := histSum(rig.metrics(t), "gen_ai.client.operation.duration", attribute.String("error.type", "client")); n != 1 {
		t.Fatalf("duration with error.type: %d points", n)
	}
}

// TestTelemetryRetriedCall: each attempt is an event with its status,
// error class and the wait before the next; the span counts them.
func TestTelemetryRetriedCall(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rig := newTelRig(t)
	rt := newRT(t, WithProvider(openaiCfg(srv, key)), WithTelemetry(rig.tel))
	srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 500}}, llmtest.Step{Reply: &llmtest.Reply{Text: "ok"}})
	s, err := rt.Stream(ctxT(t, 5*time.Second), req("openai/m"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Result(); err != nil {
		t.Fatal(err)
	}
	spans := rig.ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	var got []string
	for _, ev := range spans[0].Events() {
		if ev.Name != telemetry.EventAttempt {
			continue
		}
		m := map[string]attribute.Value{}
		for _, kv := range ev.Attributes {
			m[string(kv.Key)] = kv.Value
		}
		got = append(got, fmt.Sprintf("%d/%d/%s/wait=%v", m["chorus.attempt"].AsInt64(), m["http.response.status_code"].AsInt64(), m["chorus.error.class"].AsString(), m["chorus.retry.wait"].AsFloat64() > 0))
	}
	if strings.Join(got, " ") != "1/500/server/wait=true 2/200//wait=false" {
		t.Fatalf("attempt events %v", got)
	}
	if a := attrs(spans[0]); a["chorus.attempts"].AsInt64() != 2 {
		t.Fatalf("chorus.attempts %v", a["chorus.attempts"].AsInt64())
	}
	if _, sum, _, _ := histSum(rig.metrics(t), telemetry.MetricRetries); sum != 1 {
		t.Fatalf("retries metric %d", sum)
	}
}

// TestTelemetryFallback: an alias whose first model fails over to the
// second is one span, named for the model that served, with the alias, the
// step and a fallback event.
func TestTelemetryFallback(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rig := newTelRig(t)
	rt := newRT(t, WithProvider(openaiCfg(srv, key)), WithProvider(anthropicCfg(srv)), WithAlias("best", "openai/gpt-a", "anthropic/claude-b"), WithTelemetry(rig.tel))
	fail := llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 503}}
	srv.Push(fail, fail, fail, llmtest.Step{Reply: &llmtest.Reply{Text: "served by b"}})
	res, err := rt.Chat(ctxT(t, 5*time.Second), req("best"))
	if err != nil || res.Content != "served by b" {
		t.Fatalf("%v %v", res, err)
	}
	spans := rig.ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	a := attrs(spans[0])
	if spans[0].Name() != "chat claude-b" || a["gen_ai.provider.name"].AsString() != "anthropic" || a["chorus.alias"].AsString() != "best" || a["chorus.fallback.step"].AsInt64() != 1 {
		t.Fatalf("span %q %v", spans[0].Name(), a)
	}
	var fallback bool
	for _, ev := range spans[0].Events() {
		fallback = fallback || ev.Name == telemetry.EventFallback
	}
	if !fallback {
		t.Fatal("no fallback event")
	}
	if _, sum, _, _ := histSum(rig.metrics(t), telemetry.MetricFallbacks); sum != 1 {
		t.Fatalf("fallbacks metric %d", sum)
	}
}

// TestTelemetryContentOnlyWhenAsked: message content is on the span only
// with telemetry.WithContent.
func TestTelemetryContentOnlyWhenAsked(t *testing.T) {
	for _, on := range []bool{false, true} {
		srv := llmtest.NewServer()
		var opts []telemetry.Option
		if on {
			opts = append(opts, telemetry.WithContent())
		}
		rig := newTelRig(t, opts...)
		rt := newRT(t, WithProvider(openaiCfg(srv, key)), WithTelemetry(rig.tel))
		srv.Push(llmtest.Step{Reply: &llmtest.Reply{Text: "the-answer-text"}})
		r := &llm.ChatRequest{Model: "openai/m", Messages: []llm.Message{llm.UserText("the-question-text")}}
		if _, err := rt.Chat(ctxT(t, 5*time.Second), r); err != nil {
			t.Fatal(err)
		}
		dump := dumpTelemetry(t, rig)
		for _, s := range []string{"the-question-text", "the-answer-text"} {
			if strings.Contains(dump, s) != on {
				t.Errorf("content %q recorded=%v with WithContent=%v", s, !on, on)
			}
		}
		if on {
			a := attrs(rig.ended()[0])
			var in []map[string]any
			if err := json.Unmarshal([]byte(a["gen_ai.input.messages"].AsString()), &in); err != nil || in[0]["role"] != "user" {
				t.Errorf("input messages %s: %v", a["gen_ai.input.messages"].AsString(), err)
			}
		}
		rt.Close(context.Background())
		srv.Close()
	}
}

// dumpTelemetry renders every span (name, attributes, events, status) and
// every metric point of rig as text.
func dumpTelemetry(t *testing.T, rig *telRig) string {
	var b strings.Builder
	for _, s := range rig.ended() {
		fmt.Fprintf(&b, "%s %v %v %v\n", s.Name(), s.Attributes(), s.Events(), s.Status())
	}
	j, _ := json.Marshal(rig.metrics(t))
	b.Write(j)
	return b.String()
}

// TestSecretsNeverLeak_Telemetry extends the secrets test to telemetry:
// calls of every format against faults that echo the key (and the key's
// tail), and a rate limit; no span, event, metric or log line of the run
// holds the key, its last 8 characters or the message content.
func TestSecretsNeverLeak_Telemetry(t *testing.T) {
	var logs strings.Builder
	logger := slog.New(telemetry.LogHandler(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	rig := newTelRig(t)
	srv := llmtest.NewServer()
	defer srv.Close()
	cfgs := []providers.Config{openaiCfg(srv, key), anthropicCfg(srv), geminiCfg(srv)}
	var opts []Option
	for _, c := range cfgs {
		opts = append(opts, WithProvider(c))
	}
	rt := newRT(t, append(opts, WithTelemetry(rig.tel), WithLogger(logger))...)
	for _, c := range cfgs {
		for _, f := range []*llmtest.Fault{
			{Kind: llmtest.FaultStatus, Status: 401, Message: "invalid key " + key},
			{Kind: llmtest.FaultStatus, Status: 400, Message: "bad " + key[len(key)-8:]},
			{Kind: llmtest.FaultStatus, Status: 429, RetryAfter: 10 * time.Millisecond, Message: "slow down " + key},
		} {
			srv.Push(llmtest.Step{Fault: f})
			r := &llm.ChatRequest{Model: c.ID + "/m", Messages: []llm.Message{llm.UserText("secret-question")}}
			if s, err := rt.Stream(ctxT(t, 5*time.Second), r); err == nil {
				s.Result()
			}
		}
		srv.Push(llmtest.Step{Reply: &llmtest.Reply{Text: "secret-answer"}})
		if _, err := rt.Chat(ctxT(t, 5*time.Second), &llm.ChatRequest{Model: c.ID + "/m", Messages: []llm.Message{llm.UserText("secret-question")}}); err != nil {
			t.Fatal(err)
		}
	}
	all := dumpTelemetry(t, rig) + logs.String()
	if len(rig.ended()) != 12 {
		t.Fatalf("%d spans, want 12", len(rig.ended()))
	}
	for _, s := range []string{key, key[len(key)-8:], "secret-question", "secret-answer"} {
		if strings.Contains(all, s) {
			t.Errorf("%q in telemetry", s)
		}
	}
}

// TestTelemetryCredentialGauges: each credential's queue, in-flight count
// and the limits its provider reported are gauges named by the
// credential's fingerprint; a limit never reported is not a gauge value.
func TestTelemetryCredentialGauges(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rig := newTelRig(t)
	rt := newRT(t, WithProvider(openaiCfg(srv, key)), WithTelemetry(rig.tel))
	srv.Push(llmtest.Step{Reply: &llmtest.Reply{Text: "ok", Header: map[string]string{
		"x-ratelimit-limit-requests": "100", "x-ratelimit-remaining-requests": "99", "x-ratelimit-reset-requests": "1s",
	}}})
	if _, err := rt.Chat(ctxT(t, 5*time.Second), req("openai/m")); err != nil {
		t.Fatal(err)
	}
	rm := rig.metrics(t)
	gauge := func(name string) (int64, bool) {
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if m.Name != name {
					continue
				}
				for _, p := range m.Data.(metricdata.Gauge[int64]).DataPoints {
					if v, ok := p.Attributes.Value("chorus.credential.fingerprint"); ok && v.AsString() == fingerprint(key) {
						return p.Value, true
					}
				}
			}
		}
		return 0, false
	}
	if v, ok := gauge(telemetry.MetricLimitRequests); !ok || v != 100 {
		t.Errorf("limit gauge %d %v", v, ok)
	}
	if v, ok := gauge(telemetry.MetricQueueLength); !ok || v != 0 {
		t.Errorf("queue gauge %d %v", v, ok)
	}
	if _, ok := gauge(telemetry.MetricLimitTokens); ok {
		t.Error("a token limit nobody reported")
	}
	if _, ok := gauge(telemetry.MetricRemainingReqs); !ok {
		t.Error("no remaining-requests gauge")
	}
}

// TestTelemetryEmbeddingsSpan: an embeddings call is one CLIENT span
// "embeddings {model}" with the conventions' operation name, provider,
// model and input tokens, no gen_ai.request.stream (a chat attribute), and
// its token usage metric; a failed one carries error.type.
func TestTelemetryEmbeddingsSpan(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rig := newTelRig(t)
	rt := newRT(t, WithProvider(openaiCfg(srv, key)), WithTelemetry(rig.tel))
	res, err := rt.Embed(ctxT(t, 5*time.Second), &llm.EmbedRequest{Model: "openai/embed-x", Inputs: []string{"one text", "another text"}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 400, Message: "bad input"}})
	if _, err := rt.Embed(ctxT(t, 5*time.Second), &llm.EmbedRequest{Model: "openai/embed-x", Inputs: []string{"x"}}); err == nil {
		t.Fatal("the fault did not fail the call")
	}
	spans := rig.ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	ok, bad := spans[0], spans[1]
	a := attrs(ok)
	if ok.Name() != "embeddings embed-x" || ok.SpanKind() != trace.SpanKindClient {
		t.Fatalf("span %q kind %v", ok.Name(), ok.SpanKind())
	}
	if a["gen_ai.operation.name"].AsString() != "embeddings" || a["gen_ai.provider.name"].AsString() != "openai" || a["gen_ai.request.model"].AsString() != "embed-x" ||
		res.Usage.InputTokens() == 0 || a["gen_ai.usage.input_tokens"].AsInt64() != int64(res.Usage.InputTokens()) {
		t.Errorf("attributes %v (usage %+v)", ok.Attributes(), res.Usage)
	}
	if _, has := a["gen_ai.request.stream"]; has {
		t.Error("an embeddings span has gen_ai.request.stream")
	}
	if _, has := a["error.type"]; has {
		t.Error("a succeeded call has error.type")
	}
	if attrs(bad)["error.type"].AsString() != "client" || bad.Status().Code != codes.Error {
		t.Errorf("failed call: %v %v", bad.Attributes(), bad.Status())
	}
	if n, sum, _, _ := histSum(rig.metrics(t), "gen_ai.client.token.usage", attribute.String("gen_ai.operation.name", "embeddings"), attribute.String("gen_ai.token.type", "input")); n != 1 || sum != int64(res.Usage.InputTokens()) {
		t.Errorf("input token usage: %d points, sum %d", n, sum)
	}
}

// cooldownEvents returns the span's chorus.cooldown events' refused flags.
func cooldownEvents(sp sdktrace.ReadOnlySpan) []bool {
	var out []bool
	for _, ev := range sp.Events() {
		if ev.Name != telemetry.EventCooldown {
			continue
		}
		refused := false
		for _, kv := range ev.Attributes {
			if kv.Key == telemetry.AttrCooldownRefused {
				refused = kv.Value.AsBool()
			}
		}
		out = append(out, refused)
	}
	return out
}

// TestTelemetryCooldownWait: a call that meets a 429 records the cooldown
// it caused; its next placement waits for the cooldown to end, and the
// span tells that part of the admission wait (chorus.admission.cooldown_wait)
// from the rest. A call whose deadline the cooldown outlasts is refused
// admission: the refusal is a chorus.cooldown event (refused=true) on its
// span, and both count in chorus.cooldowns.
func TestTelemetryCooldownWait(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rig := newTelRig(t)
	rt := newRT(t, WithProvider(openaiCfg(srv, key)), WithTelemetry(rig.tel))
	const cool = 400 * time.Millisecond
	srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 429, RetryAfter: cool}}, llmtest.Step{Reply: &llmtest.Reply{Text: "ok"}})
	if _, err := rt.Chat(ctxT(t, 10*time.Second), req("openai/m")); err != nil {
		t.Fatal(err)
	}
	spans := rig.ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	a := attrs(spans[0])
	wait, cw := a["chorus.admission.wait"].AsFloat64(), a["chorus.admission.cooldown_wait"].AsFloat64()
	if cw < (cool/2).Seconds() || cw > wait || wait > 5 {
		t.Errorf("admission wait %.3fs, of it cooling down %.3fs; want most of the %v cooldown", wait, cw, cool)
	}
	if got := cooldownEvents(spans[0]); len(got) != 1 || got[0] {
		t.Errorf("cooldown events (refused?) %v, want one caused by the 429", got)
	}

	// A cooldown longer than the call's deadline: the next call is refused.
	srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 429, RetryAfter: 30 * time.Second}})
	if _, err := rt.Chat(ctxT(t, 3*time.Second), req("openai/m")); err == nil {
		t.Fatal("a 30s cooldown did not fail a 3s call")
	}
	spans = rig.ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans", len(spans))
	}
	if got := cooldownEvents(spans[1]); len(got) != 2 || got[0] || !got[1] {
		t.Errorf("cooldown events (refused?) %v, want the 429's then the refusal", got)
	}
	if _, sum, _, _ := histSum(rig.metrics(t), telemetry.MetricCooldowns, attribute.Bool("chorus.cooldown.refused", true)); sum != 1 {
		t.Errorf("refused cooldowns metric %d, want 1", sum)
	}
	if _, sum, _, _ := histSum(rig.metrics(t), telemetry.MetricCooldowns); sum != 3 {
		t.Errorf("cooldowns metric %d, want 3", sum)
	}
}

// TestTelemetrySharedLimitGauges: keys declared to share one limit are
// paced by one budget, so its queue, in-flight count and limits are one
// series (chorus.credential.shared=true), not one copy per key that a sum
// over credentials would count twice; a key of its own keeps its series.
func TestTelemetrySharedLimitGauges(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rig := newTelRig(t)
	rt := newRT(t, WithProvider(openaiCfg(srv, "k-a")), WithProvider(openaiCfg(srv, "k-b")), WithProvider(anthropicCfg(srv)),
		WithLimits("openai", Limits{Shared: true}), WithTelemetry(rig.tel))
	srv.Push(llmtest.Step{Reply: &llmtest.Reply{Text: "ok", Header: map[string]string{
		"x-ratelimit-limit-requests": "100", "x-ratelimit-remaining-requests": "99", "x-ratelimit-reset-requests": "1s",
	}}})
	if _, err := rt.Chat(ctxT(t, 5*time.Second), req("openai/m")); err != nil {
		t.Fatal(err)
	}
	rm := rig.metrics(t)
	for _, name := range []string{telemetry.MetricQueueLength, telemetry.MetricInFlight, telemetry.MetricLimitRequests} {
		var series []string
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if m.Name != name {
					continue
				}
				for _, p := range m.Data.(metricdata.Gauge[int64]).DataPoints {
					prov, _ := p.Attributes.Value("gen_ai.provider.name")
					shared, _ := p.Attributes.Value(telemetry.AttrCredentialShared)
					series = append(series, fmt.Sprintf("%s/shared=%v", prov.AsString(), shared.AsBool()))
				}
			}
		}
		sort.Strings(series)
		want := "anthropic/shared=false openai/shared=true"
		if name == telemetry.MetricLimitRequests {
			want = "openai/shared=true" // anthropic never reported one
		}
		if got := strings.Join(series, " "); got != want {
			t.Errorf("%s: series %q, want %q", name, got, want)
		}
	}
}

// TestTelemetryQueuedAhead: a call's span says how many requests waited
// ahead of it in its credential's queue when it asked
// (chorus.admission.queued_ahead), and how long it waited behind them
// and then at the queue's head for the pacer (chorus.admission.queue_wait,
// pacing_wait): with one request at a time, the second call waits at the
// head for the first one in flight with nobody queued ahead, the third
// behind the second, then at the head.
func TestTelemetryQueuedAhead(t *testing.T) {
	srv := llmtest.NewServer(llmtest.WithLatency(300*time.Millisecond, 0))
	defer srv.Close()
	rig := newTelRig(t)
	rt := newRT(t, WithProvider(openaiCfg(srv, key)), WithLimits("openai", Limits{MaxConcurrency: 1}), WithTelemetry(rig.tel))
	ref := rt.groups["openai"].creds[0].ref
	var wg sync.WaitGroup
	call := func() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := rt.Chat(ctxT(t, 10*time.Second), req("openai/m")); err != nil {
				t.Error(err)
			}
		}()
	}
	waitFor := func(what string, ok func(q, f int) bool) {
		deadline := time.Now().Add(5 * time.Second)
		for {
			q, f, _ := ref.Load()
			if ok(q, f) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("never %s (queued %d, in flight %d)", what, q, f)
			}
			time.Sleep(time.Millisecond)
		}
	}
	call()
	waitFor("one in flight", func(q, f int) bool { return f == 1 })
	call()
	waitFor("one queued", func(q, f int) bool { return q == 1 })
	call()
	wg.Wait()
	var ahead []int64
	type waits struct{ total, queue, pacing float64 }
	var ws []waits
	for _, sp := range rig.ended() {
		a := attrs(sp)
		v, ok := a["chorus.admission.queued_ahead"]
		if !ok {
			t.Fatalf("span without chorus.admission.queued_ahead: %v", sp.Attributes())
		}
		ahead = append(ahead, v.AsInt64())
		if _, ok := a["chorus.admission.pacing_wait"]; !ok {
			t.Fatalf("span without chorus.admission.pacing_wait: %v", sp.Attributes())
		}
		ws = append(ws, waits{a["chorus.admission.wait"].AsFloat64(), a["chorus.admission.queue_wait"].AsFloat64(), a["chorus.admission.pacing_wait"].AsFloat64()})
	}
	slices.Sort(ahead)
	if fmt.Sprint(ahead) != "[0 0 1]" {
		t.Fatalf("queued ahead %v, want [0 0 1]", ahead)
	}
	// By admission wait: the first call waited for nothing, the second at
	// the queue's head for the first (the pacer's concurrency of one), the
	// third behind the second, then at the head for it.
	slices.SortFunc(ws, func(x, y waits) int { return cmp.Compare(x.total, y.total) })
	first, second, third := ws[0], ws[1], ws[2]
	if first.queue != 0 || first.pacing != 0 || second.queue > 0.1 || second.pacing < 0.15 || third.queue < 0.15 || third.pacing < 0.15 ||
		second.queue+second.pacing > second.total+0.001 || third.queue+third.pacing > third.total+0.001 {
		t.Fatalf("admission waits (total, queue, pacing) %+v", ws)
	}
}

// remoteLike is an Admitter whose queue this process does not see (as a
// cluster's budget owner on another node): its Load reports none queued.
type remoteLike struct{ actors.Admitter }

func (r remoteLike) Load() (int, int, time.Time) {
	_, f, cd := r.Admitter.Load()
	return 0, f, cd
}

// TestTelemetryQueueUnknownNotGuessed: with an admitter that does not see
// its credential's queue, a call's span has no chorus.admission.queued_ahead
// and no queue-length gauge is reported for it (a zero would be a guess);
// its in-flight gauge and admission wait still are.
func TestTelemetryQueueUnknownNotGuessed(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	sys := actors.NewSystem(nil)
	defer sys.Release()
	budget := func(c Credential) (actors.Admitter, error) {
		return remoteLike{actors.Spawn(sys, actors.NewCredentialState(c.Provider, c.Index, c.Limits, c.QueueSize))}, nil
	}
	rig := newTelRig(t)
	rt := newRT(t, WithProvider(openaiCfg(srv, key)), WithSharedBudget(budget), WithTelemetry(rig.tel))
	if _, err := rt.Chat(ctxT(t, 5*time.Second), req("openai/m")); err != nil {
		t.Fatal(err)
	}
	a := attrs(rig.ended()[0])
	if _, ok := a["chorus.admission.queued_ahead"]; ok {
		t.Error("chorus.admission.queued_ahead recorded for a queue this process does not see")
	}
	if _, ok := a["chorus.admission.wait"]; !ok {
		t.Error("no chorus.admission.wait")
	}
	rm := rig.metrics(t)
	points := func(name string) int {
		n := 0
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if m.Name == name {
					n += len(m.Data.(metricdata.Gauge[int64]).DataPoints)
				}
			}
		}
		return n
	}
	if q, f := points(telemetry.MetricQueueLength), points(telemetry.MetricInFlight); q != 0 || f != 1 {
		t.Errorf("queue-length points %d (want 0), in-flight points %d (want 1)", q, f)
	}
}
