package gateway

import (
	"bytes"
	"unicode/utf8"
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

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string exactly as encoding/json
// writes a string (HTML characters escaped, invalid UTF-8 as \ufffd,
// U+2028 and U+2029 escaped): TestAppendJSONStringMatchesEncodingJSON and
// its fuzz target hold it to that.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
