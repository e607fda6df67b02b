// Package sqlitecache is the SQLite cache.Store: one database file (pure
// Go, modernc.org/sqlite), WAL mode, shared by the processes that open it.
// Entries past the size cap are evicted oldest first (by the time they
// were written), the size checked every thousandth of the entries (the
// cap holds to within 0.1%, at most 1,000 entries over); expired entries are never served and are deleted as new
// ones are written.
//
//	s, err := sqlitecache.Open("cache.db", cache.Limits{MaxEntries: 100_000})
//	c, err := cache.New(s, cache.Options{TTL: 24 * time.Hour})
package sqlitecache

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/chorusrt/chorus/cache"
	"github.com/chorusrt/chorus/llm"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// Store is the SQLite cache.Store.
type Store struct {
	db     *sql.DB
	lim    cache.Limits
	closed atomic.Bool

	size cache.SizeCheck // paces the size cap's checks
}

var _ cache.Store = (*Store)(nil)

const schema = `CREATE TABLE IF NOT EXISTS chorus_cache (
	id        INTEGER PRIMARY KEY,
	namespace TEXT    NOT NULL,
	key       TEXT    NOT NULL,
	value     BLOB    NOT NULL,
	size      INTEGER NOT NULL,
	created   INTEGER NOT NULL,
	expires   INTEGER NOT NULL,
	UNIQUE (namespace, key)
);
CREATE INDEX IF NOT EXISTS chorus_cache_created ON chorus_cache (created, id);
CREATE INDEX IF NOT EXISTS chorus_cache_expires ON chorus_cache (expires) WHERE expires > 0;`

// Open opens (creating it if needed) the cache database at path, capped
// by lim. A path or limit that cannot hold is an *llm.ConfigError naming
// it.
func Open(path string, lim cache.Limits) (*Store, error) {
	if path == "" {
		return nil, &llm.ConfigError{Field: "path", Msg: "must not be empty"}
	}
	if err := lim.Validate(); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, &llm.ConfigError{Field: "path", Msg: err.Error()}
	}
	if fi, err := os.Stat(filepath.Dir(abs)); err != nil || !fi.IsDir() {
		return nil, &llm.ConfigError{Field: "path", Msg: fmt.Sprintf("directory %q does not exist", filepath.Dir(abs))}
	}
	db, err := sql.Open("sqlite", abs+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("sqlitecache: open %q: %w", abs, err)
	}
	db.SetMaxOpenConns(8)
	if _, err := db.Exec(schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlitecache: create schema in %q: %w", abs, err)
	}
	return &Store{db: db, lim: lim}, nil
}

// Get implements cache.Store.
func (s *Store) Get(ctx context.Context, namespace, key string, now time.Time) ([]byte, bool, error) {
	if s.closed.Load() {
		return nil, false, cache.ErrClosed
	}
	var v []byte
	err := s.db.QueryRowContext(ctx, `SELECT value FROM chorus_cache WHERE namespace = ? AND key = ? AND (expires = 0 OR expires > ?)`,
		namespace, key, now.UnixMicro()).Scan(&v)
	if err == sql.ErrNoRows {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("sqlitecache: get: %w", err)
	}
	return v, true, nil
}

// Put implements cache.Store: the write, the expired entries' deletion and
// the eviction are one transaction.
func (s *Store) Put(ctx context.Context, e cache.Entry) error {
	if s.closed.Load() {
		return cache.ErrClosed
	}
	var exp int64
	if !e.Expires.IsZero() {
		exp = e.Expires.UnixMicro()
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlitecache: put: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO chorus_cache (namespace, key, value, size, created, expires) VALUES (?, ?, ?, ?, ?, ?)`,
		e.Namespace, e.Key, e.Value, cache.EntrySize(e), e.Created.UnixMicro(), exp); err != nil {
		return fmt.Errorf("sqlitecache: put: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM chorus_cache WHERE expires > 0 AND expires <= ?`, e.Created.UnixMicro()); err != nil {
		return fmt.Errorf("sqlitecache: expire: %w", err)
	}
	if s.size.Due(s.lim) {
		if s.lim.MaxEntries > 0 {
			if _, err := tx.ExecContext(ctx, `DELETE FROM chorus_cache WHERE id IN (
				SELECT id FROM chorus_cache ORDER BY created, id
				LIMIT max(0, (SELECT count(*) FROM chorus_cache) - ?))`, s.lim.MaxEntries); err != nil {
				return fmt.Errorf("sqlitecache: evict: %w", err)
			}
		}
		if s.lim.MaxBytes > 0 {
			if _, err := tx.ExecContext(ctx, `DELETE FROM chorus_cache WHERE id IN (
				SELECT r FROM (SELECT id AS r, sum(size) OVER (ORDER BY created DESC, id DESC) AS run FROM chorus_cache)
				WHERE run > ?)`, s.lim.MaxBytes); err != nil {
				return fmt.Errorf("sqlitecache: evict: %w", err)
			}
		}
		var n int64
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM chorus_cache`).Scan(&n); err != nil {
			return fmt.Errorf("sqlitecache: evict: %w", err)
		}
		defer s.size.Checked(n)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlitecache: put: %w", err)
	}
	return nil
}

// Close implements cache.Store.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	return s.db.Close()
}
