package requestlog_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chorusrt/chorus/requestlog"
)

// faultyStore wraps a Store: while down its inserts fail, while blocked
// they wait for release (or their context).
type faultyStore struct {
	requestlog.Store
	down    atomic.Bool
	mu      sync.Mutex
	blocked chan struct{} // non-nil: inserts wait for it to close
	inserts atomic.Int64
}

var errDown = errors.New("store is down")

func (f *faultyStore) Insert(ctx context.Context, recs []requestlog.Record) error {
	f.inserts.Add(1)
	f.mu.Lock()
	b := f.blocked
	f.mu.Unlock()
	if b != nil {
		select {
		case <-b:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if f.down.Load() {
		return errDown
	}
	return f.Store.Insert(ctx, recs)
}

func (f *faultyStore) block() {
	f.mu.Lock()
	f.blocked = make(chan struct{})
	f.mu.Unlock()
}

func (f *faultyStore) release() {
	f.mu.Lock()
	if f.blocked != nil {
		close(f.blocked)
		f.blocked = nil
	}
	f.mu.Unlock()
}

func count(t *testing.T, st requestlog.Store) int64 {
	t.Helper()
	rows, err := st.Usage(context.Background(), requestlog.UsageQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		return 0
	}
	return rows[0].Requests
}

// TestLoggerWritesEveryRecord: 20,000 records from 8 goroutines, all
// written, in batches.
func TestLoggerWritesEveryRecord(t *testing.T) {
	inner := openSQLite(t)
	defer inner.Close()
	fs := &faultyStore{Store: nopClose{inner}}
	lg := requestlog.New(fs, requestlog.Options{Queue: 50000})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2500 {
				lg.Log(sample(g*2500 + i))
			}
		}()
	}
	wg.Wait()
	if err := lg.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := lg.Stats()
	if s.Logged != 20000 || s.Written != 20000 || s.Dropped != 0 || s.Queued != 0 {
		t.Fatalf("stats %+v", s)
	}
	if n := count(t, inner); n != 20000 {
		t.Fatalf("the store holds %d records, want 20000", n)
	}
	if n := fs.inserts.Load(); n >= 20000/10 {
		t.Fatalf("%d inserts for 20000 records: not batched", n)
	}
	t.Logf("20000 records in %d inserts", fs.inserts.Load())
}

type nopClose struct{ requestlog.Store }

func (nopClose) Close() error { return nil }

// TestLoggerStoreDown: a store that fails, then hangs, never holds up Log;
// what overflowed the queue is counted, the rest written once the store
// is back, and Logged = Written + Dropped.
func TestLoggerStoreDown(t *testing.T) {
	inner := openSQLite(t)
	defer inner.Close()
	fs := &faultyStore{Store: nopClose{inner}}
	lg := requestlog.New(fs, requestlog.Options{Queue: 100, Batch: 10, Interval: 5 * time.Millisecond})
	fs.down.Store(true)
	logN := func(n, from int) time.Duration {
		var worst time.Duration
		for i := range n {
			s := time.Now()
			lg.Log(sample(from + i))
			worst = max(worst, time.Since(s))
		}
		return worst
	}
	w1 := logN(1000, 0)
	deadline := time.Now().Add(10 * time.Second)
	for lg.Stats().WriteErrors < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	fs.down.Store(false)
	fs.block() // now it hangs
	w2 := logN(1000, 1000)
	s := lg.Stats()
	if s.WriteErrors < 2 || s.LastError == "" || s.Dropped < 1000 {
		t.Fatalf("while down: %+v; want failed writes counted and the overflow dropped", s)
	}
	fs.release()
	if err := lg.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	s = lg.Stats()
	n := count(t, inner)
	if s.Logged != 2000 || s.Written+s.Dropped != 2000 || s.Written != n || n < 100 {
		t.Fatalf("after: %+v, %d in the store; want Logged = Written + Dropped = 2000 and Written in the store", s, n)
	}
	t.Logf("worst Log call while the store failed %v, while it hung %v; %d written, %d dropped, %d failed inserts", w1, w2, s.Written, s.Dropped, s.WriteErrors)
}

// TestLoggerCloseGivesUp: Close on a hung store returns at its deadline,
// counting what it could not write.
func TestLoggerCloseGivesUp(t *testing.T) {
	inner := openSQLite(t)
	defer inner.Close()
	fs := &faultyStore{Store: nopClose{inner}}
	fs.block()
	defer fs.release()
	lg := requestlog.New(fs, requestlog.Options{Interval: time.Millisecond})
	for i := range 50 {
		lg.Log(sample(i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := lg.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close: %v, want the deadline", err)
	}
	lg.Log(sample(50)) // after Close: dropped, not a panic
	if s := lg.Stats(); s.Dropped != 51 || s.Written != 0 {
		t.Fatalf("stats %+v, want all 51 dropped", s)
	}
}

// TestLoggerRetention: the background pruning keeps MaxRows and drops
// what is older than Retain.
func TestLoggerRetention(t *testing.T) {
	inner := openSQLite(t)
	defer inner.Close()
	fill(t, inner, 100) // minutes 0..49
	now := t0.Add(40*time.Minute + time.Hour)
	lg := requestlog.New(nopClose{inner}, requestlog.Options{Retain: time.Hour, MaxRows: 10, PruneEvery: 5 * time.Millisecond, Now: func() time.Time { return now }})
	deadline := time.Now().Add(10 * time.Second)
	for lg.Stats().Pruned < 90 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if err := lg.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := count(t, inner); n != 10 || lg.Stats().Pruned != 90 {
		t.Fatalf("%d left, %d pruned; want 10 left", n, lg.Stats().Pruned)
	}
}
