package pipeline_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chorusrt/chorus/pipeline"
)

// BenchmarkFanOutTTFE measures the fan-out's time-to-first-event overhead
// over a single stream of the same fake client: each iteration times one
// single stream and one fan-out (1, 2 or 4 models; merged view or branch 0)
// from the call to the first event in the caller's hand, so machine noise
// hits both alike. Every model answers at once. It reports both times and
// their difference, ns-overhead.
func BenchmarkFanOutTTFE(b *testing.B) {
	specs := map[string]spec{}
	models := make([]string, 4)
	for i := range models {
		models[i] = fmt.Sprint("m", i)
		specs[models[i]] = spec{deltas: []string{"hello"}}
	}
	ctx := context.Background()
	c := newFake(specs)
	c.buffer = 64
	single := func() time.Duration {
		start := time.Now()
		req := userReq("hi")
		req.Model = "m0"
		s, err := c.Stream(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		<-s.Events()
		d := time.Since(start)
		s.Close()
		return d
	}
	for _, n := range []int{1, 2, 4} {
		for _, face := range []string{"merged", "branch"} {
			b.Run(fmt.Sprintf("models=%d/%s", n, face), func(b *testing.B) {
				var base, fanned time.Duration
				for b.Loop() {
					base += single()
					start := time.Now()
					fan := pipeline.FanOut(ctx, c, userReq("hi"), models[:n]...)
					if face == "merged" {
						<-fan.Events()
					} else {
						<-fan.Branch(0)
					}
					fanned += time.Since(start)
					fan.Close()
				}
				per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) }
				b.ReportMetric(per(base), "ns/single-first-event")
				b.ReportMetric(per(fanned), "ns/fan-first-event")
				b.ReportMetric(per(fanned-base), "ns-overhead")
			})
		}
	}
}

// BenchmarkFanOutPerEvent measures the cost per event of reading a
// 512-event answer through a single stream, the merged view and a branch.
func BenchmarkFanOutPerEvent(b *testing.B) {
	const n = 512
	c := newFake(map[string]spec{"m": {deltas: words("w", n)}})
	c.buffer = 64
	ctx := context.Background()
	req := userReq("hi")
	req.Model = "m"
	for _, face := range []string{"single", "merged", "branch"} {
		b.Run(face, func(b *testing.B) {
			for b.Loop() {
				switch face {
				case "single":
					s, _ := c.Stream(ctx, req)
					for range s.Events() {
					}
				case "merged":
					fan := pipeline.FanOut(ctx, c, req, "m")
					for range fan.Events() {
					}
				case "branch":
					fan := pipeline.FanOut(ctx, c, req, "m")
					for range fan.Branch(0) {
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*(n+2)), "ns/event")
		})
	}
}
