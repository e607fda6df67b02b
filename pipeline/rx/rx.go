package rx

import (
	"context"
	"sync"

	"github.com/reactivex/rxgo/v2"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/pipeline"
)

// FromStream returns an Observable of s's events, each an llm.Event value.
// A stream that fails ends with one error item (a *llm.StreamError when
// events had been sent); after the last item, s.Result returns the whole
// answer. The stream is read once, from now on, however many observers
// subscribe; cancelling ctx closes it.
func FromStream(ctx context.Context, s *llm.Stream) rxgo.Observable {
	return multicast(ctx, func(emit func(rxgo.Item)) {
		if s == nil {
			emit(rxgo.Error(&llm.ConfigError{Field: "stream", Msg: "is nil"}))
			return
		}
		for {
			select {
			case ev, ok := <-s.Events():
				if !ok {
					if err := s.Err(); err != nil {
						emit(rxgo.Error(err))
					}
					return
				}
				emit(rxgo.Of(ev))
			case <-ctx.Done():
				s.Close()
				return
			}
		}
	})
}

// FromFan returns an Observable of a fan-out's merged view: one
// pipeline.Tagged value per event, in order per model, and one error item,
// a *pipeline.ModelError, for each model that fails, when it fails (rxgo
// operators stop at the first error unless given
// rxgo.WithErrorStrategy(rxgo.ContinueOnError); ForEach goes on). It takes
// the Fan's merged face (Fan.All). Cancelling ctx closes the Fan.
func FromFan(ctx context.Context, f *pipeline.Fan) rxgo.Observable {
	return multicast(ctx, func(emit func(rxgo.Item)) {
		if f == nil {
			emit(rxgo.Error(&llm.ConfigError{Field: "fan", Msg: "is nil"}))
			return
		}
		stop := context.AfterFunc(ctx, func() { f.Close() })
		defer stop()
		for t, err := range f.All() {
			if err != nil {
				emit(rxgo.Error(err))
				continue
			}
			emit(rxgo.Of(t))
		}
	})
}

// FromBatch returns an Observable of a batch's items, each a
// pipeline.Item[T] value, as the stage delivers them (the output of
// pipeline.Map, pipeline.Batch or pipeline.Embed). Per-item errors stay
// inside the items: they never end the Observable. Cancel ctx (the one the
// batch runs under) to stop the batch.
func FromBatch[T any](ctx context.Context, items <-chan pipeline.Item[T]) rxgo.Observable {
	return FromChannel(ctx, items)
}

// FromChannel returns an Observable of the values read from ch until it is
// closed or ctx is cancelled, read once and shared by every observer.
func FromChannel[T any](ctx context.Context, ch <-chan T) rxgo.Observable {
	return multicast(ctx, func(emit func(rxgo.Item)) {
		for {
			select {
			case v, ok := <-ch:
				if !ok {
					return
				}
				emit(rxgo.Of(v))
			case <-ctx.Done():
				return
			}
		}
	})
}

// hub is the multicast behind every Observable of this package: one
// goroutine reads the source once into an append-only log, and each
// subscription replays the log from its start at its own pace.
type hub struct {
	ctx context.Context

	mu      sync.Mutex
	items   []rxgo.Item
	done    bool
	waiting bool
	notify  chan struct{}
}

// multicast starts read in its own goroutine and returns the Observable
// that replays what it emits.
func multicast(ctx context.Context, read func(emit func(rxgo.Item))) rxgo.Observable {
	h := &hub{ctx: ctx, notify: make(chan struct{})}
	go func() {
		defer h.finish()
		read(h.emit)
	}()
	return rxgo.Defer([]rxgo.Producer{h.subscribe}, rxgo.WithContext(ctx))
}

func (h *hub) emit(it rxgo.Item) {
	h.mu.Lock()
	h.items = append(h.items, it)
	h.wake()
	h.mu.Unlock()
}

func (h *hub) finish() {
	h.mu.Lock()
	h.done = true
	h.wake()
	h.mu.Unlock()
}

// wake tells waiting subscribers that the log changed. h.mu is held.
func (h *hub) wake() {
	if h.waiting {
		close(h.notify)
		h.notify = make(chan struct{})
		h.waiting = false
	}
}

// subscribe replays the log into next, then follows it until the source
// ends or either context is cancelled.
func (h *hub) subscribe(ctx context.Context, next chan<- rxgo.Item) {
	for i := 0; ; {
		h.mu.Lock()
		pending := h.items[i:len(h.items):len(h.items)]
		done := h.done
		var wait chan struct{}
		if len(pending) == 0 && !done {
			h.waiting = true
			wait = h.notify
		}
		h.mu.Unlock()
		for _, it := range pending {
			select {
			case next <- it:
				i++
			case <-ctx.Done():
				return
			case <-h.ctx.Done():
				return
			}
		}
		if len(pending) > 0 {
			continue
		}
		if done {
			return
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return
		case <-h.ctx.Done():
			return
		}
	}
}
