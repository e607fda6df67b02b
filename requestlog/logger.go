package requestlog

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
)

// Options configures a Logger. The zero value works.
type Options struct {
	// Queue bounds the records waiting to be written (default 16384).
	Queue int
	// Batch is the most records of one insert (default 2000); Interval the
	// longest a record waits for its batch (default 1 s). Larger batches
	// cost the store less per record (BenchmarkInsert: on SQLite a record
	// in a batch of 2000 costs under half what it does in one of 200).
	Batch    int
	Interval time.Duration
	// Retain deletes records older than this (zero: kept by age); MaxRows
	// keeps at most this many, the newest (zero: no bound). Both run every
	// PruneEvery (default 1 minute) and once at start.
	Retain     time.Duration
	MaxRows    int64
	PruneEvery time.Duration
	// WriteTimeout bounds one insert (default 10 s): a store that hangs
	// holds up the writer, never a request.
	WriteTimeout time.Duration
	// Logger receives one line per failed write or prune (nil discards).
	Logger *slog.Logger
	// Now is the retention's clock (default time.Now).
	Now func() time.Time
	// MeterProvider receives the Logger's metrics (metrics.go; default
	// the global provider).
	MeterProvider metric.MeterProvider
}

// Stats counts what a Logger did with its records.
type Stats struct {
	// Logged counts Log calls; Written the records the store took;
	// Dropped those that never will be (the queue was full, or Close gave
	// up); Queued those waiting now.
	Logged, Written, Dropped int64
	Queued                   int
	// WriteErrors counts failed inserts (each retried); Pruned the records
	// retention deleted.
	WriteErrors, Pruned int64
	// LastError is the last failed insert's or prune's error ("" none).
	LastError string
}

// Logger queues records and writes them to its Store in the background.
// Its methods are safe for concurrent use.
type Logger struct {
	st   Store
	opts Options
	log  *slog.Logger
	q    chan Record

	logged, written, dropped, writeErrs, pruned atomic.Int64
	lastErr                                     atomic.Pointer[string]

	closeOnce sync.Once
	closing   chan struct{} // closed by Close: flush and stop
	abort     context.Context
	cancel    context.CancelFunc
	done      chan struct{}
	mu        sync.RWMutex // Log holds it shared, Close exclusively once
	closed    bool
	unmetric  func()
}

// New starts a Logger writing to st. Close it to flush; Close also closes
// st.
func New(st Store, opts Options) *Logger {
	if opts.Queue <= 0 {
		opts.Queue = 16384
	}
	if opts.Batch <= 0 {
		opts.Batch = 2000
	}
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	if opts.PruneEvery <= 0 {
		opts.PruneEvery = time.Minute
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 10 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	l := &Logger{st: st, opts: opts, log: opts.Logger, q: make(chan Record, opts.Queue), closing: make(chan struct{}), done: make(chan struct{})}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	l.abort, l.cancel = context.WithCancel(context.Background())
	l.unmetric = l.registerMetrics(opts.MeterProvider)
	go l.run()
	return l
}

// Store is the Logger's store, for reading.
func (l *Logger) Store() Store { return l.st }

// Log queues r. It never blocks: with the queue full, or the Logger
// closed, r is dropped and counted.
func (l *Logger) Log(r Record) {
	l.logged.Add(1)
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		l.dropped.Add(1)
		return
	}
	select {
	case l.q <- r:
	default:
		l.dropped.Add(1)
	}
}

// Stats returns the Logger's counts.
func (l *Logger) Stats() Stats {
	s := Stats{Logged: l.logged.Load(), Written: l.written.Load(), Dropped: l.dropped.Load(), Queued: len(l.q),
		WriteErrors: l.writeErrs.Load(), Pruned: l.pruned.Load()}
	if e := l.lastErr.Load(); e != nil {
		s.LastError = *e
	}
	return s
}

// Close stops taking records, writes what is queued and closes the store.
// When ctx ends first, what is left is counted as dropped and ctx's error
// returned.
func (l *Logger) Close(ctx context.Context) error {
	l.closeOnce.Do(func() {
		l.mu.Lock()
		l.closed = true
		l.mu.Unlock()
		close(l.closing)
		l.unmetric()
	})
	var err error
	select {
	case <-l.done:
	case <-ctx.Done():
		l.cancel()
		<-l.done
		err = ctx.Err()
	}
	l.cancel()
	if cerr := l.st.Close(); err == nil {
		err = cerr
	}
	return err
}

func (l *Logger) fail(what string, err error) {
	s := err.Error()
	l.lastErr.Store(&s)
	l.log.Warn("request log: "+what+" failed", "err", err)
}

// run is the writer: it batches the queue into inserts, retries a failed
// one (backing off up to 1 s, or Interval), and prunes on its schedule.
func (l *Logger) run() {
	defer close(l.done)
	tick := time.NewTicker(l.opts.Interval)
	defer tick.Stop()
	prune := time.NewTicker(l.opts.PruneEvery)
	defer prune.Stop()
	l.prune()
	batch := make([]Record, 0, l.opts.Batch)
	backoff := time.Duration(0)
	var retryAt time.Time
	closing := false
	for {
		full := len(batch) >= l.opts.Batch
		if !full && !closing {
			select {
			case r := <-l.q:
				batch = append(batch, r)
				continue
			case <-tick.C:
			case <-prune.C:
				l.prune()
				continue
			case <-l.closing:
				closing = true
			case <-l.abort.Done():
			}
		}
		if l.abort.Err() != nil {
			l.dropped.Add(int64(len(batch) + len(l.q)))
			for len(l.q) > 0 {
				<-l.q
			}
			return
		}
		if closing || full { // take what else is queued, up to a batch
			for len(batch) < l.opts.Batch {
				select {
				case r := <-l.q:
					batch = append(batch, r)
					continue
				default:
				}
				break
			}
		}
		if len(batch) == 0 {
			if closing {
				return
			}
			continue
		}
		if time.Now().Before(retryAt) {
			if closing { // retry soon, not at once
				select {
				case <-time.After(time.Until(retryAt)):
				case <-l.abort.Done():
				}
			} else if !full {
				continue
			} else {
				select { // a full batch waits for its retry; the queue fills, then overflows
				case <-time.After(time.Until(retryAt)):
				case <-l.closing:
					closing = true
				case <-l.abort.Done():
				}
			}
			continue
		}
		if err := l.write(batch); err != nil {
			l.writeErrs.Add(1)
			l.fail("write", err)
			// At most a second (or Interval): a store that is back is
			// written to before the queue overflows more than it must.
			backoff = min(max(2*backoff, l.opts.Interval), max(l.opts.Interval, time.Second))
			retryAt = time.Now().Add(backoff)
			continue
		}
		l.written.Add(int64(len(batch)))
		batch = batch[:0]
		backoff, retryAt = 0, time.Time{}
	}
}

func (l *Logger) write(batch []Record) error {
	ctx, cancel := context.WithTimeout(l.abort, l.opts.WriteTimeout)
	defer cancel()
	return l.st.Insert(ctx, batch)
}

func (l *Logger) prune() {
	if l.opts.Retain <= 0 && l.opts.MaxRows <= 0 {
		return
	}
	var before time.Time
	if l.opts.Retain > 0 {
		before = l.opts.Now().Add(-l.opts.Retain)
	}
	ctx, cancel := context.WithTimeout(l.abort, time.Minute)
	defer cancel()
	n, err := l.st.Prune(ctx, before, l.opts.MaxRows)
	l.pruned.Add(n)
	if err != nil && !errors.Is(err, context.Canceled) {
		l.fail("prune", err)
	}
}
