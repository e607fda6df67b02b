// Package jsonscan walks JSON documents without building them: it iterates
// object members and array elements as raw slices of the input and decodes
// only the strings and numbers a caller asks for.
//
// It exists for the streaming hot path. Decoding one OpenAI chunk with
// encoding/json costs several microseconds and a dozen allocations, most of
// them for fields Chorus never reads (see BenchmarkChunk in the openai
// package); walking the chunk with this package and decoding only the delta
// text costs a few hundred nanoseconds and one allocation. Buffered
// responses, which are not on the hot path, use encoding/json.
//
// The scanner validates the structure it walks (brackets, strings, literals)
// and returns an error on malformed input; it never panics and never reads
// past the slice it was given.
package jsonscan

import (
	"bytes"
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// ErrSyntax is returned for malformed JSON.
var ErrSyntax = errors.New("jsonscan: malformed JSON")

var space = [256]bool{' ': true, '\n': true, '\r': true, '\t': true}

// scalarEnd marks the bytes that end a number or literal.
var scalarEnd = [256]bool{' ': true, '\n': true, '\r': true, '\t': true, ',': true, '}': true, ']': true}

func isSpace(c byte) bool { return space[c] }

func skipSpace(b []byte, i int) int {
	for i < len(b) && space[b[i]] {
		i++
	}
	return i
}

// skipString returns the index after the closing quote of the string that
// starts at b[i] == '"'. It jumps from quote to quote with bytes.IndexByte
// (vectorised) and counts the backslashes before each one. (A byte loop for
// the first 16 bytes measured 14% more instructions on the OpenAI chunk
// benchmark under callgrind, so there is none.)
func skipString(b []byte, i int) (int, error) {
	i++
	for i <= len(b) {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return 0, ErrSyntax
		}
		k := i + j
		n := 0
		for m := k - 1; m >= i && b[m] == '\\'; m-- {
			n++
		}
		if n%2 == 0 {
			return k + 1, nil
		}
		i = k + 1
	}
	return 0, ErrSyntax
}

// structural marks the bytes a container scan must look at.
var structural = [256]bool{'"': true, '{': true, '[': true, '}': true, ']': true}

// skipValue returns the index after the value that starts at b[i].
func skipValue(b []byte, i int) (int, error) {
	i = skipSpace(b, i)
	if i >= len(b) {
		return 0, ErrSyntax
	}
	switch c := b[i]; {
	case c == '"':
		return skipString(b, i)
	case c == '{' || c == '[':
		depth := 0
		for i < len(b) {
			for i < len(b) && !structural[b[i]] {
				i++
			}
			if i >= len(b) {
				break
			}
			switch b[i] {
			case '"':
				j, err := skipString(b, i)
				if err != nil {
					return 0, err
				}
				i = j
				continue
			case '{', '[':
				depth++
			default: // '}' or ']'
				depth--
				if depth == 0 {
					return i + 1, nil
				}
			}
			i++
		}
		return 0, ErrSyntax
	case c == 't' || c == 'f' || c == 'n' || c == '-' || (c >= '0' && c <= '9'):
		j := i
		for j < len(b) && !scalarEnd[b[j]] {
			j++
		}
		if j == i {
			return 0, ErrSyntax
		}
		return j, nil
	}
	return 0, ErrSyntax
}

// cursor is an iterator's position. A child iterator opened on the current
// value (Object.Object, Object.Array, Array.Object, Array.Array) walks that
// value in place; handing its End back with Consumed moves the parent past
// the value, so nested data is scanned once instead of once per level. (The
// child holds no pointer to its parent: that would move every iterator to
// the heap, an allocation per chunk.)
type cursor struct {
	i       int    // next byte to read
	vs      int    // start of the current value
	pending bool   // the current value has not been skipped yet
	val     []byte // the current value, once its end is known
}

// consumed records that a child walked the current value up to end.
func (c *cursor) consumed(b []byte, end int) {
	if !c.pending || end <= c.vs || end > len(b) {
		return
	}
	c.val, c.i, c.pending = b[c.vs:end], end, false
}

// skip moves past the current value if nothing walked it.
func (c *cursor) skip(b []byte) error {
	if !c.pending {
		return nil
	}
	ve, err := skipValue(b, c.vs)
	if err != nil {
		return err
	}
	c.val, c.i, c.pending = b[c.vs:ve], ve, false
	return nil
}

// Object iterates the members of a JSON object.
//
//	it := jsonscan.NewObject(data)
//	for it.Next() {
//		switch string(it.Key()) {
//		case "a": s, _ := jsonscan.String(it.Value())
//		case "b": inner := it.Object(); for inner.Next() { ... }
//		}
//	}
//	if it.Err() != nil { ... }
type Object struct {
	b     []byte
	c     cursor
	key   []byte
	ks    int
	err   error
	first bool
	done  bool
	end   int
}

// NewObject starts iterating data, which must hold an object. null (or
// nothing) yields no members and no error; any other value is ErrSyntax.
func NewObject(data []byte) Object {
	i := skipSpace(data, 0)
	if i < len(data) && data[i] == '{' {
		return Object{b: data, c: cursor{i: i + 1}, first: true}
	}
	if IsNull(data) {
		return Object{done: true}
	}
	return Object{err: ErrSyntax}
}

// ResumeObject continues iterating the object that data holds from offset
// at, just past the value of a member already walked (in an earlier
// document whose bytes up to at were the same, for instance): the next
// call to Next expects a comma or the closing brace. An at that cannot end
// a member (out of range, or inside a number or literal that continues)
// yields ErrSyntax, never a wrong member.
func ResumeObject(data []byte, at int) Object {
	if at <= 0 || at >= len(data) || !scalarEnd[data[at]] {
		return Object{err: ErrSyntax}
	}
	return Object{b: data, c: cursor{i: at}}
}

// childObject opens an object iterator on the value at c.vs of b.
func childObject(b []byte, c *cursor) Object {
	if !c.pending {
		return NewObject(c.val)
	}
	i := c.vs
	if i < len(b) && b[i] == '{' {
		return Object{b: b, c: cursor{i: i + 1}, first: true}
	}
	if IsNull(b[i:]) {
		return Object{done: true}
	}
	return Object{err: ErrSyntax}
}

// childArray opens an array iterator on the value at c.vs of b.
func childArray(b []byte, c *cursor) Array {
	if !c.pending {
		return NewArray(c.val)
	}
	i := c.vs
	if i < len(b) && b[i] == '[' {
		return Array{b: b, c: cursor{i: i + 1}, first: true, idx: -1}
	}
	if IsNull(b[i:]) {
		return Array{done: true}
	}
	return Array{err: ErrSyntax}
}

// Next advances to the next member.
func (o *Object) Next() bool {
	if o.err != nil || o.done {
		return false
	}
	if err := o.c.skip(o.b); err != nil {
		o.err = err
		return false
	}
	i := skipSpace(o.b, o.c.i)
	if i >= len(o.b) {
		o.err = ErrSyntax
		return false
	}
	if o.b[i] == '}' {
		o.done, o.end = true, i+1
		return false
	}
	if !o.first {
		if o.b[i] != ',' {
			o.err = ErrSyntax
			return false
		}
		i = skipSpace(o.b, i+1)
	}
	o.first = false
	if i >= len(o.b) || o.b[i] != '"' {
		o.err = ErrSyntax
		return false
	}
	end, err := skipString(o.b, i)
	if err != nil {
		o.err = err
		return false
	}
	o.key, o.ks = o.b[i+1:end-1], i
	i = skipSpace(o.b, end)
	if i >= len(o.b) || o.b[i] != ':' {
		o.err = ErrSyntax
		return false
	}
	vs := skipSpace(o.b, i+1)
	if vs >= len(o.b) {
		o.err = ErrSyntax
		return false
	}
	o.c = cursor{i: vs, vs: vs, pending: true}
	return true
}

// Key is the current member's key, raw (escapes not decoded).
func (o *Object) Key() []byte { return o.key }

// KeyStart is the offset, in the data being iterated, of the current key's
// opening quote: the members before it end at the last comma before it.
func (o *Object) KeyStart() int { return o.ks }

// KeyIs reports whether the current key equals s.
func (o *Object) KeyIs(s string) bool { return string(o.key) == s }

// Value is the current member's raw value. It is nil after a malformed value
// (Err says why).
func (o *Object) Value() []byte {
	if err := o.c.skip(o.b); err != nil {
		o.err = err
		return nil
	}
	return o.c.val
}

// Object walks the current value, which must be an object or null, in
// place. Pass the child's End to Consumed when it is done, and the parent
// does not scan the value again.
func (o *Object) Object() Object { return childObject(o.b, &o.c) }

// Array walks the current value, which must be an array or null, in place.
func (o *Object) Array() Array { return childArray(o.b, &o.c) }

// Consumed tells the iterator that a child walked the current value up to
// end (the child's End). An end of 0 (a child that stopped early or failed)
// changes nothing: the value is skipped as usual.
func (o *Object) Consumed(end int) { o.c.consumed(o.b, end) }

// End is the offset just past the object's closing brace, once Next has
// reached it; 0 before.
func (o *Object) End() int { return o.end }

// Err is the first syntax error met.
func (o *Object) Err() error { return o.err }

// Array iterates the elements of a JSON array.
type Array struct {
	b     []byte
	c     cursor
	err   error
	first bool
	done  bool
	idx   int
	end   int
}

// NewArray starts iterating data, which must hold an array or null.
func NewArray(data []byte) Array {
	i := skipSpace(data, 0)
	if i < len(data) && data[i] == '[' {
		return Array{b: data, c: cursor{i: i + 1}, first: true, idx: -1}
	}
	if IsNull(data) {
		return Array{done: true}
	}
	return Array{err: ErrSyntax}
}

// Next advances to the next element.
func (a *Array) Next() bool {
	if a.err != nil || a.done {
		return false
	}
	if err := a.c.skip(a.b); err != nil {
		a.err = err
		return false
	}
	i := skipSpace(a.b, a.c.i)
	if i >= len(a.b) {
		a.err = ErrSyntax
		return false
	}
	if a.b[i] == ']' {
		a.done, a.end = true, i+1
		return false
	}
	if !a.first {
		if a.b[i] != ',' {
			a.err = ErrSyntax
			return false
		}
		i = skipSpace(a.b, i+1)
	}
	a.first = false
	if i >= len(a.b) {
		a.err = ErrSyntax
		return false
	}
	a.c = cursor{i: i, vs: i, pending: true}
	a.idx++
	return true
}

// Value is the current element, raw.
func (a *Array) Value() []byte {
	if err := a.c.skip(a.b); err != nil {
		a.err = err
		return nil
	}
	return a.c.val
}

// Object walks the current element, which must be an object or null, in place.
func (a *Array) Object() Object { return childObject(a.b, &a.c) }

// Array walks the current element, which must be an array or null, in place.
func (a *Array) Array() Array { return childArray(a.b, &a.c) }

// Consumed is Object.Consumed for an element.
func (a *Array) Consumed(end int) { a.c.consumed(a.b, end) }

// End is the offset just past the array's closing bracket, once Next has
// reached it; 0 before.
func (a *Array) End() int { return a.end }

// Index is the current element's position.
func (a *Array) Index() int { return a.idx }

// Err is the first syntax error met.
func (a *Array) Err() error { return a.err }

// IsNull reports whether v is the literal null (or empty, meaning absent).
func IsNull(v []byte) bool {
	i := skipSpace(v, 0)
	if i >= len(v) {
		return true
	}
	return len(v)-i >= 4 && string(v[i:i+4]) == "null"
}

// IsString reports whether v is a JSON string.
func IsString(v []byte) bool {
	i := skipSpace(v, 0)
	return i < len(v) && v[i] == '"'
}

// String decodes a JSON string value. null and absent values decode to "".
// It allocates only for a non-empty result.
func String(v []byte) (string, error) {
	i := skipSpace(v, 0)
	if i >= len(v) || IsNull(v) {
		return "", nil
	}
	if v[i] != '"' {
		return "", ErrSyntax
	}
	end, err := skipString(v, i)
	if err != nil {
		return "", err
	}
	return decodeRaw(v[i+1 : end-1])
}

// StringPrefix decodes the JSON string that v starts with (no space before
// it) and returns it with the number of bytes it took, quotes included.
// What follows the string is not looked at.
func StringPrefix(v []byte) (string, int, error) {
	if len(v) == 0 || v[0] != '"' {
		return "", 0, ErrSyntax
	}
	end, err := skipString(v, 0)
	if err != nil {
		return "", 0, err
	}
	s, err := decodeRaw(v[1 : end-1])
	if err != nil {
		return "", 0, err
	}
	return s, end, nil
}

// AppendString is String appending the decoded string to dst instead of
// allocating it: dst grows by the string's bytes (nothing for null or an
// absent value). On error dst's contents are unchanged (bytes past its
// length may have been written).
func AppendString(dst, v []byte) ([]byte, error) {
	i := skipSpace(v, 0)
	if i >= len(v) || IsNull(v) {
		return dst, nil
	}
	if v[i] != '"' {
		return dst, ErrSyntax
	}
	end, err := skipString(v, i)
	if err != nil {
		return dst, err
	}
	return appendRaw(dst, v[i+1:end-1])
}

// AppendStringPrefix is StringPrefix appending the decoded string to dst
// instead of allocating it. n is the number of bytes the string took,
// quotes included. On error dst's contents are unchanged.
func AppendStringPrefix(dst, v []byte) (out []byte, n int, err error) {
	if len(v) == 0 || v[0] != '"' {
		return dst, 0, ErrSyntax
	}
	// A streamed delta is mostly a few plain bytes: one pass that looks
	// for the closing quote and for anything needing a decode (the search
	// and the check fused) costs less than the vectorised search and a
	// second pass. Non-ASCII text is checked as UTF-8 once its end is
	// found. Past shortString bytes, or at an escape or a control byte,
	// the general path takes over from the start.
	ascii := true
scan:
	for j := 1; j < len(v) && j <= shortString; j++ {
		switch c := v[j]; {
		case c == '"':
			if raw := v[1:j]; ascii || utf8.Valid(raw) {
				return append(dst, raw...), j + 1, nil
			}
			break scan
		case plain[c]:
		case c >= utf8.RuneSelf:
			ascii = false
		default:
			break scan
		}
	}
	end, err := skipString(v, 0)
	if err != nil {
		return dst, 0, err
	}
	out, err = appendRaw(dst, v[1:end-1])
	if err != nil {
		return dst, 0, err
	}
	return out, end, nil
}

// shortString is how far AppendStringPrefix looks byte by byte for the end
// of a plain string before it searches with bytes.IndexByte.
const shortString = 32

// plain marks the bytes a string's contents can hold and still be copied as
// they are: not a backslash, a control byte or a non-ASCII byte (which
// must be valid UTF-8).
var plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '\\'
	}
	return t
}()

// simpleRaw reports whether raw, the bytes between a string's quotes, is
// its own decoding: no escape, no control byte, valid UTF-8.
func simpleRaw(raw []byte) bool {
	for i, c := range raw {
		if !plain[c] {
			if c == '\\' || c < 0x20 {
				return false
			}
			return simpleTail(raw[i:])
		}
	}
	return true
}

// simpleTail is simpleRaw from the first non-ASCII byte on.
func simpleTail(raw []byte) bool {
	for _, c := range raw {
		if c == '\\' || c < 0x20 {
			return false
		}
	}
	return utf8.Valid(raw)
}

// appendRaw appends the decoding of the bytes between a string's quotes.
func appendRaw(dst, raw []byte) ([]byte, error) {
	if simpleRaw(raw) {
		return append(dst, raw...), nil
	}
	out, err := unescape(dst, raw)
	if err != nil {
		return dst, err
	}
	return out, nil
}

// decodeRaw decodes the bytes between a string's quotes.
func decodeRaw(raw []byte) (string, error) {
	if simpleRaw(raw) {
		if len(raw) == 0 {
			return "", nil
		}
		return string(raw), nil
	}
	out, err := unescape(make([]byte, 0, len(raw)), raw)
	if err != nil {
		return "", err
	}
	return string(out), nil
}

// StringIs reports whether v is the JSON string s without allocating
// (escape-free comparison).
func StringIs(v []byte, s string) bool {
	i := skipSpace(v, 0)
	if i >= len(v) || v[i] != '"' {
		return false
	}
	end, err := skipString(v, i)
	if err != nil {
		return false
	}
	return string(v[i+1:end-1]) == s
}

// RawString returns the bytes between the quotes of a JSON string value,
// escapes left as they are. It reports false for any other value.
func RawString(v []byte) ([]byte, bool) {
	i := skipSpace(v, 0)
	if i >= len(v) || v[i] != '"' {
		return nil, false
	}
	end, err := skipString(v, i)
	if err != nil {
		return nil, false
	}
	return v[i+1 : end-1], true
}

func unescape(dst, raw []byte) ([]byte, error) {
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRune(raw[i:])
			dst = utf8.AppendRune(dst, r) // invalid bytes become U+FFFD, as in encoding/json
			i += n - 1
			continue
		}
		if c != '\\' {
			dst = append(dst, c)
			continue
		}
		i++
		if i >= len(raw) {
			return nil, ErrSyntax
		}
		switch raw[i] {
		case '"', '\\', '/':
			dst = append(dst, raw[i])
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, n, ok := readHex(raw[i+1:])
			if !ok {
				return nil, ErrSyntax
			}
			i += n
			if utf16.IsSurrogate(r) {
				if len(raw) > i+2 && raw[i+1] == '\\' && raw[i+2] == 'u' {
					r2, n2, ok2 := readHex(raw[i+3:])
					if ok2 {
						if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
							i += 2 + n2
							dst = utf8.AppendRune(dst, d)
							continue
						}
					}
				}
				r = utf8.RuneError
			}
			dst = utf8.AppendRune(dst, r)
		default:
			return nil, ErrSyntax
		}
	}
	return dst, nil
}

func readHex(b []byte) (rune, int, bool) {
	if len(b) < 4 {
		return 0, 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, 0, false
		}
	}
	return r, 4, true
}

// Int decodes an integer value; null and absent decode to 0. A number with
// a fraction or exponent is truncated toward zero.
func Int(v []byte) (int, error) {
	i := skipSpace(v, 0)
	if i >= len(v) || IsNull(v) {
		return 0, nil
	}
	j := len(v)
	for j > i && isSpace(v[j-1]) {
		j--
	}
	s := v[i:j]
	n := 0
	neg := false
	k := 0
	if len(s) > 0 && s[0] == '-' {
		neg = true
		k = 1
	}
	if k >= len(s) {
		return 0, ErrSyntax
	}
	for ; k < len(s); k++ {
		c := s[k]
		if c < '0' || c > '9' {
			if c == '.' || c == 'e' || c == 'E' {
				f, err := strconv.ParseFloat(string(s), 64)
				if err != nil {
					return 0, ErrSyntax
				}
				return int(f), nil
			}
			return 0, ErrSyntax
		}
		n = n*10 + int(c-'0')
		if n > 1<<53 {
			return 0, ErrSyntax
		}
	}
	if neg {
		n = -n
	}
	return n, nil
}

// Bool decodes true or false; null and absent decode to false.
func Bool(v []byte) bool {
	i := skipSpace(v, 0)
	return len(v)-i >= 4 && string(v[i:i+4]) == "true"
}

// Get returns the raw value of key in object data, or nil when absent.
func Get(data []byte, key string) []byte {
	o := NewObject(data)
	for o.Next() {
		if o.KeyIs(key) {
			return o.Value()
		}
	}
	return nil
}

// Valid reports whether the value that data holds is well-formed enough to
// walk: a complete value with nothing after it.
func Valid(data []byte) bool {
	i := skipSpace(data, 0)
	if i >= len(data) {
		return false
	}
	end, err := skipValue(data, i)
	if err != nil {
		return false
	}
	return skipSpace(data, end) == len(data)
}
