package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/chorusrt/chorus/llm"
)

// Embedding defaults.
const (
	// DefaultEmbedBatchSize is how many texts go in one embedding request
	// when EmbedOptions.BatchSize is zero.
	DefaultEmbedBatchSize = 96
	// DefaultEmbedConcurrency is how many embedding requests run at once
	// when EmbedOptions.Concurrency is zero.
	DefaultEmbedConcurrency = 4
	// DefaultLinger is how long Embed holds a partial batch for more texts
	// when EmbedOptions.Linger is zero.
	DefaultLinger = 20 * time.Millisecond
)

// EmbedOptions configures EmbedTexts, EmbedAll and Embed.
type EmbedOptions struct {
	// BatchSize is the number of texts per request (DefaultEmbedBatchSize
	// when zero or negative).
	BatchSize int
	// Concurrency bounds the requests in flight (DefaultEmbedConcurrency
	// when zero or negative).
	Concurrency int
	// Dimensions and Headers are copied into every llm.EmbedRequest.
	Dimensions int
	Headers    map[string]string
	// Linger (Embed only) is how long a partial batch waits for more texts
	// before it is sent (DefaultLinger when zero); negative waits until the
	// batch is full or the input is closed.
	Linger time.Duration
	// Ordered (Embed only) delivers items in input order.
	Ordered bool
}

func (o EmbedOptions) batchSize() int {
	if o.BatchSize <= 0 {
		return DefaultEmbedBatchSize
	}
	return o.BatchSize
}

func (o EmbedOptions) concurrency() int {
	if o.Concurrency <= 0 {
		return DefaultEmbedConcurrency
	}
	return o.Concurrency
}

// embedChunk is one request's worth of texts; start is the input index of
// texts[0]. After the call, vectors (or errs, per text) are filled.
type embedChunk struct {
	start   int
	texts   []string
	vectors [][]float32
	errs    []error
	model   string
	usage   llm.Usage
	meta    llm.ResponseMeta
}

// embedChunkFunc returns the Map function that embeds one chunk. Empty
// texts fail on their own (a *llm.ConfigError) without failing the chunk;
// a failed call fails every text of the chunk.
func embedChunkFunc(c Client, model string, opts EmbedOptions) MapFunc[embedChunk, embedChunk] {
	return func(ctx context.Context, ch embedChunk) (embedChunk, llm.Usage, error) {
		ch.vectors = make([][]float32, len(ch.texts))
		ch.errs = make([]error, len(ch.texts))
		send := make([]string, 0, len(ch.texts))
		for k, t := range ch.texts {
			if t == "" {
				ch.errs[k] = &llm.ConfigError{Field: fmt.Sprintf("texts[%d]", ch.start+k), Msg: "is empty"}
				continue
			}
			send = append(send, t)
		}
		if len(send) == 0 {
			return ch, llm.Usage{}, nil
		}
		if c == nil {
			return ch, llm.Usage{}, &llm.ConfigError{Field: "client", Msg: "is nil"}
		}
		res, err := c.Embed(ctx, &llm.EmbedRequest{Model: model, Inputs: send, Dimensions: opts.Dimensions, Headers: opts.Headers})
		if err != nil {
			return ch, llm.Usage{}, fmt.Errorf("pipeline: embed texts %d to %d: %w", ch.start, ch.start+len(ch.texts)-1, err)
		}
		if res == nil || len(res.Vectors) != len(send) {
			n := 0
			if res != nil {
				n = len(res.Vectors)
			}
			return ch, llm.Usage{}, &llm.DecodeError{Provider: model, Err: fmt.Errorf("embeddings: %d vectors for %d inputs", n, len(send))}
		}
		j := 0
		for k := range ch.texts {
			if ch.errs[k] == nil {
				ch.vectors[k] = res.Vectors[j]
				j++
			}
		}
		ch.model, ch.usage, ch.meta = res.Model, res.Usage, res.Meta
		return ch, res.Usage, nil
	}
}

// chunks splits texts into batches of size.
func chunks(texts []string, size int) []embedChunk {
	out := make([]embedChunk, 0, (len(texts)+size-1)/size)
	for start := 0; start < len(texts); start += size {
		out = append(out, embedChunk{start: start, texts: texts[start:min(start+size, len(texts))]})
	}
	return out
}

// EmbedTexts embeds texts with model, BatchSize texts per request and at
// most Concurrency requests at a time, and returns one vector per text in
// input order. The first failed request cancels the others and is returned.
func EmbedTexts(ctx context.Context, c Client, model string, texts []string, opts EmbedOptions) ([][]float32, error) {
	res, err := EmbedAll(ctx, c, &llm.EmbedRequest{Model: model, Inputs: texts, Dimensions: opts.Dimensions, Headers: opts.Headers}, opts)
	if err != nil {
		return nil, err
	}
	return res.Vectors, nil
}

// EmbedAll is EmbedTexts for a whole llm.EmbedRequest (opts.Dimensions and
// opts.Headers are ignored: the request's own apply). The result's Usage
// sums every request's; Model and Meta are those of the last request to
// finish.
func EmbedAll(ctx context.Context, c Client, req *llm.EmbedRequest, opts EmbedOptions) (*llm.EmbedResult, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	opts.Dimensions, opts.Headers = req.Dimensions, req.Headers
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	parts := chunks(req.Inputs, opts.batchSize())
	items := Map(cctx, FromSlice(cctx, parts), embedChunkFunc(c, req.Model, opts), BatchOptions{Concurrency: opts.concurrency()})
	res := &llm.EmbedResult{Vectors: make([][]float32, len(req.Inputs))}
	var firstErr error
	got := 0
	for it := range items {
		if it.Err != nil {
			if firstErr == nil {
				firstErr = it.Err
				cancel()
			}
			continue
		}
		got++
		copy(res.Vectors[it.Value.start:], it.Value.vectors)
		res.Usage = res.Usage.Add(it.Value.usage)
		res.Model, res.Meta = it.Value.model, it.Value.meta
	}
	if firstErr != nil {
		return nil, firstErr
	}
	if got < len(parts) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return nil, context.Canceled
	}
	return res, nil
}

// Embed is the channel stage of embeddings: it reads texts, groups them
// into requests of BatchSize (a partial batch is sent after Linger, or when
// the input is closed) and sends one Item per text, its Index the text's
// position in the input and its Value the vector. A failed request fails
// the items of its texts only; an empty text fails alone. Items arrive as
// requests finish, or in input order with Ordered. The channel is closed
// once the input is closed and every item delivered, or once ctx is
// cancelled (cancel ctx to abandon it).
func Embed(ctx context.Context, c Client, model string, texts <-chan string, opts EmbedOptions) <-chan Item[[]float32] {
	batches := make(chan embedChunk)
	go batchTexts(ctx, texts, batches, opts)
	results := Map(ctx, batches, embedChunkFunc(c, model, opts), BatchOptions{Concurrency: opts.concurrency(), Ordered: opts.Ordered})
	out := make(chan Item[[]float32])
	go func() {
		defer close(out)
		for it := range results {
			for k := range it.Value.texts {
				item := Item[[]float32]{Index: it.Value.start + k}
				switch {
				case it.Err != nil:
					item.Err = it.Err
				case it.Value.errs[k] != nil:
					item.Err = it.Value.errs[k]
				default:
					item.Value = it.Value.vectors[k]
				}
				select {
				case out <- item:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}

// batchTexts groups texts into chunks of opts.BatchSize, sending a partial
// chunk after opts.Linger.
func batchTexts(ctx context.Context, texts <-chan string, out chan<- embedChunk, opts EmbedOptions) {
	defer close(out)
	size := opts.batchSize()
	linger := opts.Linger
	if linger == 0 {
		linger = DefaultLinger
	}
	var cur embedChunk
	var timer *time.Timer
	var timeout <-chan time.Time
	next := 0
	flush := func() bool {
		if timer != nil {
			timer.Stop()
			timer, timeout = nil, nil
		}
		if len(cur.texts) == 0 {
			return true
		}
		ch := cur
		cur = embedChunk{}
		select {
		case out <- ch:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		select {
		case t, ok := <-texts:
			if !ok {
				flush()
				return
			}
			if len(cur.texts) == 0 {
				cur = embedChunk{start: next, texts: make([]string, 0, size)}
				if linger > 0 {
					timer = time.NewTimer(linger)
					timeout = timer.C
				}
			}
			cur.texts = append(cur.texts, t)
			next++
			if len(cur.texts) >= size && !flush() {
				return
			}
		case <-timeout:
			if !flush() {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}
