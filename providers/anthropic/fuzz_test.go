package anthropic

import (
	"testing"

	"github.com/chorusrt/chorus/internal/testkit/fixture"
	"github.com/chorusrt/chorus/providers/internal/codectest"
)

// Fuzz targets of the Anthropic Messages format (issue 8), seeded from every
// recorded Messages body of the fixture corpus: whole SSE bodies (event
// names included) for the stream decoder, whole JSON bodies for the
// buffered parser. For any input: no panic; errors are typed
// (*llm.DecodeError or *llm.APIError); every tool event points at a call
// already opened, and starts come in position order; finish reasons are
// canonical; the events and Result() agree; and the memory allocated, like
// the result's size, is bounded by the input's size. The seeding and the
// checks are package codectest's; which fixtures seed which target is
// decided here.
//
// FuzzFeed (textdelta_test.go) fuzzes single events; these fuzz whole
// bodies, block sequences included.

func fzAnthropic(p string) bool { return p == "anthropic" }

// fzIsMessages: an exchange of POST /v1/messages (payload-only recordings
// have no request and count as Messages answers).
func fzIsMessages(_ fixture.Entry, ex fixture.Exchange) bool {
	return ex.Request.URL == "" || codectest.URLPath(ex.Request.URL) == "/v1/messages"
}

func FuzzAnthropicStream(f *testing.F) {
	for _, b := range codectest.Seeds(f, fzAnthropic, func(e fixture.Entry, ex fixture.Exchange) bool {
		return ex.Response.Stream && fzIsMessages(e, ex)
	}) {
		f.Add(b)
	}
	f.Add([]byte("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":7,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"n\",\"input\":{}}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":7,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\":\"}}\n\n"))
	f.Add([]byte("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"m\"}}\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		codectest.Stream(t, Codec{}.NewStreamDecoder(), body)
	})
}

func FuzzAnthropicBuffered(f *testing.F) {
	for _, b := range codectest.Seeds(f, fzAnthropic, func(e fixture.Entry, ex fixture.Exchange) bool {
		return !ex.Response.Stream && fzIsMessages(e, ex)
	}) {
		f.Add(b)
	}
	f.Add([]byte(`{"type":"error","error":{"type":"invalid_request_error","message":"m"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		codectest.Buffered(t, body, Codec{}.ParseChat, Codec{}.ParseError)
	})
}
