package sqlbind

import "testing"

func TestPostgres(t *testing.T) {
	for q, want := range map[string]string{
		"SELECT 1":                          "SELECT 1",
		"SELECT a FROM t WHERE b = ?":       "SELECT a FROM t WHERE b = $1",
		"INSERT INTO t VALUES (?, ?, ?)":    "INSERT INTO t VALUES ($1, $2, $3)",
		"UPDATE t SET é = ? WHERE id = ?":   "UPDATE t SET é = $1 WHERE id = $2",
		"? ? ? ? ? ? ? ? ? ?, ? and ? more": "$1 $2 $3 $4 $5 $6 $7 $8 $9 $10, $11 and $12 more",
	} {
		if got := Postgres(q); got != want {
			t.Errorf("Postgres(%q) = %q, want %q", q, got, want)
		}
	}
}
