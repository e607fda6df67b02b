//go:build unix

package pipeline_test

import (
	"context"
	"github.com/chorusrt/chorus/internal/testkit/cputime"
	"testing"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/pipeline"
)

// BenchmarkMapOverhead is Map's own cost per item: 2,000 items through
// a function that does nothing, fed by a producer goroutine as the bench's
// batch scenario feeds pipeline.Batch, at the scenario's concurrency (256)
// and the default (8). cpu-ns/item counts every goroutine of the process.
func BenchmarkMapOverhead(b *testing.B) {
	const items = 2000
	for _, conc := range []int{8, 256} {
		for _, ordered := range []bool{false, true} {
			name := "conc=" + itoa(conc)
			if ordered {
				name += "/ordered"
			}
			b.Run(name, func(b *testing.B) {
				ctx := context.Background()
				fn := func(_ context.Context, v int) (int, llm.Usage, error) { return v, llm.Usage{}, nil }
				b.ReportAllocs()
				cpu0 := cputime.Process()
				for b.Loop() {
					in := make(chan int)
					go func() {
						defer close(in)
						for i := range items {
							in <- i
						}
					}()
					n := 0
					for range pipeline.Map(ctx, in, fn, pipeline.BatchOptions{Concurrency: conc, Ordered: ordered}) {
						n++
					}
					if n != items {
						b.Fatalf("%d items", n)
					}
				}
				b.ReportMetric(float64((cputime.Process()-cpu0).Nanoseconds())/float64(b.N*items), "cpu-ns/item")
			})
		}
	}
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
