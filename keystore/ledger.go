package keystore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ErrLost is what a replica's ledger call returns once another replica
// has reconciled it as dead (its heartbeat was older than the TTL): what
// it had reserved now counts as spent, so it must forget its leases (and
// settle nothing of the calls they covered), Register again, and go on.
var ErrLost = errors.New("keystore: this replica was reconciled as dead; its reservations count as spent")

// Register enters replica as live (or again, after ErrLost).
func (s *Store) Register(ctx context.Context, replica string, now time.Time) error {
	q := `INSERT INTO chorus_replicas (id, seen) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET seen = excluded.seen`
	if _, err := s.db.ExecContext(ctx, s.bind(q), replica, now.UnixNano()); err != nil {
		return fmt.Errorf("keystore: register replica: %w", err)
	}
	return nil
}

// Heartbeat says replica is alive at now; ErrLost when it was reconciled.
func (s *Store) Heartbeat(ctx context.Context, replica string, now time.Time) error {
	return s.tx(ctx, func(tx *sql.Tx) error { return s.alive(ctx, tx, replica, now) })
}

// alive renews replica's heartbeat in tx, taking its row's lock (so a
// Reconcile of it waits for tx, or tx for it), or answers ErrLost.
func (s *Store) alive(ctx context.Context, tx *sql.Tx, replica string, now time.Time) error {
	res, err := tx.ExecContext(ctx, s.bind(`UPDATE chorus_replicas SET seen = ? WHERE id = ?`), now.UnixNano(), replica)
	if err != nil {
		return fmt.Errorf("keystore: heartbeat: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return ErrLost
	}
	return nil
}

// Reserve leases part of key keyID's budget of period to replica: what is
// left of the budget (the budget, less what is spent, less what every
// replica holds reserved) up to want, or nothing when less than need is
// left. A key without a budget grants want. The lease stays counted (as
// reserved, then spent) until Settle moves it to the ledger or releases
// it, or Reconcile counts it as spent once replica is dead.
func (s *Store) Reserve(ctx context.Context, replica, keyID, period string, need, want NanoUSD, now time.Time) (NanoUSD, error) {
	if need < 0 || want < need {
		return 0, &FieldError{Field: "want", Msg: "need <= want, both >= 0"}
	}
	var granted NanoUSD
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if err := s.alive(ctx, tx, replica, now); err != nil {
			return err
		}
		var budget NanoUSD
		var revoked int64
		err := tx.QueryRowContext(ctx, s.bind(`SELECT budget_nusd, revoked FROM chorus_keys WHERE id = ?`+s.forUpdate()), keyID).Scan(&budget, &revoked)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("keystore: reserve: %w", err)
		}
		if budget == 0 {
			granted = want
			return nil
		}
		var used NanoUSD
		if err := tx.QueryRowContext(ctx, s.bind(`SELECT
			COALESCE((SELECT SUM(nusd) FROM chorus_spend WHERE key_id = ? AND period = ?), 0) +
			COALESCE((SELECT SUM(nusd) FROM chorus_reservations WHERE key_id = ? AND period = ?), 0)`), keyID, period, keyID, period).Scan(&used); err != nil {
			return fmt.Errorf("keystore: reserve: %w", err)
		}
		left := budget - used
		if left < need || left <= 0 {
			granted = 0
			return nil
		}
		granted = min(want, left)
		_, err = tx.ExecContext(ctx, s.bind(`INSERT INTO chorus_reservations (replica, key_id, period, nusd) VALUES (?, ?, ?, ?)
			ON CONFLICT (replica, key_id, period) DO UPDATE SET nusd = chorus_reservations.nusd + excluded.nusd`), replica, keyID, period, granted)
		if err != nil {
			return fmt.Errorf("keystore: reserve: %w", err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return granted, nil
}

// Settlement is what a replica moves from its reservation of a key's
// period to the ledger: Spent (the answered calls' costs, Calls of them),
// and Release, what it gives back unspent.
type Settlement struct {
	KeyID, Period  string
	Spent, Release NanoUSD
	Calls          int64
}

// Settle applies a replica's settlements in one transaction: each adds
// Spent to the ledger and takes Spent+Release off the replica's
// reservation, so that what is spent plus what is reserved never drops by
// what was spent. Rows are taken in (key, period) order, so that replicas
// settling at once never deadlock. ErrLost: nothing was applied.
func (s *Store) Settle(ctx context.Context, replica string, sets []Settlement, now time.Time) error {
	sets = slices.Clone(sets)
	slices.SortFunc(sets, func(a, b Settlement) int {
		if c := strings.Compare(a.KeyID, b.KeyID); c != 0 {
			return c
		}
		return strings.Compare(a.Period, b.Period)
	})
	return s.tx(ctx, func(tx *sql.Tx) error {
		if err := s.alive(ctx, tx, replica, now); err != nil {
			return err
		}
		for _, st := range sets {
			if st.Spent < 0 || st.Release < 0 || st.Calls < 0 {
				return &FieldError{Field: "settlement", Msg: "amounts must not be negative"}
			}
			if st.Spent > 0 || st.Calls > 0 {
				if err := s.addSpend(ctx, tx, st.KeyID, st.Period, st.Spent, st.Calls); err != nil {
					return err
				}
			}
			if take := st.Spent + st.Release; take > 0 {
				if _, err := tx.ExecContext(ctx, s.bind(`UPDATE chorus_reservations SET nusd = nusd - ? WHERE replica = ? AND key_id = ? AND period = ?`), take, replica, st.KeyID, st.Period); err != nil {
					return fmt.Errorf("keystore: settle: %w", err)
				}
			}
		}
		if _, err := tx.ExecContext(ctx, s.bind(`DELETE FROM chorus_reservations WHERE replica = ? AND nusd <= 0`), replica); err != nil {
			return fmt.Errorf("keystore: settle: %w", err)
		}
		return nil
	})
}

func (s *Store) addSpend(ctx context.Context, tx *sql.Tx, keyID, period string, nusd NanoUSD, calls int64) error {
	_, err := tx.ExecContext(ctx, s.bind(`INSERT INTO chorus_spend (key_id, period, nusd, calls) VALUES (?, ?, ?, ?)
		ON CONFLICT (key_id, period) DO UPDATE SET nusd = chorus_spend.nusd + excluded.nusd, calls = chorus_spend.calls + excluded.calls`), keyID, period, nusd, calls)
	if err != nil {
		return fmt.Errorf("keystore: ledger: %w", err)
	}
	return nil
}

// Reconcile finds the replicas whose last heartbeat is older than ttl and,
// for each, counts what it held reserved as spent (it may have answered
// calls it never settled: counting the reservation never under-counts),
// frees its concurrency slots and forgets it. It returns the replicas it
// reconciled. Any replica may run it; two at once reconcile each once.
func (s *Store) Reconcile(ctx context.Context, now time.Time, ttl time.Duration) ([]string, error) {
	cut := now.Add(-ttl).UnixNano()
	rows, err := s.db.QueryContext(ctx, s.bind(`SELECT id FROM chorus_replicas WHERE seen < ? ORDER BY id`), cut)
	if err != nil {
		return nil, fmt.Errorf("keystore: reconcile: %w", err)
	}
	var dead []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("keystore: reconcile: %w", err)
		}
		dead = append(dead, id)
	}
	rows.Close()
	var done []string
	for _, id := range dead {
		err := s.tx(ctx, func(tx *sql.Tx) error {
			res, err := tx.ExecContext(ctx, s.bind(`DELETE FROM chorus_replicas WHERE id = ? AND seen < ?`), id, cut)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return errSkip // renewed meanwhile, or reconciled by another
			}
			if err := s.countReserved(ctx, tx, id); err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, s.bind(`DELETE FROM chorus_slots WHERE replica = ?`), id)
			return err
		})
		if errors.Is(err, errSkip) {
			continue
		}
		if err != nil {
			return done, fmt.Errorf("keystore: reconcile %s: %w", id, err)
		}
		done = append(done, id)
	}
	if _, err := s.db.ExecContext(ctx, s.bind(`DELETE FROM chorus_windows WHERE win < ?`), now.Add(-time.Hour).Unix()/60); err != nil {
		return done, fmt.Errorf("keystore: prune windows: %w", err)
	}
	return done, nil
}

var errSkip = errors.New("skip")

// countReserved moves replica's reservations to the ledger, in tx.
func (s *Store) countReserved(ctx context.Context, tx *sql.Tx, replica string) error {
	rows, err := tx.QueryContext(ctx, s.bind(`SELECT key_id, period, nusd FROM chorus_reservations WHERE replica = ? ORDER BY key_id, period`), replica)
	if err != nil {
		return err
	}
	var sets []Settlement
	for rows.Next() {
		var st Settlement
		if err := rows.Scan(&st.KeyID, &st.Period, &st.Spent); err != nil {
			rows.Close()
			return err
		}
		sets = append(sets, st)
	}
	rows.Close()
	for _, st := range sets {
		if st.Spent > 0 {
			if err := s.addSpend(ctx, tx, st.KeyID, st.Period, st.Spent, 0); err != nil {
				return err
			}
		}
	}
	_, err = tx.ExecContext(ctx, s.bind(`DELETE FROM chorus_reservations WHERE replica = ?`), replica)
	return err
}

// Retire takes replica out at a clean shutdown, once it has settled: what
// it still holds reserved is counted as spent (it should hold nothing),
// its slots are freed, and it is forgotten.
func (s *Store) Retire(ctx context.Context, replica string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, s.bind(`DELETE FROM chorus_replicas WHERE id = ?`), replica); err != nil {
			return fmt.Errorf("keystore: retire: %w", err)
		}
		if err := s.countReserved(ctx, tx, replica); err != nil {
			return fmt.Errorf("keystore: retire: %w", err)
		}
		if _, err := tx.ExecContext(ctx, s.bind(`DELETE FROM chorus_slots WHERE replica = ?`), replica); err != nil {
			return fmt.Errorf("keystore: retire: %w", err)
		}
		return nil
	})
}

// Spend is a key's ledger for one period.
type Spend struct {
	KeyID  string `json:"key_id"`
	Period string `json:"period"`
	// Spent is what the ledger holds: settled answers, and the
	// reservations of replicas that died before settling them.
	Spent NanoUSD `json:"spent_nusd"`
	// Calls counts the settled answers.
	Calls int64 `json:"calls"`
	// Reserved is what live replicas hold for calls in flight or to come.
	Reserved NanoUSD `json:"reserved_nusd"`
}

// SpendOf returns key keyID's ledger for period.
func (s *Store) SpendOf(ctx context.Context, keyID, period string) (Spend, error) {
	sp := Spend{KeyID: keyID, Period: period}
	err := s.db.QueryRowContext(ctx, s.bind(`SELECT
		COALESCE((SELECT nusd FROM chorus_spend WHERE key_id = ? AND period = ?), 0),
		COALESCE((SELECT calls FROM chorus_spend WHERE key_id = ? AND period = ?), 0),
		COALESCE((SELECT SUM(nusd) FROM chorus_reservations WHERE key_id = ? AND period = ?), 0)`),
		keyID, period, keyID, period, keyID, period).Scan(&sp.Spent, &sp.Calls, &sp.Reserved)
	if err != nil {
		return sp, fmt.Errorf("keystore: spend: %w", err)
	}
	return sp, nil
}

// Ledger returns every period of key keyID's ledger, oldest first.
func (s *Store) Ledger(ctx context.Context, keyID string) ([]Spend, error) {
	rows, err := s.db.QueryContext(ctx, s.bind(`SELECT period, nusd, calls FROM chorus_spend WHERE key_id = ? ORDER BY period`), keyID)
	if err != nil {
		return nil, fmt.Errorf("keystore: ledger: %w", err)
	}
	defer rows.Close()
	var out []Spend
	for rows.Next() {
		sp := Spend{KeyID: keyID}
		if err := rows.Scan(&sp.Period, &sp.Spent, &sp.Calls); err != nil {
			return nil, fmt.Errorf("keystore: ledger: %w", err)
		}
		out = append(out, sp)
	}
	return out, rows.Err()
}

// Take leases up to want of a key's per-minute limit (resource "req" or
// "tok") in minute window win (Unix minutes): what is left of limit in
// that window, across every replica. Unused leases are not given back: a
// window ends within a minute.
//
// It returns what it granted and what is left of the window after it.
func (s *Store) Take(ctx context.Context, keyID, resource string, win, limit, want int64) (granted, left int64, err error) {
	if want <= 0 || limit <= 0 {
		return 0, max(limit, 0), nil
	}
	err = s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, s.bind(`INSERT INTO chorus_windows (key_id, resource, win, taken) VALUES (?, ?, ?, 0) ON CONFLICT (key_id, resource, win) DO NOTHING`), keyID, resource, win); err != nil {
			return fmt.Errorf("keystore: take: %w", err)
		}
		var taken int64
		if err := tx.QueryRowContext(ctx, s.bind(`SELECT taken FROM chorus_windows WHERE key_id = ? AND resource = ? AND win = ?`+s.forUpdate()), keyID, resource, win).Scan(&taken); err != nil {
			return fmt.Errorf("keystore: take: %w", err)
		}
		granted = max(0, min(want, limit-taken))
		left = max(0, limit-taken-granted)
		if granted == 0 {
			return nil
		}
		_, err := tx.ExecContext(ctx, s.bind(`UPDATE chorus_windows SET taken = taken + ? WHERE key_id = ? AND resource = ? AND win = ?`), granted, keyID, resource, win)
		return err
	})
	return granted, left, err
}

// TakeSlots leases up to want of a key's concurrency limit to replica:
// what is left of limit beside every replica's slots.
func (s *Store) TakeSlots(ctx context.Context, replica, keyID string, limit, want int64, now time.Time) (int64, error) {
	if want <= 0 || limit <= 0 {
		return 0, nil
	}
	var granted int64
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if err := s.alive(ctx, tx, replica, now); err != nil {
			return err
		}
		var id string
		if err := tx.QueryRowContext(ctx, s.bind(`SELECT id FROM chorus_keys WHERE id = ?`+s.forUpdate()), keyID).Scan(&id); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return ErrNotFound
			}
			return fmt.Errorf("keystore: slots: %w", err)
		}
		var held int64
		if err := tx.QueryRowContext(ctx, s.bind(`SELECT COALESCE(SUM(held), 0) FROM chorus_slots WHERE key_id = ?`), keyID).Scan(&held); err != nil {
			return fmt.Errorf("keystore: slots: %w", err)
		}
		granted = max(0, min(want, limit-held))
		if granted == 0 {
			return nil
		}
		_, err := tx.ExecContext(ctx, s.bind(`INSERT INTO chorus_slots (replica, key_id, held) VALUES (?, ?, ?)
			ON CONFLICT (replica, key_id) DO UPDATE SET held = chorus_slots.held + excluded.held`), replica, keyID, granted)
		return err
	})
	return granted, err
}

// ReleaseSlots gives n of replica's slots of a key back.
func (s *Store) ReleaseSlots(ctx context.Context, replica, keyID string, n int64) error {
	if n <= 0 {
		return nil
	}
	if _, err := s.db.ExecContext(ctx, s.bind(`UPDATE chorus_slots SET held = CASE WHEN held > ? THEN held - ? ELSE 0 END WHERE replica = ? AND key_id = ?`), n, n, replica, keyID); err != nil {
		return fmt.Errorf("keystore: release slots: %w", err)
	}
	return nil
}

// Replicas counts the replicas whose heartbeat is within ttl of now.
func (s *Store) Replicas(ctx context.Context, now time.Time, ttl time.Duration) (int, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, s.bind(`SELECT COUNT(*) FROM chorus_replicas WHERE seen >= ?`), now.Add(-ttl).UnixNano()).Scan(&n); err != nil {
		return 0, fmt.Errorf("keystore: replicas: %w", err)
	}
	return n, nil
}
