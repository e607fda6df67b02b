package store

import (
	"context"
	"database/sql"

	"github.com/jackc/pgx/v5"
)

// SQLiteSettings returns journal_mode, synchronous and busy_timeout as seen by
// n distinct connections of s, held at once.
func SQLiteSettings(ctx context.Context, s *SQLite, n int) ([][3]string, error) {
	conns := make([]*sql.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	var out [][3]string
	for range n {
		c, err := s.db.Conn(ctx)
		if err != nil {
			return nil, err
		}
		conns = append(conns, c)
		var v [3]string
		for i, p := range []string{"journal_mode", "synchronous", "busy_timeout"} {
			if err := c.QueryRowContext(ctx, "PRAGMA "+p).Scan(&v[i]); err != nil {
				return nil, err
			}
		}
		out = append(out, v)
	}
	return out, nil
}

// PostgresSetting runs SHOW name on one of p's connections.
func PostgresSetting(ctx context.Context, p *Postgres, name string) (string, error) {
	var v string
	err := p.do(ctx, "show", true, func(c *pgx.Conn) error {
		return c.QueryRow(ctx, "SHOW "+pgx.Identifier{name}.Sanitize()).Scan(&v)
	})
	return v, err
}
