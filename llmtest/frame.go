package llmtest

// frameKind places a stream event relative to the content, which is where
// mid-stream faults act.
type frameKind uint8

const (
	// fMid is structural: role chunk, block start/stop, ping, signature.
	fMid frameKind = iota
	// fHead opens the stream (message_start, the role chunk).
	fHead
	// fDelta carries content and counts toward Fault.After.
	fDelta
	// fTail closes the answer: finish, usage, terminator.
	fTail
)

// frame is one stream event before framing: an SSE event name (Anthropic)
// and its JSON data.
type frame struct {
	kind  frameKind
	event string
	data  []byte
}

// Framing modes.
const (
	modeData     = iota // "data: X\n\n" (OpenAI)
	modeEvent           // "event: N\ndata: X\n\n" (Anthropic)
	modeDataCRLF        // "data: X\r\n\r\n" (Gemini alt=sse)
	modeArray           // one JSON array written in pieces (Gemini without alt=sse)
)

// framer turns frames into body bytes.
type framer struct {
	mode int
	n    int
}

func (fr *framer) wrap(f frame) []byte {
	fr.n++
	var b []byte
	switch fr.mode {
	case modeEvent:
		b = make([]byte, 0, len(f.event)+len(f.data)+16)
		b = append(b, "event: "...)
		b = append(b, f.event...)
		b = append(b, "\ndata: "...)
		b = append(b, f.data...)
		b = append(b, "\n\n"...)
	case modeDataCRLF:
		b = make([]byte, 0, len(f.data)+10)
		b = append(b, "data: "...)
		b = append(b, f.data...)
		b = append(b, "\r\n\r\n"...)
	case modeArray:
		b = make([]byte, 0, len(f.data)+4)
		if fr.n == 1 {
			b = append(b, '[')
		} else {
			b = append(b, "\n,\r\n"...)
		}
		b = append(b, f.data...)
	default:
		b = make([]byte, 0, len(f.data)+8)
		b = append(b, "data: "...)
		b = append(b, f.data...)
		b = append(b, "\n\n"...)
	}
	return b
}

// end is what closes a complete body: "]" for an array, nothing for SSE.
func (fr *framer) end() []byte {
	if fr.mode != modeArray {
		return nil
	}
	if fr.n == 0 {
		return []byte("[]")
	}
	return []byte("\n]")
}
