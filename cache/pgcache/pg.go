// Package pgcache is the PostgreSQL cache.Store, shared by a fleet:
// every process that opens the same database reads the entries the others
// wrote. Entries past the size cap are evicted oldest first (by the time
// they were written), the size checked every thousandth of the entries by
// each process (the cap holds to within 0.1%, at most 1,000 entries over
// per process); expired entries are never served and are deleted
// as new ones are written. Two processes storing the same answer at once
// store it once (the later write replaces the earlier).
//
//	s, err := pgcache.Open(ctx, "postgres://chorus@db/chorus", cache.Limits{MaxBytes: 1 << 30})
//	c, err := cache.New(s, cache.Options{TTL: 24 * time.Hour})
package pgcache

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chorusrt/chorus/cache"
	"github.com/chorusrt/chorus/llm"
)

// Store is the PostgreSQL cache.Store.
type Store struct {
	pool   *pgxpool.Pool
	lim    cache.Limits
	closed atomic.Bool

	size cache.SizeCheck // paces the size cap's checks
}

var _ cache.Store = (*Store)(nil)

var schema = []string{
	`CREATE TABLE IF NOT EXISTS chorus_cache (
		id        BIGSERIAL PRIMARY KEY,
		namespace TEXT   NOT NULL,
		key       TEXT   NOT NULL,
		value     BYTEA  NOT NULL,
		size      BIGINT NOT NULL,
		created   BIGINT NOT NULL,
		expires   BIGINT NOT NULL,
		UNIQUE (namespace, key)
	)`,
	`CREATE INDEX IF NOT EXISTS chorus_cache_created ON chorus_cache (created, id)`,
	`CREATE INDEX IF NOT EXISTS chorus_cache_expires ON chorus_cache (expires) WHERE expires > 0`,
}

// Open connects to dsn, creates the table if needed, and returns the
// store capped by lim. A DSN or limit that cannot hold is an
// *llm.ConfigError naming it.
func Open(ctx context.Context, dsn string, lim cache.Limits) (*Store, error) {
	if err := lim.Validate(); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, &llm.ConfigError{Field: "dsn", Msg: err.Error()}
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 10 * time.Second
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgcache: open: %w", err)
	}
	// Concurrent first opens race on CREATE ... IF NOT EXISTS; a lock
	// makes them take turns.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(7302633)`); err != nil {
			return err
		}
		for _, q := range schema {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgcache: create schema: %w", err)
	}
	return &Store{pool: pool, lim: lim}, nil
}

// Get implements cache.Store.
func (s *Store) Get(ctx context.Context, namespace, key string, now time.Time) ([]byte, bool, error) {
	if s.closed.Load() {
		return nil, false, cache.ErrClosed
	}
	var v []byte
	err := s.pool.QueryRow(ctx, `SELECT value FROM chorus_cache WHERE namespace = $1 AND key = $2 AND (expires = 0 OR expires > $3)`,
		namespace, key, now.UnixMicro()).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("pgcache: get: %w", err)
	}
	return v, true, nil
}

// Put implements cache.Store.
func (s *Store) Put(ctx context.Context, e cache.Entry) error {
	if s.closed.Load() {
		return cache.ErrClosed
	}
	var exp int64
	if !e.Expires.IsZero() {
		exp = e.Expires.UnixMicro()
	}
	now := e.Created.UnixMicro()
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO chorus_cache (namespace, key, value, size, created, expires) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (namespace, key) DO UPDATE SET value = EXCLUDED.value, size = EXCLUDED.size,
		created = EXCLUDED.created, expires = EXCLUDED.expires, id = nextval(pg_get_serial_sequence('chorus_cache', 'id'))`,
		e.Namespace, e.Key, e.Value, cache.EntrySize(e), now, exp)
	b.Queue(`DELETE FROM chorus_cache WHERE expires > 0 AND expires <= $1`, now)
	check := s.size.Due(s.lim)
	if check && s.lim.MaxEntries > 0 {
		b.Queue(`DELETE FROM chorus_cache WHERE id IN (
			SELECT id FROM chorus_cache ORDER BY created, id
			LIMIT greatest(0, (SELECT count(*) FROM chorus_cache) - $1))`, s.lim.MaxEntries)
	}
	if check && s.lim.MaxBytes > 0 {
		b.Queue(`DELETE FROM chorus_cache WHERE id IN (
			SELECT id FROM (SELECT id, sum(size) OVER (ORDER BY created DESC, id DESC) AS run FROM chorus_cache) w
			WHERE run > $1)`, s.lim.MaxBytes)
	}
	var n int64
	if check {
		b.Queue(`SELECT count(*) FROM chorus_cache`).QueryRow(func(row pgx.Row) error { return row.Scan(&n) })
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return fmt.Errorf("pgcache: put: %w", err)
	}
	if check {
		s.size.Checked(n)
	}
	return nil
}

// Close implements cache.Store.
func (s *Store) Close() error {
	if !s.closed.Swap(true) {
		s.pool.Close()
	}
	return nil
}
