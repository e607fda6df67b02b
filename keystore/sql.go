package keystore

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/chorusrt/chorus/internal/sqlbind"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	_ "modernc.org/sqlite"             // database/sql driver "sqlite"
)

// Store keeps gateway keys and their ledger in SQLite or PostgreSQL. It
// is safe for concurrent use, by many processes on one database.
type Store struct {
	db       *sql.DB
	postgres bool
}

func schema() []string {
	return []string{
		`CREATE TABLE IF NOT EXISTS chorus_keys (
			id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, hash TEXT NOT NULL UNIQUE,
			prev_hash TEXT NOT NULL, prev_until BIGINT NOT NULL,
			models TEXT NOT NULL, rpm BIGINT NOT NULL, tpm BIGINT NOT NULL, concurrency BIGINT NOT NULL,
			budget_nusd BIGINT NOT NULL, budget_period TEXT NOT NULL, drop_unsupported SMALLINT NOT NULL,
			created BIGINT NOT NULL, updated BIGINT NOT NULL, revoked BIGINT NOT NULL, rev BIGINT NOT NULL)`,
		`CREATE INDEX IF NOT EXISTS chorus_keys_by_rev ON chorus_keys (rev)`,
		`CREATE TABLE IF NOT EXISTS chorus_keys_rev (one SMALLINT PRIMARY KEY, rev BIGINT NOT NULL)`,
		`INSERT INTO chorus_keys_rev (one, rev) VALUES (1, 0) ON CONFLICT (one) DO NOTHING`,
		`CREATE TABLE IF NOT EXISTS chorus_spend (
			key_id TEXT NOT NULL, period TEXT NOT NULL, nusd BIGINT NOT NULL, calls BIGINT NOT NULL,
			PRIMARY KEY (key_id, period))`,
		`CREATE TABLE IF NOT EXISTS chorus_reservations (
			replica TEXT NOT NULL, key_id TEXT NOT NULL, period TEXT NOT NULL, nusd BIGINT NOT NULL,
			PRIMARY KEY (replica, key_id, period))`,
		`CREATE INDEX IF NOT EXISTS chorus_reservations_key ON chorus_reservations (key_id, period)`,
		`CREATE TABLE IF NOT EXISTS chorus_replicas (id TEXT PRIMARY KEY, seen BIGINT NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS chorus_windows (
			key_id TEXT NOT NULL, resource TEXT NOT NULL, win BIGINT NOT NULL, taken BIGINT NOT NULL,
			PRIMARY KEY (key_id, resource, win))`,
		`CREATE TABLE IF NOT EXISTS chorus_slots (
			replica TEXT NOT NULL, key_id TEXT NOT NULL, held BIGINT NOT NULL,
			PRIMARY KEY (replica, key_id))`,
	}
}

// OpenSQLite opens (creating it if needed) the store in the SQLite file at
// path: the default for one server.
func OpenSQLite(path string) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("keystore: sqlite path %q: %w", path, err)
	}
	if fi, err := os.Stat(filepath.Dir(abs)); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("keystore: the directory of %q is not a directory", abs)
	}
	// Immediate transactions: a transaction that reads then writes takes
	// the write lock first, so concurrent ones wait (busy_timeout) instead
	// of failing with SQLITE_BUSY.
	db, err := sql.Open("sqlite", abs+"?_txlock=immediate&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)")
	if err != nil {
		return nil, fmt.Errorf("keystore: open sqlite %q: %w", abs, err)
	}
	db.SetMaxOpenConns(4)
	return initStore(db, false)
}

// OpenPostgres opens the store in the PostgreSQL database at dsn, creating
// its tables if needed: the store of a fleet.
func OpenPostgres(ctx context.Context, dsn string) (*Store, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("keystore: open postgres: %w", err)
	}
	db.SetMaxOpenConns(8)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("keystore: connect to postgres: %w", err)
	}
	return initStore(db, true)
}

func initStore(db *sql.DB, postgres bool) (*Store, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := &Store{db: db, postgres: postgres}
	for _, q := range append(schema(), blobSchema(postgres)...) {
		if err := s.retry(ctx, func() error { _, err := db.ExecContext(ctx, q); return err }); err != nil {
			db.Close()
			return nil, fmt.Errorf("keystore: create schema: %w", err)
		}
	}
	return s, nil
}

// retry runs f again when PostgreSQL reports a concurrent CREATE of the
// same object (several replicas opening one new database at once).
func (s *Store) retry(ctx context.Context, f func() error) error {
	for i := 0; ; i++ {
		err := f()
		if err == nil || i == 5 || !s.postgres || !strings.Contains(err.Error(), "23505") {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Postgres reports whether the store is PostgreSQL's.
func (s *Store) Postgres() bool { return s.postgres }

// bind rewrites ? placeholders for PostgreSQL ($1, $2, ...).
func (s *Store) bind(q string) string {
	if !s.postgres {
		return q
	}
	return sqlbind.Postgres(q)
}

// forUpdate is the row lock of a SELECT on PostgreSQL (SQLite's immediate
// transactions hold the whole database).
func (s *Store) forUpdate() string {
	if s.postgres {
		return " FOR UPDATE"
	}
	return ""
}

// tx runs f in a transaction, committed when f returns nil.
func (s *Store) tx(ctx context.Context, f func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("keystore: %w", err)
	}
	if err := f(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("keystore: commit: %w", err)
	}
	return nil
}

const keyColumns = "id, name, hash, prev_hash, prev_until, models, rpm, tpm, concurrency, budget_nusd, budget_period, drop_unsupported, created, updated, revoked, rev"

type scanner interface{ Scan(dest ...any) error }

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func hexHash(h [32]byte) string {
	if h == ([32]byte{}) {
		return ""
	}
	return hex.EncodeToString(h[:])
}

func scanKey(sc scanner) (Key, error) {
	var k Key
	var hash, prev, models, period string
	var prevUntil, budget, created, updated, revoked int64
	var drop int
	if err := sc.Scan(&k.ID, &k.Name, &hash, &prev, &prevUntil, &models, &k.RPM, &k.TPM, &k.Concurrency, &budget, &period, &drop, &created, &updated, &revoked, &k.Rev); err != nil {
		return k, err
	}
	if b, err := hex.DecodeString(hash); err == nil && len(b) == 32 {
		copy(k.Hash[:], b)
	}
	if b, err := hex.DecodeString(prev); err == nil && len(b) == 32 {
		copy(k.PrevHash[:], b)
	}
	if err := json.Unmarshal([]byte(models), &k.Models); err != nil {
		return k, fmt.Errorf("keystore: key %s: models: %w", k.ID, err)
	}
	k.PrevUntil, k.Created, k.Updated, k.Revoked = fromNanos(prevUntil), fromNanos(created), fromNanos(updated), fromNanos(revoked)
	k.BudgetUSD, k.BudgetPeriod, k.DropUnsupported = FromNano(budget), Period(period), drop != 0
	return k, nil
}

func keyArgs(k *Key) []any {
	models, _ := json.Marshal(k.Models)
	if k.Models == nil {
		models = []byte("[]")
	}
	drop := 0
	if k.DropUnsupported {
		drop = 1
	}
	return []any{k.ID, k.Name, hexHash(k.Hash), hexHash(k.PrevHash), nanos(k.PrevUntil), string(models), k.RPM, k.TPM, k.Concurrency,
		ToNano(k.BudgetUSD), string(k.BudgetPeriod), drop, nanos(k.Created), nanos(k.Updated), nanos(k.Revoked), k.Rev}
}

// nextRev takes the store's next revision, in tx (it also serialises the
// store's key changes).
func (s *Store) nextRev(ctx context.Context, tx *sql.Tx) (int64, error) {
	var rev int64
	if err := tx.QueryRowContext(ctx, `UPDATE chorus_keys_rev SET rev = rev + 1 WHERE one = 1 RETURNING rev`).Scan(&rev); err != nil {
		return 0, fmt.Errorf("keystore: next revision: %w", err)
	}
	return rev, nil
}

// clash reports whether another key (not id) has the name or the hash.
func (s *Store) clash(ctx context.Context, tx *sql.Tx, id, name string, hash [32]byte) error {
	var n int
	h := hexHash(hash)
	if err := tx.QueryRowContext(ctx, s.bind(`SELECT COUNT(*) FROM chorus_keys WHERE id <> ? AND (name = ? OR hash = ? OR prev_hash = ?)`), id, name, h, h).Scan(&n); err != nil {
		return fmt.Errorf("keystore: %w", err)
	}
	if n > 0 {
		return ErrConflict
	}
	return nil
}

// Create adds a key, giving it an id when it has none. A key whose name
// or hash another key has is refused with ErrConflict; an invalid one with
// a *FieldError.
func (s *Store) Create(ctx context.Context, k Key, now time.Time) (Key, error) {
	if k.ID == "" {
		k.ID = newID()
	}
	k.Models = slices.Clone(k.Models)
	k.Created, k.Updated, k.Revoked = now.UTC(), now.UTC(), time.Time{}
	if err := k.validate(); err != nil {
		return Key{}, err
	}
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if err := s.clash(ctx, tx, k.ID, k.Name, k.Hash); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRowContext(ctx, s.bind(`SELECT COUNT(*) FROM chorus_keys WHERE id = ?`), k.ID).Scan(&n); err != nil {
			return fmt.Errorf("keystore: %w", err)
		}
		if n > 0 {
			return ErrConflict
		}
		rev, err := s.nextRev(ctx, tx)
		if err != nil {
			return err
		}
		k.Rev = rev
		if _, err := tx.ExecContext(ctx, s.bind(`INSERT INTO chorus_keys (`+keyColumns+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`), keyArgs(&k)...); err != nil {
			if uniqueViolation(err) {
				return ErrConflict
			}
			return fmt.Errorf("keystore: insert key: %w", err)
		}
		return nil
	})
	if err != nil {
		return Key{}, err
	}
	return k, nil
}

func uniqueViolation(err error) bool {
	s := err.Error()
	return strings.Contains(s, "UNIQUE constraint") || strings.Contains(s, "23505")
}

// Seed creates each key whose name the store does not hold yet, and
// leaves the others as the store has them (once running, the store is the
// truth: a key of the configuration changed later is changed through the
// admin API). It returns the keys created.
func (s *Store) Seed(ctx context.Context, keys []Key, now time.Time) ([]Key, error) {
	var made []Key
	for _, k := range keys {
		_, err := s.ByName(ctx, k.Name)
		if err == nil {
			continue
		}
		if !errors.Is(err, ErrNotFound) {
			return made, err
		}
		c, err := s.Create(ctx, k, now)
		if errors.Is(err, ErrConflict) { // another replica seeding at once
			continue
		}
		if err != nil {
			return made, fmt.Errorf("keystore: seed key %q: %w", k.Name, err)
		}
		made = append(made, c)
	}
	return made, nil
}

// Get returns the key with id, or ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (Key, error) {
	return s.one(ctx, s.db.QueryRowContext(ctx, s.bind(`SELECT `+keyColumns+` FROM chorus_keys WHERE id = ?`), id))
}

// ByName returns the key named name, or ErrNotFound.
func (s *Store) ByName(ctx context.Context, name string) (Key, error) {
	return s.one(ctx, s.db.QueryRowContext(ctx, s.bind(`SELECT `+keyColumns+` FROM chorus_keys WHERE name = ?`), name))
}

func (s *Store) one(_ context.Context, row *sql.Row) (Key, error) {
	k, err := scanKey(row)
	if errors.Is(err, sql.ErrNoRows) {
		return Key{}, ErrNotFound
	}
	if err != nil {
		return Key{}, fmt.Errorf("keystore: %w", err)
	}
	return k, nil
}

// List returns every key, revoked ones included, by name.
func (s *Store) List(ctx context.Context) ([]Key, error) {
	return s.query(ctx, `SELECT `+keyColumns+` FROM chorus_keys ORDER BY name`)
}

// Changes returns the keys changed after revision rev, in revision order,
// and the newest revision (rev itself when none changed): a replica polls
// it to follow every change made through any other.
func (s *Store) Changes(ctx context.Context, rev int64) ([]Key, int64, error) {
	ks, err := s.query(ctx, `SELECT `+keyColumns+` FROM chorus_keys WHERE rev > ? ORDER BY rev`, rev)
	if err != nil {
		return nil, rev, err
	}
	if len(ks) > 0 {
		rev = ks[len(ks)-1].Rev
	}
	return ks, rev, nil
}

func (s *Store) query(ctx context.Context, q string, args ...any) ([]Key, error) {
	rows, err := s.db.QueryContext(ctx, s.bind(q), args...)
	if err != nil {
		return nil, fmt.Errorf("keystore: %w", err)
	}
	defer rows.Close()
	var out []Key
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, fmt.Errorf("keystore: %w", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("keystore: %w", err)
	}
	return out, nil
}

// change reads key id for update, lets f change it, and writes it back
// with the next revision.
func (s *Store) change(ctx context.Context, id string, now time.Time, f func(k *Key) error) (Key, error) {
	var out Key
	err := s.tx(ctx, func(tx *sql.Tx) error {
		k, err := scanKey(tx.QueryRowContext(ctx, s.bind(`SELECT `+keyColumns+` FROM chorus_keys WHERE id = ?`+s.forUpdate()), id))
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("keystore: %w", err)
		}
		if err := f(&k); err != nil {
			return err
		}
		if err := k.validate(); err != nil {
			return err
		}
		if err := s.clash(ctx, tx, k.ID, k.Name, k.Hash); err != nil {
			return err
		}
		if k.Rev, err = s.nextRev(ctx, tx); err != nil {
			return err
		}
		k.Updated = now.UTC()
		args := keyArgs(&k)
		if _, err := tx.ExecContext(ctx, s.bind(`UPDATE chorus_keys SET name=?, hash=?, prev_hash=?, prev_until=?, models=?, rpm=?, tpm=?, concurrency=?, budget_nusd=?, budget_period=?, drop_unsupported=?, created=?, updated=?, revoked=?, rev=? WHERE id = ?`), append(args[1:], k.ID)...); err != nil {
			if uniqueViolation(err) {
				return ErrConflict
			}
			return fmt.Errorf("keystore: update key: %w", err)
		}
		out = k
		return nil
	})
	return out, err
}

// Update changes a key's settings. A revoked key is refused (ErrRevoked).
func (s *Store) Update(ctx context.Context, id string, u Update, now time.Time) (Key, error) {
	return s.change(ctx, id, now, func(k *Key) error {
		if !k.Live() {
			return ErrRevoked
		}
		u.Apply(k)
		return nil
	})
}

// Rotate gives the key a new hash; the old one keeps working for grace
// (zero: not at all). The key keeps its id, settings and ledger.
func (s *Store) Rotate(ctx context.Context, id string, hash [32]byte, grace time.Duration, now time.Time) (Key, error) {
	if grace < 0 {
		return Key{}, &FieldError{Field: "grace", Msg: "must not be negative"}
	}
	return s.change(ctx, id, now, func(k *Key) error {
		if !k.Live() {
			return ErrRevoked
		}
		if hash == k.Hash {
			return ErrConflict
		}
		k.PrevHash, k.PrevUntil, k.Hash = k.Hash, now.UTC().Add(grace), hash
		if grace == 0 {
			k.PrevHash, k.PrevUntil = [32]byte{}, time.Time{}
		}
		return nil
	})
}

// Revoke revokes a key: every replica refuses it from its next poll of
// Changes. Revoking a revoked key changes nothing.
func (s *Store) Revoke(ctx context.Context, id string, now time.Time) (Key, error) {
	return s.change(ctx, id, now, func(k *Key) error {
		if k.Live() {
			k.Revoked = now.UTC()
		}
		return nil
	})
}
