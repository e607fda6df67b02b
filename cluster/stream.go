package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/chorusrt/chorus/cluster/clusterpb"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/telemetry"
)

// A remote stream runs a model call on a worker node and relays its events
// to the caller's node in ordered batches:
//
//	caller                                   worker node
//	receiver R --StreamOpen{req, R, window}--> worker --spawns--> producer P
//	R <--StreamOpened{P}-- P   (R watches P, P watches R)
//	R <--DeltaBatch{seq 1..}-- P   at most window batches beyond R's credit
//	R --Credit{1}--> P   once the caller has taken a batch's events
//	R <--StreamEnd{result | error}-- P
//
// The producer reads the call's events as they come and sends what is
// ready at once (up to maxBatch events), so a batch costs one message
// whatever the delta rate, and never waits to fill. Its events travel
// packed column-wise (toDeltas: types, text lengths, one bytes field of
// texts, tool indexes only when some is not 0, the rare fields sparse), so
// that either side handles a batch with a few allocations, not one message
// per event (BenchmarkRemoteStream: about 0.9 allocations and 150 bytes
// per delta beyond a local stream, from 2.9 and 455 with a message per
// event; what remains is mostly Proto.Actor's and gRPC's per message).
// Nodes of one build talk to each other: the packing is not compatible
// with builds before it. Cancelling the caller's
// stream sends StreamCancel; the death of either side's node is a Terminated
// on the other, which ends the call there (ErrNodeLost on the caller's side).

const (
	// maxBatch bounds the events of one DeltaBatch.
	maxBatch = 128
	// defaultWindow is how many batches may be unacknowledged.
	defaultWindow = 8
)

// Stream runs req on a member of the cluster (round robin over the live
// members) and returns its stream on this node. Before the first event, a
// call whose node is lost is retried on another member; after it, the
// partial result comes with ErrNodeLost in a *llm.StreamError.
func (n *Node) Stream(ctx context.Context, req *llm.ChatRequest) (*llm.Stream, error) {
	return n.stream(ctx, req, n.runRemote)
}

// streamOn runs req on the member at addr only (tests and benchmarks).
func (n *Node) streamOn(ctx context.Context, addr string, req *llm.ChatRequest) (*llm.Stream, error) {
	return n.stream(ctx, req, func(ctx context.Context, body []byte, w *llm.StreamWriter) {
		res, emitted, err := n.remoteOnce(ctx, actor.NewPID(addr, workerName), body, w)
		w.Finish(res, streamErr(res, emitted, err))
	})
}

// stream starts run, which relays req's events into w, on a goroutine of
// the node, bounded by ctx and by the node's life.
func (n *Node) stream(ctx context.Context, req *llm.ChatRequest, run func(context.Context, []byte, *llm.StreamWriter)) (*llm.Stream, error) {
	if req == nil {
		return nil, &llm.ConfigError{Field: "request", Msg: "is nil"}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, &llm.ConfigError{Field: "request", Msg: err.Error()}
	}
	if !n.enter() {
		return nil, ErrClosed
	}
	bctx, release := n.bound(ctx)
	s, w, sctx := llm.NewStream(bctx, 64)
	go func() {
		defer n.wg.Done()
		defer release()
		run(sctx, body, w)
	}()
	return s, nil
}

// streamErr is a remote stream's error as a local stream reports it: after
// output, a *llm.StreamError holding the partial result.
func streamErr(res *llm.ChatResult, emitted bool, err error) error {
	var se *llm.StreamError
	if err != nil && emitted && !errors.As(err, &se) {
		return &llm.StreamError{Partial: res, Err: err}
	}
	return err
}

// bound returns a context that also ends when the node closes, so that
// Close ends the calls in flight from this node; release it when the call
// ends.
func (n *Node) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(n.base, cancel)
	return ctx, func() { stop(); cancel() }
}

// Chat runs req on a member of the cluster and returns its result. Unlike
// a stream, nothing reaches the caller before the end, so a call whose node
// is lost, even mid-answer, runs again on another member (up to 3 times):
// a chat call is a read, running it twice is safe.
func (n *Node) Chat(ctx context.Context, req *llm.ChatRequest) (*llm.ChatResult, error) {
	for try := 0; ; try++ {
		s, err := n.Stream(ctx, req)
		if err != nil {
			return nil, err
		}
		res, err := s.Result()
		if err != nil && errors.Is(err, ErrNodeLost) && ctx.Err() == nil && try < 3 {
			continue
		}
		return res, err
	}
}

// runRemote places the call, retrying on another member while nothing was
// emitted.
func (n *Node) runRemote(ctx context.Context, body []byte, w *llm.StreamWriter) {
	var lastErr error
	start := n.rr.Add(1)
	for attempt := 0; attempt < 4; attempt++ {
		target := n.pickWorker(start, attempt)
		if target == nil {
			lastErr = errNoMembers
			if !sleepCtx(ctx, 200*time.Millisecond) {
				break
			}
			continue
		}
		res, emitted, err := n.remoteOnce(ctx, target, body, w)
		if err == nil {
			w.Finish(res, nil)
			return
		}
		if emitted || !movable(err) || ctx.Err() != nil {
			w.Finish(res, streamErr(res, emitted, err))
			return
		}
		lastErr = err
	}
	if ctx.Err() != nil {
		lastErr = ctx.Err()
	}
	w.Finish(nil, lastErr)
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// pickWorker returns a live member's worker: the call's first attempt
// goes to the next member round robin (start, from n.rr), each later
// attempt to the member after the last one tried.
func (n *Node) pickWorker(start uint64, attempt int) *actor.PID {
	ms := n.Members()
	if len(ms) == 0 {
		return nil
	}
	i := (start + uint64(attempt)) % uint64(len(ms))
	return actor.NewPID(ms[i], workerName)
}

// inbound is what the receiver actor hands to the relaying goroutine.
type inbound struct {
	batch *clusterpb.DeltaBatch
	end   *clusterpb.StreamEnd
	lost  bool
}

// receiverActor receives one remote stream's messages on the caller's node.
type receiverActor struct {
	stream   uint64
	target   *actor.PID
	producer *actor.PID
	in       chan inbound
	ctl      chan *actor.PID
	ended    bool
}

func (r *receiverActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		c.Watch(r.target)
	case *clusterpb.StreamOpened:
		if m.Stream != r.stream || r.producer != nil {
			return
		}
		r.producer = fromRef(m.Producer)
		if r.producer != nil {
			c.Watch(r.producer)
			r.ctl <- r.producer
		}
	case *clusterpb.DeltaBatch:
		if m.Stream == r.stream && !r.ended {
			r.in <- inbound{batch: m}
		}
	case *clusterpb.StreamEnd:
		if m.Stream == r.stream && !r.ended {
			r.ended = true
			r.in <- inbound{end: m}
		}
	case *actor.Terminated:
		if r.ended {
			return
		}
		if (r.producer != nil && m.Who.Equal(r.producer)) || (r.producer == nil && m.Who.Equal(r.target)) {
			r.ended = true
			r.in <- inbound{lost: true}
		}
	}
}

// remoteOnce runs one attempt on target's node. It reports whether any
// event reached the caller.
func (n *Node) remoteOnce(ctx context.Context, target *actor.PID, body []byte, w *llm.StreamWriter) (*llm.ChatResult, bool, error) {
	emitted := false
	var rb llm.ResultBuilder
	var bad error
	emit := func(ev llm.Event) bool {
		rb.Apply(&ev)
		emitted = true
		return w.Emit(ev)
	}
	end, err := n.runFlow(ctx, target, func(id uint64, recv *actor.PID) {
		sendAs(n.sys, target, &clusterpb.StreamOpen{Stream: id, RequestJson: body, Receiver: toRef(recv), Window: defaultWindow, TraceContext: telemetry.Inject(ctx)}, recv)
	}, func(b *clusterpb.DeltaBatch) bool {
		all, perr := fromDeltas(b, emit)
		if perr != nil {
			bad = perr
		}
		return all
	})
	if bad != nil {
		err = bad // runFlow cancelled the producer
	}
	if err != nil {
		return partial(&rb, emitted), emitted, err
	}
	var res *llm.ChatResult
	if len(end.ResultJson) > 0 {
		res = new(llm.ChatResult)
		if err := json.Unmarshal(end.ResultJson, res); err != nil {
			return partial(&rb, emitted), emitted, &ProtocolError{Msg: "undecodable result: " + err.Error()}
		}
	}
	return res, emitted, fromFailure(end.Err)
}

// runFlow receives one flow on this node: it spawns the receiver, asks the
// producer's side through open, hands every batch to onBatch in order
// (granting one credit after each), and returns the end. onBatch returns
// false when the caller stopped listening (context.Canceled then). A lost
// producer node is ErrNodeLost.
func (n *Node) runFlow(ctx context.Context, target *actor.PID, open func(id uint64, recv *actor.PID), onBatch func(*clusterpb.DeltaBatch) bool) (*clusterpb.StreamEnd, error) {
	id := n.streamID.Add(1)
	// Room for the whole window plus the end and a loss: the actor never
	// blocks on a caller that stopped reading.
	r := &receiverActor{stream: id, target: target, in: make(chan inbound, defaultWindow+4), ctl: make(chan *actor.PID, 1)}
	pid := n.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return r }))
	defer n.sys.Root.Stop(pid)
	open(id, pid)

	var producer *actor.PID
	known := func() *actor.PID {
		if producer == nil {
			select {
			case producer = <-r.ctl:
			default:
			}
		}
		return producer
	}
	cancel := func() {
		if p := known(); p != nil {
			send(n.sys, p, &clusterpb.StreamCancel{Stream: id})
		}
	}
	var next uint64 = 1
	for {
		var msg inbound
		select {
		case <-ctx.Done():
			cancel()
			return nil, ctx.Err()
		case p := <-r.ctl:
			producer = p
			continue
		case msg = <-r.in:
		}
		switch {
		case msg.lost:
			return nil, ErrNodeLost
		case msg.batch != nil:
			if msg.batch.Seq != next {
				cancel()
				return nil, &ProtocolError{Msg: "batch out of order"}
			}
			next++
			if !onBatch(msg.batch) {
				cancel()
				return nil, context.Canceled
			}
			p := known()
			if p == nil {
				// The producer's address comes with StreamOpened, which it
				// sends before any batch.
				return nil, &ProtocolError{Msg: "batch before the flow was opened"}
			}
			send(n.sys, p, &clusterpb.Credit{Stream: id, Batches: 1})
		case msg.end != nil:
			if msg.end.Seq != next {
				return nil, &ProtocolError{Msg: "end out of order"}
			}
			cancel() // releases the producer
			return msg.end, nil
		}
	}
}

// partial is the result so far, for an error after events were emitted.
func partial(rb *llm.ResultBuilder, emitted bool) *llm.ChatResult {
	if !emitted {
		return nil
	}
	return rb.Result()
}

// workerActor is the well-known actor on every member that starts
// producers for remote streams.
type workerActor struct{ n *Node }

func (a *workerActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *clusterpb.CallRequest:
		a.n.serveCall(c, m)
		return
	case *clusterpb.CallCancel:
		a.n.cancelCall(m)
		return
	}
	m, ok := c.Message().(*clusterpb.StreamOpen)
	if !ok {
		return
	}
	recv := fromRef(m.Receiver)
	if recv == nil {
		return
	}
	if a.n.rt == nil {
		send(c.ActorSystem(), recv, &clusterpb.StreamEnd{Stream: m.Stream, Seq: 1, Err: toFailure(errNoMembers)})
		return
	}
	// The call's spans join the caller's trace (telemetry.Extract).
	p := newProducer(telemetry.Extract(a.n.base, m.TraceContext), m.Stream, recv, int(m.Window), a.n.chatBody(m.RequestJson))
	p.sent = a.n.sent
	c.Spawn(actor.PropsFromProducer(func() actor.Actor { return p }))
}

// producerActor runs one flow (a remote stream, or a session's events) on
// the node that produces it: it watches the receiver, takes its credit and
// cancellation, and runs body on a goroutine.
type producerActor struct {
	stream  uint64
	recv    *actor.PID
	window  int
	credits chan int32
	cancel  context.CancelFunc
	base    context.Context
	body    func(ctx context.Context, out *flowOut) bool
	sent    func(stream, seq uint64) // test hook

	released     chan struct{}
	releasedOnce sync.Once
}

func newProducer(base context.Context, stream uint64, recv *actor.PID, window int, body func(context.Context, *flowOut) bool) *producerActor {
	if window <= 0 || window > 1024 {
		window = defaultWindow
	}
	return &producerActor{stream: stream, recv: recv, window: window, credits: make(chan int32, window+1), base: base, body: body, released: make(chan struct{})}
}

func (p *producerActor) release() { p.releasedOnce.Do(func() { close(p.released) }) }

func (p *producerActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		c.Watch(p.recv)
		sendAs(c.ActorSystem(), p.recv, &clusterpb.StreamOpened{Stream: p.stream, Producer: toRef(c.Self())}, c.Self())
		ctx, cancel := context.WithCancel(p.base)
		p.cancel = cancel
		self, sys := c.Self(), c.ActorSystem()
		out := &flowOut{sys: sys, p: p, credit: p.window}
		go func() {
			defer sys.Root.Stop(self)
			defer cancel()
			if p.sent != nil {
				defer p.sent(p.stream, 0)
			}
			if p.body(ctx, out) {
				// The receiver releases the producer once it has the end
				// (a Terminated it saw before the end would read as a
				// lost node); a receiver gone silent is given up on.
				t := time.NewTimer(time.Minute)
				defer t.Stop()
				select {
				case <-p.released:
				case <-t.C:
				}
			}
		}()
	case *clusterpb.Credit:
		if m.Stream == p.stream {
			select {
			case p.credits <- m.Batches:
			default: // more credit than the window: a broken receiver; ignore
			}
		}
	case *clusterpb.StreamCancel:
		if m.Stream == p.stream {
			p.cancel()
			p.release()
		}
	case *actor.Terminated:
		p.cancel() // the receiver's node is gone
		p.release()
	case *actor.Stopped:
		if p.cancel != nil {
			p.cancel()
		}
	}
}

// flowOut sends a flow's batches, in order, within the receiver's credit.
type flowOut struct {
	sys    *actor.ActorSystem
	p      *producerActor
	seq    uint64
	credit int
}

// batch sends one batch of events (packed by toDeltas, so evs may be
// reused once it returns) and items, waiting for credit; false when ctx
// ended first.
func (o *flowOut) batch(ctx context.Context, evs []llm.Event, items [][]byte) bool {
	for o.credit == 0 {
		select {
		case n := <-o.p.credits:
			o.credit += int(n)
		case <-ctx.Done():
			return false
		}
	}
	o.credit--
	o.seq++
	m := &clusterpb.DeltaBatch{Stream: o.p.stream, Seq: o.seq, Items: items}
	if len(evs) > 0 {
		toDeltas(evs, m)
	}
	send(o.sys, o.p.recv, m)
	if o.p.sent != nil {
		o.p.sent(o.p.stream, o.seq)
	}
	return true
}

// end sends the last message.
func (o *flowOut) end(res *llm.ChatResult, err error) {
	o.seq++
	e := &clusterpb.StreamEnd{Stream: o.p.stream, Seq: o.seq, Err: toFailure(err)}
	if res != nil {
		e.ResultJson, _ = json.Marshal(res)
	}
	send(o.sys, o.p.recv, e)
}

// gather takes a flow's next batch from ch: it waits for the first item,
// then takes what is ready, up to maxBatch, so a batch never waits to
// fill. It reports false, with nothing, once ch is closed or ctx ended.
func gather[T, U any](ctx context.Context, ch <-chan T, conv func(*T) U) ([]U, bool) {
	var first T
	var ok bool
	select {
	case first, ok = <-ch:
	case <-ctx.Done():
	}
	if !ok {
		return nil, false
	}
	batch := append(make([]U, 0, 8), conv(&first))
	for len(batch) < maxBatch {
		select {
		case v, ok := <-ch:
			if !ok {
				return batch, true
			}
			batch = append(batch, conv(&v))
		default:
			return batch, true
		}
	}
	return batch, true
}

// gatherDeltas is gather for a stream's events: it collects them in evs,
// reused from batch to batch (flowOut.batch packs them into the batch's
// columns before it returns).
func gatherDeltas(ctx context.Context, ch <-chan llm.Event, evs []llm.Event) ([]llm.Event, bool) {
	clear(evs)
	evs = evs[:0]
	select {
	case ev, ok := <-ch:
		if !ok {
			return evs, false
		}
		evs = append(evs, ev)
	case <-ctx.Done():
		return evs, false
	}
fill:
	for len(evs) < maxBatch {
		select {
		case ev, ok := <-ch:
			if !ok {
				break fill
			}
			evs = append(evs, ev)
		default:
			break fill
		}
	}
	return evs, true
}

// chatBody runs a model call on this node's runtime and relays its events
// in batches (gather).
func (n *Node) chatBody(body []byte) func(context.Context, *flowOut) bool {
	return func(ctx context.Context, out *flowOut) bool {
		var req llm.ChatRequest
		if err := json.Unmarshal(body, &req); err != nil {
			out.end(nil, &llm.ConfigError{Field: "request", Msg: "undecodable: " + err.Error()})
			return true
		}
		s, err := n.rt.Stream(ctx, &req)
		if err != nil {
			out.end(nil, err)
			return true
		}
		defer s.Close()
		evs := make([]llm.Event, 0, maxBatch)
		for {
			var ok bool
			evs, ok = gatherDeltas(ctx, s.Events(), evs)
			if !ok {
				break
			}
			if !out.batch(ctx, evs, nil) {
				return false
			}
		}
		res, err := s.Result()
		if ctx.Err() != nil {
			return false // cancelled by the caller, or its node is gone: nobody listens
		}
		out.end(res, err)
		return true
	}
}
