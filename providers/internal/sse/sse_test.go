package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"

	"github.com/chorusrt/chorus/internal/testkit/fixture"
)

func readAll(t *testing.T, body string) []Event {
	t.Helper()
	r := NewReader(strings.NewReader(body), nil)
	var out []Event
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		out = append(out, Event{Name: append([]byte(nil), ev.Name...), Data: append([]byte(nil), ev.Data...)})
	}
}

func TestReaderFraming(t *testing.T) {
	cases := []struct {
		name, body string
		want       []string // "name|data"
	}{
		{"lf", "data: a\n\ndata: b\n\n", []string{"|a", "|b"}},
		{"crlf", "data: a\r\n\r\ndata: b\r\n\r\n", []string{"|a", "|b"}},
		{"named", "event: ping\ndata: {}\n\n", []string{"ping|{}"}},
		{"multi data lines joined", "data: a\ndata: b\n\n", []string{"|a\nb"}},
		{"comments skipped", ": OPENROUTER PROCESSING\n\ndata: x\n\n", []string{"|x"}},
		{"no space after colon", "data:x\n\n", []string{"|x"}},
		{"trailing event at EOF", "data: a\n\ndata: tail", []string{"|a", "|tail"}},
		{"done sentinel", "data: [DONE]\n\n", []string{"|[DONE]"}},
		{"unknown fields ignored", "id: 1\nretry: 10\ndata: a\n\n", []string{"|a"}},
		{"empty data", "data:\n\n", []string{"|"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := readAll(t, c.body)
			if len(got) != len(c.want) {
				t.Fatalf("got %d events, want %d", len(got), len(c.want))
			}
			for i, ev := range got {
				if s := string(ev.Name) + "|" + string(ev.Data); s != c.want[i] {
					t.Errorf("event %d = %q, want %q", i, s, c.want[i])
				}
			}
		})
	}
}

func TestReaderLongLineWithinCap(t *testing.T) {
	long := strings.Repeat("x", 100<<10) // beyond the bufio buffer
	got := readAll(t, "data: "+long+"\n\n")
	if len(got) != 1 || string(got[0].Data) != long {
		t.Fatalf("long line not reassembled: %d events", len(got))
	}
}

func TestReaderCaps(t *testing.T) {
	r := NewReader(strings.NewReader("data: "+strings.Repeat("x", 200)+"\n\n"), nil)
	r.SetLimits(100, 0)
	if _, err := r.Next(); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("line cap: got %v", err)
	}
	r = NewReader(strings.NewReader(strings.Repeat("data: xxxxxxxxxx\n", 20)+"\n"), nil)
	r.SetLimits(0, 100)
	if _, err := r.Next(); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("event cap: got %v", err)
	}
}

func TestReaderCountsActivity(t *testing.T) {
	var n atomic.Uint64
	r := NewReader(strings.NewReader(": ka\n: ka\ndata: a\n\n"), &n)
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if n.Load() != 4 {
		t.Fatalf("activity = %d, want 4 lines", n.Load())
	}
}

// FuzzReader (the FuzzSSEReader) is seeded with every streamed
// body of the fixture corpus (at most 64 KiB each, synthetic rows skipped):
// every provider's framing, CRLF and padded data lines, comments, event
// names. With small caps the reader terminates and never hands out an event
// over its cap; with the default caps an input smaller than them is read to
// io.EOF without error, and the events' total size never exceeds the
// input's.
func FuzzReader(f *testing.F) {
	f.Add([]byte("data: a\n\nevent: x\ndata: b\r\n\r\n: c\n"))
	for _, b := range fixtureStreams(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		sameEvents(t, b)
		r := NewReader(strings.NewReader(string(b)), nil)
		r.SetLimits(1024, 4096)
		terminated := false
		for i := 0; i < len(b)+2; i++ {
			ev, err := r.Next()
			if err != nil {
				terminated = true
				break
			}
			if len(ev.Data) > 4096 {
				t.Fatalf("event over cap: %d", len(ev.Data))
			}
		}
		if !terminated {
			t.Fatal("reader did not terminate")
		}
		var activity atomic.Uint64
		r = NewReader(bytes.NewReader(b), &activity)
		total := 0
		for {
			ev, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				if len(b) < DefaultMaxLine {
					t.Fatalf("a %d-byte body under the default caps failed: %v", len(b), err)
				}
				return
			}
			total += len(ev.Name) + len(ev.Data)
			if total > len(b) {
				t.Fatalf("events hold %d bytes from a %d-byte body", total, len(b))
			}
		}
		if lines := uint64(bytes.Count(b, []byte("\n"))); activity.Load() < lines {
			t.Fatalf("activity %d for %d lines", activity.Load(), lines)
		}
	})
}

// fixtureStreams returns the recorded SSE bodies of the non-synthetic
// fixtures, deduplicated, at most 64 KiB each.
func fixtureStreams(tb testing.TB) [][]byte {
	tb.Helper()
	dir := fixture.Require(tb)
	idx, err := fixture.LoadIndex(dir)
	if err != nil {
		tb.Fatalf("fixtures: %v", err)
	}
	seen := map[string]bool{}
	var out [][]byte
	for _, e := range idx {
		if e.Synthetic() {
			continue
		}
		exs, err := fixture.Load(dir, e)
		if err != nil {
			tb.Fatalf("load %s: %v", e.File, err)
		}
		for _, ex := range exs {
			b := ex.Response.Body
			if !ex.Response.Stream || len(b) == 0 || len(b) > 64<<10 || seen[string(b)] {
				continue
			}
			seen[string(b)] = true
			out = append(out, b)
		}
	}
	if len(out) < 50 {
		tb.Fatalf("fixtures: only %d streamed bodies", len(out))
	}
	return out
}

func BenchmarkReader(b *testing.B) {
	chunk := `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hello"},"finish_reason":null}]}` + "\n\n"
	body := strings.Repeat(chunk, 1000)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		r := NewReader(strings.NewReader(body), nil)
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/delta")
}

// chunkReader hands out its data a piece at a time and records the
// activity counter at each read.
type chunkReader struct {
	data     []byte
	piece    int
	activity *atomic.Uint64
	seen     []uint64
}

func (c *chunkReader) Read(p []byte) (int, error) {
	c.seen = append(c.seen, c.activity.Load())
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.data[:min(c.piece, len(c.data))])
	c.data = c.data[n:]
	return n, nil
}

// TestLongLineIsActivity: a line longer than the read buffer, arriving a
// piece at a time, counts as activity while it arrives, so an idle
// watchdog does not take a slow big line for a stalled stream.
func TestLongLineIsActivity(t *testing.T) {
	var activity atomic.Uint64
	line := "data: " + strings.Repeat("x", 256<<10) + "\n\n"
	cr := &chunkReader{data: []byte(line), piece: 4096, activity: &activity}
	r := NewReader(cr, &activity)
	ev, err := r.Next()
	if err != nil || len(ev.Data) != 256<<10 {
		t.Fatalf("event of %d bytes, err %v", len(ev.Data), err)
	}
	// Half way through the line's reads the counter must have moved.
	if mid := cr.seen[len(cr.seen)/2]; mid == 0 {
		t.Fatalf("no activity counted while the long line arrived (%d reads)", len(cr.seen))
	}
}

// chunked reads at most n bytes per Read, n cycling from 1 to 7: buffer
// refills land anywhere, between a data line and the line after it too.
type chunked struct {
	r io.Reader
	n int
}

func (c *chunked) Read(p []byte) (int, error) {
	c.n = c.n%7 + 1
	if len(p) > c.n {
		p = p[:c.n]
	}
	return c.r.Read(p)
}

// events reads every event of r as "name|data" strings, and the error that
// ended it.
func events(r io.Reader) ([]string, error) {
	sr := NewReader(r, nil)
	sr.SetLimits(1024, 4096)
	var out []string
	for {
		ev, err := sr.Next()
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return out, err
		}
		out = append(out, string(ev.Name)+"|"+string(ev.Data))
	}
}

// sameEvents checks that b frames into the same events whether the body
// arrives whole, a byte at a time or in small chunks: an event's data that
// is still a slice of the reader's buffer is never moved under the caller.
func sameEvents(t *testing.T, b []byte) {
	t.Helper()
	want, werr := events(bytes.NewReader(b))
	for name, r := range map[string]io.Reader{
		"one byte": iotest.OneByteReader(bytes.NewReader(b)),
		"chunked":  &chunked{r: bytes.NewReader(b)},
		"half":     iotest.HalfReader(bytes.NewReader(b)),
	} {
		got, gerr := events(r)
		if (werr == nil) != (gerr == nil) || strings.Join(got, "\x00") != strings.Join(want, "\x00") {
			t.Fatalf("%s: events %q (%v), whole body %q (%v)", name, got, gerr, want, werr)
		}
	}
}

func TestReaderSameEventsHoweverReadsSplit(t *testing.T) {
	var long strings.Builder
	for long.Len() < 6000 {
		long.WriteString("data: {\"text\":\"0123456789abcdef\"}\n\n")
	}
	for _, b := range []string{
		"data: a\n\nevent: x\ndata: b\r\n\r\n: c\n",
		"data: one\ndata: two\n\ndata: three\n\n",
		"event: e\ndata: x\nid: 3\ndata: y\n\n",
		"data: " + strings.Repeat("z", 5000) + "\n\ndata: after\n\n",
		"data: last without blank line",
		long.String(),
	} {
		sameEvents(t, []byte(b))
	}
}

// drip hands out its pieces one per Read, as a network body does when each
// arrives in its own segment: a Read returns at most the next piece.
type drip struct{ pieces []string }

func (d *drip) Read(p []byte) (int, error) {
	if len(d.pieces) == 0 {
		return 0, io.EOF
	}
	n := copy(p, d.pieces[0])
	if n < len(d.pieces[0]) {
		d.pieces[0] = d.pieces[0][n:]
	} else {
		d.pieces = d.pieces[1:]
	}
	return n, nil
}

// TestReaderHoldsNoPooledBufferWhileWaiting: events that arrive one small
// read at a time are framed in the Reader's own small buffer; a burst
// bigger than it takes a pooled buffer, which goes back to the pool before
// the read that would wait for the network.
func TestReaderHoldsNoPooledBufferWhileWaiting(t *testing.T) {
	ev := `data: {"choices":[{"delta":{"content":"hi"}}]}` + "\n\n"
	burst := strings.Repeat(ev, 40) // > idleSize, < bufferSize
	r := NewReader(&drip{pieces: []string{ev, ev, burst, ev}}, nil)
	for i := range 2 {
		got, err := r.Next()
		if err != nil || string(got.Data) != ev[len("data: "):len(ev)-2] {
			t.Fatalf("event %d: %q, %v", i, got.Data, err)
		}
		if r.pooled != nil {
			t.Fatalf("event %d: a small event took a pooled buffer", i)
		}
	}
	pooled := false
	for i := range 40 {
		if _, err := r.Next(); err != nil {
			t.Fatalf("burst event %d: %v", i, err)
		}
		pooled = pooled || r.pooled != nil
	}
	if !pooled {
		t.Fatal("a burst over the small buffer was read without a pooled one")
	}
	// The burst's read was short: the next read waits, in the small buffer.
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if r.pooled != nil {
		t.Fatal("the pooled buffer was held across the read after a short one")
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
}

// TestReaderDataOutlivesRefill: an event whose data line is in the buffer
// but whose blank line needs another read keeps its data when the buffer
// moves (small to pooled, pooled to small, slid).
func TestReaderDataOutlivesRefill(t *testing.T) {
	data := strings.Repeat("d", 300)
	big := strings.Repeat("e", 3000)
	r := NewReader(&drip{pieces: []string{
		"event: first\ndata: " + data + "\n", "\n",
		"data: " + big + "\n", "\ndata: x\n\n",
		"event: ev", "ent\ndata: a", "b\n\n",
	}}, nil)
	for _, want := range []string{"first|" + data, "|" + big, "|x", "event|ab"} {
		got, err := r.Next()
		if err != nil || string(got.Name)+"|"+string(got.Data) != want {
			t.Fatalf("got %.40q (%v), want %.40q", string(got.Name)+"|"+string(got.Data), err, want)
		}
	}
}

func TestReaderRelease(t *testing.T) {
	r := NewReader(strings.NewReader(strings.Repeat("data: x\n\n", 1000)), nil)
	for range 100 { // past the first, small, read
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
	}
	if r.pooled == nil {
		t.Fatal("a body read whole should be framed in a pooled buffer")
	}
	r.Release()
	r.Release() // idempotent
	if r.pooled != nil {
		t.Fatal("Release kept the pooled buffer")
	}
	if _, err := r.Next(); err == nil {
		t.Fatal("Next after Release returned an event")
	}
}

func TestReaderNoProgress(t *testing.T) {
	r := NewReader(iotest.ErrReader(nil), nil) // (0, nil) forever
	if _, err := r.Next(); err != io.ErrNoProgress {
		t.Fatalf("got %v, want io.ErrNoProgress", err)
	}
}
