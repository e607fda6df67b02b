package gateway

import (
	"bytes"
	"github.com/chorusrt/chorus/internal/jsonenc"
)

// textFrame writes a streamed text delta's frame without encoding/json: a
// constant prefix, the text as a JSON string, a constant suffix. The
// prefix and suffix are not written here but taken from the format's own
// encoder (the codec stays the one place that knows the wire), which
// frames two probe texts; the frame is used only when both probes come out
// as prefix + quoted text + suffix, byte for byte, else every delta goes
// through the codec as before. Measured on the OpenAI chunk
// (BenchmarkStreamGateway/handler): json.Marshal of the chunk struct was
// about two thirds of the gateway's CPU per delta and 6 of its 7
// allocations.
type textFrame struct {
	prefix, suffix []byte
	tried, ok      bool
	frames         int // deltas written with the frame (tests look)
}

// The probes: the second holds what encoding/json escapes (HTML
// characters, a quote, a control character, U+2028, non-ASCII), so that a
// codec escaping otherwise than appendJSONString is caught and not used.
const (
	probeA = "chorus-probe-a"
	probeB = "chorus-probe-b <&>\"\\\n\x01\u2028\u00e9"
)

// derive sets the frame from frame, the codec's encoding of a text delta
// in the stream's current state (which must not change by encoding one).
// It runs once per stream.
func (t *textFrame) derive(frame func(text string) []byte) {
	t.tried = true
	a, b := frame(probeA), frame(probeB)
	qa := appendJSONString(nil, probeA)
	// The probe text may occur more than once (a client may name its model
	// so): the split is the one that gives the second probe's frame. A
	// wrong one cannot: it would swap the two probes' places.
	for off := 0; ; {
		i := bytes.Index(a[off:], qa)
		if i < 0 {
			return
		}
		i += off
		prefix, suffix := a[:i:i], a[i+len(qa):]
		if bytes.Equal(b, t.appendWith(nil, prefix, suffix, probeB)) {
			t.prefix, t.suffix, t.ok = prefix, suffix, true
			return
		}
		off = i + 1
	}
}

// append appends text's frame; derive must have succeeded.
func (t *textFrame) append(dst []byte, text string) []byte {
	t.frames++
	return t.appendWith(dst, t.prefix, t.suffix, text)
}

func (t *textFrame) appendWith(dst, prefix, suffix []byte, text string) []byte {
	dst = append(dst, prefix...)
	dst = appendJSONString(dst, text)
	return append(dst, suffix...)
}

// appendJSONString appends s as json.Marshal writes it (HTML escaped), as
// the codecs' stream encoders do.
func appendJSONString(dst []byte, s string) []byte { return jsonenc.AppendString(dst, s, true) }
