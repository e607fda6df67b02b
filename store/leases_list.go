package store

import "context"

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
	return s.queryLeases(ctx, "leases", limit, `SELECT session, holder, epoch, expires_at FROM `+tableLeases+`
		WHERE holder <> '' ORDER BY session LIMIT ?`, limit)
}

const pgLeases = `SELECT session, holder, epoch, expires_at FROM ` + tableLeases + `
	WHERE holder <> '' ORDER BY session COLLATE "C" LIMIT $1`

// Leases implements LeaseLister.
func (p *Postgres) Leases(ctx context.Context, limit int) ([]Lease, error) {
	return p.queryLeases(ctx, "leases", limit, pgLeases)
}
