package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// LeaseLister lists the sessions' current leases: which holder (in a
// cluster, "<node address>/<activation id>") runs each session now. The
// console shows it as where each session lives. *SQLite and *Postgres
// implement it.
type LeaseLister interface {
	// Leases returns up to limit leases that have a holder (released ones
	// are left out), sorted by session; an expired one is listed with its
	// past Expires until another holder takes it.
	Leases(ctx context.Context, limit int) ([]Lease, error)
}

var (
	_ LeaseLister = (*SQLite)(nil)
	_ LeaseLister = (*Postgres)(nil)
)

// Leases implements LeaseLister.
func (s *SQLite) Leases(ctx context.Context, limit int) ([]Lease, error) {
	if err := validateLimit(limit); err != nil {
		return nil, err
	}
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if limit == 0 {
		return nil, nil
	}
	rows, err := s.db.QueryContext(ctx, `SELECT session, holder, epoch, expires_at FROM `+tableLeases+`
		WHERE holder <> '' ORDER BY session LIMIT ?`, limit)
	if err != nil {
		return nil, s.wrap(ctx, "leases", err)
	}
	defer rows.Close()
	var out []Lease
	for rows.Next() {
		var l Lease
		var expires int64
		if err := rows.Scan(&l.Session, &l.Holder, &l.Epoch, &expires); err != nil {
			return nil, s.wrap(ctx, "leases", err)
		}
		l.Expires = time.UnixMicro(expires).UTC()
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap(ctx, "leases", err)
	}
	return out, nil
}

const pgLeases = `SELECT session, holder, epoch, expires_at FROM ` + tableLeases + `
	WHERE holder <> '' ORDER BY session COLLATE "C" LIMIT $1`

// Leases implements LeaseLister.
func (p *Postgres) Leases(ctx context.Context, limit int) ([]Lease, error) {
	if err := validateLimit(limit); err != nil {
		return nil, err
	}
	var out []Lease
	err := p.do(ctx, "leases", true, func(c *pgx.Conn) error {
		out = out[:0]
		if limit == 0 {
			return nil
		}
		rows, err := c.Query(ctx, pgLeases, limit)
		if err != nil {
			return err
		}
		for rows.Next() {
			var l Lease
			if err := rows.Scan(&l.Session, &l.Holder, &l.Epoch, &l.Expires); err != nil {
				rows.Close()
				return err
			}
			l.Expires = l.Expires.UTC()
			out = append(out, l)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
