package runtime

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
)

const benchDeltas = 1000

func benchServer(b *testing.B) *llmtest.Server {
	deltas := make([]string, benchDeltas)
	for i := range deltas {
		deltas[i] = "tok "
	}
	return llmtest.NewServer(llmtest.WithDefault(llmtest.Reply{Deltas: deltas}))
}

func drain(b *testing.B, s *llm.Stream, err error) {
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for ev := range s.Events() {
		if ev.Type == llm.EventText {
			n++
		}
	}
	if _, err := s.Result(); err != nil || n != benchDeltas {
		b.Fatalf("%d deltas: %v", n, err)
	}
}

func perDelta(b *testing.B, run func()) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for b.Loop() {
		run()
		n++
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*benchDeltas), "ns/delta")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(n*benchDeltas), "allocs/delta")
}

// BenchmarkStreamDirect and BenchmarkStreamRuntime stream the same 1,000
// deltas from the same loopback server, through a bare providers.Client and
// through the runtime's actors: the difference is the runtime's cost per
// delta (target: under 100 ns).
func BenchmarkStreamDirect(b *testing.B) {
	srv := benchServer(b)
	defer srv.Close()
	c, err := providers.New(providers.Config{ID: "openai", Format: providers.FormatOpenAI, BaseURL: srv.OpenAIBaseURL(), APIKey: "k"})
	if err != nil {
		b.Fatal(err)
	}
	defer c.CloseIdleConnections()
	r := &llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("go")}}
	perDelta(b, func() {
		s, err := c.Stream(context.Background(), r)
		drain(b, s, err)
	})
}

func BenchmarkStreamRuntime(b *testing.B) {
	srv := benchServer(b)
	defer srv.Close()
	rt, err := New(WithProvider(providers.Config{ID: "openai", Format: providers.FormatOpenAI, BaseURL: srv.OpenAIBaseURL(), APIKey: "k"}))
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

// BenchmarkAdmission is the control-plane cost of one call: admission by
// the credential actor and the report at its end (target: under 20 µs).
func BenchmarkAdmission(b *testing.B) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rt, err := New(WithProvider(providers.Config{ID: "openai", Format: providers.FormatOpenAI, BaseURL: srv.OpenAIBaseURL(), APIKey: "k"}))
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close(context.Background())
	c := rt.groups["openai"].creds[0]
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		seq, err := c.ref.Admit(ctx, 10)
		if err != nil {
			b.Fatal(err)
		}
		c.ref.Finish(finished(seq, outcome{}))
	}
}

// BenchmarkPick is the cost of choosing a credential among a provider's
// keys, per call placed: by count when no key knows its request limit,
// by outlook (each key's budget read under its lock) when every one does.
func BenchmarkPick(b *testing.B) {
	srv := llmtest.NewServer()
	defer srv.Close()
	for _, keys := range []int{2, 4} {
		for _, known := range []bool{false, true} {
			name := fmt.Sprintf("keys=%d/limits=%s", keys, map[bool]string{false: "unknown", true: "known"}[known])
			b.Run(name, func(b *testing.B) {
				var opts []Option
				for i := range keys {
					opts = append(opts, WithProvider(providers.Config{ID: "openai", Format: providers.FormatOpenAI, BaseURL: srv.OpenAIBaseURL(), APIKey: providers.Secret(fmt.Sprintf("k%d", i))}))
				}
				if known {
					opts = append(opts, WithLimits("openai", Limits{RequestsPerMinute: 1 << 20}))
				}
				rt, err := New(opts...)
				if err != nil {
					b.Fatal(err)
				}
				defer rt.Close(context.Background())
				g := rt.groups["openai"]
				ctx := context.Background()
				for _, c := range g.creds { // one call each: their budgets publish what they know
					seq, err := c.ref.Admit(ctx, 10)
					if err != nil {
						b.Fatal(err)
					}
					c.ref.Finish(finished(seq, outcome{}))
				}
				if c := g.pickByOutlook(0); (c != nil) != known {
					b.Fatalf("placed by outlook: %v, want %v", c != nil, known)
				}
				b.ReportAllocs()
				for b.Loop() {
					g.pick(time.Now())
				}
			})
		}
	}
}
