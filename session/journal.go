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

// recover rebuilds the state from the journal: the latest snapshot, then
// every later record.
func (a *sessionActor) recover() {
	a.tools, a.retrying, a.timers = map[string]*flight{}, map[string]bool{}, map[string]*time.Timer{}
	ctx, cancel := context.WithTimeout(context.Background(), journalTimeout)
	defer cancel()
	st := newState(a.id)
	j := a.m.opt.Journal
	seq, data, err := j.LoadSnapshot(ctx, a.id)
	switch {
	case err == nil && len(data) > 0:
		if err := json.Unmarshal(data, st); err != nil {
			a.fail(fmt.Errorf("session %q: decoding snapshot %d: %w", a.id, seq, err))
			return
		}
		st.ID = a.id
		st.Seq = seq
	case err != nil && !errors.Is(err, store.ErrNotFound):
		a.fail(fmt.Errorf("session %q: loading snapshot: %w", a.id, err))
		return
	}
	recs, err := j.Read(ctx, a.id, st.Seq+1)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		a.fail(fmt.Errorf("session %q: reading journal: %w", a.id, err))
		return
	}
	for _, r := range recs {
		if r.Seq <= st.Seq {
			continue
		}
		if err := st.apply(r); err != nil {
			a.fail(err)
			return
		}
	}
	a.st = st
	if st.Seq > 0 {
		a.log.Debug("session recovered", slog.Int64("seq", st.Seq), slog.Int("turn", st.Turn), slog.Bool("active", st.Active != nil))
	}
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
