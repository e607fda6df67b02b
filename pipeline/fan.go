package pipeline

import (
	"context"
	"errors"
	"iter"
	"sync"

	"github.com/chorusrt/chorus/llm"
)

// DefaultBranchBuffer is how many events each branch of a Fan holds for a
// consumer that is not reading it. A branch whose buffer is full waits (and
// with it that model's stream, down to its HTTP body); no other branch does.
const DefaultBranchBuffer = 64

// ErrFaceInUse is yielded by Fan.All when the Fan already serves another
// face (Events or Branch).
var ErrFaceInUse = errors.New("pipeline: the fan already serves another face")

// Tagged is one event of a fan-out, tagged with the model that produced it
// and that model's position in the FanOut model list.
type Tagged struct {
	Model string
	Index int
	Event llm.Event
}

// ModelResult is one model's outcome in a fan-out: its whole answer, or
// the error that ended its stream (a *llm.StreamError with the partial
// answer when events had been produced).
type ModelResult struct {
	Model  string
	Result *llm.ChatResult
	Err    error
}

type fanFace uint8

const (
	faceNone fanFace = iota
	faceEvents
	faceAll
	faceBranches
)

var (
	closedEvents = func() chan llm.Event { c := make(chan llm.Event); close(c); return c }()
	closedTagged = func() chan Tagged { c := make(chan Tagged); close(c); return c }()
)

// Fan is one prompt streamed from several models at once. Create it with
// FanOut.
//
// A Fan has two faces, like llm.Stream has three; the first call to
// Events, All or Branch picks the face and the other calls then yield
// nothing (Events and Branch return a closed channel, All yields
// ErrFaceInUse):
//
//   - the merged view, Events or All: every model's events on one channel
//     (holding DefaultBranchBuffer events), tagged, in order per model and
//     interleaved as they arrive. Once it is picked, each model's goroutine
//     writes straight into it, so it costs no extra hop per event. A slow
//     consumer of the merged view slows every model, since it is the only
//     reader.
//   - the branches, Branch(i): one channel per model. Each branch has its
//     own bounded buffer (DefaultBranchBuffer); a consumer that stalls on
//     branch 0 stalls model 0 only, once its buffer is full, and never
//     blocks branch 1. Branches may be read from different goroutines.
//
// Whatever the face, each model's answer and error are kept separately:
// Result(i) for one model, Wait and Results for all, Done to be told when
// every model has ended. Wait, Results and Result discard the events of
// any branch nobody has taken, so they may be called instead of reading;
// they never take events from a face in use.
//
// Close, or cancelling the context given to FanOut, stops every model and
// releases every goroutine and connection. Breaking out of All closes the
// Fan. A Fan whose events have all been read needs no Close.
type Fan struct {
	models []string
	parent context.Context
	ctx    context.Context
	cancel context.CancelFunc
	stop   chan struct{}

	branches []chan llm.Event
	ended    []chan struct{} // per model, closed once results[i] is final
	results  []ModelResult
	allEnded chan struct{}

	mu        sync.Mutex
	face      fanFace
	closed    bool
	claimed   []bool // branch taken by Branch, a discard or the merged view
	prodEnded []bool // producer i has finished writing branch i
	events    chan Tagged
	all       chan fanItem
	stopOnce  sync.Once

	// The merged view. send is set, then merging closed, when the merged
	// face is picked; from then on each running producer feeds send itself
	// (after its branch's buffered events), and a forwarder goroutine does it
	// for the branches whose producer had already ended. fw counts them all.
	merging chan struct{}
	send    func(fanItem) bool
	fw      sync.WaitGroup

	wg sync.WaitGroup
}

// fanItem is what the merged view carries: an event, or the end of one
// model (end true).
type fanItem struct {
	t   Tagged
	end bool
}

// FanOut sends req to every model at once, each as its own stream (req.Model
// is replaced by the model; req itself is not modified), and returns at once.
// Requests start immediately; see Fan for how to read the answers.
func FanOut(ctx context.Context, c Client, req *llm.ChatRequest, models ...string) *Fan {
	fctx, cancel := context.WithCancel(ctx)
	n := len(models)
	f := &Fan{
		models:    append([]string(nil), models...),
		parent:    ctx,
		ctx:       fctx,
		cancel:    cancel,
		stop:      make(chan struct{}),
		branches:  make([]chan llm.Event, n),
		ended:     make([]chan struct{}, n),
		results:   make([]ModelResult, n),
		allEnded:  make(chan struct{}),
		claimed:   make([]bool, n),
		prodEnded: make([]bool, n),
		merging:   make(chan struct{}),
	}
	for i, m := range models {
		f.results[i].Model = m
		f.branches[i] = make(chan llm.Event, DefaultBranchBuffer)
		f.ended[i] = make(chan struct{})
	}
	var producers sync.WaitGroup
	producers.Add(n)
	f.wg.Add(n + 1)
	for i := range models {
		go f.run(c, req, i, &producers)
	}
	go func() {
		defer f.wg.Done()
		producers.Wait()
		f.cancel()
		close(f.allEnded)
	}()
	return f
}

// run streams model i into its branch, or into the merged view once that
// face is picked.
func (f *Fan) run(c Client, req *llm.ChatRequest, i int, producers *sync.WaitGroup) {
	defer f.wg.Done()
	defer producers.Done()
	defer close(f.ended[i])
	r := &f.results[i]
	s, err := openStream(f.ctx, c, req, f.models[i])
	if err != nil {
		r.Err = err
	} else {
		f.pump(i, s)
		r.Result, r.Err = s.Result()
	}
	f.endBranch(i)
}

// pump moves s's events into branch i until the merged face is picked,
// then (after the branch's buffered events) straight into the merged view:
// the merged view costs no extra goroutine hop per event.
func (f *Fan) pump(i int, s *llm.Stream) {
	br := f.branches[i]
	events := s.Events()
	tag := Tagged{Model: f.models[i], Index: i}
	direct := false
	for {
		var ev llm.Event
		var ok bool
		if direct {
			ev, ok = <-events
		} else {
			// Wait for the next event, or for the merged face to be picked
			// while the branch holds events nobody will read otherwise.
			select {
			case ev, ok = <-events: // fast path
			default:
				select {
				case ev, ok = <-events:
				case <-f.merging:
					direct = true
					if !f.flush(i) {
						s.Close()
						return
					}
					continue
				}
			}
		}
		if !ok {
			return
		}
		if !direct {
			select {
			case <-f.merging:
				direct = true
			default:
				select {
				case br <- ev: // fast path: the branch has room
					continue
				default:
				}
				select {
				case br <- ev:
					continue
				case <-f.merging:
					direct = true
				case <-f.ctx.Done():
					s.Close()
					return
				}
			}
			if !f.flush(i) {
				s.Close()
				return
			}
		}
		tag.Event = ev
		if !f.send(fanItem{t: tag}) {
			s.Close()
			return
		}
	}
}

// flush sends the events buffered in branch i to the merged view, in order.
// Only branch i's producer, its only writer, calls it while it runs.
func (f *Fan) flush(i int) bool {
	tag := Tagged{Model: f.models[i], Index: i}
	for {
		select {
		case ev := <-f.branches[i]:
			tag.Event = ev
			if !f.send(fanItem{t: tag}) {
				return false
			}
		default:
			return true
		}
	}
}

// endBranch ends branch i after its result is final. If the merged face
// was picked while the producer ran, the producer delivers the rest itself.
func (f *Fan) endBranch(i int) {
	f.mu.Lock()
	merged := f.face == faceEvents || f.face == faceAll
	f.prodEnded[i] = true
	f.mu.Unlock()
	if merged {
		if f.flush(i) {
			f.send(fanItem{t: Tagged{Model: f.models[i], Index: i}, end: true})
		}
		f.fw.Done()
	}
	close(f.branches[i])
}

// openStream starts one model's stream, refusing a nil client or request
// rather than panicking.
func openStream(ctx context.Context, c Client, req *llm.ChatRequest, model string) (*llm.Stream, error) {
	switch {
	case c == nil:
		return nil, &llm.ConfigError{Field: "client", Msg: "is nil"}
	case req == nil:
		return nil, &llm.ConfigError{Field: "request", Msg: "is nil"}
	}
	s, err := c.Stream(ctx, withModel(req, model))
	if err == nil && s == nil {
		err = &llm.ConfigError{Field: "client", Msg: "returned no stream and no error"}
	}
	return s, err
}

// Models returns the models of the fan-out, in order.
func (f *Fan) Models() []string { return append([]string(nil), f.models...) }

// Events returns the merged view: every model's events, tagged, on one
// channel that is closed once every model has ended (or the Fan was closed).
// Each model's outcome is then in Results.
func (f *Fan) Events() <-chan Tagged {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.face == faceEvents:
	case f.face != faceNone || f.closed:
		return closedTagged
	default:
		f.face = faceEvents
		f.events = make(chan Tagged, DefaultBranchBuffer)
		out := f.events
		f.merge(func(it fanItem) bool {
			if it.end {
				return true
			}
			select {
			case out <- it.t:
				return true
			default:
			}
			select {
			case out <- it.t:
				return true
			case <-f.stop:
			case <-f.parent.Done():
			}
			return false
		}, func() { close(out) })
	}
	return f.events
}

// All returns the merged view as an iterator. A model's failure is yielded
// when that model ends, as its tag with a *ModelError, and iteration goes
// on with the other models; a cancelled context ends the iteration with the
// context's error. Breaking out of the loop closes the Fan.
func (f *Fan) All() iter.Seq2[Tagged, error] {
	return func(yield func(Tagged, error) bool) {
		f.mu.Lock()
		switch {
		case f.face == faceAll:
		case f.face != faceNone || f.closed:
			f.mu.Unlock()
			yield(Tagged{}, ErrFaceInUse)
			return
		default:
			f.face = faceAll
			f.all = make(chan fanItem, DefaultBranchBuffer)
			out := f.all
			f.merge(func(it fanItem) bool {
				select {
				case out <- it:
					return true
				default:
				}
				select {
				case out <- it:
					return true
				case <-f.stop:
				case <-f.parent.Done():
				}
				return false
			}, func() { close(out) })
		}
		ch := f.all
		f.mu.Unlock()
		ended := 0
		for it := range ch {
			if !it.end {
				if !yield(it.t, nil) {
					f.Close()
					return
				}
				continue
			}
			ended++
			if err := f.results[it.t.Index].Err; err != nil {
				if !yield(it.t, &ModelError{Model: it.t.Model, Index: it.t.Index, Err: err}) {
					f.Close()
					return
				}
			}
		}
		if ended < len(f.models) {
			err := f.parent.Err()
			if err == nil {
				err = context.Canceled
			}
			yield(Tagged{}, err)
		}
	}
}

// merge picks the merged face with send as its sink: running producers
// switch to it, and a forwarder drains the branch of each producer that has
// already ended; done runs once they all have. f.mu is held.
func (f *Fan) merge(send func(fanItem) bool, done func()) {
	f.send = send
	f.fw.Add(len(f.branches))
	f.wg.Add(1)
	for i := range f.branches {
		f.claimed[i] = true
		if !f.prodEnded[i] {
			continue // its producer feeds the merged view
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer f.fw.Done()
			tag := Tagged{Model: f.models[i], Index: i}
			for ev := range f.branches[i] {
				tag.Event = ev
				if !send(fanItem{t: tag}) {
					return
				}
			}
			send(fanItem{t: Tagged{Model: f.models[i], Index: i}, end: true})
		}()
	}
	close(f.merging)
	go func() {
		defer f.wg.Done()
		f.fw.Wait()
		done()
	}()
}

// Branch returns model i's own channel of events, closed when that model
// has ended; its outcome is then Result(i). Out-of-range indexes, and
// any index once the merged view is in use, get a closed channel.
func (f *Fan) Branch(i int) <-chan llm.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	if i < 0 || i >= len(f.branches) {
		return closedEvents
	}
	switch f.face {
	case faceNone:
		f.face = faceBranches
	case faceBranches:
	default:
		return closedEvents
	}
	f.claimed[i] = true
	return f.branches[i]
}

// discard reads and drops branch i's events if nobody has taken the branch.
func (f *Fan) discard(i int) {
	f.mu.Lock()
	if f.face == faceNone {
		f.face = faceBranches
	}
	take := f.face == faceBranches && !f.claimed[i]
	if take {
		f.claimed[i] = true
	}
	f.mu.Unlock()
	if take {
		for range f.branches[i] {
		}
	}
}

// Result waits until model i has ended and returns its answer or error.
// The events of branch i are discarded if nobody has taken them.
func (f *Fan) Result(i int) (*llm.ChatResult, error) {
	if i < 0 || i >= len(f.models) {
		return nil, &llm.ConfigError{Field: "index", Msg: "is out of range"}
	}
	f.discard(i)
	<-f.ended[i]
	r := f.results[i]
	return r.Result, r.Err
}

// Done is closed once every model has ended.
func (f *Fan) Done() <-chan struct{} { return f.allEnded }

// Wait blocks until every model has ended, discarding the events of
// branches nobody has taken, and returns nil if every model succeeded, else
// the failures joined, each a *ModelError. With the merged view in use,
// something must be reading it for Wait to return.
func (f *Fan) Wait() error {
	if len(f.models) == 0 {
		return errNoModels()
	}
	for i := range f.branches {
		f.discard(i)
	}
	<-f.allEnded
	errs := make([]error, len(f.results))
	for i, r := range f.results {
		errs[i] = r.Err
	}
	return joinModelErrors(f.models, errs)
}

// Results waits like Wait and returns every model's outcome, in model order.
func (f *Fan) Results() []ModelResult {
	_ = f.Wait()
	return append([]ModelResult(nil), f.results...)
}

// Close stops every model still streaming and waits until every goroutine
// of the Fan has returned. Events and branches are closed; models that had
// not ended report the cancellation in their results. Close is safe to
// call more than once and from any goroutine.
func (f *Fan) Close() error {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.stopOnce.Do(func() { close(f.stop) })
	f.cancel()
	f.wg.Wait()
	return nil
}
