// Package codectest is a test helper shared by the codec packages' fuzz
// targets (providers/openai, providers/anthropic, providers/gemini). It is
// imported only from _test.go files and never from production code.
//
// It holds the parts of the harness that do not depend on a wire format:
// seeding a fuzz corpus with the recorded response bodies of the fixture
// corpus (Seeds), and the properties every codec must keep for any input
// (Stream, StreamFrom, Buffered): no panic; errors are typed
// (*llm.DecodeError or *llm.APIError); every tool event points at a call
// already opened, and starts come in position order; finish reasons are
// canonical; the events and Result() agree; and the memory allocated, like
// the result's size, is bounded by the input's size. Which fixtures seed a
// target, and how a streamed body is split into events when it is not SSE,
// stay in each codec package.
//
// Replay feeds a whole SSE body to a stream decoder and returns what it
// emitted: the server-side round-trip tests of the three packages decode
// what their server encoders wrote with it.
package codectest
