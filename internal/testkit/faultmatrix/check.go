package faultmatrix

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"go.uber.org/goleak"
)

// Via is the path a runner's calls take.
type Via int

const (
	// Client: a plain providers.Client.
	Client Via = iota
	// Runtime: a runtime.Runtime; Want.Runtime applies.
	Runtime
)

func (v Via) String() string {
	if v == Runtime {
		return "the runtime"
	}
	return "a plain providers.Client"
}

// Cell is one cell as its runner gets it: a fresh llmtest server holding
// the cell's script, and a recorder for the key scan.
type Cell struct {
	Format Format
	Stream bool
	Want   Want
	Server *llmtest.Server
	Rec    *Recorder
	via    Via
}

// Run runs every cell (format x mode x fault) as a subtest named
// format/mode/fault: it gives run the cell, and once run returned closes the
// server and checks that no goroutine was left behind (goleak). It logs the
// count and fails unless every cell ran to its end.
func Run(t *testing.T, via Via, run func(t *testing.T, c *Cell)) {
	t.Helper()
	faults := Faults()
	planned := len(Formats) * 2 * len(faults)
	ran := 0
	start := time.Now()
	for _, f := range Formats {
		for _, stream := range []bool{false, true} {
			mode := "buffered"
			if stream {
				mode = "stream"
			}
			for _, fault := range faults {
				t.Run(f.Name+"/"+mode+"/"+fault.Name, func(t *testing.T) {
					base := goleak.IgnoreCurrent()
					srv := llmtest.NewServer()
					defer srv.Close()
					steps, want := fault.Cell(stream)
					srv.Push(steps...)
					run(t, &Cell{Format: f, Stream: stream, Want: want, Server: srv, Rec: &Recorder{}, via: via})
					srv.Close()
					goleak.VerifyNone(t, base)
					ran++ // not reached after a Skip or a Fatal
				})
			}
		}
	}
	t.Logf("fault matrix: %d cells (%d formats x 2 modes x %d faults) through %v, %d ran to the end, in %v",
		planned, len(Formats), len(faults), via, ran, time.Since(start).Round(time.Millisecond))
	if ran != planned {
		t.Fatalf("fault matrix: only %d of %d cells ran to the end (skipped or stopped)", ran, planned)
	}
}

// Recorder collects a cell's log lines and observer events, for the key
// scan. It knows the events only as values to print, so that it needs no
// providers import: a runner hands it each providers.AttemptEvent with
// its error, and each providers.LearnEvent.
type Recorder struct {
	mu       sync.Mutex
	logs     bytes.Buffer
	events   []string
	attempts int
	learned  int
}

// Write receives log lines.
func (r *Recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.logs.Write(p)
}

// Logger logs JSON lines, debug level up, into r.
func (r *Recorder) Logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(r, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Attempt records an attempt event and its error.
func (r *Recorder) Attempt(ev any, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempts++
	r.events = append(r.events, fmt.Sprintf("%+v", ev))
	if err != nil {
		r.events = append(r.events, err.Error())
	}
}

// Learned records a learn event.
func (r *Recorder) Learned(ev any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.learned++
	r.events = append(r.events, fmt.Sprintf("%+v", ev))
}

// Attempts is the number of attempt events recorded.
func (r *Recorder) Attempts() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.attempts
}

// LearnEvents is the number of learn events recorded.
func (r *Recorder) LearnEvents() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.learned
}

// Texts is everything recorded, as strings to scan.
func (r *Recorder) Texts() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string{r.logs.String()}, r.events...)
}

// Leaks returns every text holding key or its last 8 characters, clipped.
func Leaks(key string, texts []string) []string {
	var out []string
	tail := key[len(key)-8:]
	for _, s := range texts {
		if strings.Contains(s, key) || strings.Contains(s, tail) {
			if len(s) > 300 {
				s = s[:300] + "..."
			}
			out = append(out, s)
		}
	}
	return out
}

// CheckNoLeak fails t when Key shows in what the recorder holds, in the
// call's outcome, or in texts (the runner's own renderings).
func (c *Cell) CheckNoLeak(t *testing.T, o Outcome, texts ...string) {
	t.Helper()
	texts = append(texts, c.Rec.Texts()...)
	if err := o.Err; err != nil {
		texts = append(texts, err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err))
	}
	if o.Res != nil {
		texts = append(texts, fmt.Sprintf("%+v", *o.Res), fmt.Sprintf("%+v", o.Res.Meta))
	}
	for _, ev := range o.Events {
		texts = append(texts, fmt.Sprintf("%+v", ev))
		if ev.Usage != nil {
			texts = append(texts, fmt.Sprintf("%+v", *ev.Usage))
		}
	}
	if l := Leaks(Key, texts); len(l) > 0 {
		t.Errorf("the key leaked into %d outputs, e.g. %q", len(l), l[0])
	}
}

// CheckConnsClosed waits up to 3s for the server to have no open
// connection, and fails t if one stays.
func (c *Cell) CheckConnsClosed(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for c.Server.OpenConns() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := c.Server.OpenConns(); n != 0 {
		t.Errorf("%d connections still open at the server", n)
	}
}

// Outcome is what one cell's call did.
type Outcome struct {
	Res     *llm.ChatResult
	Err     error
	Events  []llm.Event
	Elapsed time.Duration
}

// Call makes the cell's call, streamed (collecting its events) or
// buffered, and times it. A stream that fails to start ends the test.
func (c *Cell) Call(t *testing.T, chat func() (*llm.ChatResult, error), stream func() (*llm.Stream, error)) Outcome {
	t.Helper()
	var o Outcome
	begin := time.Now()
	if c.Stream {
		s, err := stream()
		if err != nil {
			t.Fatalf("Stream refused the request: %v", err)
		}
		for ev, err := range s.All() {
			if err != nil {
				o.Err = err
				break
			}
			o.Events = append(o.Events, ev)
		}
		o.Res, _ = s.Result()
	} else {
		o.Res, o.Err = chat()
	}
	o.Elapsed = time.Since(begin)
	return o
}

// TextOf is the text the events carried.
func TextOf(evs []llm.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.Type == llm.EventText {
			b.WriteString(ev.Text)
		}
	}
	return b.String()
}

// Check asserts the call's outcome against the cell's documented one:
// duration, the requests the server saw (each one observed as an attempt,
// each one on the format's path), redaction, and the result, partial result
// or error.
func (c *Cell) Check(t *testing.T, o Outcome) {
	t.Helper()
	w := c.Want
	attempts := w.Requests // the result's Meta.Attempts
	if c.via == Runtime {
		if w.Runtime.MinElapsed != 0 {
			w.MinElapsed = w.Runtime.MinElapsed
		}
		if w.Runtime.Attempts != 0 {
			attempts = w.Runtime.Attempts
		}
	}
	requests := c.Server.Requests()
	for _, r := range requests {
		if c.Format.Path != "" && r.Path != c.Format.Path {
			t.Errorf("request went to %s, want %s", r.Path, c.Format.Path)
		}
	}
	if o.Elapsed > Budget+Slack {
		t.Errorf("call took %v, budget %v", o.Elapsed, Budget)
	}
	if o.Elapsed < w.MinElapsed {
		t.Errorf("call took %v, want at least %v", o.Elapsed, w.MinElapsed)
	}
	if len(requests) != w.Requests {
		t.Errorf("server saw %d requests, want %d", len(requests), w.Requests)
	}
	if n := c.Rec.Attempts(); n != len(requests) {
		t.Errorf("attempt observer saw %d attempts for %d requests", n, len(requests))
	}
	if w.Echo && (o.Err == nil || !strings.Contains(o.Err.Error(), "[REDACTED]")) {
		t.Errorf("the provider echoed the key, the error should show it redacted: %v", o.Err)
	}
	got := TextOf(o.Events)
	switch {
	case w.OK:
		if o.Err != nil {
			t.Fatalf("want success, got %T %v", o.Err, o.Err)
		}
		if o.Res == nil || o.Res.Content != Full || o.Res.FinishReason != llm.FinishStop {
			t.Fatalf("result %+v, want %q finished by stop", o.Res, Full)
		}
		if c.Stream && got != Full {
			t.Errorf("events carried %q, want %q once (no replay of a failed attempt)", got, Full)
		}
		if o.Res.Meta.Buffered != w.Buffered {
			t.Errorf("Meta.Buffered = %v, want %v", o.Res.Meta.Buffered, w.Buffered)
		}
		if o.Res.Meta.Attempts != attempts {
			t.Errorf("Meta.Attempts = %d, want %d (%d requests)", o.Res.Meta.Attempts, attempts, w.Requests)
		}
	case w.Partial != "":
		var se *llm.StreamError
		if !errors.As(o.Err, &se) {
			t.Fatalf("want *llm.StreamError with the partial result, got %T %v", o.Err, o.Err)
		}
		if se.Partial == nil || se.Partial.Content != w.Partial {
			t.Errorf("partial result %+v, want content %q", se.Partial, w.Partial)
		}
		if got != w.Partial {
			t.Errorf("events carried %q, want %q", got, w.Partial)
		}
		if o.Res != se.Partial {
			t.Errorf("Result() = %p, want the partial %p", o.Res, se.Partial)
		}
		if msg := w.Err(se.Err); msg != "" {
			t.Error(msg)
		}
	default:
		if o.Err == nil {
			t.Fatalf("want an error, got success %+v", o.Res)
		}
		var se *llm.StreamError
		if errors.As(o.Err, &se) {
			t.Errorf("a failure before any event is not a StreamError: %v", o.Err)
		}
		if len(o.Events) != 0 {
			t.Errorf("%d events reached the caller before the failure", len(o.Events))
		}
		if msg := w.Err(o.Err); msg != "" {
			t.Error(msg)
		}
	}
}
