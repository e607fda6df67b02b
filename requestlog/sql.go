package requestlog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/chorusrt/chorus/internal/sqlbind"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	_ "modernc.org/sqlite"             // database/sql driver "sqlite"
)

// Store keeps records. OpenSQLite and OpenPostgres return one; a test may
// wrap one to make it fail or stall.
type Store interface {
	// Insert writes records in one transaction.
	Insert(ctx context.Context, recs []Record) error
	// List returns one page, newest first.
	List(ctx context.Context, q Query) (Page, error)
	// Usage returns aggregates, ordered by bucket then group.
	Usage(ctx context.Context, q UsageQuery) ([]UsageRow, error)
	// Prune deletes records older than before (unless zero) and all but the
	// newest maxRows (unless zero), returning how many it deleted.
	Prune(ctx context.Context, before time.Time, maxRows int64) (int64, error)
	Close() error
}

// sqlStore is Store over database/sql, for both SQLite and PostgreSQL.
type sqlStore struct {
	db       *sql.DB
	postgres bool

	mu      sync.Mutex
	inserts map[int]*sql.Stmt // the prepared INSERT of n rows (insertChunks)
}

const columns = "t, key_fp, key_name, route, format, requested, model, provider, step, attempts, stream, status, error_type, queue_ns, ttft_ns, latency_ns, input_tokens, cached_tokens, output_tokens, cost, cache_hit, batch_id, line_id, trace_id, request_body, answer"

var nColumns = strings.Count(columns, ",") + 1

func schema(postgres bool) []string {
	id, real := "id INTEGER PRIMARY KEY", "REAL"
	if postgres {
		id, real = "id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY", "DOUBLE PRECISION"
	}
	return []string{
		`CREATE TABLE IF NOT EXISTS request_log (` + id + `,
			t BIGINT NOT NULL, key_fp TEXT NOT NULL, key_name TEXT NOT NULL,
			route TEXT NOT NULL, format TEXT NOT NULL, requested TEXT NOT NULL,
			model TEXT NOT NULL, provider TEXT NOT NULL, step INTEGER NOT NULL, attempts INTEGER NOT NULL,
			stream SMALLINT NOT NULL, status INTEGER NOT NULL, error_type TEXT NOT NULL,
			queue_ns BIGINT NOT NULL, ttft_ns BIGINT NOT NULL, latency_ns BIGINT NOT NULL,
			input_tokens BIGINT NOT NULL, cached_tokens BIGINT NOT NULL, output_tokens BIGINT NOT NULL,
			cost ` + real + ` NOT NULL, cache_hit SMALLINT NOT NULL,
			batch_id TEXT NOT NULL, line_id TEXT NOT NULL, trace_id TEXT NOT NULL,
			request_body TEXT NOT NULL DEFAULT '', answer TEXT NOT NULL DEFAULT '')`,
		`CREATE INDEX IF NOT EXISTS request_log_t ON request_log (t DESC, id DESC)`,
		`CREATE INDEX IF NOT EXISTS request_log_key ON request_log (key_fp, t DESC, id DESC)`,
		`CREATE INDEX IF NOT EXISTS request_log_key_name ON request_log (key_name, t DESC, id DESC)`,
		`CREATE INDEX IF NOT EXISTS request_log_model ON request_log (model, t DESC, id DESC)`,
	}
}

// OpenSQLite opens (creating it if needed) the request log in the SQLite
// file at path.
func OpenSQLite(path string) (Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("requestlog: sqlite path %q: %w", path, err)
	}
	if fi, err := os.Stat(filepath.Dir(abs)); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("requestlog: sqlite directory of %q is not a directory", abs)
	}
	db, err := sql.Open("sqlite", abs+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=temp_store(memory)")
	if err != nil {
		return nil, fmt.Errorf("requestlog: open sqlite %q: %w", abs, err)
	}
	db.SetMaxOpenConns(4)
	return initStore(db, false)
}

// OpenPostgres opens the request log in the PostgreSQL database at dsn,
// creating its table and indexes if needed.
func OpenPostgres(ctx context.Context, dsn string) (Store, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("requestlog: open postgres: %w", err)
	}
	db.SetMaxOpenConns(4)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("requestlog: connect to postgres: %w", err)
	}
	return initStore(db, true)
}

func initStore(db *sql.DB, postgres bool) (Store, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, q := range schema(postgres) {
		if _, err := db.ExecContext(ctx, q); err != nil {
			db.Close()
			return nil, fmt.Errorf("requestlog: create schema: %w", err)
		}
	}
	if err := addContentColumns(ctx, db, postgres); err != nil {
		db.Close()
		return nil, err
	}
	return &sqlStore{db: db, postgres: postgres}, nil
}

// addContentColumns adds the content columns to a table made before they
// were (a store written by an earlier release).
func addContentColumns(ctx context.Context, db *sql.DB, postgres bool) error {
	for _, col := range []string{"request_body", "answer"} {
		if postgres {
			if _, err := db.ExecContext(ctx, "ALTER TABLE request_log ADD COLUMN IF NOT EXISTS "+col+" TEXT NOT NULL DEFAULT ''"); err != nil {
				return fmt.Errorf("requestlog: add column %s: %w", col, err)
			}
			continue
		}
		var n int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM pragma_table_info('request_log') WHERE name = ?", col).Scan(&n); err != nil {
			return fmt.Errorf("requestlog: read the schema: %w", err)
		}
		if n == 0 {
			if _, err := db.ExecContext(ctx, "ALTER TABLE request_log ADD COLUMN "+col+" TEXT NOT NULL DEFAULT ''"); err != nil {
				return fmt.Errorf("requestlog: add column %s: %w", col, err)
			}
		}
	}
	return nil
}

func (s *sqlStore) Close() error {
	s.mu.Lock()
	for _, st := range s.inserts {
		st.Close()
	}
	s.inserts = nil
	s.mu.Unlock()
	return s.db.Close()
}

// bind rewrites ? placeholders for PostgreSQL ($1, $2, ...).
func (s *sqlStore) bind(q string) string {
	if !s.postgres {
		return q
	}
	return sqlbind.Postgres(q)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// storedText is s as both stores take it: valid UTF-8 with no NUL
// (PostgreSQL's TEXT refuses either), each bad byte or NUL as U+FFFD.
func storedText(s string) string {
	if s == "" || utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// insertRows is the most rows of one INSERT statement.
const insertRows = 200

// insertChunks are the row counts of the INSERTs a batch is cut into,
// largest first: each is prepared once (parsing a statement of 200 rows
// cost a sixth of an insert's CPU on SQLite).
var insertChunks = [...]int{insertRows, 20, 1}

// insertStmt is the prepared INSERT of n rows.
func (s *sqlStore) insertStmt(ctx context.Context, n int) (*sql.Stmt, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.inserts[n]; st != nil {
		return st, nil
	}
	row := "(" + strings.Repeat("?,", nColumns-1) + "?)"
	q := "INSERT INTO request_log (" + columns + ") VALUES " + strings.TrimSuffix(strings.Repeat(row+",", n), ",")
	st, err := s.db.PrepareContext(ctx, s.bind(q))
	if err != nil {
		return nil, err
	}
	if s.inserts == nil {
		s.inserts = map[int]*sql.Stmt{}
	}
	s.inserts[n] = st
	return st, nil
}

func (s *sqlStore) Insert(ctx context.Context, recs []Record) error {
	if len(recs) == 0 {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("requestlog: insert: %w", err)
	}
	defer tx.Rollback()
	args := make([]any, 0, min(len(recs), insertRows)*nColumns)
	for len(recs) > 0 {
		n := 1
		for _, c := range insertChunks {
			if c <= len(recs) {
				n = c
				break
			}
		}
		st, err := s.insertStmt(ctx, n)
		if err != nil {
			return fmt.Errorf("requestlog: insert: %w", err)
		}
		args = args[:0]
		for i := range recs[:n] {
			r := &recs[i]
			args = append(args, r.Time.UnixNano(), r.KeyFingerprint, r.KeyName, r.Route, r.Format, storedText(r.Requested),
				r.Model, r.Provider, r.Step, r.Attempts, b2i(r.Stream), r.Status, r.ErrorType,
				int64(r.Queue), int64(r.TTFT), int64(r.Latency), r.InputTokens, r.CachedTokens, r.OutputTokens,
				r.Cost, b2i(r.CacheHit), r.BatchID, r.LineID, r.TraceID, storedText(r.RequestBody), storedText(r.Answer))
		}
		if _, err := tx.StmtContext(ctx, st).ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("requestlog: insert: %w", err)
		}
		recs = recs[n:]
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("requestlog: insert: %w", err)
	}
	return nil
}

// where is the condition of f (with a leading " WHERE " when not empty).
func (f Filter) where(extra string, extraArgs ...any) (string, []any, error) {
	var conds []string
	var args []any
	if f.Key != "" {
		conds, args = append(conds, "(key_fp = ? OR key_name = ?)"), append(args, f.Key, f.Key)
	}
	if f.Model != "" {
		conds, args = append(conds, "model = ?"), append(args, f.Model)
	}
	if f.Provider != "" {
		conds, args = append(conds, "provider = ?"), append(args, f.Provider)
	}
	c, a, err := statusCond(f.Status)
	if err != nil {
		return "", nil, err
	}
	if c != "" {
		conds = append(conds, c)
		if a != nil {
			args = append(args, a)
		}
	}
	if !f.From.IsZero() {
		conds, args = append(conds, "t >= ?"), append(args, f.From.UnixNano())
	}
	if !f.To.IsZero() {
		conds, args = append(conds, "t < ?"), append(args, f.To.UnixNano())
	}
	if extra != "" {
		conds, args = append(conds, extra), append(args, extraArgs...)
	}
	if len(conds) == 0 {
		return "", nil, nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args, nil
}

func (s *sqlStore) List(ctx context.Context, q Query) (Page, error) {
	if err := q.check(); err != nil {
		return Page{}, err
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 1000)
	var extra string
	var extraArgs []any
	if q.Cursor != "" {
		t, id, err := decodeCursor(q.Cursor)
		if err != nil {
			return Page{}, err
		}
		extra, extraArgs = "(t < ? OR (t = ? AND id < ?))", []any{t, t, id}
	}
	w, args, err := q.where(extra, extraArgs...)
	if err != nil {
		return Page{}, err
	}
	rows, err := s.db.QueryContext(ctx, s.bind("SELECT id, "+columns+" FROM request_log"+w+" ORDER BY t DESC, id DESC LIMIT "+strconv.Itoa(limit+1)), args...)
	if err != nil {
		return Page{}, fmt.Errorf("requestlog: list: %w", err)
	}
	defer rows.Close()
	var p Page
	p.Records = []Record{}
	for rows.Next() {
		var r Record
		var t, queue, ttft, lat int64
		var stream, hit int
		if err := rows.Scan(&r.ID, &t, &r.KeyFingerprint, &r.KeyName, &r.Route, &r.Format, &r.Requested,
			&r.Model, &r.Provider, &r.Step, &r.Attempts, &stream, &r.Status, &r.ErrorType,
			&queue, &ttft, &lat, &r.InputTokens, &r.CachedTokens, &r.OutputTokens,
			&r.Cost, &hit, &r.BatchID, &r.LineID, &r.TraceID, &r.RequestBody, &r.Answer); err != nil {
			return Page{}, fmt.Errorf("requestlog: list: %w", err)
		}
		r.Time = time.Unix(0, t).UTC()
		r.Queue, r.TTFT, r.Latency = time.Duration(queue), time.Duration(ttft), time.Duration(lat)
		r.Stream, r.CacheHit = stream != 0, hit != 0
		p.Records = append(p.Records, r)
	}
	if err := rows.Err(); err != nil {
		return Page{}, fmt.Errorf("requestlog: list: %w", err)
	}
	if len(p.Records) > limit {
		p.Records = p.Records[:limit]
		last := p.Records[limit-1]
		p.Next = encodeCursor(last.Time.UnixNano(), last.ID)
	}
	return p, nil
}

type agg struct {
	row       UsageRow
	lat, ttft []int64
}

func (s *sqlStore) Usage(ctx context.Context, q UsageQuery) ([]UsageRow, error) {
	if err := q.check(); err != nil {
		return nil, err
	}
	group := "''"
	switch q.GroupBy {
	case "key":
		group = "CASE WHEN key_name <> '' THEN key_name ELSE key_fp END"
	case "model":
		group = "model"
	case "provider":
		group = "provider"
	}
	w, args, err := q.where("")
	if err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, s.bind("SELECT t, "+group+", error_type, input_tokens, cached_tokens, output_tokens, cost, latency_ns, ttft_ns, stream FROM request_log"+w), args...)
	if err != nil {
		return nil, fmt.Errorf("requestlog: usage: %w", err)
	}
	defer rows.Close()
	type gk struct {
		b int64
		g string
	}
	aggs := map[gk]*agg{}
	for rows.Next() {
		var t, in, cached, out, lat, ttft int64
		var g, et string
		var cost float64
		var stream int
		if err := rows.Scan(&t, &g, &et, &in, &cached, &out, &cost, &lat, &ttft, &stream); err != nil {
			return nil, fmt.Errorf("requestlog: usage: %w", err)
		}
		var b int64
		if q.Bucket != 0 {
			b = t - (t-q.From.UnixNano())%int64(q.Bucket) // buckets start at From, UTC-aligned when From is
		}
		a := aggs[gk{b, g}]
		if a == nil {
			a = &agg{row: UsageRow{Group: g}}
			if q.Bucket != 0 {
				a.row.Bucket = time.Unix(0, b).UTC()
			}
			aggs[gk{b, g}] = a
		}
		r := &a.row
		r.Requests++
		if et != "" {
			r.Errors++
			if r.ErrorsByKind == nil {
				r.ErrorsByKind = map[string]int64{}
			}
			r.ErrorsByKind[et]++
		}
		r.InputTokens += in
		r.CachedTokens += cached
		r.OutputTokens += out
		r.Cost += cost
		a.lat = append(a.lat, lat)
		if stream != 0 && et == "" {
			a.ttft = append(a.ttft, ttft)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("requestlog: usage: %w", err)
	}
	out := make([]UsageRow, 0, len(aggs))
	for _, a := range aggs {
		r := a.row
		r.LatencyP50, r.LatencyP95, r.LatencyP99 = percentiles(a.lat)
		r.TTFTP50, r.TTFTP95, r.TTFTP99 = percentiles(a.ttft)
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b UsageRow) int {
		if c := a.Bucket.Compare(b.Bucket); c != 0 {
			return c
		}
		return strings.Compare(a.Group, b.Group)
	})
	return out, nil
}

// percentiles are the nearest-rank p50, p95 and p99 of v (sorted in place).
func percentiles(v []int64) (p50, p95, p99 time.Duration) {
	if len(v) == 0 {
		return 0, 0, 0
	}
	slices.Sort(v)
	rank := func(p int) time.Duration {
		i := (p*len(v) + 99) / 100 // ceil(p/100 * n)
		return time.Duration(v[max(i, 1)-1])
	}
	return rank(50), rank(95), rank(99)
}

func (s *sqlStore) Prune(ctx context.Context, before time.Time, maxRows int64) (int64, error) {
	var n int64
	if !before.IsZero() {
		res, err := s.db.ExecContext(ctx, s.bind("DELETE FROM request_log WHERE t < ?"), before.UnixNano())
		if err != nil {
			return n, fmt.Errorf("requestlog: prune: %w", err)
		}
		d, _ := res.RowsAffected()
		n += d
	}
	if maxRows > 0 {
		var t, id int64
		err := s.db.QueryRowContext(ctx, s.bind("SELECT t, id FROM request_log ORDER BY t DESC, id DESC LIMIT 1 OFFSET ?"), maxRows-1).Scan(&t, &id)
		if errors.Is(err, sql.ErrNoRows) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("requestlog: prune: %w", err)
		}
		res, err := s.db.ExecContext(ctx, s.bind("DELETE FROM request_log WHERE t < ? OR (t = ? AND id < ?)"), t, t, id)
		if err != nil {
			return n, fmt.Errorf("requestlog: prune: %w", err)
		}
		d, _ := res.RowsAffected()
		n += d
	}
	return n, nil
}
