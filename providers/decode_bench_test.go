package providers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/chorusrt/chorus/internal/testkit/cputime"
	"io"
	"net/http"
	"strings"
	"testing"
	"unsafe"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/codectest"
)

// The decode benchmark of bench/ (scenario 1), in the package: one stream
// of memDeltas text deltas served from memory by an http.RoundTripper,
// through StreamTo (request building, response handling, framing, decoding,
// the caller's callback), against a floor that produces the same text
// events from the same body with the least work. The bodies have the
// shapes of bench/internal/corpus (which this module cannot import).

const memDeltas = 1000

var memVocabulary = []string{
	"The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", ".",
	" Chorus", " streams", " deltas", ",", " and", " every", " provider", " answers",
	" in", " its", " own", " format", ":\n\n", "**", "Holiday", " Name", "**", " café",
	" \"quoted\"", " 42", " tokens", " per", " second", ";", " naïve", " résumé",
	" —", " done", "!\n", " ok",
}

func memToken(i int) string { return memVocabulary[i%len(memVocabulary)] }

func memQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func memBody(f Format, n int) []byte {
	var b strings.Builder
	switch f {
	case FormatAnthropic:
		b.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-sonnet-4-20250514\",\"id\":\"msg_01R8GdyyLQUhUfyjqSCMbnWg\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":16,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0,\"cache_creation\":{\"ephemeral_5m_input_tokens\":0,\"ephemeral_1h_input_tokens\":0},\"output_tokens\":5,\"service_tier\":\"standard\"}}   }\n\n")
		b.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}            }\n\n")
		b.WriteString("event: ping\ndata: {\"type\": \"ping\"}\n\n")
		for i := range n {
			b.WriteString("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":" + memQuote(memToken(i)) + "}" + strings.Repeat(" ", (i*5)%13) + "}\n\n")
		}
		b.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0            }\n\n")
		fmt.Fprintf(&b, "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"input_tokens\":16,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0,\"output_tokens\":%d}            }\n\n", n)
		b.WriteString("event: message_stop\ndata: {\"type\":\"message_stop\"       }\n\n")
	case FormatGemini:
		for i := range n {
			text := memQuote(memToken(i))
			if i < n-1 {
				b.WriteString(`data: {"candidates": [{"content": {"parts": [{"text": ` + text + `}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 11,"totalTokenCount": 11,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 11}]},"modelVersion": "gemini-2.5-flash","responseId": "VwCzabneCuzPz7IP0aL64A0"}` + "\r\n\r\n")
				continue
			}
			fmt.Fprintf(&b, `data: {"candidates": [{"content": {"parts": [{"text": %s}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 11,"candidatesTokenCount": %d,"totalTokenCount": %d,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 11}],"candidatesTokensDetails": [{"modality": "TEXT","tokenCount": %d}]},"modelVersion": "gemini-2.5-flash","responseId": "VwCzabneCuzPz7IP0aL64A0"}`+"\r\n\r\n", text, n, n+11, n)
		}
	default:
		letters := "Qup1BsQ3yhjoJbEFdTh"
		head := `data: {"id":"chatcmpl-D8Z5oo6uDh67AD85p73ksdT1KxhE0","object":"chat.completion.chunk","created":1770933892,"model":"gpt-4.1-nano-2025-04-14","service_tier":"default","system_fingerprint":"fp_de604bd877","choices":[`
		b.WriteString(head + `{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"Qup1BsQ3"}` + "\n\n")
		for i := range n {
			b.WriteString(head + `{"index":0,"delta":{"content":` + memQuote(memToken(i)) + `},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"` + letters[:3+(i*7)%14] + `"}` + "\n\n")
		}
		b.WriteString(head + `{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null,"obfuscation":"yoKFv"}` + "\n\n")
		fmt.Fprintf(&b, head+`],"usage":{"prompt_tokens":11,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"obfuscation":"dTh"}`+"\n\n", n, n+11)
		b.WriteString("data: [DONE]\n\n")
	}
	return []byte(b.String())
}

// memTransport answers every request from memory with one SSE body.
type memTransport struct{ body []byte }

func (m memTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	return &http.Response{
		StatusCode:    http.StatusOK,
		Status:        "200 OK",
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": {"text/event-stream"}},
		Body:          io.NopCloser(bytes.NewReader(m.body)),
		ContentLength: int64(len(m.body)),
		Request:       req,
	}, nil
}

func memClient(b *testing.B, f Format, body []byte, opts ...Option) *Client {
	b.Helper()
	cfg := Config{ID: string(f), Format: f, BaseURL: "http://memory.invalid", APIKey: "k"}
	if f == FormatOpenAI {
		cfg.BaseURL += "/v1"
	}
	c, err := New(cfg, append([]Option{WithHTTPClient(&http.Client{Transport: memTransport{body: body}})}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// memFloor is the floor of one format: the body framed line by line, each
// data line searched for the text key and the text unescaped in place;
// Anthropic's end found on its event: line, OpenAI's on [DONE].
func memFloor(f Format, body []byte, delta func(string)) error {
	key := []byte(`"text":`)
	if f == FormatOpenAI {
		key = []byte(`"content":`)
	}
	var scratch []byte
	stop := false
	br := bufio.NewReaderSize(bytes.NewReader(body), 4<<10)
	var name func([]byte) bool
	if f == FormatAnthropic {
		name = func(n []byte) bool {
			stop = string(n) == "message_stop"
			return true
		}
	}
	return codectest.FloorLines(br, name, func(data []byte) bool {
		if stop || (f == FormatOpenAI && bytes.HasPrefix(data, []byte(" [DONE]"))) {
			return false
		}
		if t, ok := codectest.FloorString(data, key, &scratch); ok && len(t) > 0 {
			delta(unsafe.String(&t[0], len(t)))
		}
		return true
	})
}

// BenchmarkDecodeMemory is bench's scenario 1 in the package: per format,
// "floor" and "streamto" (StreamTo's callback face) on the same body.
// cpu-ns/delta is the figure compared; streamto/floor is the ratio the
// issue sets at most 1.5×.
func BenchmarkDecodeMemory(b *testing.B) {
	for _, f := range []Format{FormatOpenAI, FormatAnthropic, FormatGemini} {
		body := memBody(f, memDeltas)
		b.Run(string(f)+"/floor", func(b *testing.B) {
			b.ReportAllocs()
			texts := 0
			cpu0 := cputime.Process()
			for b.Loop() {
				texts = 0
				if err := memFloor(f, body, func(string) { texts++ }); err != nil {
					b.Fatal(err)
				}
			}
			codectest.PerDelta(b, memDeltas, cpu0)
			if texts != memDeltas {
				b.Fatalf("floor: %d texts", texts)
			}
		})
		b.Run(string(f)+"/streamto", func(b *testing.B) {
			c := memClient(b, f, body)
			req := &llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("go")}, MaxTokens: 1024}
			ctx := context.Background()
			b.ReportAllocs()
			texts := 0
			var res *llm.ChatResult
			cpu0 := cputime.Process()
			for b.Loop() {
				texts = 0
				var err error
				res, err = c.StreamTo(ctx, req, func(ev llm.Event) bool {
					if ev.Type == llm.EventText {
						texts++
					}
					return true
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			codectest.PerDelta(b, memDeltas, cpu0)
			if texts != memDeltas || res.FinishReason != llm.FinishStop || !strings.HasPrefix(res.Content, "The quick") {
				b.Fatalf("streamto: %d texts, finish %q", texts, res.FinishReason)
			}
		})
	}
}

// BenchmarkStreamChannelMemory is the channel face (Stream, ranging over
// Events) on the OpenAI body from memory, by stream buffer: what a smaller
// event channel costs per delta when the consumer keeps up.
func BenchmarkStreamChannelMemory(b *testing.B) {
	body := memBody(FormatOpenAI, memDeltas)
	for _, buf := range []int{64, 16, 8} {
		b.Run(fmt.Sprintf("buffer=%d", buf), func(b *testing.B) {
			c := memClient(b, FormatOpenAI, body, WithStreamBuffer(buf))
			req := &llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("go")}, MaxTokens: 1024}
			b.ReportAllocs()
			texts := 0
			cpu0 := cputime.Process()
			for b.Loop() {
				s, err := c.Stream(context.Background(), req)
				if err != nil {
					b.Fatal(err)
				}
				texts = 0
				for ev := range s.Events() {
					if ev.Type == llm.EventText {
						texts++
					}
				}
				if _, err := s.Result(); err != nil {
					b.Fatal(err)
				}
			}
			codectest.PerDelta(b, memDeltas, cpu0)
			if texts != memDeltas {
				b.Fatalf("%d texts", texts)
			}
		})
	}
}
