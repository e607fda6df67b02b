package sse

import (
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
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

func FuzzReader(f *testing.F) {
	f.Add([]byte("data: a\n\nevent: x\ndata: b\r\n\r\n: c\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewReader(strings.NewReader(string(b)), nil)
		r.SetLimits(1024, 4096)
		for i := 0; i < len(b)+2; i++ {
			ev, err := r.Next()
			if err != nil {
				return
			}
			if len(ev.Data) > 4096 {
				t.Fatalf("event over cap: %d", len(ev.Data))
			}
		}
		t.Fatal("reader did not terminate")
	})
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
