// Package clients puts every benchmarked client behind one small
// interface: the two floors (a bare bufio SSE framing loop, and the same
// loop extracting the delta's text), Chorus (plain providers.Client, with
// its channel face and its callback face, and the runtime), and the peer
// SDKs: openai-go, go-openai, langchaingo, eino, anthropic-sdk-go and
// genai.
//
// Each adapter uses its library the cheapest idiomatic way: it reads the
// delta's text from the library's own chunk type and does not run the
// library's optional accumulators, while Chorus always builds its
// ChatResult. Every adapter gets the same *http.Client (same transport and
// pool sizes), so that the comparison is of the libraries, not of their
// default transports.
package clients
