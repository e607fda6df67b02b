package batch

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// Registry publishes the progress of batch jobs to readers in the same
// process (the console): a job is registered with Track, fed its events
// through the Tracker's Observe (Job.Observe), and ended with Finish.
// Readers take snapshots with Jobs; they never slow a job: Observe only
// updates counters under a short lock. A Registry keeps the last Keep
// finished jobs. The zero value is not ready: use NewRegistry.
type Registry struct {
	mu   sync.Mutex
	keep int
	seq  int
	jobs []*Tracker
}

// NewRegistry returns a Registry that keeps the keep most recent finished
// jobs (default 20 when keep <= 0) besides the running ones.
func NewRegistry(keep int) *Registry {
	if keep <= 0 {
		keep = 20
	}
	return &Registry{keep: keep}
}

// maxBadLines bounds the bad lines a Tracker keeps (it counts them all).
const maxBadLines = 100

// Tracker is one job's progress in a Registry.
type Tracker struct {
	r  *Registry
	mu sync.Mutex
	p  Progress
	// models indexes p.Models by model.
	models map[string]int
}

// Progress is a snapshot of a job's advance.
type Progress struct {
	// ID is the job's id in its registry ("job-1", "job-2", ...); Name is
	// what Track was given (the input file, say).
	ID   string
	Name string
	// Total is the number of input lines (0 when unknown).
	Total int
	// Done counts the lines finished in this run (succeeded, failed, bad);
	// Failed the failed ones and bad lines; Skipped those already in the
	// output; Bad the bad lines.
	Done, Succeeded, Failed, Skipped, Bad int
	Tokens                                int64
	// Cost adds up the priced items (Priced counts them): zero and 0 when
	// nothing is priced.
	Cost   Cost
	Priced int
	// Models is the per-model summary, in the order models first finished.
	Models []ModelProgress
	// BadLines are the first bad lines (up to 100).
	BadLines []BadLineInfo
	Started  time.Time
	// Finished is zero while the job runs; Err is its error, if any.
	Finished time.Time
	Err      string
}

// ModelProgress is one model's row of a job's progress.
type ModelProgress struct {
	Model    string
	Requests int
	Failed   int
	Tokens   int64
	Cost     Cost
	Priced   int
	Native   int
}

// BadLineInfo is a bad input line as a reader sees it.
type BadLineInfo struct {
	Line     int
	CustomID string
	Error    string
}

// Running reports whether the job has not finished.
func (p Progress) Running() bool { return p.Finished.IsZero() }

// Elapsed is the job's time so far (to now, or to its end).
func (p Progress) Elapsed(now time.Time) time.Duration {
	if !p.Finished.IsZero() {
		now = p.Finished
	}
	return now.Sub(p.Started)
}

// Rate is lines finished per second of the job's time (0 before any).
func (p Progress) Rate(now time.Time) float64 {
	el := p.Elapsed(now).Seconds()
	if el <= 0 || p.Done == 0 {
		return 0
	}
	return float64(p.Done) / el
}

// ETA estimates the time left at the job's rate; ok is false when it
// cannot be told (total unknown, nothing done yet, or finished).
func (p Progress) ETA(now time.Time) (eta time.Duration, ok bool) {
	rate := p.Rate(now)
	left := p.Total - p.Skipped - p.Done
	if !p.Running() || p.Total == 0 || rate <= 0 || left < 0 {
		return 0, false
	}
	return time.Duration(float64(left) / rate * float64(time.Second)), true
}

// Track registers a job named name with total input lines (0: unknown)
// and returns its Tracker. Set the job's Observe to the Tracker's Observe
// (or call it from your own), and call Finish when Run returns.
func (r *Registry) Track(name string, total int) *Tracker {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	t := &Tracker{r: r, models: map[string]int{},
		p: Progress{ID: fmt.Sprintf("job-%d", r.seq), Name: name, Total: total, Started: time.Now()}}
	r.jobs = append(r.jobs, t)
	r.pruneLocked()
	return t
}

// pruneLocked drops the oldest finished jobs past keep.
func (r *Registry) pruneLocked() {
	finished := 0
	for _, t := range r.jobs {
		if !t.snapshot().Running() {
			finished++
		}
	}
	for i := 0; finished > r.keep && i < len(r.jobs); {
		if !r.jobs[i].snapshot().Running() {
			r.jobs = slices.Delete(r.jobs, i, i+1)
			finished--
			continue
		}
		i++
	}
}

// Jobs returns a snapshot of every job the registry holds, oldest first.
func (r *Registry) Jobs() []Progress {
	r.mu.Lock()
	jobs := slices.Clone(r.jobs)
	r.mu.Unlock()
	out := make([]Progress, len(jobs))
	for i, t := range jobs {
		out[i] = t.snapshot()
	}
	return out
}

// Job returns one job's snapshot by id.
func (r *Registry) Job(id string) (Progress, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range r.jobs {
		if t.p.ID == id {
			return t.snapshot(), true
		}
	}
	return Progress{}, false
}

// ID is the job's id in its registry.
func (t *Tracker) ID() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.p.ID
}

func (t *Tracker) snapshot() Progress {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.p
	p.Models = slices.Clone(p.Models)
	p.BadLines = slices.Clone(p.BadLines)
	return p
}

// Observe counts one job event. It never blocks for long: use it as (or
// from) Job.Observe.
func (t *Tracker) Observe(ev Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch ev.Kind {
	case EventSkipped:
		t.p.Skipped++
	case EventBadLine:
		t.p.Bad++
		if len(t.p.BadLines) < maxBadLines {
			b := BadLineInfo{Line: ev.Line, CustomID: ev.CustomID}
			if ev.Err != nil {
				b.Error = ev.Err.Error()
			}
			t.p.BadLines = append(t.p.BadLines, b)
		}
	case EventDone:
		t.p.Done++
		if ev.Failed {
			t.p.Failed++
		} else {
			t.p.Succeeded++
		}
		t.p.Tokens += int64(ev.Tokens)
		if ev.Cost != nil {
			t.p.Cost.USD += ev.Cost.USD
			t.p.Priced++
		}
		if ev.Model == "" {
			return
		}
		i, ok := t.models[ev.Model]
		if !ok {
			i = len(t.p.Models)
			t.models[ev.Model] = i
			t.p.Models = append(t.p.Models, ModelProgress{Model: ev.Model})
		}
		m := &t.p.Models[i]
		m.Requests++
		if ev.Failed {
			m.Failed++
		}
		m.Tokens += int64(ev.Tokens)
		if ev.Cost != nil {
			m.Cost.USD += ev.Cost.USD
			m.Priced++
		}
		if ev.Native {
			m.Native++
		}
	}
}

// Finish marks the job finished, with Run's error (nil: none).
func (t *Tracker) Finish(err error) {
	t.mu.Lock()
	t.p.Finished = time.Now()
	if err != nil {
		t.p.Err = err.Error()
	}
	t.mu.Unlock()
	t.r.mu.Lock()
	t.r.pruneLocked()
	t.r.mu.Unlock()
}
