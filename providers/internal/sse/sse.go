// Package sse reads Server-Sent Events with bounded memory and no
// allocation per event in the steady state.
//
// It is the framing floor of every streaming decoder in Chorus: a line loop
// that hands each event's name and data to the caller as slices that stay
// valid until the next call. Comment lines (": keepalive") are skipped but
// counted as activity, so an idle watchdog sees them.
//
// Memory while a stream waits: a Reader reads into a 4 KiB buffer taken
// from a pool only while bytes are at hand. When a read returns less than
// it was offered, the body holds nothing more for now and the next read is
// likely to block on the network; before it, the unread bytes (the start of
// a line, usually none) move to a 512-byte buffer of the Reader's own and
// the pooled buffer goes back to the pool. Ten thousand streams waiting for
// their next token then hold 512 bytes each, not 4 KiB; a stream whose
// provider flushes one small event at a time never takes a pooled buffer
// at all. A read that fills the small buffer takes a pooled one for the
// rest of what arrived.
//
// An event's data and name are slices of the read buffer when the event's
// lines are in it (no copy); they are copied to the Reader's own storage
// only when the event spans a refill, has several data lines or a line
// longer than the buffer.
package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
)

// Default caps.
const (
	DefaultMaxLine  = 1 << 20
	DefaultMaxEvent = 4 << 20
	// bufferSize is the pooled read buffer: most events fit; a longer
	// line is assembled in Reader.long up to the line cap. 4 KiB, the
	// size of net/http's own connection buffer: a smaller one slides
	// partial lines more often and costs CPU per delta.
	bufferSize = 4 << 10
	// idleSize is the buffer a Reader keeps while it waits for the
	// network: one typical event (an OpenAI chunk, an Anthropic
	// event: and data: pair) fits.
	idleSize = 512
	// maxEmptyReads is how many reads returning no bytes and no error
	// the Reader tolerates in a row (bufio's rule) before failing with
	// io.ErrNoProgress.
	maxEmptyReads = 100
)

// ErrTooLarge is returned when a line or an event exceeds its cap.
var ErrTooLarge = errors.New("sse: line or event exceeds its size cap")

// Event is one dispatched SSE event. Its slices are valid until the next
// call to Reader.Next or Reader.Release.
type Event struct {
	Name []byte
	Data []byte
}

var pool = sync.Pool{New: func() any {
	b := make([]byte, bufferSize)
	return &b
}}

// Reader reads events from an SSE body. It is not safe for concurrent use.
type Reader struct {
	src      io.Reader
	maxLine  int
	maxEvent int
	activity *atomic.Uint64

	buf     []byte  // r.idle[:] or *pooled
	pooled  *[]byte // the pooled buffer buf is, or nil
	r, w    int     // unread bytes: buf[r:w]
	drained bool    // the last read got less than it was offered
	rerr    error   // the read error met, returned once buf is consumed

	// The event being assembled. name and data alias buf until they are
	// owned (copied to nameBuf and dataBuf).
	name, data       []byte
	nameOwn, dataOwn bool
	nameBuf, dataBuf []byte
	long             []byte // a line longer than the buffer, being gathered
	hasData          bool
	err              error

	idle [idleSize]byte
}

// NewReader returns a Reader over r. activity, when non-nil, is incremented
// for every line read, comments included.
func NewReader(r io.Reader, activity *atomic.Uint64) *Reader {
	sr := &Reader{
		src:      r,
		maxLine:  DefaultMaxLine,
		maxEvent: DefaultMaxEvent,
		activity: activity,
		// The first bytes of a stream are usually a wait for the first
		// token: they are read into the small buffer.
		drained: true,
	}
	sr.buf = sr.idle[:]
	return sr
}

// SetLimits changes the line and event caps; zero keeps a cap unchanged.
func (r *Reader) SetLimits(maxLine, maxEvent int) {
	if maxLine > 0 {
		r.maxLine = maxLine
	}
	if maxEvent > 0 {
		r.maxEvent = maxEvent
	}
}

// Release returns the Reader's pooled buffer, if it holds one. The Reader
// and the slices of the last event must not be used afterwards.
func (r *Reader) Release() {
	if r.pooled != nil {
		p := r.pooled
		r.pooled = nil
		r.buf = r.idle[:]
		r.r, r.w = 0, 0
		pool.Put(p)
	}
	if r.err == nil {
		r.err = io.ErrClosedPipe
	}
}

func (r *Reader) count() {
	if r.activity != nil {
		r.activity.Add(1)
	}
}

// own copies the event's fields that still alias the read buffer into the
// Reader's own storage: the buffer is about to move.
func (r *Reader) own() {
	if !r.nameOwn {
		r.nameBuf = append(r.nameBuf[:0], r.name...)
		r.name, r.nameOwn = r.nameBuf, true
	}
	if !r.dataOwn {
		r.dataBuf = append(r.dataBuf[:0], r.data...)
		r.data, r.dataOwn = r.dataBuf, true
	}
}

// fill reads more bytes after buf[r:w], sliding them to the front. It
// chooses the buffer: the small one when the last read drained the body
// (the read is likely to wait on the network) and the unread bytes fit,
// the pooled one otherwise.
func (r *Reader) fill() {
	r.own()
	if r.r > 0 {
		copy(r.buf, r.buf[r.r:r.w])
		r.w -= r.r
		r.r = 0
	}
	switch {
	case r.pooled != nil && r.drained && r.w < idleSize:
		copy(r.idle[:], r.buf[:r.w])
		p := r.pooled
		r.pooled, r.buf = nil, r.idle[:]
		pool.Put(p)
	case r.pooled == nil && (!r.drained || r.w == len(r.buf)):
		p := pool.Get().(*[]byte)
		copy(*p, r.buf[:r.w])
		r.pooled, r.buf = p, *p
	}
	for range maxEmptyReads {
		n, err := r.src.Read(r.buf[r.w:])
		if n < 0 || n > len(r.buf)-r.w {
			r.rerr = errors.New("sse: reader returned an invalid count")
			return
		}
		r.drained = n < len(r.buf)-r.w
		r.w += n
		if err != nil {
			r.rerr = err
			return
		}
		if n > 0 {
			return
		}
	}
	r.rerr = io.ErrNoProgress
}

// readLine returns the next line without its terminator and whether it is
// a slice of the read buffer (else of r.long).
func (r *Reader) readLine() ([]byte, bool, error) {
	r.long = r.long[:0]
	scanned := 0 // bytes of buf[r:w] known to hold no line end
	for {
		if i := bytes.IndexByte(r.buf[r.r+scanned:r.w], '\n'); i >= 0 {
			i += scanned
			line := r.buf[r.r : r.r+i+1]
			r.r += i + 1
			inBuf := true
			if len(r.long) > 0 {
				r.long = append(r.long, line...)
				line, inBuf = r.long, false
			}
			return r.endLine(line, inBuf)
		}
		if r.rerr != nil {
			if r.rerr != io.EOF {
				return nil, false, r.rerr
			}
			// The body ended: what is left is its last line.
			line := r.buf[r.r:r.w]
			r.r = r.w
			inBuf := true
			if len(r.long) > 0 {
				r.long = append(r.long, line...)
				line, inBuf = r.long, false
			}
			if len(line) == 0 {
				return nil, false, io.EOF
			}
			return r.endLine(line, inBuf)
		}
		if r.r == 0 && r.w == len(r.buf) && r.pooled != nil {
			// The pooled buffer is full and holds no line end: gather
			// the line in r.long. A long line still arriving is
			// activity: a slow reader of a big line is not an idle
			// stream.
			r.own()
			r.long = append(r.long, r.buf[:r.w]...)
			r.w, scanned = 0, 0
			if len(r.long) > r.maxLine {
				return nil, false, fmt.Errorf("%w: line over %d bytes", ErrTooLarge, r.maxLine)
			}
			r.count()
		}
		scanned = r.w - r.r
		r.fill()
	}
}

func (r *Reader) endLine(line []byte, inBuf bool) ([]byte, bool, error) {
	if len(line) > r.maxLine {
		return nil, false, fmt.Errorf("%w: line over %d bytes", ErrTooLarge, r.maxLine)
	}
	r.count()
	n := len(line)
	if n > 0 && line[n-1] == '\n' {
		n--
	}
	if n > 0 && line[n-1] == '\r' {
		n--
	}
	return line[:n:n], inBuf, nil
}

// Next returns the next event. At the end of the body it returns io.EOF; an
// event not yet terminated by a blank line is delivered first.
func (r *Reader) Next() (Event, error) {
	if r.err != nil {
		return Event{}, r.err
	}
	r.name, r.nameOwn = nil, true
	r.data, r.dataOwn = nil, true
	r.hasData = false
	for {
		line, inBuf, err := r.readLine()
		if err != nil {
			r.err = err
			if err == io.EOF && (r.hasData || len(r.name) > 0) {
				return Event{Name: r.name, Data: r.data}, nil
			}
			return Event{}, err
		}
		if len(line) == 0 {
			if r.hasData || len(r.name) > 0 {
				return Event{Name: r.name, Data: r.data}, nil
			}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			switch {
			case r.hasData:
				r.own()
				r.dataBuf = append(append(r.dataBuf, '\n'), value...)
				r.data = r.dataBuf
			case inBuf:
				r.data, r.dataOwn = value, false
			default:
				r.dataBuf = append(r.dataBuf[:0], value...)
				r.data, r.dataOwn = r.dataBuf, true
			}
			r.hasData = true
			if len(r.data) > r.maxEvent {
				r.err = fmt.Errorf("%w: event over %d bytes", ErrTooLarge, r.maxEvent)
				return Event{}, r.err
			}
		case "event":
			if inBuf {
				r.name, r.nameOwn = value, false
			} else {
				r.nameBuf = append(r.nameBuf[:0], value...)
				r.name, r.nameOwn = r.nameBuf, true
			}
		}
	}
}
