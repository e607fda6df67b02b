package rx_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reactivex/rxgo/v2"
	"go.uber.org/goleak"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/pipeline"
	"github.com/chorusrt/chorus/pipeline/rx"
	"github.com/chorusrt/chorus/providers"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fake is a pipeline.Client whose streams send deltas then finish, fail
// with failErr, or hang until cancelled; it counts Stream calls.
type fake struct {
	deltas  map[string][]string
	failErr map[string]error
	hang    bool
	streams atomic.Int64
	closed  atomic.Int64 // streams that ended because they were cancelled
}

func (f *fake) Chat(context.Context, *llm.ChatRequest) (*llm.ChatResult, error) {
	return nil, errors.New("fake: no chat")
}

func (f *fake) Embed(context.Context, *llm.EmbedRequest) (*llm.EmbedResult, error) {
	return nil, errors.New("fake: no embed")
}

func (f *fake) Stream(ctx context.Context, req *llm.ChatRequest) (*llm.Stream, error) {
	f.streams.Add(1)
	s, w, sctx := llm.NewStream(ctx, 0)
	go func() {
		var b llm.ResultBuilder
		for _, d := range f.deltas[req.Model] {
			ev := llm.Event{Type: llm.EventText, Text: d}
			if !w.Emit(ev) {
				f.closed.Add(1)
				w.Finish(nil, sctx.Err())
				return
			}
			b.Apply(&ev)
		}
		if err := f.failErr[req.Model]; err != nil {
			w.Finish(nil, &llm.StreamError{Partial: b.Result(), Err: err})
			return
		}
		if f.hang {
			<-sctx.Done()
			f.closed.Add(1)
			w.Finish(nil, sctx.Err())
			return
		}
		w.Finish(b.Result(), nil)
	}()
	return s, nil
}

func req(model string) *llm.ChatRequest {
	return &llm.ChatRequest{Model: model, Messages: []llm.Message{llm.UserText("hi")}}
}

// observe collects an observer's items: values as strings via str, errors apart.
func observe(ch <-chan rxgo.Item, str func(any) string) (vals []string, errs []error) {
	for it := range ch {
		if it.Error() {
			errs = append(errs, it.E)
			continue
		}
		vals = append(vals, str(it.V))
	}
	return vals, errs
}

func eventText(v any) string { return v.(llm.Event).Type.String() + ":" + v.(llm.Event).Text }

// Two observers (one subscribing late, after the stream ended) and an
// operator chain see the same events from one request to the server.
func TestFromStreamMulticastOneRequest(t *testing.T) {
	srv := llmtest.NewServer()
	hc := providers.NewHTTPClient()
	defer func() {
		hc.CloseIdleConnections()
		srv.Close()
		goleak.VerifyNone(t)
	}()
	srv.Push(llmtest.Deltas("Hello", ", ", "world"))
	c, err := providers.New(providers.Compatible("llmtest", srv.OpenAIBaseURL(), ""), providers.WithHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := c.Stream(ctx, req("gpt-test"))
	if err != nil {
		t.Fatal(err)
	}
	obs := rx.FromStream(ctx, s)
	first, _ := observe(obs.Observe(), eventText)
	second, _ := observe(obs.Observe(), eventText) // subscribes after the end: replayed
	var mapped []string
	<-obs.Filter(func(v any) bool { return v.(llm.Event).Type == llm.EventText }).
		Map(func(_ context.Context, v any) (any, error) { return strings.ToUpper(v.(llm.Event).Text), nil }).
		ForEach(func(v any) { mapped = append(mapped, v.(string)) }, func(err error) { t.Error(err) }, func() {})

	if len(first) < 4 || !slices.Equal(first, second) {
		t.Fatalf("observers disagree:\n%q\n%q", first, second)
	}
	if got := strings.Join(mapped, ""); got != "HELLO, WORLD" {
		t.Errorf("operator chain saw %q", got)
	}
	if srv.Count() != 1 {
		t.Fatalf("%d requests for three observers, want 1", srv.Count())
	}
	res, err := s.Result()
	if err != nil || res.Content != "Hello, world" {
		t.Errorf("stream result after the observable = %+v, %v", res, err)
	}
}

// Concurrent observers subscribed before any event see the same events,
// and the Client is called once.
func TestFromStreamConcurrentObservers(t *testing.T) {
	defer goleak.VerifyNone(t)
	f := &fake{deltas: map[string][]string{"m": strings.Split("a b c d e f g h i j", " ")}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, _ := f.Stream(ctx, req("m"))
	obs := rx.FromStream(ctx, s)
	const n = 4
	got := make([][]string, n)
	var wg sync.WaitGroup
	for i := range n {
		ch := obs.Observe()
		wg.Go(func() {
			for it := range ch {
				got[i] = append(got[i], eventText(it.V))
				if i == 0 {
					time.Sleep(time.Millisecond) // a slow observer slows only itself
				}
			}
		})
	}
	wg.Wait()
	for i := range n {
		if len(got[i]) != 10 || !slices.Equal(got[i], got[0]) {
			t.Fatalf("observer %d saw %q", i, got[i])
		}
	}
	if f.streams.Load() != 1 {
		t.Fatalf("%d Stream calls, want 1", f.streams.Load())
	}
}

func TestFromStreamError(t *testing.T) {
	defer goleak.VerifyNone(t)
	boom := errors.New("boom")
	f := &fake{deltas: map[string][]string{"m": {"x", "y"}}, failErr: map[string]error{"m": boom}}
	s, _ := f.Stream(context.Background(), req("m"))
	obs := rx.FromStream(context.Background(), s)
	for range 2 {
		vals, errs := observe(obs.Observe(), eventText)
		var se *llm.StreamError
		if len(vals) != 2 || len(errs) != 1 || !errors.As(errs[0], &se) || !errors.Is(se, boom) {
			t.Fatalf("vals %q errs %v", vals, errs)
		}
	}
}

// Cancelling ctx closes the stream and ends every observer, including one
// that stopped reading.
func TestFromStreamCancel(t *testing.T) {
	defer goleak.VerifyNone(t)
	f := &fake{deltas: map[string][]string{"m": {"x", "y"}}, hang: true}
	ctx, cancel := context.WithCancel(context.Background())
	s, _ := f.Stream(ctx, req("m"))
	obs := rx.FromStream(ctx, s)
	reading := obs.Observe()
	abandoned := obs.Observe()
	<-abandoned // then never read again
	<-reading
	<-reading
	cancel()
	for range reading {
	}
	if err := s.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("stream err = %v", err)
	}
	if f.closed.Load() != 1 {
		t.Fatalf("stream not cancelled")
	}
}

func TestFromFan(t *testing.T) {
	defer goleak.VerifyNone(t)
	boom := errors.New("boom")
	f := &fake{
		deltas:  map[string][]string{"a": {"a1", "a2", "a3"}, "b": {"b1", "b2"}, "bad": {"z"}},
		failErr: map[string]error{"bad": boom},
	}
	ctx := context.Background()
	fan := pipeline.FanOut(ctx, f, req(""), "a", "b", "bad")
	obs := rx.FromFan(ctx, fan)
	tagged := func(v any) string { t := v.(pipeline.Tagged); return t.Model + ":" + t.Event.Text }
	ch1, ch2 := obs.Observe(), obs.Observe()
	var wg sync.WaitGroup
	var v2 []string
	var e2 []error
	wg.Go(func() { v2, e2 = observe(ch2, tagged) })
	v1, e1 := observe(ch1, tagged)
	wg.Wait()
	if !slices.Equal(v1, v2) || len(e1) != 1 || len(e2) != 1 {
		t.Fatalf("observers disagree: %q %v / %q %v", v1, e1, v2, e2)
	}
	var me *pipeline.ModelError
	if !errors.As(e1[0], &me) || me.Model != "bad" || !errors.Is(me, boom) {
		t.Fatalf("error item %v", e1[0])
	}
	perModel := map[string][]string{}
	for _, v := range v1 {
		m, txt, _ := strings.Cut(v, ":")
		perModel[m] = append(perModel[m], txt)
	}
	if !slices.Equal(perModel["a"], []string{"a1", "a2", "a3"}) || !slices.Equal(perModel["b"], []string{"b1", "b2"}) {
		t.Fatalf("per-model order lost: %v", perModel)
	}
	if f.streams.Load() != 3 {
		t.Fatalf("%d Stream calls for 3 models and 2 observers, want 3", f.streams.Load())
	}
}

func TestFromFanCancel(t *testing.T) {
	defer goleak.VerifyNone(t)
	f := &fake{deltas: map[string][]string{"a": {"a1"}, "b": {"b1"}}, hang: true}
	ctx, cancel := context.WithCancel(context.Background())
	fan := pipeline.FanOut(ctx, f, req(""), "a", "b")
	obs := rx.FromFan(ctx, fan)
	ch := obs.Observe()
	<-ch
	cancel()
	for range ch {
	}
	<-fan.Done()
	if f.closed.Load() != 2 {
		t.Fatalf("%d streams cancelled, want 2", f.closed.Load())
	}
}

func TestFromBatch(t *testing.T) {
	defer goleak.VerifyNone(t)
	var calls atomic.Int64
	ctx := context.Background()
	items := pipeline.Map(ctx, pipeline.FromSlice(ctx, []int{1, 2, 3, 4, 5}),
		func(ctx context.Context, i int) (int, llm.Usage, error) {
			calls.Add(1)
			if i == 3 {
				return 0, llm.Usage{}, errors.New("three")
			}
			return i * i, llm.Usage{}, nil
		}, pipeline.BatchOptions{Ordered: true})
	obs := rx.FromBatch(ctx, items)
	str := func(v any) string {
		it := v.(pipeline.Item[int])
		return fmt.Sprint(it.Index, "=", it.Value, ",", it.Err)
	}
	v1, e1 := observe(obs.Observe(), str)
	v2, e2 := observe(obs.Observe(), str)
	want := []string{"0=1,<nil>", "1=4,<nil>", "2=0,three", "3=16,<nil>", "4=25,<nil>"}
	if !slices.Equal(v1, want) || !slices.Equal(v2, want) || e1 != nil || e2 != nil {
		t.Fatalf("observers saw %q %v / %q %v", v1, e1, v2, e2)
	}
	if calls.Load() != 5 {
		t.Fatalf("%d calls for 5 items and 2 observers", calls.Load())
	}
	// Sum through operators: per-item errors never stop the observable.
	sum, err := obs.Filter(func(v any) bool { return v.(pipeline.Item[int]).Err == nil }).
		Map(func(_ context.Context, v any) (any, error) { return v.(pipeline.Item[int]).Value, nil }).
		SumInt64().Get()
	if err != nil || sum.V.(int64) != 1+4+16+25 {
		t.Fatalf("sum = %v, %v", sum.V, err)
	}
}

// Against a real provider client: two observers of a fan-out and of a
// batch cost one request per model and per item, never one per observer.
func TestFanAndBatchObservablesOneRequestEach(t *testing.T) {
	srv := llmtest.NewServer()
	hc := providers.NewHTTPClient()
	defer func() {
		hc.CloseIdleConnections()
		srv.Close()
		goleak.VerifyNone(t)
	}()
	c, err := providers.New(providers.Compatible("llmtest", srv.OpenAIBaseURL(), ""), providers.WithHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	fan := rx.FromFan(ctx, pipeline.FanOut(ctx, c, req(""), "model-a", "model-b"))
	tagged := func(v any) string { t := v.(pipeline.Tagged); return t.Model + ":" + t.Event.Text }
	v1, e1 := observe(fan.Observe(), tagged)
	v2, e2 := observe(fan.Observe(), tagged)
	if len(v1) == 0 || !slices.Equal(v1, v2) || e1 != nil || e2 != nil {
		t.Fatalf("fan observers disagree: %q %v / %q %v", v1, e1, v2, e2)
	}
	if srv.Count() != 2 {
		t.Fatalf("%d requests for 2 models and 2 observers, want 2", srv.Count())
	}

	reqs := []*llm.ChatRequest{req("m"), req("m"), req("m")}
	batch := rx.FromBatch(ctx, pipeline.Batch(ctx, c, pipeline.FromSlice(ctx, reqs), pipeline.BatchOptions{Ordered: true}))
	item := func(v any) string {
		it := v.(pipeline.Item[*llm.ChatResult])
		return fmt.Sprint(it.Index, it.Value.Content, it.Err)
	}
	b1, _ := observe(batch.Observe(), item)
	b2, _ := observe(batch.Observe(), item)
	if want := []string{"0simulated reply<nil>", "1simulated reply<nil>", "2simulated reply<nil>"}; !slices.Equal(b1, want) || !slices.Equal(b2, want) {
		t.Fatalf("batch observers saw %q / %q", b1, b2)
	}
	if srv.Count() != 2+3 {
		t.Fatalf("%d requests in all, want 5", srv.Count())
	}
}
