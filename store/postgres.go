package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PostgresMaxConns is the default bound on the connections one Postgres
// journal opens. The DSN parameter pool_max_conns overrides it; the other
// pool_* parameters of pgxpool.ParseConfig (pool_max_conn_lifetime,
// pool_health_check_period...) apply as well.
const PostgresMaxConns = 10

// Postgres is the shared Journal: tables in one PostgreSQL schema that any
// number of processes and machines may use at once. Each Append is a single
// statement committed with synchronous_commit on (a connection whose setting
// is off is switched on), so it is in the server's flushed WAL before Append
// returns; the server itself must run with fsync on.
//
// Connections come from a pgxpool.Pool: at most PostgresMaxConns (or the
// DSN's pool_max_conns), dialled on demand, each set up with
// synchronous_commit on before first use, and pinged before reuse when idle
// for more than a second.
//
// The tables live in the first schema of the connection's search_path (set
// search_path in the DSN to keep journals apart); the schema must exist.
type Postgres struct {
	pool   *pgxpool.Pool
	closed atomic.Bool
	once   sync.Once
}

var _ Journal = (*Postgres)(nil)

// pgSchema creates the journal tables. It runs under an advisory lock keyed
// on the schema so that processes starting at once do not race on the
// catalog (CREATE TABLE IF NOT EXISTS alone is not safe for that).
var pgSchema = []string{
	`CREATE TABLE IF NOT EXISTS chorus_journal_meta (
		id      boolean PRIMARY KEY DEFAULT true CHECK (id),
		version integer NOT NULL
	)`,
	`CREATE TABLE IF NOT EXISTS ` + tableSessions + ` (
		session    text        PRIMARY KEY,
		last_seq   bigint      NOT NULL CHECK (last_seq > 0),
		updated_at timestamptz NOT NULL
	)`,
	`CREATE TABLE IF NOT EXISTS ` + tableRecords + ` (
		session text        NOT NULL,
		seq     bigint      NOT NULL CHECK (seq > 0),
		kind    text        NOT NULL,
		data    bytea       NOT NULL,
		at      timestamptz NOT NULL,
		PRIMARY KEY (session, seq)
	)`,
	`CREATE TABLE IF NOT EXISTS ` + tableSnapshots + ` (
		session text        PRIMARY KEY,
		seq     bigint      NOT NULL CHECK (seq >= 0),
		data    bytea       NOT NULL,
		at      timestamptz NOT NULL
	)`,
	`CREATE TABLE IF NOT EXISTS ` + tableLeases + ` (
		session    text        PRIMARY KEY,
		holder     text        NOT NULL,
		epoch      bigint      NOT NULL CHECK (epoch > 0),
		expires_at timestamptz NOT NULL
	)`,
	`CREATE INDEX IF NOT EXISTS ` + tableLeases + `_expires ON ` + tableLeases + ` (expires_at) WHERE holder <> ''`,
	`INSERT INTO chorus_journal_meta (version) VALUES (` + strconv.Itoa(schemaVersion) + `) ON CONFLICT (id) DO NOTHING`,
}

// The append statements. The session row is the compare-and-set: the
// records are inserted only when the claim on it succeeded, all in one
// statement, so an append is one round trip and one commit. A concurrent
// writer with the same expected seq waits on the row lock, then finds the
// seq moved and inserts nothing.
const (
	pgAppendNew = `WITH claim AS (
		INSERT INTO ` + tableSessions + ` (session, last_seq, updated_at) VALUES ($1, $2, $3)
		ON CONFLICT (session) DO NOTHING
		RETURNING 1
	)
	INSERT INTO ` + tableRecords + ` (session, seq, kind, data, at)
	SELECT $1, r.seq, r.kind, r.data, $3
	FROM unnest($4::bigint[], $5::text[], $6::bytea[]) AS r(seq, kind, data)
	WHERE EXISTS (SELECT 1 FROM claim)`

	pgAppendNext = `WITH claim AS (
		UPDATE ` + tableSessions + ` SET last_seq = $2, updated_at = $3
		WHERE session = $1 AND last_seq = $7
		RETURNING 1
	)
	INSERT INTO ` + tableRecords + ` (session, seq, kind, data, at)
	SELECT $1, r.seq, r.kind, r.data, $3
	FROM unnest($4::bigint[], $5::text[], $6::bytea[]) AS r(seq, kind, data)
	WHERE EXISTS (SELECT 1 FROM claim)`
)

// OpenPostgres connects to the database named by dsn (a URL or key=value
// connection string as pgxpool.ParseConfig parses it) and creates the
// journal tables if they are missing. Creating them is idempotent and safe
// when several processes start at once. Errors never include the DSN's
// password.
func OpenPostgres(ctx context.Context, dsn string) (*Postgres, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, &llm.ConfigError{Field: "dsn", Msg: err.Error()}
	}
	if !setsMaxConns(dsn) {
		cfg.MaxConns = PostgresMaxConns
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = pgDialTimeout
	}
	cfg.AfterConnect = setupPGConn
	cfg.ShouldPing = shouldPing
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: postgres: open: %w", err)
	}
	p := &Postgres{pool: pool}
	if err := p.init(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return p, nil
}

// setsMaxConns reports whether dsn (already parsed successfully by
// pgxpool.ParseConfig) names pool_max_conns, which pgxpool removes from the
// config it returns: without it the pool gets PostgresMaxConns rather than
// pgxpool's own default.
func setsMaxConns(dsn string) bool {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return false
	}
	_, ok := cfg.RuntimeParams["pool_max_conns"]
	return ok
}

// pingFirst marks the context of the retry in do: the connection it gets is
// pinged before use even when it was idle only briefly, so that a retry does
// not land on another connection that went stale with the first.
type pingFirst struct{}

// shouldPing is pgxpool's default (ping a connection idle for more than a
// second before handing it out) plus every connection acquired for a retry.
func shouldPing(ctx context.Context, p pgxpool.ShouldPingParams) bool {
	return p.IdleDuration > time.Second || ctx.Value(pingFirst{}) != nil
}

// setupPGConn makes a new connection durable on commit: synchronous_commit
// off would acknowledge commits before their WAL is flushed.
func setupPGConn(ctx context.Context, c *pgx.Conn) error {
	var sc string
	if err := c.QueryRow(ctx, "SHOW synchronous_commit").Scan(&sc); err != nil {
		return err
	}
	if sc == "off" {
		if _, err := c.Exec(ctx, "SET synchronous_commit TO on"); err != nil {
			return err
		}
	}
	return nil
}

// init creates the schema under an advisory lock.
func (p *Postgres) init(ctx context.Context) error {
	return p.do(ctx, "create schema", true, func(c *pgx.Conn) error {
		return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			var schema *string
			if err := tx.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
				return err
			}
			if schema == nil {
				return errors.New("no schema to create the tables in: the first schema of search_path does not exist")
			}
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext($1))", "chorus.store/"+*schema); err != nil {
				return err
			}
			for _, q := range pgSchema {
				if _, err := tx.Exec(ctx, q); err != nil {
					return err
				}
			}
			var version int
			if err := tx.QueryRow(ctx, "SELECT version FROM chorus_journal_meta").Scan(&version); err != nil {
				return err
			}
			if version > schemaVersion {
				return fmt.Errorf("schema %q has journal version %d, newer than this package's %d", *schema, version, schemaVersion)
			}
			return nil
		})
	})
}

// do runs fn on a pooled connection. A call that failed is retried once, on
// a connection pinged first, when nothing reached the server, or, for
// idempotent calls, when the connection broke.
func (p *Postgres) do(ctx context.Context, op string, idempotent bool, fn func(*pgx.Conn) error) error {
	if p.closed.Load() {
		return fmt.Errorf("store: postgres: %s: %w", op, ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	acquireCtx := ctx
	for attempt := 0; ; attempt++ {
		pc, err := p.pool.Acquire(acquireCtx)
		if err != nil {
			if p.closed.Load() { // Close ran since the check above
				return fmt.Errorf("store: postgres: %s: %w", op, ErrClosed)
			}
			return p.wrap(ctx, op, err)
		}
		c := pc.Conn()
		err = fn(c)
		broken := c.IsClosed()
		if err != nil && ctx.Err() != nil {
			// A connection whose call was cancelled is not reused. pgx closes
			// one interrupted mid-statement itself; this also covers a cancel
			// between statements, and a context handler that sends the
			// server a cancel request, which could cancel the next call.
			// pgxpool destroys a closed connection on Release.
			closeConn(c)
		}
		pc.Release()
		if err == nil {
			return nil
		}
		if attempt == 0 && ctx.Err() == nil && (pgconn.SafeToRetry(err) || idempotent && broken) {
			acquireCtx = context.WithValue(ctx, pingFirst{}, true)
			continue
		}
		return p.wrap(ctx, op, err)
	}
}

// closeConn closes c, giving the terminate message a short time to go out.
func closeConn(c *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = c.Close(ctx)
}

// wrap adds the operation to err; sentinel errors stay as they are, and
// when the call was cut short by its context the result matches the
// context's error.
func (p *Postgres) wrap(ctx context.Context, op string, err error) error {
	if errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) || errors.Is(err, ErrLeaseHeld) || errors.Is(err, ErrLeaseLost) {
		return err
	}
	ctxErr := ctx.Err()
	if ctxErr == nil {
		ctxErr = contextError(err)
	}
	if ctxErr != nil && !errors.Is(err, ctxErr) {
		return fmt.Errorf("store: postgres: %s: %w (%v)", op, ctxErr, err)
	}
	return fmt.Errorf("store: postgres: %s: %w", op, err)
}

// contextError maps pgx's report of a cancelled or timed-out call to the
// context error, so that callers can match it with errors.Is.
func contextError(err error) error {
	switch {
	case errors.Is(err, context.Canceled):
		return context.Canceled
	case errors.Is(err, context.DeadlineExceeded), pgconn.Timeout(err):
		return context.DeadlineExceeded
	}
	return nil
}

// columns lays recs out as the array parameters of the append statements:
// the new last seq, and each record's seq, kind and payload.
func columns(expectedSeq int64, recs []Record) (last int64, seqs []int64, kinds []string, datas [][]byte) {
	seqs = make([]int64, len(recs))
	kinds = make([]string, len(recs))
	datas = make([][]byte, len(recs))
	for i, r := range recs {
		seqs[i] = expectedSeq + 1 + int64(i)
		kinds[i] = r.Kind
		datas[i] = nonNil(r.Data)
	}
	return expectedSeq + int64(len(recs)), seqs, kinds, datas
}

// Append implements Journal.
func (p *Postgres) Append(ctx context.Context, session string, expectedSeq int64, recs ...Record) (int64, error) {
	if err := validateAppend(session, expectedSeq, recs); err != nil {
		return 0, err
	}
	if len(recs) == 0 {
		cur, err := p.LastSeq(ctx, session)
		if err != nil {
			return 0, err
		}
		if cur != expectedSeq {
			return 0, conflict(session, expectedSeq)
		}
		return cur, nil
	}
	last, seqs, kinds, datas := columns(expectedSeq, recs)
	at := now()
	err := p.do(ctx, "append", false, func(c *pgx.Conn) error {
		var tag pgconn.CommandTag
		var err error
		if expectedSeq == 0 {
			tag, err = c.Exec(ctx, pgAppendNew, session, last, at, seqs, kinds, datas)
		} else {
			tag, err = c.Exec(ctx, pgAppendNext, session, last, at, seqs, kinds, datas, expectedSeq)
		}
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" { // unique_violation: the seqs are taken
			return conflict(session, expectedSeq)
		}
		if err != nil {
			return err
		}
		switch tag.RowsAffected() {
		case int64(len(recs)):
			return nil
		case 0:
			return conflict(session, expectedSeq)
		default:
			return fmt.Errorf("inserted %d of %d records", tag.RowsAffected(), len(recs))
		}
	})
	if err != nil {
		return 0, err
	}
	return last, nil
}

// Read implements Journal.
func (p *Postgres) Read(ctx context.Context, session string, from int64) ([]Record, error) {
	if err := checkID("session", session); err != nil {
		return nil, err
	}
	var out []Record
	err := p.do(ctx, "read", true, func(c *pgx.Conn) error {
		out = out[:0]
		rows, err := c.Query(ctx, `SELECT seq, kind, data, at FROM `+tableRecords+` WHERE session = $1 AND seq >= $2 ORDER BY seq`, session, from)
		if err != nil {
			return err
		}
		for rows.Next() {
			r := Record{Session: session}
			if err := rows.Scan(&r.Seq, &r.Kind, &r.Data, &r.At); err != nil {
				rows.Close()
				return err
			}
			r.Data = nonNil(r.Data)
			r.At = r.At.UTC()
			out = append(out, r)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// LastSeq implements Journal.
func (p *Postgres) LastSeq(ctx context.Context, session string) (int64, error) {
	if err := checkID("session", session); err != nil {
		return 0, err
	}
	var last int64
	err := p.do(ctx, "last seq", true, func(c *pgx.Conn) error {
		err := c.QueryRow(ctx, `SELECT last_seq FROM `+tableSessions+` WHERE session = $1`, session).Scan(&last)
		if errors.Is(err, pgx.ErrNoRows) {
			last = 0
			return nil
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	return last, nil
}

// SaveSnapshot implements Journal. A snapshot at the same seq as the stored
// one replaces it; one at an older seq is ignored.
func (p *Postgres) SaveSnapshot(ctx context.Context, session string, seq int64, data []byte) error {
	if err := validateSnapshot(session, seq); err != nil {
		return err
	}
	at := now()
	return p.do(ctx, "save snapshot", true, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, `INSERT INTO `+tableSnapshots+` (session, seq, data, at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (session) DO UPDATE SET seq = EXCLUDED.seq, data = EXCLUDED.data, at = EXCLUDED.at
			WHERE EXCLUDED.seq >= `+tableSnapshots+`.seq`,
			session, seq, nonNil(data), at)
		return err
	})
}

// LoadSnapshot implements Journal.
func (p *Postgres) LoadSnapshot(ctx context.Context, session string) (int64, []byte, error) {
	if err := checkID("session", session); err != nil {
		return 0, nil, err
	}
	var seq int64
	var data []byte
	err := p.do(ctx, "load snapshot", true, func(c *pgx.Conn) error {
		err := c.QueryRow(ctx, `SELECT seq, data FROM `+tableSnapshots+` WHERE session = $1`, session).Scan(&seq, &data)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: no snapshot of session %q", ErrNotFound, session)
		}
		return err
	})
	if err != nil {
		return 0, nil, err
	}
	return seq, nonNil(data), nil
}

// Sessions implements Journal. The ids are sorted bytewise (in Go, not by
// the database's collation).
func (p *Postgres) Sessions(ctx context.Context) ([]string, error) {
	var out []string
	err := p.do(ctx, "sessions", true, func(c *pgx.Conn) error {
		out = out[:0]
		rows, err := c.Query(ctx, `SELECT session FROM `+tableSessions)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			out = append(out, id)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(out)
	return out, nil
}

// Close closes the journal's connections. It waits for calls in flight to
// finish on their connection, then closes every connection and stops the
// pool's background health check; later calls return ErrClosed. Closing
// twice is a no-op.
func (p *Postgres) Close() error {
	p.once.Do(func() {
		p.closed.Store(true)
		p.pool.Close()
	})
	return nil
}

// pgDialTimeout bounds each new connection when the DSN sets no
// connect_timeout.
const pgDialTimeout = 30 * time.Second

// The lease statements. Expiry is judged by the server's clock (now(), the
// start of the statement's transaction), so that the clocks of the machines
// sharing the database do not matter. The ttl parameter is in microseconds.
const (
	// pgAcquire grants the lease unless another holder holds it unexpired;
	// a conflicting row is locked (even when not updated) until the
	// transaction ends, so that pgLeaseHolder reads the holder that won.
	pgAcquire = `INSERT INTO ` + tableLeases + ` AS l (session, holder, epoch, expires_at)
	VALUES ($1, $2, 1, now() + $3::bigint * interval '1 microsecond')
	ON CONFLICT (session) DO UPDATE SET
		epoch = CASE WHEN l.holder = EXCLUDED.holder AND l.expires_at > now() THEN l.epoch ELSE l.epoch + 1 END,
		holder = EXCLUDED.holder,
		expires_at = EXCLUDED.expires_at
	WHERE l.holder = EXCLUDED.holder OR l.holder = '' OR l.expires_at <= now()
	RETURNING epoch, expires_at`

	pgLeaseHolder = `SELECT holder, expires_at FROM ` + tableLeases + ` WHERE session = $1`

	// pgRenew locks the holder's leases in session order (two renewals
	// never deadlock) and extends them.
	pgRenew = `WITH mine AS (
		SELECT l.session FROM ` + tableLeases + ` AS l
		JOIN unnest($2::text[], $3::bigint[]) AS h(session, epoch) ON l.session = h.session AND l.epoch = h.epoch
		WHERE l.holder = $1
		ORDER BY l.session COLLATE "C"
		FOR UPDATE OF l
	)
	UPDATE ` + tableLeases + ` AS l SET expires_at = now() + $4::bigint * interval '1 microsecond'
	FROM mine WHERE l.session = mine.session
	RETURNING l.session`

	// pgRelease keeps the row, holder emptied, so that the next grant's
	// epoch is higher.
	pgRelease = `UPDATE ` + tableLeases + ` SET holder = '', expires_at = now()
	WHERE session = $1 AND holder = $2 AND epoch = $3`

	pgExpired = `SELECT session, holder, epoch, expires_at FROM ` + tableLeases + `
	WHERE holder <> '' AND expires_at <= now()
	ORDER BY expires_at, session COLLATE "C"
	LIMIT $1`

	// pgLeaseOK checks a lease and reads the session's last seq, for an
	// AppendLeased of no records.
	pgLeaseOK = `SELECT EXISTS (SELECT 1 FROM ` + tableLeases + ` WHERE session = $1 AND holder = $2 AND epoch = $3),
		COALESCE((SELECT last_seq FROM ` + tableSessions + ` WHERE session = $1), 0)`
)

// The AppendLeased statements: the append statements behind a share lock on
// the session's lease row, taken only when the row names the lease's holder
// and epoch. An Acquire that would hand the lease over waits for the append
// to commit; an append that comes after the hand-over (or waited for it)
// finds the row changed, claims nothing and writes nothing. The result says
// whether the lease was current and how many records were inserted.
const (
	pgLeasedAppendNew = `WITH lease AS (
		SELECT 1 FROM ` + tableLeases + ` WHERE session = $1 AND holder = $7 AND epoch = $8 FOR SHARE
	), claim AS (
		INSERT INTO ` + tableSessions + ` (session, last_seq, updated_at)
		SELECT $1::text, $2::bigint, $3::timestamptz WHERE EXISTS (SELECT 1 FROM lease)
		ON CONFLICT (session) DO NOTHING
		RETURNING 1
	), ins AS (
		INSERT INTO ` + tableRecords + ` (session, seq, kind, data, at)
		SELECT $1, r.seq, r.kind, r.data, $3
		FROM unnest($4::bigint[], $5::text[], $6::bytea[]) AS r(seq, kind, data)
		WHERE EXISTS (SELECT 1 FROM claim)
		RETURNING 1
	)
	SELECT EXISTS (SELECT 1 FROM lease), (SELECT count(*) FROM ins)`

	pgLeasedAppendNext = `WITH lease AS (
		SELECT 1 FROM ` + tableLeases + ` WHERE session = $1 AND holder = $8 AND epoch = $9 FOR SHARE
	), claim AS (
		UPDATE ` + tableSessions + ` SET last_seq = $2, updated_at = $3
		WHERE session = $1 AND last_seq = $7 AND EXISTS (SELECT 1 FROM lease)
		RETURNING 1
	), ins AS (
		INSERT INTO ` + tableRecords + ` (session, seq, kind, data, at)
		SELECT $1, r.seq, r.kind, r.data, $3
		FROM unnest($4::bigint[], $5::text[], $6::bytea[]) AS r(seq, kind, data)
		WHERE EXISTS (SELECT 1 FROM claim)
		RETURNING 1
	)
	SELECT EXISTS (SELECT 1 FROM lease), (SELECT count(*) FROM ins)`
)

// Acquire implements Leaser. Expires is the server's now() plus ttl.
func (p *Postgres) Acquire(ctx context.Context, session, holder string, ttl time.Duration) (Lease, error) {
	if err := validateAcquire(session, holder, ttl); err != nil {
		return Lease{}, err
	}
	l := Lease{Session: session, Holder: holder}
	// Idempotent: a retry after a commit whose answer was lost finds the
	// holder holding the lease and returns it, same epoch.
	err := p.do(ctx, "acquire lease", true, func(c *pgx.Conn) error {
		return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			err := tx.QueryRow(ctx, pgAcquire, session, holder, ttlMicros(ttl)).Scan(&l.Epoch, &l.Expires)
			if !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			held := &LeaseHeldError{Session: session}
			if err := tx.QueryRow(ctx, pgLeaseHolder, session).Scan(&held.Holder, &held.Expires); err != nil {
				return err
			}
			held.Expires = held.Expires.UTC()
			return held
		})
	})
	if err != nil {
		return Lease{}, err
	}
	l.Expires = l.Expires.UTC()
	return l, nil
}

// Renew implements Leaser: one statement locks and extends the leases.
func (p *Postgres) Renew(ctx context.Context, holder string, ttl time.Duration, held map[string]int64) ([]string, error) {
	sessions, err := validateRenew(holder, ttl, held)
	if err != nil {
		return nil, err
	}
	epochs := make([]int64, len(sessions))
	for i, s := range sessions {
		epochs[i] = held[s]
	}
	kept := map[string]bool{}
	err = p.do(ctx, "renew leases", true, func(c *pgx.Conn) error {
		clear(kept)
		if len(sessions) == 0 {
			return nil
		}
		rows, err := c.Query(ctx, pgRenew, holder, sessions, epochs, ttlMicros(ttl))
		if err != nil {
			return err
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				rows.Close()
				return err
			}
			kept[s] = true
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return lostSessions(sessions, kept), nil
}

// Release implements Leaser.
func (p *Postgres) Release(ctx context.Context, l Lease) error {
	if err := validateLease(l); err != nil {
		return err
	}
	return p.do(ctx, "release lease", true, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, pgRelease, l.Session, l.Holder, l.Epoch)
		return err
	})
}

// Expired implements Leaser; expiry is judged by the server's clock.
func (p *Postgres) Expired(ctx context.Context, limit int) ([]Lease, error) {
	return p.queryLeases(ctx, "expired leases", limit, pgExpired)
}

// queryLeases runs a query whose rows are leases (session, holder, epoch,
// expires_at) with limit as its one argument; a limit of 0 asks nothing.
func (p *Postgres) queryLeases(ctx context.Context, op string, limit int, query string) ([]Lease, error) {
	if err := validateLimit(limit); err != nil {
		return nil, err
	}
	var out []Lease
	err := p.do(ctx, op, true, func(c *pgx.Conn) error {
		out = out[:0]
		if limit == 0 {
			return nil
		}
		rows, err := c.Query(ctx, query, limit)
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

// AppendLeased implements Leaser: one statement checks the lease (holding a
// share lock on it until the commit), claims the seq and inserts the
// records, so it is one round trip, as Append is.
func (p *Postgres) AppendLeased(ctx context.Context, l Lease, expectedSeq int64, recs ...Record) (int64, error) {
	if err := validateAppend(l.Session, expectedSeq, recs); err != nil {
		return 0, err
	}
	if err := checkID("holder", l.Holder); err != nil {
		return 0, err
	}
	session := l.Session
	if len(recs) == 0 {
		var ok bool
		var cur int64
		err := p.do(ctx, "append", true, func(c *pgx.Conn) error {
			return c.QueryRow(ctx, pgLeaseOK, session, l.Holder, l.Epoch).Scan(&ok, &cur)
		})
		switch {
		case err != nil:
			return 0, err
		case !ok:
			return 0, leaseLost(l)
		case cur != expectedSeq:
			return 0, conflict(session, expectedSeq)
		}
		return cur, nil
	}
	last, seqs, kinds, datas := columns(expectedSeq, recs)
	at := now()
	err := p.do(ctx, "append", false, func(c *pgx.Conn) error {
		var leaseOK bool
		var inserted int64
		var err error
		if expectedSeq == 0 {
			err = c.QueryRow(ctx, pgLeasedAppendNew, session, last, at, seqs, kinds, datas, l.Holder, l.Epoch).Scan(&leaseOK, &inserted)
		} else {
			err = c.QueryRow(ctx, pgLeasedAppendNext, session, last, at, seqs, kinds, datas, expectedSeq, l.Holder, l.Epoch).Scan(&leaseOK, &inserted)
		}
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" { // unique_violation: the seqs are taken
			return conflict(session, expectedSeq)
		}
		switch {
		case err != nil:
			return err
		case !leaseOK:
			return leaseLost(l)
		case inserted == int64(len(recs)):
			return nil
		case inserted == 0:
			return conflict(session, expectedSeq)
		default:
			return fmt.Errorf("inserted %d of %d records", inserted, len(recs))
		}
	})
	if err != nil {
		return 0, err
	}
	return last, nil
}
