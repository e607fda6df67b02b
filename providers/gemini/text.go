package gemini

import "unsafe"

// textBuf holds the answer's text for the stream decoder: text deltas are
// decoded straight onto the end of its current block, and each text
// event's Text is a string over the bytes the delta added (view). A block
// only ever grows by append, so bytes below its length are never written
// again and those strings stay immutable; a delta costs no allocation of
// its own.
//
// When a delta does not fit, a new block is started (twice the last one's
// size, up to maxTextBlock) instead of copying the text into a bigger
// array: the full blocks are kept for Content, which joins them once, into
// an array of exactly the text's size, when a result is asked for. Bytes
// allocated per answer are then about twice the text, where growing one
// array by doubling allocates two to four times the text and copies it at
// every step. An answer that fits its first block needs no join at all.
type textBuf struct {
	cur  []byte   // the block being filled
	full [][]byte // the blocks filled before cur, in order
	n    int      // bytes in full

	joined string // Content as last joined

	// exact sizes each new block to the text it must hold: a buffered
	// answer has its texts whole, with no growth to plan for.
	exact bool
}

const (
	firstTextBlock = 256
	maxTextBlock   = 16 << 10
)

// reserve makes room in the current block for n more bytes (a text's raw
// length, which its decoding seldom exceeds; when it does, append grows
// the block, which is just as safe).
func (t *textBuf) reserve(n int) {
	if cap(t.cur)-len(t.cur) >= n {
		return
	}
	size := max(min(2*cap(t.cur), maxTextBlock), n, firstTextBlock)
	if t.exact {
		size = n
	}
	if len(t.cur) > 0 {
		t.full = append(t.full, t.cur)
		t.n += len(t.cur)
	}
	t.cur = make([]byte, 0, size)
}

// keep makes b, the current block with decoded text appended, the current
// block. When the append stayed in the block's array (reserve made room)
// only the length is stored: re-slicing a field in place needs no GC
// write barrier, where storing the new slice would.
func (t *textBuf) keep(b []byte) {
	if len(b) > 0 && cap(b) == cap(t.cur) && unsafe.SliceData(b) == unsafe.SliceData(t.cur) {
		t.cur = t.cur[:len(b)]
		return
	}
	t.cur = b
}

// view is the current block's text from start on, as a string over its
// bytes.
func (t *textBuf) view(start int) string {
	if start >= len(t.cur) {
		return ""
	}
	return unsafe.String(&t.cur[start], len(t.cur)-start)
}

// Len is the length of the whole text.
func (t *textBuf) Len() int { return t.n + len(t.cur) }

// String is the whole text. Joined text is kept until more arrives.
func (t *textBuf) String() string {
	if len(t.full) == 0 {
		return t.view(0)
	}
	n := t.Len()
	if len(t.joined) == n {
		return t.joined
	}
	b := make([]byte, 0, n)
	for _, f := range t.full {
		b = append(b, f...)
	}
	b = append(b, t.cur...)
	t.joined = unsafe.String(&b[0], len(b))
	return t.joined
}
