package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/chorusrt/chorus/llm"
)

// Record is one journal entry of a session.
type Record struct {
	Session string    // session id
	Seq     int64     // 1-based, contiguous per session; set by Append
	Kind    string    // e.g. "user_message", "model_result", "tool_started", "tool_finished", "approval_requested"...
	Data    []byte    // JSON payload, stored as given
	At      time.Time // set by Append (UTC)
}

// ErrConflict is returned (wrapped; match it with errors.Is) by Append when the
// session's last seq is not the expected one: another writer won, and nothing
// was written.
var ErrConflict = errors.New("store: sequence conflict") // expected seq did not match: another writer won

// ErrNotFound is returned by LoadSnapshot when the session has no snapshot.
var ErrNotFound = errors.New("store: not found")

// ErrClosed is returned (wrapped) by every method of a journal after Close.
var ErrClosed = errors.New("store: journal closed")

// Journal is the durable, append-only log of agent sessions.
type Journal interface {
	// Append writes recs after the session's record expectedSeq (0 for a new session) atomically:
	// all or nothing, durable (fsync'd / committed) when it returns nil. It returns the new last seq.
	// If the session's last seq is not expectedSeq it writes nothing and returns ErrConflict (wrapped, errors.Is-matchable).
	Append(ctx context.Context, session string, expectedSeq int64, recs ...Record) (int64, error)
	// Read returns the session's records with Seq >= from, in order (empty, not an error, for an unknown session).
	Read(ctx context.Context, session string, from int64) ([]Record, error)
	// LastSeq is the session's last seq (0 when unknown).
	LastSeq(ctx context.Context, session string) (int64, error)
	// SaveSnapshot stores an opaque snapshot taken at seq (the latest one wins; older seq than stored is ignored).
	SaveSnapshot(ctx context.Context, session string, seq int64, data []byte) error
	// LoadSnapshot returns the latest snapshot, or ErrNotFound.
	LoadSnapshot(ctx context.Context, session string) (seq int64, data []byte, err error)
	// Sessions lists session ids with at least one record, sorted.
	Sessions(ctx context.Context) ([]string, error)
	Close() error
}

// MaxIDLen is the longest session id or record kind, in bytes, a journal
// accepts. It keeps keys well inside PostgreSQL's btree entry limit so that
// both backends accept exactly the same input.
const MaxIDLen = 512

// Table names, shared by both backends so that a database holding a journal
// is recognisable whichever engine wrote it.
const (
	tableRecords   = "chorus_journal_records"
	tableSessions  = "chorus_journal_sessions"
	tableSnapshots = "chorus_journal_snapshots"
)

// schemaVersion is the layout version written by this package.
const schemaVersion = 1

// checkID validates a session id or a record kind: present, at most
// MaxIDLen bytes, valid UTF-8 and free of NUL bytes (PostgreSQL text cannot
// hold either, so neither backend accepts them).
func checkID(field, v string) error {
	switch {
	case v == "":
		return &llm.ConfigError{Field: field, Msg: "must not be empty"}
	case len(v) > MaxIDLen:
		return &llm.ConfigError{Field: field, Msg: "longer than " + strconv.Itoa(MaxIDLen) + " bytes"}
	case !utf8.ValidString(v):
		return &llm.ConfigError{Field: field, Msg: "not valid UTF-8"}
	case strings.IndexByte(v, 0) >= 0:
		return &llm.ConfigError{Field: field, Msg: "contains a NUL byte"}
	}
	return nil
}

// validateAppend checks everything Append is given before anything is
// written, so that a bad record anywhere in a batch writes nothing.
func validateAppend(session string, expectedSeq int64, recs []Record) error {
	if err := checkID("session", session); err != nil {
		return err
	}
	if expectedSeq < 0 {
		return &llm.ConfigError{Field: "expectedSeq", Msg: "must not be negative"}
	}
	for i, r := range recs {
		if r.Session != "" && r.Session != session {
			return &llm.ConfigError{Field: fmt.Sprintf("recs[%d].Session", i), Msg: fmt.Sprintf("%q differs from the session appended to", r.Session)}
		}
		if err := checkID(fmt.Sprintf("recs[%d].Kind", i), r.Kind); err != nil {
			return err
		}
	}
	return nil
}

// validateSnapshot checks SaveSnapshot's arguments.
func validateSnapshot(session string, seq int64) error {
	if err := checkID("session", session); err != nil {
		return err
	}
	if seq < 0 {
		return &llm.ConfigError{Field: "seq", Msg: "must not be negative"}
	}
	return nil
}

// conflict builds the wrapped ErrConflict Append returns.
func conflict(session string, expectedSeq int64) error {
	return fmt.Errorf("%w: session %q is not at seq %d", ErrConflict, session, expectedSeq)
}

// now is the record timestamp: UTC, truncated to the microsecond both
// backends store, so that At reads back exactly as Append set it.
func now() time.Time {
	return time.Now().UTC().Truncate(time.Microsecond)
}

// nonNil returns b, or an empty slice for nil, so that a nil payload is
// stored as an empty one.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
