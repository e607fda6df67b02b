package pipeline

import (
	"context"
	"iter"
	"slices"
	"sync"
	"time"

	"github.com/chorusrt/chorus/llm"
)

// DefaultConcurrency is how many items Map and Batch run at once when
// BatchOptions.Concurrency is zero.
const DefaultConcurrency = 8

// Item is one output of Map or Batch: the Index of its input in the input
// order (from 0), the function's Value and its Err. A failed item does not
// stop the batch. Value is whatever the function returned, even alongside
// an error.
type Item[T any] struct {
	Index int
	Value T
	Err   error
}

// Progress is a batch's running count, reported after each item.
type Progress struct {
	// Done is the number of finished items, failed ones included.
	Done int
	// Failed is the number of finished items with an error.
	Failed int
	// InFlight is the number of items being processed.
	InFlight int
	// Usage sums the usage every finished item reported.
	Usage llm.Usage
	// Tokens is Usage.TotalTokens().
	Tokens int
	// Elapsed is the time since the batch started.
	Elapsed time.Duration
	// Rate is finished items per second since the start.
	Rate float64
	// TokenRate is tokens per second since the start.
	TokenRate float64
}

// BatchOptions configures Map and Batch.
type BatchOptions struct {
	// Concurrency bounds how many items run at once (DefaultConcurrency
	// when zero or negative).
	Concurrency int
	// Ordered delivers items in input order. Out of order items wait, at
	// most about Concurrency of them; unordered items are delivered as they
	// finish.
	Ordered bool
	// OnProgress, when set, is called after each item finishes, one call
	// at a time, from the stage's goroutines: keep it short.
	OnProgress func(Progress)
}

func (o BatchOptions) concurrency() int {
	if o.Concurrency <= 0 {
		return DefaultConcurrency
	}
	return o.Concurrency
}

// MapFunc is the work of one item: its output, the tokens it used (zero
// when it calls no model) and its error.
type MapFunc[In, Out any] func(ctx context.Context, in In) (Out, llm.Usage, error)

// Map runs fn over every input read from in, at most opts.Concurrency at a
// time, and sends one Item per input on the returned channel, which is
// closed once in is closed and every item delivered.
//
// A per-item error, or a panic in fn (as a *PanicError), is reported in
// that item and the batch goes on. Cancelling ctx stops the stage: no new
// input is read, running calls see the cancelled context, undelivered
// items are dropped and the channel is closed once every goroutine has
// returned. Cancel ctx to abandon the output channel; a consumer that
// simply stops reading holds the stage (and its inputs) where it is.
//
// The output of one stage is the input of the next: Map's input may be the
// output of FromSeq, another Map, Batch or any channel.
func Map[In, Out any](ctx context.Context, in <-chan In, fn MapFunc[In, Out], opts BatchOptions) <-chan Item[Out] {
	n := opts.concurrency()
	out := make(chan Item[Out], n)
	m := &mapper[In, Out]{ctx: ctx, fn: fn, opts: opts, out: out, start: time.Now(), in: in}
	if opts.Ordered {
		m.queue = make(chan chan Item[Out], n)
	}
	// The workers take their inputs themselves (take): no dispatching
	// goroutine between the input channel and them, so an item costs one
	// hand-off, not two (BenchmarkMapOverhead).
	var workers sync.WaitGroup
	workers.Add(n)
	for range n {
		go func() {
			defer workers.Done()
			for {
				j, ok := m.take()
				if !ok {
					return
				}
				it := m.run(j)
				if j.slot != nil {
					j.slot <- it // capacity 1: never blocks
				} else {
					m.send(it)
				}
			}
		}()
	}
	var emitter sync.WaitGroup
	if opts.Ordered {
		emitter.Add(1)
		go func() {
			defer emitter.Done()
			m.emitOrdered(m.queue)
		}()
	}
	go func() {
		workers.Wait()
		if m.queue != nil {
			close(m.queue)
		}
		emitter.Wait()
		close(out)
	}()
	return out
}

type mapJob[In, Out any] struct {
	index int
	in    In
	slot  chan Item[Out] // ordered mode: where the result waits its turn
}

type mapper[In, Out any] struct {
	ctx   context.Context
	fn    MapFunc[In, Out]
	opts  BatchOptions
	out   chan Item[Out]
	start time.Time

	// take's: one worker at a time reads the input, numbers it and, in
	// ordered mode, queues its slot, so numbers and slots follow the
	// input order.
	inMu   sync.Mutex
	in     <-chan In
	queue  chan chan Item[Out] // ordered mode: slots in input order
	next   int
	inDone bool

	mu   sync.Mutex
	prog Progress
}

// take reads the next input for a worker and numbers it; in ordered mode
// it queues the item's slot first, in input order. It reports false once
// the input is closed or ctx is cancelled.
func (m *mapper[In, Out]) take() (mapJob[In, Out], bool) {
	m.inMu.Lock()
	defer m.inMu.Unlock()
	var j mapJob[In, Out]
	if m.inDone {
		return j, false
	}
	select {
	case v, ok := <-m.in:
		if !ok {
			m.inDone = true
			return j, false
		}
		j = mapJob[In, Out]{index: m.next, in: v}
	case <-m.ctx.Done():
		m.inDone = true
		return j, false
	}
	m.next++
	if m.queue != nil {
		j.slot = make(chan Item[Out], 1)
		select {
		case m.queue <- j.slot:
		case <-m.ctx.Done():
			m.inDone = true
			return j, false
		}
	}
	return j, true
}

// run calls fn for one job and accounts for it.
func (m *mapper[In, Out]) run(j mapJob[In, Out]) Item[Out] {
	m.mu.Lock()
	m.prog.InFlight++
	m.mu.Unlock()
	v, u, err := m.call(j.in)
	m.mu.Lock()
	p := &m.prog
	p.InFlight--
	p.Done++
	if err != nil {
		p.Failed++
	}
	p.Usage = p.Usage.Add(u)
	if m.opts.OnProgress != nil {
		p.Tokens = p.Usage.TotalTokens()
		p.Elapsed = time.Since(m.start)
		if s := p.Elapsed.Seconds(); s > 0 {
			p.Rate = float64(p.Done) / s
			p.TokenRate = float64(p.Tokens) / s
		}
		m.opts.OnProgress(*p)
	}
	m.mu.Unlock()
	return Item[Out]{Index: j.index, Value: v, Err: err}
}

func (m *mapper[In, Out]) call(in In) (v Out, u llm.Usage, err error) {
	defer recoverTo(&err)
	return m.fn(m.ctx, in)
}

func (m *mapper[In, Out]) send(it Item[Out]) bool {
	select {
	case m.out <- it:
		return true
	case <-m.ctx.Done():
		return false
	}
}

// emitOrdered delivers the slots' items in input order.
func (m *mapper[In, Out]) emitOrdered(queue chan chan Item[Out]) {
	for slot := range queue {
		select {
		case it := <-slot:
			if !m.send(it) {
				return
			}
		case <-m.ctx.Done():
			return
		}
	}
}

// Batch sends every chat request read from reqs with c.Chat, at most
// opts.Concurrency at a time: Map over chat calls, counting each answer's
// usage in the progress. A failed request yields an Item with its error.
func Batch(ctx context.Context, c Client, reqs <-chan *llm.ChatRequest, opts BatchOptions) <-chan Item[*llm.ChatResult] {
	return Map(ctx, reqs, func(ctx context.Context, req *llm.ChatRequest) (*llm.ChatResult, llm.Usage, error) {
		if err := checkCall(c, req); err != nil {
			return nil, llm.Usage{}, err
		}
		res, err := safeChat(ctx, c, req)
		var u llm.Usage
		if res != nil {
			u = res.Usage
		}
		return res, u, err
	}, opts)
}

// FromSeq returns a channel yielding seq's values, the usual first stage of
// a pipeline. The channel is closed when seq ends or ctx is cancelled.
func FromSeq[T any](ctx context.Context, seq iter.Seq[T]) <-chan T {
	out := make(chan T)
	go func() {
		defer close(out)
		for v := range seq {
			select {
			case out <- v:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// FromSlice returns a channel yielding the values of s, in order; see FromSeq.
func FromSlice[T any](ctx context.Context, s []T) <-chan T { return FromSeq(ctx, slices.Values(s)) }

// Collect reads items until the channel is closed and returns them sorted
// by Index, whatever order they arrived in.
func Collect[T any](items <-chan Item[T]) []Item[T] {
	var all []Item[T]
	for it := range items {
		all = append(all, it)
	}
	slices.SortFunc(all, func(a, b Item[T]) int { return a.Index - b.Index })
	return all
}
