package cluster

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/chorusrt/chorus/cluster/clusterpb"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/runtime"
)

func TestRemoteStreamDeliversInOrder(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	addrs := freeAddrs(t, 2)
	nodes := joinAll(t, "stream-order", addrs, func(i int, c *Config) { c.Runtime = append(c.Runtime, openaiAt(srv, "sk-test")) })
	defer closeAll(t, nodes)

	text := strings.Repeat("abcdefgh", 200)
	for range 4 {
		srv.Push(llmtest.Text(text))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 4 {
		s, err := nodes[0].Stream(ctx, &llm.ChatRequest{Model: "fake/m", Messages: []llm.Message{llm.UserText("hi")}})
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		n := 0
		for ev, err := range s.All() {
			if err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
			if ev.Type == llm.EventText {
				b.WriteString(ev.Text)
				n++
			}
		}
		if b.String() != text {
			t.Fatalf("call %d: text of %d bytes in %d deltas, want the %d sent", i, b.Len(), n, len(text))
		}
		res, err := s.Result()
		if err != nil || res.Content != text || res.FinishReason != llm.FinishStop {
			t.Fatalf("call %d: result %+v, %v", i, res, err)
		}
	}
	if srv.Count() != 4 {
		t.Fatalf("provider saw %d requests, want 4", srv.Count())
	}
}

// A caller that stops reading holds the producer to its window: no more
// than defaultWindow batches beyond what fits the caller's channel leave
// the worker until the caller takes them.
// Reading on, every event arrives in order.
func TestRemoteStreamBackpressure(t *testing.T) {
	srv := llmtest.NewServer(llmtest.WithDefault(llmtest.Reply{Text: strings.Repeat("abcd", 20000)}))
	defer srv.Close()
	addrs := freeAddrs(t, 2)
	nodes := joinAll(t, "stream-bp", addrs, func(i int, c *Config) {
		c.Runtime = append(c.Runtime, openaiAt(srv, "sk-test"), runtime.WithStreamBuffer(4))
	})
	defer closeAll(t, nodes)
	var mu sync.Mutex
	maxSeq := uint64(0)
	nodes[1].sent = func(stream, seq uint64) {
		mu.Lock()
		maxSeq = max(maxSeq, seq)
		mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	target := actor.NewPID(nodes[1].Address(), workerName)
	s, w, sctx := llm.NewStream(ctx, 4)
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, _, err := nodes[0].remoteOnce(sctx, target, mustJSON(t, &llm.ChatRequest{Model: "fake/m", Messages: []llm.Message{llm.UserText("hi")}}), w)
		w.Finish(res, err)
	}()
	<-s.Events() // the stream has begun; now the caller stops reading
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	held := maxSeq
	mu.Unlock()
	// Bound: the window, plus batches whose events fit in the caller's
	// channel (4) before it filled (each is credited once emitted), plus
	// the first.
	if bound := uint64(defaultWindow + 4 + 1); held == 0 || held > bound {
		t.Fatalf("with the caller not reading, the producer sent %d batches; want 1..%d (window + channel)", held, bound)
	}
	n := 1
	for ev, err := range s.All() {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == llm.EventText {
			n++
		}
	}
	<-done
	res, err := s.Result()
	if err != nil || len(res.Content) == 0 {
		t.Fatalf("result %v, %v", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if maxSeq <= held {
		t.Fatalf("no batch was sent after the caller read on (%d)", maxSeq)
	}
	t.Logf("held at %d batches; %d text events in %d batches in all", held, n, maxSeq)
}

// Cancelling the caller's stream cancels the call on the worker: its
// producer ends and the provider connection is released.
func TestRemoteStreamCancel(t *testing.T) {
	srv := llmtest.NewServer(llmtest.WithDefault(llmtest.Reply{Text: strings.Repeat("abcd", 5000)}), llmtest.WithLatency(0, time.Millisecond))
	defer srv.Close()
	addrs := freeAddrs(t, 2)
	nodes := joinAll(t, "stream-cancel", addrs, func(i int, c *Config) { c.Runtime = append(c.Runtime, openaiAt(srv, "sk-test")) })
	defer closeAll(t, nodes)
	ended := make(chan struct{})
	var once sync.Once
	nodes[1].sent = func(stream, seq uint64) {
		if seq == 0 {
			once.Do(func() { close(ended) })
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	target := actor.NewPID(nodes[1].Address(), workerName)
	s, w, sctx := llm.NewStream(ctx, 4)
	go func() {
		res, _, err := nodes[0].remoteOnce(sctx, target, mustJSON(t, &llm.ChatRequest{Model: "fake/m", Messages: []llm.Message{llm.UserText("hi")}}), w)
		w.Finish(res, err)
	}()
	for range 10 {
		<-s.Events()
	}
	cancel()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the worker's producer did not end after the caller cancelled")
	}
	if _, err := s.Result(); !errors.Is(err, context.Canceled) {
		t.Fatalf("stream error %v, want context.Canceled", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for srv.OpenConns() > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := srv.OpenConns(); n > 0 {
		t.Fatalf("%d provider connections still open after the cancel", n)
	}

	// Closing the caller's node ends its streams in flight.
	s2, err := nodes[0].streamOn(context.Background(), nodes[1].Address(), &llm.ChatRequest{Model: "fake/m", Messages: []llm.Message{llm.UserText("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	<-s2.Events()
	cctx, ccancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer ccancel()
	if err := nodes[0].Close(cctx); err != nil {
		t.Fatalf("close with a stream in flight: %v", err)
	}
	if err := s2.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("a stream in flight when its node closed ended with %v, want context.Canceled", err)
	}
}

// A worker that dies mid-stream ends the caller's stream with a
// *llm.StreamError holding the partial result and ErrNodeLost (no retry
// after the first event: the caller has seen output); calls then go to
// the survivors. (TestClusterSurvivesSIGKILL covers calls in flight on a
// killed member being run again by Chat.)
func TestRemoteStreamWorkerLost(t *testing.T) {
	srv := llmtest.NewServer(llmtest.WithDefault(llmtest.Reply{Text: strings.Repeat("abcd", 5000)}), llmtest.WithLatency(0, time.Millisecond))
	defer srv.Close()
	addrs := freeAddrs(t, 3)
	nodes := joinAll(t, "stream-lost", addrs, func(i int, c *Config) { c.Runtime = append(c.Runtime, openaiAt(srv, "sk-test")) })
	defer closeAll(t, []*Node{nodes[0], nodes[2]})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	worker := nodes[1]
	s, err := nodes[0].streamOn(ctx, worker.Address(), &llm.ChatRequest{Model: "fake/m", Messages: []llm.Message{llm.UserText("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	var killed time.Time
	for ev := range s.Events() {
		if ev.Type == llm.EventText {
			got++
		}
		if got == 10 {
			killed = time.Now()
			worker.stopCluster() // the worker's node goes away, abruptly for its peers
			srv.Push(llmtest.Text("short"), llmtest.Text("short"), llmtest.Text("short"), llmtest.Text("short"))
		}
	}
	_, err = s.Result()
	t.Logf("the loss ended the stream %v after the worker's node went", time.Since(killed))
	var se *llm.StreamError
	if !errors.Is(err, ErrNodeLost) || !errors.As(err, &se) || se.Partial == nil {
		t.Fatalf("stream ended with %v (%T), want a StreamError with ErrNodeLost and the partial result", err, err)
	}
	if n := len(se.Partial.Content); n < 40 || n >= 20000 {
		t.Fatalf("partial result of %d bytes: want the text received before the loss", n)
	}
	worker.cancel()
	worker.wg.Wait()
	_ = worker.rt.Close(context.Background())

	// Calls go on through the survivors.
	for i := range 4 {
		r, err := nodes[0].Chat(ctx, &llm.ChatRequest{Model: "fake/m", Messages: []llm.Message{llm.UserText("again")}})
		if err != nil || r.Content != "short" {
			t.Fatalf("chat %d after the loss: %v, %v", i, r, err)
		}
	}
}

// fakeProducer answers a StreamOpen with a good batch of one event, then
// a batch whose columns disagree, and records the StreamCancel it gets.
type fakeProducer struct{ cancelled chan struct{} }

func (f *fakeProducer) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *clusterpb.StreamOpen:
		recv := fromRef(m.Receiver)
		send(c.ActorSystem(), recv, &clusterpb.StreamOpened{Stream: m.Stream, Producer: toRef(c.Self())})
		good := &clusterpb.DeltaBatch{Stream: m.Stream, Seq: 1}
		toDeltas([]llm.Event{{Type: llm.EventText, Text: "ok"}}, good)
		send(c.ActorSystem(), recv, good)
		bad := &clusterpb.DeltaBatch{Stream: m.Stream, Seq: 2}
		toDeltas([]llm.Event{{Type: llm.EventText, Text: "a"}, {Type: llm.EventText, Text: "b"}}, bad)
		bad.TextLens = bad.TextLens[:1]
		send(c.ActorSystem(), recv, bad)
	case *clusterpb.StreamCancel:
		close(f.cancelled)
	}
}

// A batch that crosses a node malformed ends the stream with a
// *ProtocolError after the events before it (the partial result), emits
// none of its own, and cancels the producer.
func TestRemoteStreamMalformedBatch(t *testing.T) {
	addrs := freeAddrs(t, 2)
	nodes := joinAll(t, "stream-malformed", addrs, nil)
	defer closeAll(t, nodes)
	f := &fakeProducer{cancelled: make(chan struct{})}
	pid, err := nodes[1].sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return f }), "fake-producer")
	if err != nil {
		t.Fatal(err)
	}
	defer nodes[1].sys.Root.Stop(pid)
	target := actor.NewPID(nodes[1].Address(), "fake-producer")
	s, w, sctx := llm.NewStream(context.Background(), 8)
	go func() {
		res, emitted, err := nodes[0].remoteOnce(sctx, target, mustJSON(t, &llm.ChatRequest{Model: "fake/m"}), w)
		w.Finish(res, streamErr(res, emitted, err))
	}()
	var texts []string
	for ev := range s.Events() {
		texts = append(texts, ev.Text)
	}
	res, err := s.Result()
	var pe *ProtocolError
	if !errors.As(err, &pe) {
		t.Fatalf("stream error %v, want a *ProtocolError", err)
	}
	if len(texts) != 1 || texts[0] != "ok" || res == nil || res.Content != "ok" {
		t.Fatalf("events %q, result %+v: want the good batch's \"ok\" only", texts, res)
	}
	select {
	case <-f.cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the producer was not cancelled")
	}
}
