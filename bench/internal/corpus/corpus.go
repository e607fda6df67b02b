package corpus

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
)

// Format is a wire format.
type Format string

// The three wire formats.
const (
	OpenAI    Format = "openai"
	Anthropic Format = "anthropic"
	Gemini    Format = "gemini"
)

// Formats lists the formats in report order.
var Formats = []Format{OpenAI, Anthropic, Gemini}

// vocabulary is cycled through to make the deltas: word pieces as models
// send them, with a few JSON escapes (newlines, quotes) and non-ASCII text
// so that decoders pay for what real streams contain.
var vocabulary = []string{
	"The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", ".",
	" Chorus", " streams", " deltas", ",", " and", " every", " provider", " answers",
	" in", " its", " own", " format", ":\n\n", "**", "Holiday", " Name", "**", " café",
	" \"quoted\"", " 42", " tokens", " per", " second", ";", " naïve", " résumé",
	" —", " done", "!\n", " ok",
}

// Token returns the text of delta i.
func Token(i int) string { return vocabulary[i%len(vocabulary)] }

// Text is the concatenated text of n deltas.
func Text(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(Token(i))
	}
	return b.String()
}

// TextBytes is the length in bytes of the concatenated text of n deltas.
func TextBytes(n int) int {
	total := 0
	for i := range n {
		total += len(Token(i))
	}
	return total
}

// Stream is a pre-encoded streamed response.
type Stream struct {
	Format      Format
	Deltas      int    // text deltas in the body
	TextBytes   int    // bytes of decoded text in all deltas
	Body        []byte // the whole SSE body
	ContentType string
	// Ends[i] is the offset just after event i; FirstDelta is the index
	// (in Ends) of the event carrying the first text delta.
	Ends       []int
	FirstDelta int
}

// Buffered is a pre-encoded buffered (non-streaming) response.
type Buffered struct {
	Format      Format
	Text        string
	Body        []byte
	ContentType string
}

func quote(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	return string(b)
}

type builder struct {
	sb   strings.Builder
	ends []int
}

func (b *builder) event(s string) {
	b.sb.WriteString(s)
	b.ends = append(b.ends, b.sb.Len())
}

const (
	oaID    = "chatcmpl-D8Z5oo6uDh67AD85p73ksdT1KxhE0"
	oaModel = "gpt-4.1-nano-2025-04-14"
	anID    = "msg_01R8GdyyLQUhUfyjqSCMbnWg"
	anModel = "claude-sonnet-4-20250514"
	gmModel = "gemini-2.5-flash"
	gmID    = "VwCzabneCuzPz7IP0aL64A0"
)

// obfuscation mimics OpenAI's per-chunk padding field, whose length varies.
func obfuscation(i int) string {
	const letters = "Qup1BsQ3yhjoJbEFdTh"
	return letters[:3+(i*7)%14]
}

func pad(i int) string { return strings.Repeat(" ", (i*5)%13) }

func buildOpenAI(n int) *Stream {
	var b builder
	head := `data: {"id":"` + oaID + `","object":"chat.completion.chunk","created":1770933892,"model":"` + oaModel + `","service_tier":"default","system_fingerprint":"fp_de604bd877","choices":[`
	b.event(head + `{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"Qup1BsQ3"}` + "\n\n")
	first := len(b.ends)
	for i := range n {
		b.event(head + `{"index":0,"delta":{"content":` + quote(Token(i)) + `},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"` + obfuscation(i) + `"}` + "\n\n")
	}
	b.event(head + `{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null,"obfuscation":"yoKFv"}` + "\n\n")
	b.event(head + fmt.Sprintf(`],"usage":{"prompt_tokens":11,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"obfuscation":"dTh"}`, n, n+11) + "\n\n")
	b.event("data: [DONE]\n\n")
	return &Stream{Format: OpenAI, Deltas: n, TextBytes: TextBytes(n), Body: []byte(b.sb.String()), ContentType: "text/event-stream; charset=utf-8", Ends: b.ends, FirstDelta: first}
}

func buildAnthropic(n int) *Stream {
	var b builder
	b.event("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"" + anModel + "\",\"id\":\"" + anID + "\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":16,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0,\"cache_creation\":{\"ephemeral_5m_input_tokens\":0,\"ephemeral_1h_input_tokens\":0},\"output_tokens\":5,\"service_tier\":\"standard\"}}   }\n\n")
	b.event("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}            }\n\n")
	b.event("event: ping\ndata: {\"type\": \"ping\"}\n\n")
	first := len(b.ends)
	for i := range n {
		b.event("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":" + quote(Token(i)) + "}" + pad(i) + "}\n\n")
	}
	b.event("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0            }\n\n")
	b.event(fmt.Sprintf("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"input_tokens\":16,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0,\"output_tokens\":%d}            }\n\n", n))
	b.event("event: message_stop\ndata: {\"type\":\"message_stop\"       }\n\n")
	return &Stream{Format: Anthropic, Deltas: n, TextBytes: TextBytes(n), Body: []byte(b.sb.String()), ContentType: "text/event-stream; charset=utf-8", Ends: b.ends, FirstDelta: first}
}

func buildGemini(n int) *Stream {
	var b builder
	for i := range n {
		text := quote(Token(i))
		if i < n-1 {
			b.event(`data: {"candidates": [{"content": {"parts": [{"text": ` + text + `}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 11,"totalTokenCount": 11,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 11}]},"modelVersion": "` + gmModel + `","responseId": "` + gmID + `"}` + "\r\n\r\n")
			continue
		}
		b.event(fmt.Sprintf(`data: {"candidates": [{"content": {"parts": [{"text": %s}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 11,"candidatesTokenCount": %d,"totalTokenCount": %d,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 11}],"candidatesTokensDetails": [{"modality": "TEXT","tokenCount": %d}]},"modelVersion": "%s","responseId": "%s"}`, text, n, n+11, n, gmModel, gmID) + "\r\n\r\n")
	}
	return &Stream{Format: Gemini, Deltas: n, TextBytes: TextBytes(n), Body: []byte(b.sb.String()), ContentType: "text/event-stream", Ends: b.ends, FirstDelta: 0}
}

var (
	mu      sync.Mutex
	streams = map[Format]map[int]*Stream{}
	bufs    = map[Format]*Buffered{}
)

// StreamOf returns the streamed body of n text deltas in format f, built
// once and shared. n must be at least 1.
func StreamOf(f Format, n int) *Stream {
	mu.Lock()
	defer mu.Unlock()
	if streams[f] == nil {
		streams[f] = map[int]*Stream{}
	}
	if s := streams[f][n]; s != nil {
		return s
	}
	var s *Stream
	switch f {
	case Anthropic:
		s = buildAnthropic(n)
	case Gemini:
		s = buildGemini(n)
	default:
		s = buildOpenAI(n)
	}
	streams[f][n] = s
	return s
}

// ShortText is the answer of every buffered response: a short reply, as a
// batch job's classification or extraction call returns.
const ShortText = "Paris is the capital of France. It sits on the Seine."

// BufferedOf returns the buffered answer in format f.
func BufferedOf(f Format) *Buffered {
	mu.Lock()
	defer mu.Unlock()
	if b := bufs[f]; b != nil {
		return b
	}
	text := quote(ShortText)
	var body string
	switch f {
	case Anthropic:
		body = `{"model":"` + anModel + `","id":"` + anID + `","type":"message","role":"assistant","content":[{"type":"text","text":` + text + `}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":16,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":0},"output_tokens":14,"service_tier":"standard"}}`
	case Gemini:
		body = `{"candidates": [{"content": {"parts": [{"text": ` + text + `}],"role": "model"},"finishReason": "STOP","avgLogprobs": -0.0213,"index": 0}],"usageMetadata": {"promptTokenCount": 11,"candidatesTokenCount": 14,"totalTokenCount": 25,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 11}],"candidatesTokensDetails": [{"modality": "TEXT","tokenCount": 14}]},"modelVersion": "` + gmModel + `","responseId": "` + gmID + `"}`
	default:
		body = `{"id":"` + oaID + `","object":"chat.completion","created":1770933892,"model":"` + oaModel + `","choices":[{"index":0,"message":{"role":"assistant","content":` + text + `,"refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":11,"completion_tokens":14,"total_tokens":25,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default","system_fingerprint":"fp_de604bd877"}`
	}
	b := &Buffered{Format: f, Text: ShortText, Body: []byte(body), ContentType: "application/json"}
	bufs[f] = b
	return b
}
