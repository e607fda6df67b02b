package gemini

import (
	"strconv"
	"strings"

	"github.com/chorusrt/chorus/providers/internal/jsonscan"
)

// argsWriter rebuilds a function call's JSON arguments from Vertex AI
// partialArgs fragments ({jsonPath, stringValue|numberValue|boolValue|
// nullValue, willContinue}) and writes them as text, fragment by fragment,
// so the argument text streams like any other format's.
//
// Fragments come in generation order, which is document order: the writer
// keeps the chain of containers it has opened, closes those the next path
// leaves and opens those it enters. A string fragment with willContinue
// leaves its string open for the next fragment of the same path. Whatever
// order the paths come in, the text is well-formed JSON once finish has run
// (a revisited key is written again, which JSON allows).
type argsWriter struct {
	// out is the text produced since the caller last reset it.
	out     []byte
	scratch []byte
	frames  []argFrame
	strOpen bool
	strPath string
}

// pathSeg is one step of a JSON path: a member name or an array index.
type pathSeg struct {
	key   string
	idx   int
	isIdx bool
}

// argFrame is an open container. seg is the step that leads to it from its
// parent (zero for the root object).
type argFrame struct {
	array bool
	seg   pathSeg
	count int // members written
	next  int // next array index
}

// start opens the root object and returns its text.
func (w *argsWriter) start() string {
	w.frames = append(w.frames[:0], argFrame{})
	return "{"
}

// apply writes one partialArgs fragment.
func (w *argsWriter) apply(frag []byte) error {
	var pathRaw, sv, nv []byte
	var hasS, hasN, hasB, hasNull, bval, cont bool
	o := jsonscan.NewObject(frag)
	for o.Next() {
		switch string(o.Key()) {
		case "jsonPath":
			pathRaw = o.Value()
		case "stringValue":
			sv, hasS = o.Value(), true
		case "numberValue":
			nv, hasN = o.Value(), true
		case "boolValue":
			bval, hasB = jsonscan.Bool(o.Value()), true
		case "nullValue":
			hasNull = true
		case "willContinue":
			cont = jsonscan.Bool(o.Value())
		}
	}
	if err := o.Err(); err != nil {
		return err
	}
	path, err := jsonscan.String(pathRaw)
	if err != nil {
		return err
	}
	var str []byte
	if hasS {
		// Decode and re-escape rather than copy the raw text: the fragment
		// may hold escapes or control bytes that are not valid JSON.
		if !jsonscan.IsString(sv) {
			return jsonscan.ErrSyntax
		}
		s, err := jsonscan.String(sv)
		if err != nil {
			return err
		}
		w.scratch = appendJSONString(w.scratch[:0], s)
		str = w.scratch[1 : len(w.scratch)-1]
	}
	if w.strOpen {
		if hasS && path == w.strPath {
			w.out = append(w.out, str...)
			if !cont {
				w.out = append(w.out, '"')
				w.strOpen = false
			}
			return nil
		}
		w.out = append(w.out, '"')
		w.strOpen = false
	}
	if !hasS && !hasN && !hasB && !hasNull {
		return nil
	}
	segs, ok := parseJSONPath(path)
	if !ok || len(segs) == 0 || len(w.frames) == 0 {
		// Not a member of the argument object: nothing to write.
		return nil
	}

	// Keep the open containers the path still runs through.
	k := 0
	for k < len(segs)-1 && k+1 < len(w.frames) {
		f := &w.frames[k+1]
		if f.seg != segs[k] || f.array != segs[k+1].isIdx {
			break
		}
		k++
	}
	for len(w.frames) > k+1 {
		w.pop()
	}
	for i := k; i < len(segs); i++ {
		w.member(segs[i])
		if i < len(segs)-1 {
			arr := segs[i+1].isIdx
			if arr {
				w.out = append(w.out, '[')
			} else {
				w.out = append(w.out, '{')
			}
			w.frames = append(w.frames, argFrame{array: arr, seg: segs[i]})
		}
	}

	switch {
	case hasS:
		w.out = append(w.out, '"')
		w.out = append(w.out, str...)
		if cont {
			w.strOpen, w.strPath = true, path
		} else {
			w.out = append(w.out, '"')
		}
	case hasN:
		w.out = appendNumber(w.out, nv)
	case hasB:
		w.out = strconv.AppendBool(w.out, bval)
	default:
		w.out = append(w.out, "null"...)
	}
	return nil
}

// member writes the separator and key (or array padding) for seg in the
// innermost open container.
func (w *argsWriter) member(seg pathSeg) {
	f := &w.frames[len(w.frames)-1]
	if f.array {
		for f.next < seg.idx {
			if f.count > 0 {
				w.out = append(w.out, ',')
			}
			w.out = append(w.out, "null"...)
			f.count++
			f.next++
		}
		if f.count > 0 {
			w.out = append(w.out, ',')
		}
		f.count++
		if seg.idx >= f.next {
			f.next = seg.idx + 1
		} else {
			f.next++
		}
		return
	}
	if f.count > 0 {
		w.out = append(w.out, ',')
	}
	key := seg.key
	if seg.isIdx {
		key = strconv.Itoa(seg.idx)
	}
	w.out = appendJSONString(w.out, key)
	w.out = append(w.out, ':')
	f.count++
}

// pop closes the innermost container.
func (w *argsWriter) pop() {
	f := w.frames[len(w.frames)-1]
	if f.array {
		w.out = append(w.out, ']')
	} else {
		w.out = append(w.out, '}')
	}
	w.frames = w.frames[:len(w.frames)-1]
}

// finish closes the open string and every open container, the root included.
func (w *argsWriter) finish() {
	if w.strOpen {
		w.out = append(w.out, '"')
		w.strOpen = false
	}
	for len(w.frames) > 0 {
		w.pop()
	}
}

// appendNumber appends a numberValue. Non-finite values, which proto3 JSON
// writes as strings ("NaN", "Infinity"), have no JSON number and become null.
func appendNumber(dst, v []byte) []byte {
	i := 0
	for i < len(v) && (v[i] == ' ' || v[i] == '\n' || v[i] == '\r' || v[i] == '\t') {
		i++
	}
	j := len(v)
	for j > i && (v[j-1] == ' ' || v[j-1] == '\n' || v[j-1] == '\r' || v[j-1] == '\t') {
		j--
	}
	num := v[i:j]
	if len(num) == 0 || !(num[0] == '-' || (num[0] >= '0' && num[0] <= '9')) {
		return append(dst, "null"...)
	}
	for _, c := range num {
		if !(c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E') {
			return append(dst, "null"...)
		}
	}
	return append(dst, num...)
}

// parseJSONPath splits an RFC 9535 normalized path ("$.a.b[0]['c d']") into
// steps. ok is false for anything else.
func parseJSONPath(p string) (segs []pathSeg, ok bool) {
	if p == "" || p[0] != '$' {
		return nil, false
	}
	i := 1
	for i < len(p) {
		switch p[i] {
		case '.':
			j := i + 1
			for j < len(p) && p[j] != '.' && p[j] != '[' {
				j++
			}
			if j == i+1 {
				return nil, false
			}
			segs = append(segs, pathSeg{key: p[i+1 : j]})
			i = j
		case '[':
			if i+1 >= len(p) {
				return nil, false
			}
			if q := p[i+1]; q == '\'' || q == '"' {
				var b strings.Builder
				j := i + 2
				for j < len(p) && p[j] != q {
					if p[j] == '\\' && j+1 < len(p) {
						j++
					}
					b.WriteByte(p[j])
					j++
				}
				if j+1 >= len(p) || p[j+1] != ']' {
					return nil, false
				}
				segs = append(segs, pathSeg{key: b.String()})
				i = j + 2
				continue
			}
			j := i + 1
			for j < len(p) && p[j] >= '0' && p[j] <= '9' {
				j++
			}
			if j == i+1 || j >= len(p) || p[j] != ']' {
				return nil, false
			}
			n, err := strconv.Atoi(p[i+1 : j])
			if err != nil {
				return nil, false
			}
			segs = append(segs, pathSeg{idx: n, isIdx: true})
			i = j + 1
		default:
			return nil, false
		}
	}
	return segs, true
}

// appendJSONString appends s as a JSON string.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}
