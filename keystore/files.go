package keystore

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Errors of the files and batches the store keeps.
var (
	// ErrNoFile: no file has that id.
	ErrNoFile = errors.New("keystore: no such file")
	// ErrNoBatch: no batch has that id.
	ErrNoBatch = errors.New("keystore: no such batch")
	// ErrLeaseLost: the replica does not hold the batch's lease (it
	// expired and another replica took it): it must stop running it.
	ErrLeaseLost = errors.New("keystore: this replica does not hold the batch's lease")
)

func blobSchema(postgres bool) []string {
	blob := "BLOB"
	if postgres {
		blob = "BYTEA"
	}
	return []string{
		`CREATE TABLE IF NOT EXISTS chorus_files (
			id TEXT PRIMARY KEY, owner TEXT NOT NULL, purpose TEXT NOT NULL, filename TEXT NOT NULL,
			bytes BIGINT NOT NULL, created BIGINT NOT NULL, content ` + blob + ` NOT NULL)`,
		`CREATE INDEX IF NOT EXISTS chorus_files_owner ON chorus_files (owner, created)`,
		`CREATE TABLE IF NOT EXISTS chorus_batches (
			id TEXT PRIMARY KEY, owner TEXT NOT NULL, created BIGINT NOT NULL, done SMALLINT NOT NULL,
			cancel BIGINT NOT NULL, holder TEXT NOT NULL, lease_until BIGINT NOT NULL, state ` + blob + ` NOT NULL)`,
		`CREATE INDEX IF NOT EXISTS chorus_batches_owner ON chorus_batches (owner, created)`,
		`CREATE INDEX IF NOT EXISTS chorus_batches_open ON chorus_batches (done, lease_until)`,
		`CREATE TABLE IF NOT EXISTS chorus_batch_output (
			batch_id TEXT NOT NULL, seq BIGINT NOT NULL, lines ` + blob + ` NOT NULL,
			PRIMARY KEY (batch_id, seq))`,
	}
}

// File is an uploaded file's metadata (its bytes are FileContent's).
type File struct {
	ID       string
	Owner    string // the gateway key's name ("" without keys)
	Purpose  string
	Filename string
	Bytes    int64
	Created  int64 // Unix seconds
}

// PutFile stores a file and its content; an id the store holds is refused
// with ErrConflict.
func (s *Store) PutFile(ctx context.Context, f File, content []byte) error {
	if content == nil {
		content = []byte{}
	}
	_, err := s.db.ExecContext(ctx, s.bind(`INSERT INTO chorus_files (id, owner, purpose, filename, bytes, created, content) VALUES (?,?,?,?,?,?,?)`),
		f.ID, f.Owner, f.Purpose, f.Filename, f.Bytes, f.Created, content)
	if err != nil {
		if uniqueViolation(err) {
			return ErrConflict
		}
		return fmt.Errorf("keystore: put file: %w", err)
	}
	return nil
}

const fileColumns = "id, owner, purpose, filename, bytes, created"

func scanFile(sc scanner) (File, error) {
	var f File
	err := sc.Scan(&f.ID, &f.Owner, &f.Purpose, &f.Filename, &f.Bytes, &f.Created)
	return f, err
}

// File returns the metadata of file id, or ErrNoFile.
func (s *Store) File(ctx context.Context, id string) (File, error) {
	f, err := scanFile(s.db.QueryRowContext(ctx, s.bind(`SELECT `+fileColumns+` FROM chorus_files WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return File{}, ErrNoFile
	}
	if err != nil {
		return File{}, fmt.Errorf("keystore: %w", err)
	}
	return f, nil
}

// FileContent returns the bytes of file id, or ErrNoFile.
func (s *Store) FileContent(ctx context.Context, id string) ([]byte, error) {
	var b []byte
	err := s.db.QueryRowContext(ctx, s.bind(`SELECT content FROM chorus_files WHERE id = ?`), id).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNoFile
	}
	if err != nil {
		return nil, fmt.Errorf("keystore: %w", err)
	}
	return b, nil
}

// Files returns owner's files (of purpose, unless it is ""), newest first.
func (s *Store) Files(ctx context.Context, owner, purpose string) ([]File, error) {
	rows, err := s.db.QueryContext(ctx, s.bind(`SELECT `+fileColumns+` FROM chorus_files WHERE owner = ? AND (? = '' OR purpose = ?) ORDER BY created DESC, id`), owner, purpose, purpose)
	if err != nil {
		return nil, fmt.Errorf("keystore: %w", err)
	}
	defer rows.Close()
	var out []File
	for rows.Next() {
		f, err := scanFile(rows)
		if err != nil {
			return nil, fmt.Errorf("keystore: %w", err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("keystore: %w", err)
	}
	return out, nil
}

// DeleteFile removes file id and its content, or returns ErrNoFile.
func (s *Store) DeleteFile(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx, s.bind(`DELETE FROM chorus_files WHERE id = ?`), id)
	if err != nil {
		return fmt.Errorf("keystore: delete file: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNoFile
	}
	return nil
}

// Batch is a batch as the store keeps it: its state is the gateway's
// (JSON), the store knows only whether it is done, whether a client asked
// to cancel it, and which replica runs it until when (its lease).
type Batch struct {
	ID      string
	Owner   string
	Created int64 // Unix seconds
	Done    bool  // finished: no replica runs it again
	// Cancel is when a client asked to cancel it (Unix seconds; 0: not).
	Cancel     int64
	Holder     string    // the replica running it ("" once released)
	LeaseUntil time.Time // the holder's lease ends then unless renewed
	State      []byte
}

const batchColumns = "id, owner, created, done, cancel, holder, lease_until, state"

func scanBatch(sc scanner) (Batch, error) {
	var b Batch
	var done int
	var until int64
	err := sc.Scan(&b.ID, &b.Owner, &b.Created, &done, &b.Cancel, &b.Holder, &until, &b.State)
	b.Done, b.LeaseUntil = done != 0, fromNanos(until)
	return b, err
}

// CreateBatch stores a new batch, its lease held by holder until until
// (no holder: any replica may take it).
func (s *Store) CreateBatch(ctx context.Context, b Batch, holder string, until time.Time) error {
	if b.State == nil {
		b.State = []byte("{}")
	}
	done := 0
	if b.Done {
		done = 1
	}
	_, err := s.db.ExecContext(ctx, s.bind(`INSERT INTO chorus_batches (`+batchColumns+`) VALUES (?,?,?,?,?,?,?,?)`),
		b.ID, b.Owner, b.Created, done, b.Cancel, holder, nanos(until), b.State)
	if err != nil {
		if uniqueViolation(err) {
			return ErrConflict
		}
		return fmt.Errorf("keystore: create batch: %w", err)
	}
	return nil
}

// Batch returns batch id, or ErrNoBatch.
func (s *Store) Batch(ctx context.Context, id string) (Batch, error) {
	b, err := scanBatch(s.db.QueryRowContext(ctx, s.bind(`SELECT `+batchColumns+` FROM chorus_batches WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return Batch{}, ErrNoBatch
	}
	if err != nil {
		return Batch{}, fmt.Errorf("keystore: %w", err)
	}
	return b, nil
}

// Batches returns owner's batches, newest first.
func (s *Store) Batches(ctx context.Context, owner string) ([]Batch, error) {
	rows, err := s.db.QueryContext(ctx, s.bind(`SELECT `+batchColumns+` FROM chorus_batches WHERE owner = ? ORDER BY created DESC, id DESC`), owner)
	if err != nil {
		return nil, fmt.Errorf("keystore: %w", err)
	}
	defer rows.Close()
	var out []Batch
	for rows.Next() {
		b, err := scanBatch(rows)
		if err != nil {
			return nil, fmt.Errorf("keystore: %w", err)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("keystore: %w", err)
	}
	return out, nil
}

// SaveBatch writes a batch's state, by the replica holding its lease
// (ErrLeaseLost otherwise). A done batch's output lines are dropped: its
// output files hold them.
func (s *Store) SaveBatch(ctx context.Context, id, holder string, state []byte, done bool) error {
	d := 0
	if done {
		d = 1
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.bind(`UPDATE chorus_batches SET state = ?, done = ? WHERE id = ? AND holder = ? AND done = 0`), state, d, id, holder)
		if err != nil {
			return fmt.Errorf("keystore: save batch: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return ErrLeaseLost
		}
		if done {
			if _, err := tx.ExecContext(ctx, s.bind(`DELETE FROM chorus_batch_output WHERE batch_id = ?`), id); err != nil {
				return fmt.Errorf("keystore: save batch: %w", err)
			}
		}
		return nil
	})
}

// CancelBatch records a client's cancel of batch id (at now) unless it is
// done or cancelled already, and returns the batch. The holder sees it at
// its next RenewBatch.
func (s *Store) CancelBatch(ctx context.Context, id string, now time.Time) (Batch, error) {
	if _, err := s.db.ExecContext(ctx, s.bind(`UPDATE chorus_batches SET cancel = ? WHERE id = ? AND done = 0 AND cancel = 0`), now.Unix(), id); err != nil {
		return Batch{}, fmt.Errorf("keystore: cancel batch: %w", err)
	}
	return s.Batch(ctx, id)
}

// TakeBatch gives replica the lease (until now+ttl) of one batch not done
// whose lease is free or expired, oldest first; ok is false when there is
// none. Two replicas taking at once never get the same batch.
func (s *Store) TakeBatch(ctx context.Context, replica string, now time.Time, ttl time.Duration) (b Batch, ok bool, err error) {
	rows, err := s.db.QueryContext(ctx, s.bind(`SELECT id FROM chorus_batches WHERE done = 0 AND (holder = '' OR lease_until < ?) ORDER BY created, id LIMIT 8`), nanos(now))
	if err != nil {
		return Batch{}, false, fmt.Errorf("keystore: %w", err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return Batch{}, false, fmt.Errorf("keystore: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return Batch{}, false, fmt.Errorf("keystore: %w", err)
	}
	for _, id := range ids {
		res, err := s.db.ExecContext(ctx, s.bind(`UPDATE chorus_batches SET holder = ?, lease_until = ? WHERE id = ? AND done = 0 AND (holder = '' OR lease_until < ?)`),
			replica, nanos(now.Add(ttl)), id, nanos(now))
		if err != nil {
			return Batch{}, false, fmt.Errorf("keystore: take batch: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			b, err := s.Batch(ctx, id)
			return b, err == nil, err
		}
	}
	return Batch{}, false, nil
}

// RenewBatch extends replica's lease of batch id to now+ttl and returns
// the batch's cancel (0: none asked); ErrLeaseLost when replica does not
// hold it.
func (s *Store) RenewBatch(ctx context.Context, id, replica string, now time.Time, ttl time.Duration) (cancel int64, err error) {
	err = s.db.QueryRowContext(ctx, s.bind(`UPDATE chorus_batches SET lease_until = ? WHERE id = ? AND holder = ? AND done = 0 RETURNING cancel`),
		nanos(now.Add(ttl)), id, replica).Scan(&cancel)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, ErrLeaseLost
	}
	if err != nil {
		return 0, fmt.Errorf("keystore: renew batch lease: %w", err)
	}
	return cancel, nil
}

// ReleaseBatch gives up replica's lease of batch id, so that another
// replica can take it at once (a replica closing with the batch not done).
func (s *Store) ReleaseBatch(ctx context.Context, id, replica string) error {
	if _, err := s.db.ExecContext(ctx, s.bind(`UPDATE chorus_batches SET holder = '', lease_until = 0 WHERE id = ? AND holder = ?`), id, replica); err != nil {
		return fmt.Errorf("keystore: release batch: %w", err)
	}
	return nil
}

// AppendBatchOutput appends whole output lines to batch id's output, by
// the replica holding its lease (ErrLeaseLost otherwise): chunks are kept
// in the order they were appended, and a replica that lost the lease can
// append no more, so the output never holds a line twice.
func (s *Store) AppendBatchOutput(ctx context.Context, id, replica string, lines []byte) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		var holder string
		var done int
		err := tx.QueryRowContext(ctx, s.bind(`SELECT holder, done FROM chorus_batches WHERE id = ?`+s.forUpdate()), id).Scan(&holder, &done)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNoBatch
		}
		if err != nil {
			return fmt.Errorf("keystore: %w", err)
		}
		if holder != replica || done != 0 {
			return ErrLeaseLost
		}
		var seq int64
		if err := tx.QueryRowContext(ctx, s.bind(`SELECT COALESCE(MAX(seq), 0) FROM chorus_batch_output WHERE batch_id = ?`), id).Scan(&seq); err != nil {
			return fmt.Errorf("keystore: %w", err)
		}
		if _, err := tx.ExecContext(ctx, s.bind(`INSERT INTO chorus_batch_output (batch_id, seq, lines) VALUES (?,?,?)`), id, seq+1, lines); err != nil {
			return fmt.Errorf("keystore: append batch output: %w", err)
		}
		return nil
	})
}

// BatchOutput returns the output lines of batch id appended so far, in
// order.
func (s *Store) BatchOutput(ctx context.Context, id string) ([]byte, error) {
	rows, err := s.db.QueryContext(ctx, s.bind(`SELECT lines FROM chorus_batch_output WHERE batch_id = ? ORDER BY seq`), id)
	if err != nil {
		return nil, fmt.Errorf("keystore: %w", err)
	}
	defer rows.Close()
	var out bytes.Buffer
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, fmt.Errorf("keystore: %w", err)
		}
		out.Write(b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("keystore: %w", err)
	}
	return out.Bytes(), nil
}
