package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/pipeline"
	"github.com/chorusrt/chorus/providers"
)

// provider adapts a providers.Client to pipeline.Client the way the runtime
// addresses models: "provider/model" becomes the plain model name the
// provider client sends.
type provider struct{ c *providers.Client }

func plain(model string) string {
	if _, m, ok := strings.Cut(model, "/"); ok {
		return m
	}
	return model
}

func (p provider) Chat(ctx context.Context, req *llm.ChatRequest) (*llm.ChatResult, error) {
	r := *req
	r.Model = plain(r.Model)
	return p.c.Chat(ctx, &r)
}

func (p provider) Stream(ctx context.Context, req *llm.ChatRequest) (*llm.Stream, error) {
	r := *req
	r.Model = plain(r.Model)
	return p.c.Stream(ctx, &r)
}

func (p provider) Embed(ctx context.Context, req *llm.EmbedRequest) (*llm.EmbedResult, error) {
	r := *req
	r.Model = plain(r.Model)
	return p.c.Embed(ctx, &r)
}

// e2e is an llmtest server and a provider client pointed at it.
type e2e struct {
	srv    *llmtest.Server
	client provider
	close  func()
}

func newE2E(t *testing.T, opts ...llmtest.Option) *e2e {
	t.Helper()
	srv := llmtest.NewServer(opts...)
	hc := providers.NewHTTPClient()
	c, err := providers.New(providers.Compatible("llmtest", srv.OpenAIBaseURL(), ""),
		providers.WithHTTPClient(hc),
		providers.WithRetryPolicy(providers.RetryPolicy{MaxAttempts: 1}),
		providers.WithTimeout(20*time.Second))
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	return &e2e{srv: srv, client: provider{c}, close: func() {
		hc.CloseIdleConnections()
		srv.Close()
	}}
}

// done closes the server and checks that no goroutine is left.
func (e *e2e) done(t *testing.T) {
	t.Helper()
	e.close()
	goleak.VerifyNone(t)
}

func (e *e2e) models() []string {
	var out []string
	for _, r := range e.srv.Requests() {
		out = append(out, r.Model)
	}
	return out
}

func TestE2EFanOut(t *testing.T) {
	e := newE2E(t)
	defer e.done(t)
	fan := pipeline.FanOut(context.Background(), e.client, userReq("hi"), "llmtest/gpt-a", "llmtest/gpt-b", "llmtest/gpt-c")
	text := map[string]string{}
	for tg, err := range fan.All() {
		if err != nil {
			t.Fatal(err)
		}
		text[tg.Model] += tg.Event.Text
	}
	for i, r := range fan.Results() {
		if r.Err != nil || r.Result.Content != "simulated reply" || text[r.Model] != "simulated reply" || r.Result.Model != plain(r.Model) {
			t.Errorf("model %d: %+v %v (streamed %q)", i, r.Result, r.Err, text[r.Model])
		}
	}
	if got := slices.Sorted(slices.Values(e.models())); !slices.Equal(got, []string{"gpt-a", "gpt-b", "gpt-c"}) {
		t.Errorf("server saw models %v", got)
	}
}

// Cancelling a fan-out mid-stream closes every connection.
func TestE2EFanOutCancel(t *testing.T) {
	e := newE2E(t)
	defer e.done(t)
	stall := llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultStall, After: 2, Stall: time.Minute})
	e.srv.Push(stall, stall)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fan := pipeline.FanOut(ctx, e.client, userReq("hi"), "llmtest/a", "llmtest/b")
	n := 0
	var last error
	for _, err := range fan.All() {
		if err != nil {
			last = err
			continue
		}
		if n++; n == 4 {
			cancel()
		}
	}
	if !errors.Is(last, context.Canceled) {
		t.Fatalf("All ended with %v", last)
	}
	<-fan.Done()
	eventually(t, "connections closed", func() bool { return e.srv.OpenConns() == 0 })
}

func TestE2ERace(t *testing.T) {
	e := newE2E(t)
	defer e.done(t)
	// Whichever request arrives first stalls; the other answers.
	e.srv.Push(llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultStall, Stall: time.Minute}), llmtest.Text("fast"))
	start := time.Now()
	res, model, err := pipeline.Race(context.Background(), e.client, userReq("hi"), "llmtest/a", "llmtest/b")
	if err != nil || res.Content != "fast" || res.Model != plain(model) {
		t.Fatalf("Race = %+v, %q, %v", res, model, err)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatal("Race waited for the stalled loser")
	}
	if e.srv.Count() != 2 {
		t.Errorf("%d requests", e.srv.Count())
	}
}

func TestE2EFallback(t *testing.T) {
	t.Run("before the first event", func(t *testing.T) {
		e := newE2E(t)
		defer e.done(t)
		e.srv.Push(llmtest.Status(400, 0), llmtest.Text("second"))
		s, err := pipeline.Fallback(context.Background(), e.client, userReq("hi"), "llmtest/a", "llmtest/b", "llmtest/c")
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Result()
		if err != nil || res.Content != "second" || res.Model != "b" {
			t.Fatalf("Result = %+v, %v", res, err)
		}
		if got := e.models(); !slices.Equal(got, []string{"a", "b"}) {
			t.Errorf("models tried %v", got)
		}
	})
	t.Run("never after the first event", func(t *testing.T) {
		e := newE2E(t)
		defer e.done(t)
		e.srv.Push(llmtest.Step{Reply: &llmtest.Reply{Deltas: []string{"one ", "two ", "three"}},
			Fault: &llmtest.Fault{Kind: llmtest.FaultResetMidStream, After: 2}}, llmtest.Text("unused"))
		s, err := pipeline.Fallback(context.Background(), e.client, userReq("hi"), "llmtest/a", "llmtest/b")
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Result()
		var se *llm.StreamError
		if !errors.As(err, &se) || se.Partial == nil || se.Partial.Content != "one two " {
			t.Fatalf("err = %v, want a StreamError with the partial answer", err)
		}
		if e.srv.Count() != 1 || e.srv.Pending() != 1 {
			t.Errorf("%d requests, %d steps left: fell back after output", e.srv.Count(), e.srv.Pending())
		}
	})
}

func TestE2EBatch(t *testing.T) {
	e := newE2E(t, llmtest.WithLatency(2*time.Millisecond, 0))
	defer e.done(t)
	reqs := make([]*llm.ChatRequest, 12)
	for i := range reqs {
		reqs[i] = &llm.ChatRequest{Model: "llmtest/m", Messages: []llm.Message{llm.UserText(fmt.Sprint("question ", i))}}
	}
	var last pipeline.Progress
	ctx := context.Background()
	items := pipeline.Collect(pipeline.Batch(ctx, e.client, pipeline.FromSlice(ctx, reqs),
		pipeline.BatchOptions{Concurrency: 3, Ordered: true, OnProgress: func(p pipeline.Progress) { last = p }}))
	if len(items) != 12 {
		t.Fatalf("%d items", len(items))
	}
	sum := 0
	for i, it := range items {
		if it.Index != i || it.Err != nil || it.Value.Content != "simulated reply" {
			t.Errorf("item %d = %+v", i, it)
			continue
		}
		sum += it.Value.Usage.TotalTokens()
	}
	if last.Done != 12 || last.Failed != 0 || last.Tokens != sum || sum == 0 {
		t.Errorf("progress %+v, tokens summed %d", last, sum)
	}
	if e.srv.Count() != 12 {
		t.Errorf("%d requests", e.srv.Count())
	}
}

// Cancelling a batch whose requests stall closes every connection.
func TestE2EBatchCancel(t *testing.T) {
	e := newE2E(t)
	defer e.done(t)
	for range 6 {
		e.srv.Push(llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultStall, Stall: time.Minute}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reqs := slices.Repeat([]*llm.ChatRequest{{Model: "m", Messages: []llm.Message{llm.UserText("q")}}}, 6)
	items := pipeline.Batch(ctx, e.client, pipeline.FromSlice(ctx, reqs), pipeline.BatchOptions{Concurrency: 2})
	eventually(t, "2 requests in flight", func() bool { return e.srv.Count() == 2 })
	cancel()
	for range items {
	}
	if e.srv.Count() != 2 {
		t.Errorf("%d requests sent, want 2", e.srv.Count())
	}
	eventually(t, "connections closed", func() bool { return e.srv.OpenConns() == 0 })
}

func TestE2EToolLoop(t *testing.T) {
	e := newE2E(t)
	defer e.done(t)
	e.srv.Push(
		llmtest.ToolCalls(
			llm.ToolCall{Name: "weather", Arguments: `{"city":"Paris"}`},
			llm.ToolCall{Name: "clock", Arguments: `{}`}),
		llmtest.Text("Sunny at noon"))
	tools := pipeline.ToolSet{
		"weather": {Definition: llm.Tool{Description: "Weather in a city", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)},
			Func: func(ctx context.Context, args json.RawMessage) (string, error) {
				var a struct{ City string }
				if err := json.Unmarshal(args, &a); err != nil {
					return "", err
				}
				time.Sleep(20 * time.Millisecond) // finishes after clock
				return "sunny in " + a.City, nil
			}},
		"clock": {Func: func(ctx context.Context, _ json.RawMessage) (string, error) { return "12:00", nil }},
	}
	req := &llm.ChatRequest{Model: "llmtest/m", Messages: []llm.Message{llm.UserText("Weather and time?")}}
	res, err := pipeline.ToolLoop(context.Background(), e.client, req, tools, pipeline.ToolLoopOptions{Parallel: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Result.Content != "Sunny at noon" || res.Turns != 2 || len(res.Messages) != 5 {
		t.Fatalf("result = %+v", res)
	}
	body := string(e.srv.Requests()[1].Body)
	iw, ic := strings.Index(body, "sunny in Paris"), strings.Index(body, "12:00")
	if iw < 0 || ic < 0 || iw > ic {
		t.Errorf("second request does not carry the tool results in call order: %s", body)
	}
	first := string(e.srv.Requests()[0].Body)
	if !strings.Contains(first, `"name":"clock"`) || !strings.Contains(first, `"name":"weather"`) {
		t.Errorf("first request does not declare the tools: %s", first)
	}
}

func TestE2EEmbed(t *testing.T) {
	e := newE2E(t)
	defer e.done(t)
	in := []string{"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta"}
	vecs, err := pipeline.EmbedTexts(context.Background(), e.client, "llmtest/emb", in, pipeline.EmbedOptions{BatchSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vecs {
		if !slices.Equal(v, llmtest.EmbeddingFor(in[i], 0)) {
			t.Errorf("vector %d is not %q's", i, in[i])
		}
	}
	if e.srv.Count() != 3 {
		t.Errorf("%d embedding requests, want 3", e.srv.Count())
	}
	ctx := context.Background()
	items := pipeline.Collect(pipeline.Embed(ctx, e.client, "llmtest/emb", pipeline.FromSlice(ctx, in), pipeline.EmbedOptions{BatchSize: 4, Linger: -1}))
	for i, it := range items {
		if it.Err != nil || !slices.Equal(it.Value, llmtest.EmbeddingFor(in[i], 0)) {
			t.Errorf("stage item %d = %+v", i, it)
		}
	}
}
