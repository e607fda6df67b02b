package llm

import (
	"context"
	"iter"
	"sync"
)

// Stream is a streamed chat answer with three equivalent faces: Events (a
// channel), All (an iterator) and Result (the accumulated answer). Use one
// face per stream. Close, cancelling the producer's context, or breaking out
// of All releases every goroutine and connection behind the stream.
//
// The events channel is closed when the stream ends; Result then returns the
// whole answer or the error that ended it. After an error that followed
// emitted events, the error is a *StreamError holding the partial result.
//
// The producer writes into the channel from a goroutine of its own (a
// receive from a channel runs no code of the producer's), so a Stream costs
// one goroutine besides its consumer's while it is open; a caller who wants
// none uses its producer's callback face where it has one
// (providers.Client.StreamTo).
type Stream struct {
	events chan Event
	done   chan struct{}
	cancel context.CancelFunc

	closeOnce sync.Once
	result    *ChatResult
	err       error
}

// StreamWriter is the producer side of a Stream. Providers and the runtime
// use it; callers never see it.
type StreamWriter struct {
	s          *Stream
	ctx        context.Context
	finishOnce sync.Once
}

// NewStream returns a stream whose events channel holds buffer events, its
// writer, and the context the producer must watch: it is cancelled when the
// caller closes the stream or when parent ends.
func NewStream(parent context.Context, buffer int) (*Stream, *StreamWriter, context.Context) {
	ctx, cancel := context.WithCancel(parent)
	s, w := NewStreamWithCancel(ctx, cancel, buffer)
	return s, w, ctx
}

// NewStreamWithCancel is NewStream for a producer that already owns a
// cancellable context (a call's budget, say): ctx is the context the
// producer watches, and cancel, which must cancel ctx, is what Close and
// Finish call. It saves the context NewStream would derive, which every
// open stream would otherwise hold.
func NewStreamWithCancel(ctx context.Context, cancel context.CancelFunc, buffer int) (*Stream, *StreamWriter) {
	s := &Stream{
		events: make(chan Event, buffer),
		done:   make(chan struct{}),
		cancel: cancel,
	}
	return s, &StreamWriter{s: s, ctx: ctx}
}

// Emit delivers one event, blocking while the buffer is full. It returns
// false when the stream was closed or its context ended; the producer must
// then stop.
func (w *StreamWriter) Emit(ev Event) bool {
	select {
	case w.s.events <- ev:
		return true
	default:
	}
	select {
	case w.s.events <- ev:
		return true
	case <-w.ctx.Done():
		return false
	}
}

// Finish ends the stream with its result and error. Only the first call counts.
func (w *StreamWriter) Finish(res *ChatResult, err error) {
	w.finishOnce.Do(func() {
		w.s.result, w.s.err = res, err
		// Cancel before the stream reads as ended: a caller who saw Done
		// (or Result return) sees the producer's context ended too.
		w.s.cancel()
		close(w.s.events)
		close(w.s.done)
	})
}

// Events returns the channel of events. It is closed when the stream ends.
func (s *Stream) Events() <-chan Event { return s.events }

// Done is closed once the stream has ended and Result will not block.
func (s *Stream) Done() <-chan struct{} { return s.done }

// All returns an iterator over the events. A failure is yielded last, as a
// zero Event with a non-nil error. Breaking out of the loop closes the stream.
func (s *Stream) All() iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		for ev := range s.events {
			if !yield(ev, nil) {
				s.Close()
				return
			}
		}
		<-s.done
		if s.err != nil {
			yield(Event{}, s.err)
		}
	}
}

// Result consumes any events not yet read and returns the whole answer, or
// the error that ended the stream (with the partial result, when events had
// been emitted).
func (s *Stream) Result() (*ChatResult, error) {
	for range s.events {
	}
	<-s.done
	return s.result, s.err
}

// Err returns the error that ended the stream, or nil. It blocks until the
// stream has ended.
func (s *Stream) Err() error {
	<-s.done
	return s.err
}

// Close stops the stream and waits until its producer has released every
// goroutine and connection. It is safe to call more than once and from any
// goroutine.
func (s *Stream) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
	})
	for range s.events {
	}
	<-s.done
	return nil
}
