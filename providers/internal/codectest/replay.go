package codectest

import (
	"bytes"
	"io"
	"testing"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/sse"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// Replay feeds body, a whole SSE stream (what a format's server encoder
// wrote, or a recorded one), to dec event by event through the SSE reader
// package providers uses, until dec reports the format's terminal event or
// an error or the body ends. It returns the events dec emitted, whether it
// reported done, and its error; a body the reader cannot frame fails the
// test. The server-side tests of the three formats use it to decode what
// their encoders wrote with their own client codec.
func Replay(t testing.TB, dec wire.StreamDecoder, body []byte) (evs []llm.Event, done bool, err error) {
	t.Helper()
	r := sse.NewReader(bytes.NewReader(body), nil)
	emit := func(e llm.Event) bool {
		evs = append(evs, e)
		return true
	}
	for {
		ev, rerr := r.Next()
		if rerr == io.EOF {
			return evs, false, nil
		}
		if rerr != nil {
			t.Fatalf("sse over a byte slice: %v", rerr)
		}
		if done, err = dec.Feed(ev.Name, ev.Data, emit); err != nil || done {
			return evs, done, err
		}
	}
}
