package jsonscan

// Strict reports whether data is one JSON value, with only whitespace
// around it, exactly as encoding/json.Valid judges it: the same grammar
// (numbers, escapes, control characters in strings, literals), bytes that
// are not UTF-8 accepted inside strings, and the same nesting limit. It is
// one pass without a state machine per byte, several times faster than
// encoding/json.Valid (BenchmarkStrict); FuzzStrict checks the two agree.
func Strict(data []byte) bool {
	i, ok := strictValue(data, skipSpace(data, 0), 0)
	return ok && skipSpace(data, i) == len(data)
}

// strictMaxDepth is encoding/json's nesting limit: 10,000 open objects and
// arrays pass, one more does not.
const strictMaxDepth = 10000

// strictValue checks the value at b[i] and returns the index after it.
func strictValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch c := b[i]; {
	case c == '"':
		return strictString(b, i)
	case c == '{':
		if depth++; depth > strictMaxDepth {
			return i, false
		}
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1, true
		}
		for {
			if i >= len(b) || b[i] != '"' {
				return i, false
			}
			var ok bool
			if i, ok = strictString(b, i); !ok {
				return i, false
			}
			i = skipSpace(b, i)
			if i >= len(b) || b[i] != ':' {
				return i, false
			}
			if i, ok = strictValue(b, skipSpace(b, i+1), depth); !ok {
				return i, false
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return i, false
			}
			switch b[i] {
			case ',':
				i = skipSpace(b, i+1)
			case '}':
				return i + 1, true
			default:
				return i, false
			}
		}
	case c == '[':
		if depth++; depth > strictMaxDepth {
			return i, false
		}
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = strictValue(b, i, depth); !ok {
				return i, false
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return i, false
			}
			switch b[i] {
			case ',':
				i = skipSpace(b, i+1)
			case ']':
				return i + 1, true
			default:
				return i, false
			}
		}
	case c == 't':
		return strictLiteral(b, i, "true")
	case c == 'f':
		return strictLiteral(b, i, "false")
	case c == 'n':
		return strictLiteral(b, i, "null")
	case c == '-' || c >= '0' && c <= '9':
		return strictNumber(b, i)
	}
	return i, false
}

func strictLiteral(b []byte, i int, lit string) (int, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, false
	}
	return i + len(lit), true
}

// strictPlain marks the string bytes that need no look: not a quote, a
// backslash or a control character.
var strictPlain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// strictString checks the string at b[i] == '"'.
func strictString(b []byte, i int) (int, bool) {
	i++
	for {
		for i < len(b) && strictPlain[b[i]] {
			i++
		}
		if i >= len(b) {
			return i, false
		}
		switch b[i] {
		case '"':
			return i + 1, true
		case '\\':
			if i+1 >= len(b) {
				return i, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(b)-i < 6 {
					return i, false
				}
				for _, h := range b[i+2 : i+6] {
					if !strictHex(h) {
						return i, false
					}
				}
				i += 6
			default:
				return i, false
			}
		default: // a control character
			return i, false
		}
	}
}

func strictHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func strictDigit(c byte) bool { return c >= '0' && c <= '9' }

// strictNumber checks the number at b[i]: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func strictNumber(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return i, false
	case b[i] == '0':
		i++
	case strictDigit(b[i]):
		for i < len(b) && strictDigit(b[i]) {
			i++
		}
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !strictDigit(b[i]) {
			return i, false
		}
		for i < len(b) && strictDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !strictDigit(b[i]) {
			return i, false
		}
		for i < len(b) && strictDigit(b[i]) {
			i++
		}
	}
	return i, true
}
