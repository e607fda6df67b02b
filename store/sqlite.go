package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chorusrt/chorus/llm"
	"modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// SQLiteBusyTimeout is how long a SQLite write waits for another process
// holding the database's write lock before it fails. The caller's context can
// end the wait sooner.
const SQLiteBusyTimeout = 10 * time.Second

// sqliteBusy is SQLITE_BUSY, the primary result code of "database is locked".
const sqliteBusy = 5

// sqliteMaxConns bounds the connections one SQLite journal keeps open. Writes
// take one at a time (see SQLite.wtoken); the rest serve concurrent reads.
const sqliteMaxConns = 8

// SQLite is the embedded Journal: one database file in WAL mode with
// synchronous=FULL, so that every commit is fsync'd before Append returns.
// It is safe for concurrent use, and several processes may open the same
// file: writers take SQLite's write lock with BEGIN IMMEDIATE and wait for it
// up to SQLiteBusyTimeout.
type SQLite struct {
	db     *sql.DB
	path   string
	wtoken chan struct{} // in-process writer token: one write transaction at a time
	closed atomic.Bool
	once   sync.Once
	cerr   error
}

var _ Journal = (*SQLite)(nil)

// sqliteSchema creates the journal tables. records.at, sessions.updated_at
// and leases.expires_at are Unix microseconds, UTC.
var sqliteSchema = []string{
	`CREATE TABLE IF NOT EXISTS ` + tableSessions + ` (
		session    TEXT    NOT NULL PRIMARY KEY,
		last_seq   INTEGER NOT NULL CHECK (last_seq > 0),
		updated_at INTEGER NOT NULL
	) STRICT, WITHOUT ROWID`,
	`CREATE TABLE IF NOT EXISTS ` + tableRecords + ` (
		session TEXT    NOT NULL,
		seq     INTEGER NOT NULL CHECK (seq > 0),
		kind    TEXT    NOT NULL,
		data    BLOB    NOT NULL,
		at      INTEGER NOT NULL,
		PRIMARY KEY (session, seq)
	) STRICT`,
	`CREATE TABLE IF NOT EXISTS ` + tableSnapshots + ` (
		session TEXT    NOT NULL PRIMARY KEY,
		seq     INTEGER NOT NULL CHECK (seq >= 0),
		data    BLOB    NOT NULL,
		at      INTEGER NOT NULL
	) STRICT`,
	`CREATE TABLE IF NOT EXISTS ` + tableLeases + ` (
		session    TEXT    NOT NULL PRIMARY KEY,
		holder     TEXT    NOT NULL,
		epoch      INTEGER NOT NULL CHECK (epoch > 0),
		expires_at INTEGER NOT NULL
	) STRICT, WITHOUT ROWID`,
	`CREATE INDEX IF NOT EXISTS ` + tableLeases + `_expires ON ` + tableLeases + ` (expires_at) WHERE holder <> ''`,
}

// OpenSQLite opens the journal in the SQLite database file at path, creating
// the file and the schema when missing. The directory must exist. Every
// connection runs in WAL mode with synchronous=FULL and a busy timeout of
// SQLiteBusyTimeout. The result is safe for concurrent use, and several
// processes may open the same file at once.
func OpenSQLite(path string) (*SQLite, error) {
	switch {
	case path == "":
		return nil, &llm.ConfigError{Field: "path", Msg: "must not be empty"}
	case path == ":memory:" || strings.HasPrefix(path, "file:"):
		return nil, &llm.ConfigError{Field: "path", Msg: "must be a file path (an in-memory database is not durable)"}
	case strings.ContainsRune(path, '?'):
		return nil, &llm.ConfigError{Field: "path", Msg: "must not contain '?'"}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("store: sqlite path %q: %w", path, err)
	}
	dir := filepath.Dir(abs)
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("store: sqlite directory: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("store: sqlite directory %q is not a directory", dir)
	}
	_, statErr := os.Stat(abs)
	created := errors.Is(statErr, os.ErrNotExist)

	// journal_mode=WAL is persistent: init sets it once, and every later
	// connection finds the file in WAL mode.
	dsn := abs + "?_pragma=busy_timeout(" + fmt.Sprint(SQLiteBusyTimeout.Milliseconds()) + ")" +
		"&_pragma=synchronous(FULL)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("store: open sqlite %q: %w", abs, err)
	}
	db.SetMaxOpenConns(sqliteMaxConns)
	db.SetMaxIdleConns(sqliteMaxConns)
	s := &SQLite{db: db, path: abs, wtoken: make(chan struct{}, 1)}
	if err := s.init(); err != nil {
		db.Close()
		return nil, err
	}
	if created {
		// SQLite syncs the directory when it creates the WAL, not when it
		// creates the database file itself: make the new file's entry durable.
		if err := syncDir(dir); err != nil {
			db.Close()
			return nil, fmt.Errorf("store: sync directory of %q: %w", abs, err)
		}
	}
	return s, nil
}

// init checks the connection settings and creates the schema.
func (s *SQLite) init() error {
	ctx, cancel := context.WithTimeout(context.Background(), SQLiteBusyTimeout+5*time.Second)
	defer cancel()
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("store: open sqlite %q: %w", s.path, err)
	}
	defer conn.Close()
	// Switching a new file to WAL needs an exclusive lock, and SQLite fails
	// that switch with SQLITE_BUSY at once, without its busy handler, while
	// another connection (another process opening the same new file) holds
	// a lock: retry until the busy timeout.
	var mode string
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		err := conn.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode)
		if err == nil {
			break
		}
		var se *sqlite.Error
		if !errors.As(err, &se) || se.Code()&0xff != sqliteBusy {
			return fmt.Errorf("store: sqlite %q: set WAL mode: %w", s.path, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("store: sqlite %q: set WAL mode: %w", s.path, err)
		case <-time.After(delay):
		}
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("store: sqlite %q: journal_mode is %q, want wal (does the file system support shared memory?)", s.path, mode)
	}
	var syncMode int
	if err := conn.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&syncMode); err != nil {
		return fmt.Errorf("store: sqlite %q: %w", s.path, err)
	}
	if syncMode < 2 {
		return fmt.Errorf("store: sqlite %q: synchronous is %d, want FULL (2)", s.path, syncMode)
	}

	tx, err := conn.BeginTx(ctx, nil) // BEGIN IMMEDIATE: one process creates the schema at a time
	if err != nil {
		return fmt.Errorf("store: sqlite %q: create schema: %w", s.path, err)
	}
	defer tx.Rollback()
	var version int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return fmt.Errorf("store: sqlite %q: %w", s.path, err)
	}
	if version > schemaVersion {
		return fmt.Errorf("store: sqlite %q: schema version %d is newer than this package's %d", s.path, version, schemaVersion)
	}
	for _, q := range sqliteSchema {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("store: sqlite %q: create schema: %w", s.path, err)
		}
	}
	if version < schemaVersion {
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", schemaVersion)); err != nil {
			return fmt.Errorf("store: sqlite %q: create schema: %w", s.path, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: sqlite %q: create schema: %w", s.path, err)
	}
	return nil
}

// syncDir fsyncs a directory so that entries created in it survive a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Path is the absolute path of the database file.
func (s *SQLite) Path() string { return s.path }

// check reports ErrClosed after Close and the context's error when it is done.
func (s *SQLite) check(ctx context.Context) error {
	if s.closed.Load() {
		return fmt.Errorf("store: sqlite %q: %w", s.path, ErrClosed)
	}
	return ctx.Err()
}

// write runs fn in a BEGIN IMMEDIATE transaction, one at a time per journal,
// and commits when fn returns nil. SQLite's busy handler, bounded by the
// context, waits for writers in other processes.
func (s *SQLite) write(ctx context.Context, fn func(*sql.Tx) error) error {
	select {
	case s.wtoken <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.wtoken }()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.wrap(ctx, "begin", err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return s.wrap(ctx, "commit", err)
	}
	return nil
}

// wrap adds the operation and file to err. When the context is done the
// result matches the context's error (SQLite may report the interruption as
// its own error), and after Close it matches ErrClosed.
func (s *SQLite) wrap(ctx context.Context, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("store: sqlite %q: %s: %w (%v)", s.path, op, cerr, err)
	}
	if s.closed.Load() && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("store: sqlite %q: %s: %w (%v)", s.path, op, ErrClosed, err)
	}
	return fmt.Errorf("store: sqlite %q: %s: %w", s.path, op, err)
}

// Append implements Journal. The records and the session's new last seq are
// written in one transaction committed with an fsync of the WAL.
func (s *SQLite) Append(ctx context.Context, session string, expectedSeq int64, recs ...Record) (int64, error) {
	if err := validateAppend(session, expectedSeq, recs); err != nil {
		return 0, err
	}
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		return s.appendTx(ctx, tx, session, expectedSeq, recs)
	})
	if err != nil {
		return 0, err
	}
	return expectedSeq + int64(len(recs)), nil
}

// appendTx is the body of Append inside its write transaction: the
// compare-and-set on the session's last seq, then the records.
func (s *SQLite) appendTx(ctx context.Context, tx *sql.Tx, session string, expectedSeq int64, recs []Record) error {
	var cur int64
	err := tx.QueryRowContext(ctx, `SELECT last_seq FROM `+tableSessions+` WHERE session = ?`, session).Scan(&cur)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return s.wrap(ctx, "append", err)
	}
	if cur != expectedSeq {
		return conflict(session, expectedSeq)
	}
	if len(recs) == 0 {
		return nil
	}
	last := expectedSeq + int64(len(recs))
	at := now().UnixMicro()
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO `+tableRecords+` (session, seq, kind, data, at) VALUES (?, ?, ?, ?, ?)`)
	if err != nil {
		return s.wrap(ctx, "append", err)
	}
	defer stmt.Close()
	for i, r := range recs {
		if _, err := stmt.ExecContext(ctx, session, expectedSeq+1+int64(i), r.Kind, nonNil(r.Data), at); err != nil {
			return s.wrap(ctx, "append", err)
		}
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO `+tableSessions+` (session, last_seq, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (session) DO UPDATE SET last_seq = excluded.last_seq, updated_at = excluded.updated_at`,
		session, last, at)
	if err != nil {
		return s.wrap(ctx, "append", err)
	}
	return nil
}

// Read implements Journal.
func (s *SQLite) Read(ctx context.Context, session string, from int64) ([]Record, error) {
	if err := checkID("session", session); err != nil {
		return nil, err
	}
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT seq, kind, data, at FROM `+tableRecords+` WHERE session = ? AND seq >= ? ORDER BY seq`, session, from)
	if err != nil {
		return nil, s.wrap(ctx, "read", err)
	}
	defer rows.Close()
	var out []Record
	for rows.Next() {
		r := Record{Session: session}
		var at int64
		if err := rows.Scan(&r.Seq, &r.Kind, &r.Data, &at); err != nil {
			return nil, s.wrap(ctx, "read", err)
		}
		r.Data = nonNil(r.Data)
		r.At = time.UnixMicro(at).UTC()
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap(ctx, "read", err)
	}
	return out, nil
}

// LastSeq implements Journal.
func (s *SQLite) LastSeq(ctx context.Context, session string) (int64, error) {
	if err := checkID("session", session); err != nil {
		return 0, err
	}
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	var last int64
	err := s.db.QueryRowContext(ctx, `SELECT last_seq FROM `+tableSessions+` WHERE session = ?`, session).Scan(&last)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, s.wrap(ctx, "last seq", err)
	}
	return last, nil
}

// SaveSnapshot implements Journal. A snapshot at the same seq as the stored
// one replaces it; one at an older seq is ignored.
func (s *SQLite) SaveSnapshot(ctx context.Context, session string, seq int64, data []byte) error {
	if err := validateSnapshot(session, seq); err != nil {
		return err
	}
	if err := s.check(ctx); err != nil {
		return err
	}
	return s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO `+tableSnapshots+` (session, seq, data, at) VALUES (?, ?, ?, ?)
			ON CONFLICT (session) DO UPDATE SET seq = excluded.seq, data = excluded.data, at = excluded.at
			WHERE excluded.seq >= `+tableSnapshots+`.seq`,
			session, seq, nonNil(data), now().UnixMicro())
		if err != nil {
			return s.wrap(ctx, "save snapshot", err)
		}
		return nil
	})
}

// LoadSnapshot implements Journal.
func (s *SQLite) LoadSnapshot(ctx context.Context, session string) (int64, []byte, error) {
	if err := checkID("session", session); err != nil {
		return 0, nil, err
	}
	if err := s.check(ctx); err != nil {
		return 0, nil, err
	}
	var seq int64
	var data []byte
	err := s.db.QueryRowContext(ctx, `SELECT seq, data FROM `+tableSnapshots+` WHERE session = ?`, session).Scan(&seq, &data)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil, fmt.Errorf("%w: no snapshot of session %q", ErrNotFound, session)
	}
	if err != nil {
		return 0, nil, s.wrap(ctx, "load snapshot", err)
	}
	return seq, nonNil(data), nil
}

// Sessions implements Journal.
func (s *SQLite) Sessions(ctx context.Context) ([]string, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT session FROM `+tableSessions+` ORDER BY session`)
	if err != nil {
		return nil, s.wrap(ctx, "sessions", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, s.wrap(ctx, "sessions", err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap(ctx, "sessions", err)
	}
	slices.Sort(out)
	return out, nil
}

// Close closes the database. Calls in flight may fail; later calls return
// ErrClosed. Closing twice is a no-op.
func (s *SQLite) Close() error {
	s.once.Do(func() {
		s.closed.Store(true)
		if err := s.db.Close(); err != nil {
			s.cerr = fmt.Errorf("store: close sqlite %q: %w", s.path, err)
		}
	})
	return s.cerr
}

// Acquire implements Leaser. Expiry is judged by this machine's clock
// (every process sharing the file runs on it). The read of the current
// lease and the grant are one write transaction, so that of processes
// racing for a lease exactly one wins.
func (s *SQLite) Acquire(ctx context.Context, session, holder string, ttl time.Duration) (Lease, error) {
	if err := validateAcquire(session, holder, ttl); err != nil {
		return Lease{}, err
	}
	if err := s.check(ctx); err != nil {
		return Lease{}, err
	}
	var l Lease
	err := s.write(ctx, func(tx *sql.Tx) error {
		at := now().UnixMicro()
		expires := at + ttlMicros(ttl)
		var cur string
		var epoch, curExpires int64
		err := tx.QueryRowContext(ctx, `SELECT holder, epoch, expires_at FROM `+tableLeases+` WHERE session = ?`, session).Scan(&cur, &epoch, &curExpires)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			epoch = 1
		case err != nil:
			return s.wrap(ctx, "acquire lease", err)
		case cur == holder && curExpires > at: // extended, same epoch
		case cur == "" || curExpires <= at:
			epoch++
		default:
			return &LeaseHeldError{Session: session, Holder: cur, Expires: time.UnixMicro(curExpires).UTC()}
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO `+tableLeases+` (session, holder, epoch, expires_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (session) DO UPDATE SET holder = excluded.holder, epoch = excluded.epoch, expires_at = excluded.expires_at`,
			session, holder, epoch, expires)
		if err != nil {
			return s.wrap(ctx, "acquire lease", err)
		}
		l = Lease{Session: session, Holder: holder, Epoch: epoch, Expires: time.UnixMicro(expires).UTC()}
		return nil
	})
	if err != nil {
		return Lease{}, err
	}
	return l, nil
}

// Renew implements Leaser: the leases are extended in one transaction.
func (s *SQLite) Renew(ctx context.Context, holder string, ttl time.Duration, held map[string]int64) ([]string, error) {
	sessions, err := validateRenew(holder, ttl, held)
	if err != nil {
		return nil, err
	}
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if len(sessions) == 0 {
		return nil, nil
	}
	kept := map[string]bool{}
	err = s.write(ctx, func(tx *sql.Tx) error {
		expires := now().UnixMicro() + ttlMicros(ttl)
		stmt, err := tx.PrepareContext(ctx, `UPDATE `+tableLeases+` SET expires_at = ? WHERE session = ? AND holder = ? AND epoch = ?`)
		if err != nil {
			return s.wrap(ctx, "renew leases", err)
		}
		defer stmt.Close()
		for _, session := range sessions {
			res, err := stmt.ExecContext(ctx, expires, session, holder, held[session])
			if err != nil {
				return s.wrap(ctx, "renew leases", err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				return s.wrap(ctx, "renew leases", err)
			}
			kept[session] = n > 0
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return lostSessions(sessions, kept), nil
}

// Release implements Leaser. The row stays, holder emptied, so that the
// next grant's epoch is higher.
func (s *SQLite) Release(ctx context.Context, l Lease) error {
	if err := validateLease(l); err != nil {
		return err
	}
	if err := s.check(ctx); err != nil {
		return err
	}
	return s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE `+tableLeases+` SET holder = '', expires_at = ? WHERE session = ? AND holder = ? AND epoch = ?`,
			now().UnixMicro(), l.Session, l.Holder, l.Epoch)
		if err != nil {
			return s.wrap(ctx, "release lease", err)
		}
		return nil
	})
}

// Expired implements Leaser; expiry is judged by this machine's clock.
func (s *SQLite) Expired(ctx context.Context, limit int) ([]Lease, error) {
	return s.queryLeases(ctx, "expired leases", limit, `SELECT session, holder, epoch, expires_at FROM `+tableLeases+`
		WHERE holder <> '' AND expires_at <= ? ORDER BY expires_at, session LIMIT ?`, now().UnixMicro(), limit)
}

// queryLeases runs a query whose rows are leases (session, holder, epoch,
// expires_at in microseconds), after the checks every lease listing makes;
// a limit of 0 asks nothing.
func (s *SQLite) queryLeases(ctx context.Context, op string, limit int, query string, args ...any) ([]Lease, error) {
	if err := validateLimit(limit); err != nil {
		return nil, err
	}
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if limit == 0 {
		return nil, nil
	}
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, s.wrap(ctx, op, err)
	}
	defer rows.Close()
	var out []Lease
	for rows.Next() {
		var l Lease
		var expires int64
		if err := rows.Scan(&l.Session, &l.Holder, &l.Epoch, &expires); err != nil {
			return nil, s.wrap(ctx, op, err)
		}
		l.Expires = time.UnixMicro(expires).UTC()
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap(ctx, op, err)
	}
	return out, nil
}

// AppendLeased implements Leaser: the lease check and the append are one
// write transaction.
func (s *SQLite) AppendLeased(ctx context.Context, l Lease, expectedSeq int64, recs ...Record) (int64, error) {
	if err := validateAppend(l.Session, expectedSeq, recs); err != nil {
		return 0, err
	}
	if err := checkID("holder", l.Holder); err != nil {
		return 0, err
	}
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		var holder string
		var epoch int64
		err := tx.QueryRowContext(ctx, `SELECT holder, epoch FROM `+tableLeases+` WHERE session = ?`, l.Session).Scan(&holder, &epoch)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return leaseLost(l)
		case err != nil:
			return s.wrap(ctx, "append", err)
		case holder != l.Holder || epoch != l.Epoch:
			return leaseLost(l)
		}
		return s.appendTx(ctx, tx, l.Session, expectedSeq, recs)
	})
	if err != nil {
		return 0, err
	}
	return expectedSeq + int64(len(recs)), nil
}
