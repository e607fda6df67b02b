package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/pipeline"
)

// inflight measures the maximum number of concurrent calls.
type inflight struct{ cur, max atomic.Int64 }

func (f *inflight) enter() {
	n := f.cur.Add(1)
	for {
		m := f.max.Load()
		if n <= m || f.max.CompareAndSwap(m, n) {
			return
		}
	}
}

func (f *inflight) leave() { f.cur.Add(-1) }

func TestMapOrderingConcurrencyErrorsProgress(t *testing.T) {
	const n = 40
	for _, conc := range []int{1, 3, 8} {
		for _, ordered := range []bool{true, false} {
			t.Run(fmt.Sprintf("concurrency=%d/ordered=%v", conc, ordered), func(t *testing.T) {
				defer goleak.VerifyNone(t)
				var fl inflight
				var progMu sync.Mutex
				var progs []pipeline.Progress
				fn := func(ctx context.Context, i int) (string, llm.Usage, error) {
					fl.enter()
					defer fl.leave()
					// Later items finish sooner, so unordered output is out of order.
					time.Sleep(time.Duration(1+(n-i)%7) * time.Millisecond)
					u := llm.Usage{PromptTokens: i, CompletionTokens: 1}
					if i%5 == 0 {
						return "", u, fmt.Errorf("item %d failed", i)
					}
					return fmt.Sprint("v", i), u, nil
				}
				inputs := make([]int, n)
				for i := range inputs {
					inputs[i] = i
				}
				items := pipeline.Map(context.Background(), pipeline.FromSlice(context.Background(), inputs), fn, pipeline.BatchOptions{
					Concurrency: conc,
					Ordered:     ordered,
					OnProgress: func(p pipeline.Progress) {
						progMu.Lock()
						progs = append(progs, p)
						progMu.Unlock()
					},
				})
				var order []int
				for it := range items {
					order = append(order, it.Index)
					if it.Index%5 == 0 {
						if it.Err == nil || it.Err.Error() != fmt.Sprintf("item %d failed", it.Index) {
							t.Errorf("item %d: err %v", it.Index, it.Err)
						}
					} else if it.Err != nil || it.Value != fmt.Sprint("v", it.Index) {
						t.Errorf("item %d = %q, %v", it.Index, it.Value, it.Err)
					}
				}
				sorted := slices.Sorted(slices.Values(order))
				if len(order) != n || !slices.Equal(sorted, inputs) {
					t.Fatalf("got indexes %v", order)
				}
				if ordered && !slices.Equal(order, inputs) {
					t.Errorf("ordered output out of order: %v", order)
				}
				if !ordered && conc > 1 && slices.Equal(order, inputs) {
					t.Errorf("unordered output came in input order, so items waited for each other")
				}
				if m := fl.max.Load(); m > int64(conc) || m < int64(conc) {
					t.Errorf("max in flight %d, want exactly the limit %d", m, conc)
				}
				if len(progs) != n {
					t.Fatalf("%d progress calls, want %d", len(progs), n)
				}
				for k, p := range progs {
					if p.Done != k+1 || p.InFlight > conc || p.InFlight < 0 {
						t.Errorf("progress %d = %+v", k, p)
					}
				}
				last := progs[n-1]
				wantPrompt := n * (n - 1) / 2
				if last.Failed != n/5 || last.Usage.PromptTokens != wantPrompt || last.Tokens != wantPrompt+n || last.Rate <= 0 || last.TokenRate <= 0 || last.InFlight != 0 {
					t.Errorf("final progress = %+v", last)
				}
			})
		}
	}
}

func TestMapPanicBecomesItemError(t *testing.T) {
	defer goleak.VerifyNone(t)
	items := pipeline.Collect(pipeline.Map(context.Background(), pipeline.FromSlice(context.Background(), []int{0, 1, 2}),
		func(ctx context.Context, i int) (int, llm.Usage, error) {
			if i == 1 {
				panic("handler bug")
			}
			return i * 10, llm.Usage{}, nil
		}, pipeline.BatchOptions{}))
	if len(items) != 3 || items[0].Value != 0 || items[2].Value != 20 {
		t.Fatalf("items = %+v", items)
	}
	var pe *pipeline.PanicError
	if !errors.As(items[1].Err, &pe) || pe.Value != "handler bug" || len(pe.Stack) == 0 {
		t.Fatalf("item 1 err = %v", items[1].Err)
	}
}

// Cancelling ctx mid-batch stops reading input, cancels running calls,
// closes the output and releases every goroutine; nothing is started after.
func TestMapCancelMidBatch(t *testing.T) {
	for _, ordered := range []bool{true, false} {
		t.Run(fmt.Sprint("ordered=", ordered), func(t *testing.T) {
			defer goleak.VerifyNone(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var started, sawCancel atomic.Int64
			fn := func(ctx context.Context, i int) (int, llm.Usage, error) {
				started.Add(1)
				if i < 5 {
					return i, llm.Usage{}, nil
				}
				<-ctx.Done()
				sawCancel.Add(1)
				return 0, llm.Usage{}, ctx.Err()
			}
			endless := func(yield func(int) bool) {
				for i := 0; yield(i); i++ {
				}
			}
			items := pipeline.Map(ctx, pipeline.FromSeq(ctx, endless), fn, pipeline.BatchOptions{Concurrency: 4, Ordered: ordered})
			got := 0
			for it := range items {
				if it.Err == nil {
					got++
				}
				if got == 5 {
					eventually(t, "4 calls blocked", func() bool { return started.Load() == 9 })
					cancel()
				}
			}
			if got != 5 {
				t.Errorf("%d successful items, want 5", got)
			}
			if s := started.Load(); s > 9+4 {
				t.Errorf("%d calls started after cancellation", s-9)
			}
			if sawCancel.Load() < 4 {
				t.Errorf("%d running calls saw the cancellation, want 4", sawCancel.Load())
			}
		})
	}
}

// Abandoning the consumer: the consumer stops reading and cancels ctx.
func TestMapAbandonedConsumer(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithCancel(context.Background())
	items := pipeline.Map(ctx, pipeline.FromSlice(ctx, make([]int, 1000)),
		func(ctx context.Context, i int) (int, llm.Usage, error) { return i, llm.Usage{}, nil },
		pipeline.BatchOptions{Concurrency: 2, Ordered: true})
	<-items
	cancel() // and never read again
}

func TestMapComposes(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx := context.Background()
	double := pipeline.Map(ctx, pipeline.FromSlice(ctx, []int{1, 2, 3, 4}),
		func(ctx context.Context, i int) (int, llm.Usage, error) { return 2 * i, llm.Usage{}, nil },
		pipeline.BatchOptions{Concurrency: 2})
	label := pipeline.Map(ctx, double,
		func(ctx context.Context, it pipeline.Item[int]) (string, llm.Usage, error) {
			return fmt.Sprintf("%d:%d", it.Index, it.Value), llm.Usage{}, it.Err
		}, pipeline.BatchOptions{Ordered: true})
	var got []string
	for it := range label {
		got = append(got, it.Value)
	}
	slices.Sort(got)
	if want := []string{"0:2", "1:4", "2:6", "3:8"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestBatchChat(t *testing.T) {
	defer goleak.VerifyNone(t)
	var fl inflight
	c := newFake(nil)
	c.chat = func(ctx context.Context, req *llm.ChatRequest) (*llm.ChatResult, error) {
		fl.enter()
		defer fl.leave()
		time.Sleep(2 * time.Millisecond)
		q := req.Messages[0].Content
		if q == "q3" {
			return nil, &llm.APIError{Provider: "fake", Status: 400}
		}
		return &llm.ChatResult{Content: "a" + q[1:], Usage: llm.Usage{PromptTokens: 2, CompletionTokens: 3}}, nil
	}
	reqs := make([]*llm.ChatRequest, 10)
	for i := range reqs {
		reqs[i] = &llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText(fmt.Sprint("q", i))}}
	}
	var last pipeline.Progress
	items := pipeline.Collect(pipeline.Batch(context.Background(), c, pipeline.FromSlice(context.Background(), reqs),
		pipeline.BatchOptions{Concurrency: 3, OnProgress: func(p pipeline.Progress) { last = p }}))
	for i, it := range items {
		if i == 3 {
			var api *llm.APIError
			if !errors.As(it.Err, &api) {
				t.Errorf("item 3 err = %v", it.Err)
			}
			continue
		}
		if it.Err != nil || it.Value.Content != fmt.Sprint("a", i) {
			t.Errorf("item %d = %+v, %v", i, it.Value, it.Err)
		}
	}
	if last.Done != 10 || last.Failed != 1 || last.Tokens != 9*5 {
		t.Errorf("progress = %+v", last)
	}
	if fl.max.Load() != 3 {
		t.Errorf("max in flight %d, want 3", fl.max.Load())
	}
}
