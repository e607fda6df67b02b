package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/pipeline"
)

// vecOf is the fake embedding of "t<i>": {i, len}.
func vecOf(s string) []float32 {
	i, _ := strconv.Atoi(strings.TrimPrefix(s, "t"))
	return []float32{float32(i), float32(len(s))}
}

func textsN(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint("t", i)
	}
	return out
}

// embedFake answers with vecOf, earlier batches slower so that batches
// finish out of order, recording batch sizes.
func embedFake(fail string) (*fake, *[]int) {
	var mu sync.Mutex
	var sizes []int
	c := newFake(nil)
	c.embed = func(ctx context.Context, req *llm.EmbedRequest) (*llm.EmbedResult, error) {
		mu.Lock()
		sizes = append(sizes, len(req.Inputs))
		mu.Unlock()
		first, _ := strconv.Atoi(strings.TrimPrefix(req.Inputs[0], "t"))
		select {
		case <-time.After(time.Duration(max(0, 20-first)) * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if slices.Contains(req.Inputs, fail) {
			return nil, &llm.APIError{Provider: "fake", Status: 400, Message: "bad input"}
		}
		res := &llm.EmbedResult{Model: req.Model, Usage: llm.Usage{PromptTokens: len(req.Inputs)}}
		for _, in := range req.Inputs {
			res.Vectors = append(res.Vectors, vecOf(in))
		}
		return res, nil
	}
	return c, &sizes
}

func TestEmbedTextsBatchesInInputOrder(t *testing.T) {
	tests := []struct {
		n, batch  int
		wantSizes []int
	}{
		{10, 3, []int{1, 3, 3, 3}},
		{200, 0, []int{8, 96, 96}}, // default batch size 96
		{5, 5, []int{5}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.n, "/", tt.batch), func(t *testing.T) {
			defer goleak.VerifyNone(t)
			c, sizes := embedFake("")
			in := textsN(tt.n)
			vecs, err := pipeline.EmbedTexts(context.Background(), c, "emb", in, pipeline.EmbedOptions{BatchSize: tt.batch})
			if err != nil {
				t.Fatal(err)
			}
			if len(vecs) != tt.n {
				t.Fatalf("%d vectors for %d texts", len(vecs), tt.n)
			}
			for i, v := range vecs {
				if !slices.Equal(v, vecOf(in[i])) {
					t.Fatalf("vector %d = %v, want %v", i, v, vecOf(in[i]))
				}
			}
			got := slices.Sorted(slices.Values(*sizes))
			if !slices.Equal(got, tt.wantSizes) {
				t.Errorf("batch sizes %v, want %v", got, tt.wantSizes)
			}
		})
	}
}

func TestEmbedAllSumsUsageAndFails(t *testing.T) {
	defer goleak.VerifyNone(t)
	c, _ := embedFake("")
	res, err := pipeline.EmbedAll(context.Background(), c, &llm.EmbedRequest{Model: "emb", Inputs: textsN(10)}, pipeline.EmbedOptions{BatchSize: 4})
	if err != nil || res.Usage.PromptTokens != 10 || res.Model != "emb" || len(res.Vectors) != 10 {
		t.Fatalf("EmbedAll = %+v, %v", res, err)
	}
	c, _ = embedFake("t7")
	_, err = pipeline.EmbedTexts(context.Background(), c, "emb", textsN(10), pipeline.EmbedOptions{BatchSize: 3})
	var api *llm.APIError
	if !errors.As(err, &api) || !strings.Contains(err.Error(), "texts 6 to 8") {
		t.Fatalf("err = %v, want the failed batch's APIError", err)
	}
	var ce *llm.ConfigError
	if _, err := pipeline.EmbedTexts(context.Background(), c, "emb", []string{"a", ""}, pipeline.EmbedOptions{}); !errors.As(err, &ce) {
		t.Fatalf("empty text: err = %v", err)
	}
	// A provider answering the wrong number of vectors is a DecodeError.
	c.embed = func(ctx context.Context, req *llm.EmbedRequest) (*llm.EmbedResult, error) {
		return &llm.EmbedResult{Vectors: [][]float32{{1}}}, nil
	}
	var de *llm.DecodeError
	if _, err := pipeline.EmbedTexts(context.Background(), c, "emb", textsN(3), pipeline.EmbedOptions{}); !errors.As(err, &de) {
		t.Fatalf("short answer: err = %v", err)
	}
}

func TestEmbedStage(t *testing.T) {
	for _, ordered := range []bool{true, false} {
		t.Run(fmt.Sprint("ordered=", ordered), func(t *testing.T) {
			defer goleak.VerifyNone(t)
			c, sizes := embedFake("t4")
			in := textsN(12)
			in[9] = ""
			ctx := context.Background()
			items := pipeline.Embed(ctx, c, "emb", pipeline.FromSlice(ctx, in), pipeline.EmbedOptions{BatchSize: 3, Linger: -1, Ordered: ordered})
			var order []int
			byIndex := map[int]pipeline.Item[[]float32]{}
			for it := range items {
				order = append(order, it.Index)
				byIndex[it.Index] = it
			}
			if ordered && !slices.Equal(order, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}) {
				t.Errorf("ordered output %v", order)
			}
			if !ordered && order[0] == 0 {
				t.Errorf("unordered output %v: the slowest batch came first", order)
			}
			for i := range 12 {
				it := byIndex[i]
				switch {
				case i >= 3 && i <= 5: // batch holding t4 failed
					var api *llm.APIError
					if !errors.As(it.Err, &api) {
						t.Errorf("item %d err = %v", i, it.Err)
					}
				case i == 9: // empty text fails alone
					var ce *llm.ConfigError
					if !errors.As(it.Err, &ce) || ce.Field != "texts[9]" {
						t.Errorf("item 9 err = %v", it.Err)
					}
				default:
					if it.Err != nil || !slices.Equal(it.Value, vecOf(in[i])) {
						t.Errorf("item %d = %v, %v", i, it.Value, it.Err)
					}
				}
			}
			if got := slices.Sorted(slices.Values(*sizes)); !slices.Equal(got, []int{2, 3, 3, 3}) {
				t.Errorf("batch sizes %v", got)
			}
		})
	}
}

// Linger sends a partial batch of a live input without waiting for more.
func TestEmbedStageLinger(t *testing.T) {
	defer goleak.VerifyNone(t)
	c, sizes := embedFake("")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	in := make(chan string)
	items := pipeline.Embed(ctx, c, "emb", in, pipeline.EmbedOptions{BatchSize: 50, Linger: 5 * time.Millisecond})
	in <- "t1"
	in <- "t2"
	for range 2 {
		it := <-items
		if it.Err != nil || !slices.Equal(it.Value, vecOf(fmt.Sprint("t", it.Index+1))) {
			t.Fatalf("item = %+v", it)
		}
	}
	if !slices.Equal(*sizes, []int{2}) {
		t.Errorf("batch sizes %v", *sizes)
	}
	cancel() // the input stays open: cancelling releases the stage
	for range items {
	}
}

func TestEmbedCancelled(t *testing.T) {
	defer goleak.VerifyNone(t)
	c := newFake(nil)
	started := make(chan struct{}, 10)
	c.embed = func(ctx context.Context, req *llm.EmbedRequest) (*llm.EmbedResult, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	if _, err := pipeline.EmbedTexts(ctx, c, "emb", textsN(500), pipeline.EmbedOptions{BatchSize: 10, Concurrency: 2}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if n := c.embeds.Load(); n > 4 {
		t.Errorf("%d requests sent after cancellation", n)
	}
}
