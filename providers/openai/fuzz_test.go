package openai

import (
	"strings"
	"testing"

	"github.com/chorusrt/chorus/internal/testkit/fixture"
	"github.com/chorusrt/chorus/providers/internal/codectest"
)

// Fuzz targets of the two OpenAI formats (issue 8), seeded from every
// recorded body of the fixture corpus: whole SSE bodies for the stream
// decoders, whole JSON bodies for the buffered parsers. For any input:
// no panic; errors are typed (*llm.DecodeError or *llm.APIError); every tool
// event points at a call already opened, and starts come in position order;
// finish reasons are canonical; the events and Result() agree; and the
// memory allocated, like the result's size, is bounded by the input's size.
// The seeding and the checks are package codectest's; which fixtures seed
// which target is decided here.
//
// FuzzStreamDecoder (stream_test.go) fuzzes single chunks; these fuzz whole
// bodies, event sequences included.

func fzChatProvider(p string) bool { return chatProviders[p] }
func fzAnyProvider(string) bool    { return true }

// fzIsChat: a Chat Completions exchange (payload-only files under a chat
// __fixtures__ directory included).
func fzIsChat(e fixture.Entry, ex fixture.Exchange) bool {
	if ex.Request.URL == "" {
		return strings.Contains(e.File, "/src/chat/__fixtures__/")
	}
	return strings.HasSuffix(codectest.URLPath(ex.Request.URL), "/chat/completions")
}

// fzIsResponses: a Responses API exchange.
func fzIsResponses(e fixture.Entry, ex fixture.Exchange) bool {
	if ex.Request.URL == "" {
		return strings.Contains(e.File, "/src/responses/__fixtures__/")
	}
	return strings.HasSuffix(codectest.URLPath(ex.Request.URL), "/responses")
}

func FuzzOpenAIStream(f *testing.F) {
	for _, b := range codectest.Seeds(f, fzChatProvider, func(e fixture.Entry, ex fixture.Exchange) bool {
		return ex.Response.Stream && fzIsChat(e, ex)
	}) {
		f.Add(b)
	}
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":5,\"id\":\"a\",\"function\":{\"name\":\"f\",\"arguments\":\"{\"}}]}}]}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("data: {\"error\":{\"message\":\"m\",\"code\":\"c\"}}\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		codectest.Stream(t, Codec{}.NewStreamDecoder(), body)
	})
}

func FuzzOpenAIBuffered(f *testing.F) {
	for _, b := range codectest.Seeds(f, fzChatProvider, func(e fixture.Entry, ex fixture.Exchange) bool {
		return !ex.Response.Stream && fzIsChat(e, ex)
	}) {
		f.Add(b)
	}
	f.Add([]byte(`{"error":"plain text error"}`))
	f.Add([]byte(`{"choices":[{"index":3,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":null}}]},"finish_reason":"tool_calls"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		codectest.Buffered(t, body, Codec{}.ParseChat, Codec{}.ParseError)
	})
}

func FuzzResponsesStream(f *testing.F) {
	for _, b := range codectest.Seeds(f, fzAnyProvider, func(e fixture.Entry, ex fixture.Exchange) bool {
		return ex.Response.Stream && fzIsResponses(e, ex)
	}) {
		f.Add(b)
	}
	f.Add([]byte("event: error\ndata: {\"type\":\"error\",\"code\":\"insufficient_quota\",\"message\":\"m\"}\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		codectest.Stream(t, ResponsesCodec{}.NewStreamDecoder(), body)
	})
}

func FuzzResponsesBuffered(f *testing.F) {
	for _, b := range codectest.Seeds(f, fzAnyProvider, func(e fixture.Entry, ex fixture.Exchange) bool {
		return !ex.Response.Stream && fzIsResponses(e, ex)
	}) {
		f.Add(b)
	}
	f.Add([]byte(`{"status":"failed","error":{"code":"server_error","message":"m"},"output":[]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		codectest.Buffered(t, body, ResponsesCodec{}.ParseChat, ResponsesCodec{}.ParseError)
	})
}
