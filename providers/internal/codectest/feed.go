package codectest

import (
	"fmt"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// FeedEach feeds chunks to dec one data line each and returns its events
// and each chunk's error as text, and its result, so two decodings can be
// compared whole (reflect.DeepEqual). before, when not nil, runs before
// each chunk: the decoders' shortcut tests use it to make the decoder
// forget what it kept of the previous chunk.
func FeedEach(dec wire.StreamDecoder, chunks [][]byte, before func()) (evs, errs []string, res *llm.ChatResult) {
	for _, c := range chunks {
		if before != nil {
			before()
		}
		_, err := dec.Feed(nil, c, func(ev llm.Event) bool {
			u := ""
			if ev.Usage != nil {
				u = fmt.Sprint(*ev.Usage)
			}
			evs = append(evs, fmt.Sprintf("%s %q %d %s %s", ev.Type, ev.Text, ev.ToolIndex, ev.Finish, u))
			return true
		})
		errs = append(errs, fmt.Sprint(err))
	}
	return evs, errs, dec.Result()
}
