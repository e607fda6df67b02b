package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/chorusrt/chorus/store"
)

// recover rebuilds the state from the journal.
func (a *sessionActor) recover() {
	a.tools, a.retrying, a.timers = map[string]*flight{}, map[string]bool{}, map[string]*time.Timer{}
	ctx, cancel := context.WithTimeout(context.Background(), journalTimeout)
	defer cancel()
	st, err := loadState(ctx, a.m.opt.Journal, a.id)
	if err != nil {
		a.fail(err)
		return
	}
	a.st = st
	a.takeCarried() // telemetry.go
	if st.Seq > 0 {
		a.log.Debug("session recovered", slog.Int64("seq", st.Seq), slog.Int("turn", st.Turn), slog.Bool("active", st.Active != nil))
	}
}

// loadState replays a session's journal: the latest snapshot, then every
// later record.
func loadState(ctx context.Context, j store.Journal, id string) (*state, error) {
	st := newState(id)
	seq, data, err := j.LoadSnapshot(ctx, id)
	switch {
	case err == nil && len(data) > 0:
		if err := json.Unmarshal(data, st); err != nil {
			return nil, fmt.Errorf("session %q: decoding snapshot %d: %w", id, seq, err)
		}
		st.ID = id
		st.Seq = seq
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return nil, fmt.Errorf("session %q: loading snapshot: %w", id, err)
	}
	recs, err := j.Read(ctx, id, st.Seq+1)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("session %q: reading journal: %w", id, err)
	}
	for _, r := range recs {
		if r.Seq <= st.Seq {
			continue
		}
		if err := st.apply(r); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// appendBatch appends b atomically and applies its records. It reports
// whether the records are durable; on failure the session stops.
func (a *sessionActor) appendBatch(b *batch) bool {
	if a.broken != nil {
		return false
	}
	if b.err != nil {
		a.fail(b.err)
		return false
	}
	if len(b.recs) == 0 {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), journalTimeout)
	defer cancel()
	last, err := a.m.opt.Journal.Append(ctx, a.id, a.st.Seq, b.recs...)
	if err != nil {
		a.fail(fmt.Errorf("session %q: journal append: %w", a.id, err))
		return false
	}
	first := last - int64(len(b.recs)) + 1
	for i := range b.recs {
		r := b.recs[i]
		r.Seq = first + int64(i)
		if err := a.st.apply(r); err != nil {
			a.fail(err)
			return false
		}
	}
	a.st.Seq = last
	return true
}

func (a *sessionActor) newBatch() *batch { return &batch{id: a.id} }

// saveSnapshot stores the state after a turn, so recovery reads only the
// records since. A failure costs only recovery time.
func (a *sessionActor) saveSnapshot() {
	data, err := json.Marshal(a.st)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), journalTimeout)
		err = a.m.opt.Journal.SaveSnapshot(ctx, a.id, a.st.Seq, data)
		cancel()
	}
	if err != nil {
		a.log.Warn("session snapshot not saved", slog.String("error", err.Error()))
	}
}
