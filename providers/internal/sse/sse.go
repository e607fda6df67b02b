// Package sse reads Server-Sent Events with bounded memory and no
// allocation per event in the steady state.
//
// It is the framing floor of every streaming decoder in Chorus: a bufio
// loop that hands each event's name and data to the caller as slices that
// stay valid until the next call. Comment lines (": keepalive") are skipped
// but counted as activity, so an idle watchdog sees them.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
)

// Default caps.
const (
	DefaultMaxLine  = 1 << 20
	DefaultMaxEvent = 4 << 20
	// bufferSize is the reader's buffer: most events fit; a longer line is
	// assembled in Reader.long up to the line cap. 4 KiB keeps the memory
	// of 10,000 streams in flight low.
	bufferSize = 4 << 10
)

// ErrTooLarge is returned when a line or an event exceeds its cap.
var ErrTooLarge = errors.New("sse: line or event exceeds its size cap")

// Event is one dispatched SSE event. Its slices are valid until the next
// call to Reader.Next.
type Event struct {
	Name []byte
	Data []byte
}

// Reader reads events from an SSE body.
type Reader struct {
	br       *bufio.Reader
	maxLine  int
	maxEvent int
	activity *atomic.Uint64

	name    []byte
	data    []byte
	long    []byte
	hasData bool
	err     error
}

// NewReader returns a Reader over r. activity, when non-nil, is incremented
// for every line read, comments included.
func NewReader(r io.Reader, activity *atomic.Uint64) *Reader {
	return &Reader{
		br:       bufio.NewReaderSize(r, bufferSize),
		maxLine:  DefaultMaxLine,
		maxEvent: DefaultMaxEvent,
		activity: activity,
	}
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

// readLine returns the next line without its terminator.
func (r *Reader) readLine() ([]byte, error) {
	line, err := r.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		r.long = append(r.long[:0], line...)
		for err == bufio.ErrBufferFull {
			if len(r.long) > r.maxLine {
				return nil, fmt.Errorf("%w: line over %d bytes", ErrTooLarge, r.maxLine)
			}
			// A long line still arriving is activity: a slow reader of a
			// big line is not an idle stream.
			if r.activity != nil {
				r.activity.Add(1)
			}
			line, err = r.br.ReadSlice('\n')
			r.long = append(r.long, line...)
		}
		line = r.long
	}
	if err != nil && (err != io.EOF || len(line) == 0) {
		return nil, err
	}
	if len(line) > r.maxLine {
		return nil, fmt.Errorf("%w: line over %d bytes", ErrTooLarge, r.maxLine)
	}
	if r.activity != nil {
		r.activity.Add(1)
	}
	n := len(line)
	if n > 0 && line[n-1] == '\n' {
		n--
	}
	if n > 0 && line[n-1] == '\r' {
		n--
	}
	return line[:n], nil
}

// Next returns the next event. At the end of the body it returns io.EOF; an
// event not yet terminated by a blank line is delivered first.
func (r *Reader) Next() (Event, error) {
	if r.err != nil {
		return Event{}, r.err
	}
	r.name = r.name[:0]
	r.data = r.data[:0]
	r.hasData = false
	for {
		line, err := r.readLine()
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
			if r.hasData {
				r.data = append(r.data, '\n')
			}
			r.data = append(r.data, value...)
			r.hasData = true
			if len(r.data) > r.maxEvent {
				r.err = fmt.Errorf("%w: event over %d bytes", ErrTooLarge, r.maxEvent)
				return Event{}, r.err
			}
		case "event":
			r.name = append(r.name[:0], value...)
		}
	}
}
