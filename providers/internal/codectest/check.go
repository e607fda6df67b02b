package codectest

import (
	"bytes"
	"errors"
	"io"
	"runtime/metrics"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/sse"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// Source yields the events of a streamed body one at a time: the SSE event
// name (nil when the framing has none) and the data handed to
// wire.StreamDecoder.Feed. It returns io.EOF at the end of the body, and
// sse.ErrTooLarge or an error wrapping ErrTransport when the body cannot be
// framed; any other error fails the test.
type Source func() (name, data []byte, err error)

// ErrTransport is wrapped by the errors a Source returns for a body that is
// malformed at the framing level: package providers reports those as
// transport failures, not decoder errors, so the harness stops feeding the
// decoder there, as at io.EOF, and checks what was decoded so far.
var ErrTransport = errors.New("codectest: malformed stream framing")

// SSESource reads body as a Server-Sent Events stream with the SSE reader
// package providers uses.
func SSESource(body []byte) Source {
	r := sse.NewReader(bytes.NewReader(body), nil)
	return func() ([]byte, []byte, error) {
		ev, err := r.Next()
		return ev.Name, ev.Data, err
	}
}

var allocSample = []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}

// allocated is the heap allocated by the process so far.
func allocated() uint64 {
	metrics.Read(allocSample)
	return allocSample[0].Value.Uint64()
}

// allocBudget bounds what decoding n input bytes may allocate: a
// generous multiple of the input plus the fixed buffers (the SSE reader's
// 32 KiB, decoder state).
func allocBudget(n int) uint64 { return uint64(64*n) + 4<<20 }

// sizeBudget bounds the size of a result decoded from n input bytes
// (escapes re-encoded by a parser can grow a little).
func sizeBudget(n int) int { return 8*n + 1024 }

func resultSize(res *llm.ChatResult) int {
	if res == nil {
		return 0
	}
	n := len(res.Content) + len(res.Reasoning) + len(res.Refusal) + len(res.ID) + len(res.Model)
	for _, tc := range res.ToolCalls {
		n += len(tc.ID) + len(tc.Name) + len(tc.Arguments) + len(tc.Signature)
	}
	for _, tb := range res.ThinkingBlocks {
		n += len(tb.Text) + len(tb.Signature) + len(tb.Data)
	}
	return n
}

// typedError fails unless err is one of the decoders' typed errors.
func typedError(t *testing.T, err error) {
	t.Helper()
	var de *llm.DecodeError
	var ae *llm.APIError
	if err != nil && !errors.As(err, &de) && !errors.As(err, &ae) {
		t.Fatalf("untyped error %T: %v", err, err)
	}
}

// checkResult checks what is true of any result, buffered or streamed.
func checkResult(t *testing.T, in int, res *llm.ChatResult) {
	t.Helper()
	if res == nil {
		return
	}
	if !res.FinishReason.Valid() {
		t.Fatalf("finish %q is not canonical", res.FinishReason)
	}
	if n := resultSize(res); n > sizeBudget(in) {
		t.Fatalf("result of %d bytes from %d input bytes", n, in)
	}
}

// Stream feeds a whole SSE body to dec the way package providers does and
// checks the events, the error and the result (see StreamFrom).
func Stream(t *testing.T, dec wire.StreamDecoder, body []byte) {
	t.Helper()
	StreamFrom(t, dec, body, SSESource)
}

// StreamFrom feeds a whole streamed body to dec event by event, the events
// coming from the Source open makes of body, and checks: every tool call
// start is at the next position and every tool delta at an opened call;
// finish events and the result's finish reason are canonical; a decoder
// error is typed and ends the feed; Result() is not nil, holds as many tool
// calls as the events opened, and the same text and reasoning the events
// carried; and the memory allocated (open included) and the result's size stay within budgets
// proportional to len(body).
func StreamFrom(t *testing.T, dec wire.StreamDecoder, body []byte, open func([]byte) Source) {
	t.Helper()
	before := allocated()
	next := open(body)
	var text, reasoning strings.Builder
	opened := 0
	emit := func(ev llm.Event) bool {
		switch ev.Type {
		case llm.EventText:
			text.WriteString(ev.Text)
		case llm.EventReasoning:
			reasoning.WriteString(ev.Text)
		case llm.EventToolCallStart:
			if ev.ToolIndex != opened {
				t.Fatalf("tool call start at %d with %d calls open", ev.ToolIndex, opened)
			}
			opened++
		case llm.EventToolCallDelta:
			if ev.ToolIndex < 0 || ev.ToolIndex >= opened {
				t.Fatalf("tool delta for call %d with %d open", ev.ToolIndex, opened)
			}
		case llm.EventFinish:
			if !ev.Finish.Valid() {
				t.Fatalf("finish event %q is not canonical", ev.Finish)
			}
		}
		return true
	}
	for {
		name, data, err := next()
		if err == io.EOF || errors.Is(err, sse.ErrTooLarge) || errors.Is(err, ErrTransport) {
			break
		}
		if err != nil {
			t.Fatalf("sse over a byte slice: %v", err)
		}
		done, err := dec.Feed(name, data, emit)
		if err != nil {
			typedError(t, err)
			break
		}
		if done {
			break
		}
	}
	res := dec.Result()
	if res == nil {
		t.Fatal("Result() is nil")
	}
	if got := allocated() - before; got > allocBudget(len(body)) {
		t.Fatalf("decoding %d bytes allocated %d bytes", len(body), got)
	}
	checkResult(t, len(body), res)
	if len(res.ToolCalls) != opened {
		t.Fatalf("result holds %d tool calls, the events opened %d", len(res.ToolCalls), opened)
	}
	if res.Content != text.String() || res.Reasoning != reasoning.String() {
		t.Fatalf("result text %q / reasoning %q, events carried %q / %q", res.Content, res.Reasoning, text.String(), reasoning.String())
	}
}

// Buffered parses a whole body with parse and checks the outcome; the same
// bytes go through parseError, which must not panic either. It checks: the
// memory both allocate and the error info's size stay within budgets
// proportional to len(body); an error is typed; without an error the
// result is not nil, its finish reason is canonical, its size is bounded,
// and no tool call is wholly empty.
func Buffered(t *testing.T, body []byte, parse func([]byte) (*llm.ChatResult, error), parseError func(int, []byte) wire.ErrorInfo) {
	t.Helper()
	before := allocated()
	res, err := parse(body)
	info := parseError(400, body)
	if got := allocated() - before; got > allocBudget(len(body)) {
		t.Fatalf("parsing %d bytes allocated %d bytes", len(body), got)
	}
	if len(info.Message)+len(info.Code)+len(info.Type) > sizeBudget(len(body)) {
		t.Fatalf("error info of %d bytes from %d", len(info.Message), len(body))
	}
	if err != nil {
		typedError(t, err)
		return
	}
	if res == nil {
		t.Fatal("nil result without an error")
	}
	checkResult(t, len(body), res)
	for i, tc := range res.ToolCalls {
		if tc.Name == "" && tc.ID == "" && tc.Arguments == "" {
			t.Fatalf("tool call %d is empty: %+v", i, res.ToolCalls)
		}
	}
}
