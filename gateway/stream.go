package gateway

import (
	"net/http"
	goruntime "runtime"
	"sync"

	"github.com/chorusrt/chorus/llm"
)

// streamEncoder writes one streamed answer in a client's format.
type streamEncoder interface {
	// event appends the frames of one event.
	event(dst []byte, ev *llm.Event) []byte
	// end appends the frames that close a completed answer.
	end(dst []byte, res *llm.ChatResult) []byte
	// fail appends the in-band error that ends a failed answer.
	fail(dst []byte, e *Error) []byte
}

// frameBufs holds the pumps' frame buffers. A buffer holds up to
// Options.FlushEvents encoded events (about 16 KiB for 64 OpenAI chunks):
// grown from nothing per stream it was half the bytes the gateway
// allocated per stream (BenchmarkStream/mem/handler, alloc_space). A pump
// holds one only from the event it encodes to the flush that sends it, so
// a stream waiting for its upstream holds none.
var frameBufs = sync.Pool{New: func() any { b := make([]byte, 0, frameBufSize); return &b }}

const (
	frameBufSize = 16 << 10
	frameBufMax  = 256 << 10 // a buffer grown past it is left to the GC
)

// pump relays a runtime stream to the client and returns what it consumed.
//
// Nothing is written before the first event: until then a failure (after
// the runtime's retries and fallbacks) is an ordinary error answer with its
// status. From the first event on, the answer is 200 and a failure is an
// in-band error frame in the client's format; the stream is never cut
// short silently. Events already waiting are written together, at most
// Options.FlushEvents per flush; when none is waiting, the pump yields the
// processor once (the producer may be in the middle of an upstream read's
// events) and then flushes what it holds: a delta is never held for one
// that has not arrived. A write that fails (the client left) closes the
// stream, which cancels the upstream call; so does the request's context,
// which net/http cancels when the client disconnects. Memory per stream is bounded by the
// runtime's stream buffer and one flush of frames: a slow client slows only
// its own upstream read.
func (h *Handler) pump(w http.ResponseWriter, f format, s *llm.Stream, enc streamEncoder, headers func(http.Header)) (*llm.ChatResult, error) {
	// One event variable for the whole stream: its address goes through the
	// encoder's interface, so it escapes (one allocation per event when it
	// was declared in the loop).
	events := s.Events()
	ev, ok := <-events
	if !ok {
		res, err := s.Result()
		if err != nil {
			if headers != nil {
				headers(w.Header()) // what was tried: the call has ended
			}
			h.fail(w, f, errorFor(err))
			return res, err
		}
	}
	hd := w.Header()
	hs := newHeaderSetter(hd, 3)
	hs.set("Content-Type", "text/event-stream; charset=utf-8")
	hs.set("Cache-Control", "no-cache")
	hs.set("X-Accel-Buffering", "no")
	if headers != nil {
		headers(hd)
	}
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	var buf []byte // the frames held; nil with no buffer taken
	var bp *[]byte // buf's pooled buffer, while taken
	take := func() {
		if bp == nil {
			bp = frameBufs.Get().(*[]byte)
			buf = (*bp)[:0]
		}
	}
	release := func() {
		if bp != nil {
			if cap(buf) <= frameBufMax { // w.Write copied it: the bytes are free
				*bp = buf[:0]
				frameBufs.Put(bp)
			}
			bp, buf = nil, nil
		}
	}
	defer release()
	n := 0
	if ok {
		take()
		buf = enc.event(buf, &ev)
		n = 1
	}
	flush := func() bool {
		if len(buf) == 0 {
			return true
		}
		_, err := w.Write(buf)
		if err == nil {
			err = rc.Flush()
		}
		release()
		n = 0
		return err == nil
	}
	for ok {
		got := false
		select {
		case ev, ok = <-events:
			got = true
		default:
		}
		if !got && len(buf) > 0 {
			// Nothing waiting, frames held: yield the processor once before
			// paying for a write, so that a producer in the middle of a
			// burst (an upstream read holds several events) can hand over
			// the rest of it. No timer: with nothing else runnable this
			// returns at once, and the frames go out.
			goruntime.Gosched()
			select {
			case ev, ok = <-events:
				got = true
			default:
			}
		}
		if !got {
			// Nothing waiting: send what is held, then block for the next.
			if !flush() {
				s.Close()
				_, err := s.Result()
				return nil, err
			}
			ev, ok = <-events
		}
		if !ok {
			break
		}
		take()
		buf = enc.event(buf, &ev)
		if n++; n >= h.opts.FlushEvents && !flush() {
			s.Close()
			_, err := s.Result()
			return nil, err
		}
	}
	res, err := s.Result()
	take()
	if err != nil {
		e := errorFor(err)
		h.log.Warn("gateway: stream failed after its first event", "status", e.Status, "error", e.Message)
		buf = enc.fail(buf, e)
	} else {
		buf = enc.end(buf, res)
	}
	flush()
	return res, err
}
