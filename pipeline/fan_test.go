package pipeline_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/pipeline"
)

func TestFanOutMergedOrderPerModel(t *testing.T) {
	specs := map[string]spec{
		"a": {deltas: words("a", 30), gap: time.Millisecond},
		"b": {deltas: words("b", 7), first: 3 * time.Millisecond, gap: 2 * time.Millisecond},
		"c": {deltas: words("c", 100)},
	}
	for _, face := range []string{"all", "events"} {
		t.Run(face, func(t *testing.T) {
			c := newFake(specs)
			req := userReq("hi")
			fan := pipeline.FanOut(context.Background(), c, req, "a", "b", "c")
			got := map[string][]llm.Event{}
			record := func(tg pipeline.Tagged) {
				if want := []string{"a", "b", "c"}[tg.Index]; tg.Model != want {
					t.Errorf("tag %d names %q, want %q", tg.Index, tg.Model, want)
				}
				got[tg.Model] = append(got[tg.Model], tg.Event)
			}
			if face == "all" {
				for tg, err := range fan.All() {
					if err != nil {
						t.Fatal(err)
					}
					record(tg)
				}
			} else {
				for tg := range fan.Events() {
					record(tg)
				}
			}
			for m, s := range specs {
				if txt := texts(got[m]); !slices.Equal(txt, s.deltas) {
					t.Errorf("model %s: events %q, want %q in order", m, txt, s.deltas)
				}
				if last := got[m][len(got[m])-1]; last.Type != llm.EventFinish {
					t.Errorf("model %s: last event %v, want finish", m, last.Type)
				}
			}
			if err := fan.Wait(); err != nil {
				t.Fatal(err)
			}
			for i, r := range fan.Results() {
				s := specs[r.Model]
				if r.Err != nil || r.Result == nil || r.Result.Content != strings.Join(s.deltas, "") || r.Result.Model != r.Model {
					t.Errorf("result %d = %+v, %v", i, r.Result, r.Err)
				}
			}
			if req.Model != "" {
				t.Errorf("FanOut modified the request: model %q", req.Model)
			}
			if n := c.streams.Load(); n != 3 {
				t.Errorf("%d streams opened, want 3", n)
			}
		})
	}
}

// A consumer stalled on branch 0 stalls model 0 only, at its own bounded
// buffer; branch 1 completes, then branch 0 resumes intact.
func TestFanOutBranchIsolation(t *testing.T) {
	defer goleak.VerifyNone(t)
	const long = 300
	c := newFake(map[string]spec{
		"slow-reader": {deltas: words("x", long)},
		"other":       {deltas: words("y", 20), gap: time.Millisecond},
	})
	fan := pipeline.FanOut(context.Background(), c, userReq("hi"), "slow-reader", "other")
	b0 := fan.Branch(0)
	first := <-b0 // then stall on branch 0

	var got1 []llm.Event
	for ev := range fan.Branch(1) {
		got1 = append(got1, ev)
	}
	if txt := texts(got1); len(txt) != 20 || txt[19] != "y19 " {
		t.Fatalf("branch 1 got %q", txt)
	}
	res1, err := fan.Result(1)
	if err != nil || res1.Content != strings.Join(words("y", 20), "") {
		t.Fatalf("Result(1) = %+v, %v", res1, err)
	}
	// Model 0 fills its buffer and waits there: no further.
	eventually(t, "branch 0 buffer full", func() bool { return len(b0) == pipeline.DefaultBranchBuffer })
	time.Sleep(20 * time.Millisecond)
	// One event read, a full branch buffer, one held by the goroutine that
	// pumps the stream into the branch and one in the stream's hand-off
	// (fake buffer 0).
	if n := c.emittedBy("slow-reader"); n > 1+pipeline.DefaultBranchBuffer+2 {
		t.Fatalf("model 0 produced %d events while its reader stalled; the bound is %d", n, 1+pipeline.DefaultBranchBuffer+2)
	}
	if c.finishedOK("slow-reader") {
		t.Fatal("model 0 finished while its reader stalled")
	}
	select {
	case <-fan.Done():
		t.Fatal("Done before model 0 ended")
	default:
	}
	got0 := []llm.Event{first}
	for ev := range b0 {
		got0 = append(got0, ev)
	}
	if txt := texts(got0); !slices.Equal(txt, words("x", long)) {
		t.Fatalf("branch 0 lost or reordered events: %d texts", len(txt))
	}
	if err := fan.Wait(); err != nil {
		t.Fatal(err)
	}
}

// Reading only branch 0 never blocks model 1, whose answer fits its buffer.
func TestFanOutUnreadBranchDoesNotBlockOthers(t *testing.T) {
	defer goleak.VerifyNone(t)
	c := newFake(map[string]spec{
		"read":   {deltas: words("r", 5), first: 30 * time.Millisecond},
		"unread": {deltas: words("u", 10)},
	})
	fan := pipeline.FanOut(context.Background(), c, userReq("hi"), "read", "unread")
	<-fan.Branch(0)
	eventually(t, "unread model finished", func() bool { return c.finishedOK("unread") })
	for range fan.Branch(0) {
	}
	res, err := fan.Result(1) // discards branch 1, which nobody took
	if err != nil || res.Content != strings.Join(words("u", 10), "") {
		t.Fatalf("Result(1) = %+v, %v", res, err)
	}
	if err := fan.Wait(); err != nil {
		t.Fatal(err)
	}
}

func TestFanOutFailuresStaySeparate(t *testing.T) {
	defer goleak.VerifyNone(t)
	boom := errors.New("boom")
	c := newFake(map[string]spec{
		"ok":      {deltas: words("o", 10), gap: time.Millisecond},
		"refused": {openErr: &llm.APIError{Provider: "fake", Status: 400, Message: "bad model"}},
		"broken":  {deltas: words("b", 10), failAt: 3, failErr: boom},
	})
	fan := pipeline.FanOut(context.Background(), c, userReq("hi"), "ok", "refused", "broken")
	failed := map[string]error{}
	counts := map[string]int{}
	for tg, err := range fan.All() {
		if err != nil {
			var me *pipeline.ModelError
			if !errors.As(err, &me) || me.Model != tg.Model || me.Index != tg.Index {
				t.Fatalf("error %v not tagged with its model %+v", err, tg)
			}
			failed[tg.Model] = err
			continue
		}
		counts[tg.Model]++
	}
	if len(failed) != 2 || failed["ok"] != nil {
		t.Fatalf("failures = %v", failed)
	}
	var api *llm.APIError
	if !errors.As(failed["refused"], &api) || api.Status != 400 {
		t.Errorf("refused error = %v", failed["refused"])
	}
	var se *llm.StreamError
	if !errors.As(failed["broken"], &se) || !errors.Is(se, boom) || se.Partial.Content != "b0 b1 b2 " {
		t.Errorf("broken error = %v", failed["broken"])
	}
	if counts["ok"] != 12 || counts["broken"] != 3 {
		t.Errorf("event counts = %v", counts)
	}
	err := fan.Wait()
	if !errors.Is(err, boom) || !errors.As(err, &api) {
		t.Errorf("Wait = %v, want both failures joined", err)
	}
	rs := fan.Results()
	if rs[0].Err != nil || rs[0].Result.Content != strings.Join(words("o", 10), "") {
		t.Errorf("ok model result = %+v", rs[0])
	}
	if rs[1].Result != nil || rs[1].Err == nil || rs[2].Err == nil {
		t.Errorf("failed results = %+v %+v", rs[1], rs[2])
	}
}

func TestFanOutOneFacePerFan(t *testing.T) {
	defer goleak.VerifyNone(t)
	c := newFake(map[string]spec{"a": {deltas: words("a", 3)}, "b": {deltas: words("b", 3)}})

	fan := pipeline.FanOut(context.Background(), c, userReq("hi"), "a", "b")
	br := fan.Branch(0)
	if _, ok := <-fan.Events(); ok {
		t.Error("Events delivered after Branch picked the branch face")
	}
	for _, err := range fan.All() {
		if !errors.Is(err, pipeline.ErrFaceInUse) {
			t.Errorf("All after Branch yielded %v", err)
		}
	}
	if _, ok := <-fan.Branch(7); ok {
		t.Error("out-of-range branch delivered")
	}
	if n := len(texts(drain(br))); n != 3 {
		t.Errorf("branch 0 got %d texts", n)
	}
	if err := fan.Wait(); err != nil {
		t.Fatal(err)
	}

	fan = pipeline.FanOut(context.Background(), c, userReq("hi"), "a", "b")
	ev := fan.Events()
	if _, ok := <-fan.Branch(0); ok {
		t.Error("Branch delivered after Events picked the merged face")
	}
	n := 0
	for range ev {
		n++
	}
	if n != 10 {
		t.Errorf("merged view got %d events, want 10", n)
	}
	if _, err := fan.Result(5); err == nil {
		t.Error("Result(5) of a two-model fan succeeded")
	}
}

func drain(ch <-chan llm.Event) []llm.Event {
	var out []llm.Event
	for ev := range ch {
		out = append(out, ev)
	}
	return out
}

// Wait alone (no face) discards every event and returns each model's answer,
// even when answers overflow the branch buffers.
func TestFanOutWaitWithoutReading(t *testing.T) {
	defer goleak.VerifyNone(t)
	c := newFake(map[string]spec{"a": {deltas: words("a", 500)}, "b": {deltas: words("b", 200)}})
	fan := pipeline.FanOut(context.Background(), c, userReq("hi"), "a", "b")
	rs := fan.Results()
	if rs[0].Result.Content != strings.Join(words("a", 500), "") || rs[1].Result.Content != strings.Join(words("b", 200), "") {
		t.Fatal("results incomplete")
	}
	if err := pipeline.FanOut(context.Background(), c, userReq("hi")).Wait(); err == nil {
		t.Fatal("a fan-out of no model succeeded")
	}
}

// Cancelling, closing or breaking out mid-stream releases every branch and
// goroutine, and the models see the cancellation.
func TestFanOutCancelMidStream(t *testing.T) {
	for _, how := range []string{"cancel", "close", "break", "branch-cancel"} {
		t.Run(how, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			c := newFake(map[string]spec{
				"a": {deltas: words("a", 2), hang: true},
				"b": {deltas: words("b", 2), hang: true},
				"c": {deltas: words("c", 1000), gap: time.Millisecond},
			})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			fan := pipeline.FanOut(ctx, c, userReq("hi"), "a", "b", "c")
			if how == "branch-cancel" {
				b := fan.Branch(2)
				<-b
				cancel()
				for range b {
				}
				for range fan.Branch(0) {
				}
			} else {
				seen := 0
				var lastErr error
				for _, err := range fan.All() {
					if err != nil {
						lastErr = err
						continue
					}
					if seen++; seen == 6 {
						switch how {
						case "cancel":
							cancel()
						case "close":
							go fan.Close()
						case "break":
						}
						if how == "break" {
							break
						}
					}
				}
				if how == "cancel" && !errors.Is(lastErr, context.Canceled) {
					t.Errorf("All ended with %v, want context.Canceled", lastErr)
				}
			}
			fan.Close()
			<-fan.Done()
			for _, r := range fan.Results() {
				if r.Err == nil {
					t.Errorf("model %s reported success after cancellation", r.Model)
				}
			}
			if c.cancelled.Load() < 3 {
				t.Errorf("%d model calls saw the cancellation, want 3", c.cancelled.Load())
			}
		})
	}
}

// The merged view picked after events were buffered in the branches, while
// the models are still streaming, delivers those events at once.
func TestFanOutMergedAfterBufferedEvents(t *testing.T) {
	for _, face := range []string{"events", "all"} {
		t.Run(face, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			c := newFake(map[string]spec{"a": {deltas: words("a", 2), hang: true}, "b": {deltas: words("b", 3), hang: true}})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			fan := pipeline.FanOut(ctx, c, userReq("hi"), "a", "b")
			eventually(t, "events buffered", func() bool { return c.emittedBy("a") == 2 && c.emittedBy("b") == 3 })
			time.Sleep(5 * time.Millisecond) // let the producers park, waiting for more
			// Were the buffered events stuck until the models end, the
			// cancellation would release them, two seconds late.
			time.AfterFunc(2*time.Second, cancel)
			start := time.Now()
			got := map[string]int{}
			if face == "events" {
				ch := fan.Events()
				for range 5 {
					got[(<-ch).Model]++
				}
			} else {
				n := 0
				for tg, err := range fan.All() {
					if err != nil {
						t.Fatal(err)
					}
					got[tg.Model]++
					if n++; n == 5 {
						break
					}
				}
			}
			if got["a"] != 2 || got["b"] != 3 || time.Since(start) > time.Second {
				t.Fatalf("merged view delivered %v after %v", got, time.Since(start))
			}
			cancel()
			fan.Close()
		})
	}
}
