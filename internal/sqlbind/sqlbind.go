// Package sqlbind holds what the stores that run one SQL text on both
// SQLite and PostgreSQL (keystore, requestlog) share: the placeholders.
package sqlbind

import (
	"strconv"
	"strings"
)

// Postgres rewrites the ? placeholders of q as PostgreSQL's $1, $2, ...
// (q holds no ? other than placeholders: no string literal has one).
func Postgres(q string) string {
	var b strings.Builder
	b.Grow(len(q) + 8)
	n := 0
	for _, c := range q {
		if c == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}
