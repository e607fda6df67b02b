package providers

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/sse"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// Stream starts a streaming chat call. A bad request is rejected here with
// a *llm.ConfigError and nothing is sent; every other failure arrives through
// the stream. Retries happen only before the first event reaches the caller;
// after it, a failure ends the stream with a *llm.StreamError holding the
// partial result.
//
// The goroutine that reads the body decodes each event once and writes it
// straight into the stream's bounded channel: a slow reader slows the body
// read, never buffers without bound.
func (c *Client) Stream(ctx context.Context, req *llm.ChatRequest) (*llm.Stream, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	// The request is built here, so that a bad one fails the call and
	// nothing is sent; the first attempt sends what was built.
	pre := &prebuilt{sent: c.learned.snapshot(), codec: c.chatCodec(req)}
	wreq, err := pre.codec.ChatRequest(req, c.buildOpts(true, pre.sent))
	if err != nil {
		return nil, err
	}
	pre.wreq = wreq
	// The call's budget is the stream's context: Close cancels it, and
	// the stream holds no context of its own.
	bctx, cancel := c.budget(ctx)
	s, w := llm.NewStreamWithCancel(bctx, cancel, c.buffer)
	go c.runStream(bctx, req, pre, w)
	return s, nil
}

// StreamTo runs a streaming call on the caller's goroutine, handing each
// event to emit as soon as it is decoded, and returns the whole result. It is
// the same call as Stream without the channel: the runtime uses it to write
// events straight into its caller's stream. emit returning false stops the
// call. Once emit has been called, a failure returns a *llm.StreamError
// holding the partial result and is never retried.
func (c *Client) StreamTo(ctx context.Context, req *llm.ChatRequest, emit func(llm.Event) bool) (*llm.ChatResult, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	return c.StreamToValidated(ctx, req, emit)
}

// StreamToValidated is StreamTo for a request its caller has already
// validated (llm.ChatRequest.Validate) and does not check it again. The
// runtime uses it: it validates a request once, before admission, so that a
// bad one never queues, and may then place it on several credentials and
// models. Any other caller wants StreamTo.
func (c *Client) StreamToValidated(ctx context.Context, req *llm.ChatRequest, emit func(llm.Event) bool) (*llm.ChatResult, error) {
	// A context that already ends within the budget (the runtime's call
	// context) needs no budget of its own: the call runs on the caller's
	// goroutine, and each attempt cancels its own request at its end.
	if !c.withinBudget(ctx) {
		var cancel context.CancelFunc
		ctx, cancel = c.budget(ctx)
		defer cancel()
	}
	return c.streamLadder(ctx, req, nil, emit)
}

// prebuilt is a stream request built before its first attempt (by Stream,
// to reject a bad request at once), with the codec and the learned state it
// was built with: the first attempt sends it, a retry builds anew.
type prebuilt struct {
	sent  wire.Learned
	codec wire.Codec
	wreq  *wire.Request
}

type streamState struct {
	emit    func(llm.Event) bool
	started bool
}

func (st *streamState) send(ev llm.Event) bool {
	st.started = true
	return st.emit(ev)
}

func (c *Client) runStream(ctx context.Context, req *llm.ChatRequest, pre *prebuilt, w *llm.StreamWriter) {
	growStack()
	res, err := c.streamLadder(ctx, req, pre, w.Emit)
	w.Finish(res, err)
}

// growStack grows the stream goroutine's stack to the size its call will
// need, while the stack is one frame deep. The goroutine starts small and
// would otherwise grow twice, the second time inside net/http's round
// trip, where each growth copies and walks some thirty frames: with 10,000
// streams that walking was 8% of the client's CPU. The stack reaches the
// same size either way (reading the body, the goroutine uses more than a
// quarter of it, so it never shrinks).
//
//go:noinline
func growStack() {
	var frame [growFrame]byte
	keepFrame(&frame)
}

// growFrame is a frame that makes newstack double a 2 KiB stack to 8 KiB.
const growFrame = 5 << 10

//go:noinline
func keepFrame(b *[growFrame]byte) { b[0] = 1 }

func (c *Client) streamLadder(ctx context.Context, req *llm.ChatRequest, pre *prebuilt, out func(llm.Event) bool) (*llm.ChatResult, error) {
	st := &streamState{emit: out}
	emit := st.send
	var res *llm.ChatResult
	err := c.ladder(ctx, "stream", req.Model, func(ctx context.Context, attempt int) attemptResult {
		sent, codec := c.learned.snapshot(), c.chatCodec(req)
		var wreq *wire.Request
		if pre != nil {
			// Dropped once used: an open stream keeps nothing of it
			// beyond what net/http holds (its header map is copied).
			sent, codec, wreq = pre.sent, pre.codec, pre.wreq
			pre = nil
		}
		c.traceApplied(ctx, req, sent, true, attempt) // learntrace.go
		var status int
		var err error
		if c.learned.Has(LearnBuffered) {
			res, status, err = c.bufferedAsStream(ctx, codec, req, sent, attempt, emit)
		} else {
			res, status, err = c.streamAttempt(ctx, codec, req, wreq, sent, attempt, emit)
		}
		r := attemptResult{status: status, err: err}
		if res != nil {
			r.requestID = res.Meta.RequestID
		}
		if err == nil {
			return r
		}
		if errors.Is(err, wire.ErrAborted) {
			if r.err = ctxErr(ctx); r.err == nil {
				r.err = context.Canceled
			}
		}
		if st.started {
			// Events reached the caller: never retried; the partial result goes with the error.
			r.err = &finalErr{err: &llm.StreamError{Partial: res, Err: r.err}}
			return r
		}
		r.relearned = c.learnFrom(ctx, err, req, sent, true, attempt)
		return r
	})
	var final *llm.StreamError
	if errors.As(err, &final) {
		return final.Partial, final
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

// bufferedAsStream serves a stream from a buffered call once the provider
// is known to reject streaming.
func (c *Client) bufferedAsStream(ctx context.Context, codec wire.Codec, req *llm.ChatRequest, sent wire.Learned, attempt int, emit wire.Emit) (*llm.ChatResult, int, error) {
	wreq, err := codec.ChatRequest(req, c.buildOpts(false, sent))
	if err != nil {
		return nil, 0, err
	}
	res, status, err := c.chatAttempt(ctx, codec, wreq, attempt)
	if err != nil {
		return nil, status, err
	}
	res.Meta.Buffered = true
	if !emitResult(res, emit) {
		return res, status, wire.ErrAborted
	}
	return res, status, nil
}

// emitResult replays a whole result as events, in stream order.
func emitResult(res *llm.ChatResult, emit wire.Emit) bool {
	if res.Reasoning != "" && !emit(llm.Event{Type: llm.EventReasoning, Text: res.Reasoning}) {
		return false
	}
	if res.Content != "" && !emit(llm.Event{Type: llm.EventText, Text: res.Content}) {
		return false
	}
	if res.Refusal != "" && !emit(llm.Event{Type: llm.EventRefusal, Text: res.Refusal}) {
		return false
	}
	for i, tc := range res.ToolCalls {
		if !emit(llm.Event{Type: llm.EventToolCallStart, ToolIndex: i, ToolCallID: tc.ID, ToolName: tc.Name, Text: tc.Arguments, Signature: tc.Signature}) {
			return false
		}
	}
	if !res.Usage.IsZero() {
		u := res.Usage
		if !emit(llm.Event{Type: llm.EventUsage, Usage: &u}) {
			return false
		}
	}
	return emit(llm.Event{Type: llm.EventFinish, Finish: res.FinishReason})
}

// streamAttempt sends wreq, or the request built from req when wreq is nil,
// and reads its answer.
func (c *Client) streamAttempt(ctx context.Context, codec wire.Codec, req *llm.ChatRequest, wreq *wire.Request, sent wire.Learned, attempt int, emit wire.Emit) (*llm.ChatResult, int, error) {
	if wreq == nil {
		var err error
		if wreq, err = codec.ChatRequest(req, c.buildOpts(true, sent)); err != nil {
			return nil, 0, err
		}
	}
	actx, acancel := context.WithCancelCause(ctx)
	defer acancel(nil)
	var activity atomic.Uint64
	wd := startWatchdog(c.idle, &activity, func() { acancel(llm.ErrIdleTimeout) })
	defer wd.stop()

	resp, err := c.send(actx, wreq, true)
	if err != nil {
		return nil, statusOf(err), err
	}
	defer resp.Body.Close()
	activity.Add(1)
	meta := responseMeta(c.cfg.ID, resp, attempt, time.Now())
	dec := codec.NewStreamDecoder()
	result := func() *llm.ChatResult {
		r := dec.Result()
		r.Meta = withWireMeta(meta, r.Meta)
		r.Meta.Model = r.Model
		return r
	}

	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	// The SSE reader buffers the body itself; only the other answers need a
	// look at their first byte.
	var br *bufio.Reader
	if ct != "text/event-stream" {
		br = bufio.NewReaderSize(resp.Body, 512)
	}
	switch {
	case ct == "text/event-stream":
		err = pumpSSE(resp.Body, dec, emit, &activity)
	case c.cfg.Format == FormatGemini && firstByte(br) == '[':
		err = pumpJSONArray(br, dec, emit, &activity)
	default:
		// A 200 that is not a stream: parse it as the buffered answer it is,
		// learn that this provider buffers, and never send a second request.
		body, rerr := readCapped(br, MaxResponseBytes)
		if rerr != nil {
			return nil, resp.StatusCode, c.readError(actx, rerr)
		}
		res, perr := codec.ParseChat(body)
		if perr != nil {
			return nil, resp.StatusCode, c.stampError(perr, resp)
		}
		c.learn(LearnBuffered, "a stream request was answered with "+ct)
		traceLearned(ctx, LearnBuffered, attempt)
		res.Meta = withWireMeta(meta, res.Meta)
		res.Meta.Model = res.Model
		res.Meta.Buffered = true
		if !emitResult(res, emit) {
			return res, resp.StatusCode, wire.ErrAborted
		}
		return res, resp.StatusCode, nil
	}
	if err != nil {
		if !errors.Is(err, wire.ErrAborted) {
			err = c.readError(actx, err)
			err = c.stampError(err, resp)
		}
		return result(), resp.StatusCode, err
	}
	if !dec.Complete() {
		return result(), resp.StatusCode, llm.ErrPrematureClose
	}
	// Let the connection be reused: the terminator may precede a few bytes.
	_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
	return result(), resp.StatusCode, nil
}

func pumpSSE(r io.Reader, dec wire.StreamDecoder, emit wire.Emit, activity *atomic.Uint64) error {
	sr := sse.NewReader(r, activity)
	defer sr.Release()
	for {
		ev, err := sr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		done, err := dec.Feed(ev.Name, ev.Data, emit)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
	}
}

// pumpJSONArray feeds the elements of a streamed JSON array (Gemini without
// alt=sse) to the decoder as they arrive.
func pumpJSONArray(r io.Reader, dec wire.StreamDecoder, emit wire.Emit, activity *atomic.Uint64) error {
	jd := json.NewDecoder(r)
	if _, err := jd.Token(); err != nil {
		return err
	}
	for jd.More() {
		var raw json.RawMessage
		if err := jd.Decode(&raw); err != nil {
			return err
		}
		activity.Add(1)
		if _, err := dec.Feed(nil, raw, emit); err != nil {
			return err
		}
	}
	_, err := jd.Token()
	return err
}

func firstByte(br *bufio.Reader) byte {
	for i := 1; i <= 64; i++ {
		b, err := br.Peek(i)
		if err != nil || len(b) < i {
			return 0
		}
		switch c := b[i-1]; c {
		case ' ', '\n', '\r', '\t':
			continue
		default:
			return c
		}
	}
	return 0
}

// watchdog fires once when its activity counter has not moved for idle.
// It samples every idle/4, so a stall is detected within 1.25×idle; the
// hot path pays one atomic add per line.
type watchdog struct {
	mu       sync.Mutex
	t        *time.Timer
	stopped  bool
	last     uint64
	lastSeen time.Time
}

func startWatchdog(idle time.Duration, activity *atomic.Uint64, fire func()) *watchdog {
	w := &watchdog{lastSeen: time.Now()}
	if idle <= 0 {
		w.stopped = true
		return w
	}
	period := max(idle/4, time.Millisecond)
	check := func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.stopped {
			return
		}
		now := time.Now()
		if cur := activity.Load(); cur != w.last {
			w.last, w.lastSeen = cur, now
		} else if now.Sub(w.lastSeen) >= idle {
			w.stopped = true
			fire()
			return
		}
		w.t.Reset(period)
	}
	w.mu.Lock()
	w.t = time.AfterFunc(period, check)
	w.mu.Unlock()
	return w
}

func (w *watchdog) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	if w.t != nil {
		w.t.Stop()
	}
}
