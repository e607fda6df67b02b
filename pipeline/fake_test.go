package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/chorusrt/chorus/llm"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// spec scripts one model of the fake client.
type spec struct {
	deltas  []string      // text deltas, in order
	first   time.Duration // wait before the first event (and before Chat answers)
	gap     time.Duration // wait between events
	openErr error         // Stream and Chat fail at once with it
	failErr error         // the stream fails with it after failAt events
	failAt  int
	hang    bool // after the deltas, wait for cancellation instead of finishing
	usage   llm.Usage
}

// fake is a deterministic Client: each model answers as its spec says,
// waits honour ctx, and every call is counted.
type fake struct {
	specs  map[string]spec
	buffer int // stream channel capacity

	// chat, when set, answers Chat calls instead of the specs.
	chat func(ctx context.Context, req *llm.ChatRequest) (*llm.ChatResult, error)
	// embed answers Embed calls.
	embed func(ctx context.Context, req *llm.EmbedRequest) (*llm.EmbedResult, error)

	chats, streams, embeds atomic.Int64
	cancelled              atomic.Int64 // calls that ended because their ctx was cancelled

	mu       sync.Mutex
	emitted  map[string]int  // events written per model
	finished map[string]bool // streams that ended normally
	models   []string        // models called, in call order
	reqs     []*llm.ChatRequest
}

func newFake(specs map[string]spec) *fake {
	return &fake{specs: specs, emitted: map[string]int{}, finished: map[string]bool{}}
}

func (f *fake) record(req *llm.ChatRequest) spec {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.models = append(f.models, req.Model)
	f.reqs = append(f.reqs, req)
	s, ok := f.specs[req.Model]
	if !ok {
		s = spec{openErr: fmt.Errorf("fake: unknown model %q", req.Model)}
	}
	return s
}

func (f *fake) calledModels() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.models...)
}

func (f *fake) emittedBy(model string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.emitted[model]
}

func (f *fake) finishedOK(model string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.finished[model]
}

// sleep waits d or until ctx ends, counting cancellations.
func (f *fake) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		if err := ctx.Err(); err != nil {
			f.cancelled.Add(1)
			return err
		}
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		f.cancelled.Add(1)
		return ctx.Err()
	}
}

func (f *fake) hangUntil(ctx context.Context) error {
	<-ctx.Done()
	f.cancelled.Add(1)
	return ctx.Err()
}

func (f *fake) Chat(ctx context.Context, req *llm.ChatRequest) (*llm.ChatResult, error) {
	f.chats.Add(1)
	if f.chat != nil {
		f.mu.Lock()
		f.reqs = append(f.reqs, req)
		f.models = append(f.models, req.Model)
		f.mu.Unlock()
		return f.chat(ctx, req)
	}
	s := f.record(req)
	if s.openErr != nil {
		return nil, s.openErr
	}
	if err := f.sleep(ctx, s.first+time.Duration(len(s.deltas))*s.gap); err != nil {
		return nil, err
	}
	if s.hang {
		return nil, f.hangUntil(ctx)
	}
	if s.failErr != nil {
		return nil, s.failErr
	}
	return &llm.ChatResult{Model: req.Model, Content: strings.Join(s.deltas, ""), FinishReason: llm.FinishStop, Usage: s.usage}, nil
}

func (f *fake) Stream(ctx context.Context, req *llm.ChatRequest) (*llm.Stream, error) {
	f.streams.Add(1)
	s := f.record(req)
	if s.openErr != nil {
		return nil, s.openErr
	}
	st, w, sctx := llm.NewStream(ctx, f.buffer)
	go f.produce(sctx, req.Model, s, w)
	return st, nil
}

func (f *fake) produce(ctx context.Context, model string, s spec, w *llm.StreamWriter) {
	var b llm.ResultBuilder
	b.SetMeta("fake-"+model, model)
	emit := func(ev llm.Event) bool {
		if !w.Emit(ev) {
			f.cancelled.Add(1)
			return false
		}
		b.Apply(&ev)
		f.mu.Lock()
		f.emitted[model]++
		f.mu.Unlock()
		return true
	}
	fail := func(err error) {
		if f.emittedBy(model) > 0 {
			w.Finish(b.Result(), &llm.StreamError{Partial: b.Result(), Err: err})
			return
		}
		w.Finish(nil, err)
	}
	if err := f.sleep(ctx, s.first); err != nil {
		fail(err)
		return
	}
	for i, d := range s.deltas {
		if s.failErr != nil && i == s.failAt {
			fail(s.failErr)
			return
		}
		if i > 0 {
			if err := f.sleep(ctx, s.gap); err != nil {
				fail(err)
				return
			}
		}
		if !emit(llm.Event{Type: llm.EventText, Text: d}) {
			fail(ctx.Err())
			return
		}
	}
	if s.failErr != nil {
		fail(s.failErr)
		return
	}
	if s.hang {
		fail(f.hangUntil(ctx))
		return
	}
	u := s.usage
	if !emit(llm.Event{Type: llm.EventUsage, Usage: &u}) || !emit(llm.Event{Type: llm.EventFinish, Finish: llm.FinishStop}) {
		fail(ctx.Err())
		return
	}
	f.mu.Lock()
	f.finished[model] = true
	f.mu.Unlock()
	w.Finish(b.Result(), nil)
}

func (f *fake) Embed(ctx context.Context, req *llm.EmbedRequest) (*llm.EmbedResult, error) {
	f.embeds.Add(1)
	if f.embed == nil {
		return nil, errors.New("fake: no embed")
	}
	return f.embed(ctx, req)
}

// words returns n deltas "m0 ", "m1 ", ... tagged with prefix.
func words(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d ", prefix, i)
	}
	return out
}

func userReq(text string) *llm.ChatRequest {
	return &llm.ChatRequest{Messages: []llm.Message{llm.UserText(text)}}
}

// texts keeps the text deltas of evs.
func texts(evs []llm.Event) []string {
	var out []string
	for _, ev := range evs {
		if ev.Type == llm.EventText {
			out = append(out, ev.Text)
		}
	}
	return out
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
