package codectest

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"unicode/utf8"
)

// The floors below are what a decoder benchmark is compared with: the least
// work that produces the same events from the same bytes. They frame the
// SSE body with a bufio line loop (as bench/internal/clients/floor.go does,
// with the SSE reader's 4 KiB buffer), find each value by searching for its
// key with bytes.Index, unescape a string without allocating and hand it
// out as a slice of the buffer (valid until the next line). They check
// nothing else: no structure, no other field. A decoder within a small
// factor of its floor leaves little to win.

// FloorLines calls line with each "data:" line of an SSE body (the prefix
// and the terminator cut, a leading space kept) and name with each
// "event:" line's value; it stops when either returns false. It is the
// framing part of every floor.
func FloorLines(br *bufio.Reader, name func([]byte) bool, line func([]byte) bool) error {
	for {
		l, err := br.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		n := len(l) - 1
		if n > 0 && l[n-1] == '\r' {
			n--
		}
		l = l[:n]
		switch {
		case bytes.HasPrefix(l, []byte("data:")):
			if !line(l[5:]) {
				return nil
			}
		case name != nil && bytes.HasPrefix(l, []byte("event:")):
			if !name(bytes.TrimLeft(l[6:], " ")) {
				return nil
			}
		}
	}
}

// FloorString finds key (`"text":` with its colon) in data and returns the
// JSON string after it, unescaped (into *scratch when it has escapes).
func FloorString(data, key []byte, scratch *[]byte) ([]byte, bool) {
	i := bytes.Index(data, key)
	if i < 0 {
		return nil, false
	}
	rest := data[i+len(key):]
	for len(rest) > 0 && rest[0] == ' ' {
		rest = rest[1:]
	}
	if len(rest) == 0 || rest[0] != '"' {
		return nil, false
	}
	rest = rest[1:]
	escaped := false
	end := -1
	for j := 0; j < len(rest); j++ {
		if c := rest[j]; c == '\\' {
			escaped = true
			j++
		} else if c == '"' {
			end = j
			break
		}
	}
	if end < 0 {
		return nil, false
	}
	if !escaped {
		return rest[:end], true
	}
	out := (*scratch)[:0]
	s := rest[:end]
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			out = append(out, c)
			continue
		}
		i++
		switch s[i] {
		case 'n':
			out = append(out, '\n')
		case 't':
			out = append(out, '\t')
		case 'r':
			out = append(out, '\r')
		case 'u':
			if i+4 < len(s) {
				var r rune
				for _, h := range s[i+1 : i+5] {
					r <<= 4
					switch {
					case h >= '0' && h <= '9':
						r |= rune(h - '0')
					case h >= 'a' && h <= 'f':
						r |= rune(h - 'a' + 10)
					case h >= 'A' && h <= 'F':
						r |= rune(h - 'A' + 10)
					}
				}
				out = utf8.AppendRune(out, r)
				i += 4
			}
		default:
			out = append(out, s[i])
		}
	}
	*scratch = out
	return out, true
}

// FloorInt finds key in data and returns the non-negative integer after
// it.
func FloorInt(data, key []byte) (int, bool) {
	i := bytes.Index(data, key)
	if i < 0 {
		return 0, false
	}
	rest := data[i+len(key):]
	for len(rest) > 0 && rest[0] == ' ' {
		rest = rest[1:]
	}
	n, digits := 0, 0
	for _, c := range rest {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
		digits++
	}
	return n, digits > 0
}
