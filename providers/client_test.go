package providers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

func TestChatAndStreamEveryFormat(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	calls := []llm.ToolCall{
		{ID: "call_1", Name: "weather", Arguments: `{"city":"Florence"}`},
		{ID: "call_2", Name: "time", Arguments: `{"tz":"Europe/Rome"}`},
	}
	for _, cfg := range formats(srv) {
		t.Run(cfg.ID, func(t *testing.T) {
			c := newClient(t, cfg)
			srv.Push(llmtest.Step{Reply: &llmtest.Reply{Text: "Hello there, friend."}})
			res, err := c.Chat(ctxT(t), hello())
			if err != nil {
				t.Fatal(err)
			}
			if res.Content != "Hello there, friend." || res.FinishReason != llm.FinishStop || res.Meta.Attempts != 1 || res.Meta.Provider != cfg.ID {
				t.Fatalf("buffered = %+v", res)
			}

			srv.Push(llmtest.Step{Reply: &llmtest.Reply{Text: "Streaming works well."}})
			s, err := c.Stream(ctxT(t), hello())
			if err != nil {
				t.Fatal(err)
			}
			evs, err := collect(s)
			if err != nil {
				t.Fatal(err)
			}
			res, _ = s.Result()
			if got := textOf(evs); got != "Streaming works well." || res.Content != got {
				t.Fatalf("stream text %q, result %q", got, res.Content)
			}
			if res.FinishReason != llm.FinishStop {
				t.Fatalf("finish = %q", res.FinishReason)
			}
			if n := countType(evs, llm.EventText); n < 2 {
				t.Fatalf("stream came in %d text deltas; want several", n)
			}

			srv.Push(llmtest.Step{Reply: &llmtest.Reply{Text: "Let me check.", ToolCalls: calls}})
			s, err = c.Stream(ctxT(t), hello())
			if err != nil {
				t.Fatal(err)
			}
			evs, err = collect(s)
			if err != nil {
				t.Fatal(err)
			}
			res, _ = s.Result()
			checkToolResult(t, res, evs, calls)
		})
	}
}

func countType(evs []llm.Event, ty llm.EventType) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == ty {
			n++
		}
	}
	return n
}

func checkToolResult(t *testing.T, res *llm.ChatResult, evs []llm.Event, want []llm.ToolCall) {
	t.Helper()
	if res.FinishReason != llm.FinishToolCalls {
		t.Errorf("finish = %q, want tool_calls", res.FinishReason)
	}
	if len(res.ToolCalls) != len(want) {
		t.Fatalf("tool calls = %+v", res.ToolCalls)
	}
	for i, tc := range res.ToolCalls {
		if tc.Name != want[i].Name || !jsonEqual(tc.Arguments, want[i].Arguments) || tc.ID == "" {
			t.Errorf("call %d = %+v, want %+v", i, tc, want[i])
		}
	}
	// Invariant 8: ToolIndex is the position in ToolCalls.
	for _, ev := range evs {
		if ev.Type == llm.EventToolCallStart || ev.Type == llm.EventToolCallDelta {
			if ev.ToolIndex < 0 || ev.ToolIndex >= len(res.ToolCalls) {
				t.Fatalf("ToolIndex %d out of range", ev.ToolIndex)
			}
			if ev.Type == llm.EventToolCallStart && res.ToolCalls[ev.ToolIndex].Name != ev.ToolName {
				t.Errorf("ToolIndex %d names %q, result has %q", ev.ToolIndex, ev.ToolName, res.ToolCalls[ev.ToolIndex].Name)
			}
		}
	}
}

func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// TestInvariant01_FinishReasonsCanonical: each canonical reason survives
// every format, buffered and streamed.
func TestInvariant01_FinishReasonsCanonical(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	for _, cfg := range formats(srv) {
		c := newClient(t, cfg)
		for _, fr := range []llm.FinishReason{llm.FinishStop, llm.FinishLength, llm.FinishContentFilter} {
			srv.Push(llmtest.Step{Reply: &llmtest.Reply{Text: "x y", Finish: fr}})
			res, err := c.Chat(ctxT(t), hello())
			if err != nil || res.FinishReason != fr {
				t.Errorf("%s buffered %q: got %v, %v", cfg.ID, fr, res, err)
			}
			srv.Push(llmtest.Step{Reply: &llmtest.Reply{Text: "x y", Finish: fr}})
			s, _ := c.Stream(ctxT(t), hello())
			res, err = s.Result()
			if err != nil || res.FinishReason != fr {
				t.Errorf("%s stream %q: got %v, %v", cfg.ID, fr, res, err)
			}
		}
	}
}

// TestInvariant02_KeysNeverInErrorsOrEvents: a provider that echoes the key
// in its error body, a log, the attempt observer and the learn observer.
func TestInvariant02_KeysNeverInErrorsOrEvents(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	var logs bytes.Buffer
	var obs attempts
	for _, cfg := range formats(srv) {
		c := newClient(t, cfg, WithAttemptObserver(obs.observe), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 401, Message: "Incorrect API key provided: " + testKey}})
		_, err := c.Chat(ctxT(t), hello())
		var api *llm.APIError
		if !errors.As(err, &api) || api.Status != 401 || api.Retryable {
			t.Fatalf("%s: got %v, want a final 401", cfg.ID, err)
		}
		srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 401, Message: "bad key " + testKey}})
		s, _ := c.Stream(ctxT(t), hello())
		_, serr := s.Result()
		for _, e := range []error{err, serr} {
			if e == nil || strings.Contains(e.Error(), testKey) {
				t.Fatalf("%s: error leaks the key or is nil: %v", cfg.ID, e)
			}
		}
	}
	for _, ev := range obs.all() {
		if ev.Err != nil && strings.Contains(ev.Err.Error(), testKey) {
			t.Fatalf("attempt event leaks the key: %v", ev.Err)
		}
	}
	if strings.Contains(logs.String(), testKey) {
		t.Fatal("log leaks the key")
	}
	// The server did receive the key in the right header, and only there.
	for _, r := range srv.Requests() {
		if strings.Contains(string(r.Body), testKey) {
			t.Fatal("key sent in a body")
		}
	}
}

// TestInvariant03_StreamRetriesOnlyBeforeFirstEvent covers the four parts of
// invariant 3: retry before the first event, partial output plus error after
// it, premature close as an error, and no goroutine outliving its stream
// (goleak in TestMain).
func TestInvariant03_StreamRetriesOnlyBeforeFirstEvent(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	for _, cfg := range formats(srv) {
		t.Run(cfg.ID, func(t *testing.T) {
			c := newClient(t, cfg)
			// Before the first event: a 503, a reset and a premature close are retried.
			before := srv.Count()
			srv.Push(
				llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 503}},
				llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultResetBeforeHeaders}},
				llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultPrematureClose, After: 0}},
				llmtest.Step{Reply: &llmtest.Reply{Text: "finally here"}},
			)
			s, _ := c.Stream(ctxT(t), hello())
			res, err := s.Result()
			if err != nil || res.Content != "finally here" || res.Meta.Attempts != 4 || srv.Count()-before != 4 {
				t.Fatalf("retry before first event: %+v %v (requests %d)", res, err, srv.Count()-before)
			}

			// After the first event: never retried, partial kept.
			for _, kind := range []llmtest.FaultKind{llmtest.FaultResetMidStream, llmtest.FaultPrematureClose, llmtest.FaultInStreamError, llmtest.FaultMalformedLine} {
				before := srv.Count()
				srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: kind, After: 3, Reply: &llmtest.Reply{Deltas: []string{"one ", "two ", "three ", "four ", "five"}}}})
				s, _ := c.Stream(ctxT(t), hello())
				evs, err := collect(s)
				var se *llm.StreamError
				if !errors.As(err, &se) || se.Partial == nil {
					t.Fatalf("fault %v: got %v, want StreamError with partial", kind, err)
				}
				if got := textOf(evs); got != "one two three " || se.Partial.Content != got {
					t.Fatalf("fault %v: events %q, partial %q", kind, got, se.Partial.Content)
				}
				if kind == llmtest.FaultPrematureClose && !errors.Is(err, llm.ErrPrematureClose) {
					t.Fatalf("premature close not typed: %v", err)
				}
				var te *llm.TransportError
				var de *llm.DecodeError
				if kind == llmtest.FaultResetMidStream && (!errors.As(err, &te) || errors.As(err, &de)) {
					t.Fatalf("a reset mid-stream is a transport error, not a decode error: %v", err)
				}
				if n := srv.Count() - before; n != 1 {
					t.Fatalf("fault %v: %d requests, want 1 (no retry after output)", kind, n)
				}
			}
		})
	}
}

// TestInvariant04_UnknownRoleRejected: rejected with a typed error naming the
// field, before anything is sent.
func TestInvariant04_UnknownRoleRejected(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	bad := []struct {
		req   *llm.ChatRequest
		field string
	}{
		{&llm.ChatRequest{Model: "m", Messages: []llm.Message{{Role: "wizard", Content: "x"}}}, "messages[0].role"},
		{&llm.ChatRequest{Model: "m"}, "messages"},
		{&llm.ChatRequest{Messages: []llm.Message{llm.UserText("x")}}, "model"},
		{&llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("x")}, Tools: []llm.Tool{{Name: "t", Parameters: json.RawMessage(`{"type":"string"}`)}}}, "tools[0].parameters.type"},
		{&llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("x")}, Tools: []llm.Tool{{Name: "t", Parameters: json.RawMessage(`{not json`)}}}, "tools[0].parameters"},
		{&llm.ChatRequest{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.ImagePart("image/png", make([]byte, llm.MaxPartBytes+1))}}}}, "messages[0].parts[0]"},
		{&llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("x")}, Headers: map[string]string{"authorization": "Bearer x"}}, "headers"},
		{&llm.ChatRequest{Model: "m", Messages: []llm.Message{{Role: llm.RoleTool, Content: "r"}}}, "messages[0].tool_call_id"},
		{&llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("x")}, ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: "nope"}}, "tool_choice.name"},
	}
	for _, cfg := range formats(srv) {
		c := newClient(t, cfg)
		for _, b := range bad {
			_, err := c.Chat(ctxT(t), b.req)
			var ce *llm.ConfigError
			if !errors.As(err, &ce) || ce.Field != b.field {
				t.Errorf("%s chat: got %v, want ConfigError on %s", cfg.ID, err, b.field)
			}
			_, err = c.Stream(ctxT(t), b.req)
			if !errors.As(err, &ce) || ce.Field != b.field {
				t.Errorf("%s stream: got %v, want ConfigError on %s", cfg.ID, err, b.field)
			}
		}
	}
	if srv.Count() != 0 {
		t.Fatalf("%d requests reached the server", srv.Count())
	}
}

// TestInvariant06_LearnOnceSharedMonotonic: learn-once state belongs to
// the endpoint (provider id and base URL), not to a key. A rejection
// teaches the endpoint's Learned once; every client sharing it benefits,
// whichever key it holds (the runtime gives every credential of an
// endpoint the same Learned; a cluster carries it between nodes); a plain
// client given no Learned keeps its own.
func TestInvariant06_LearnOnceSharedMonotonic(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	cfg := formats(srv)[0]
	otherKey := cfg
	otherKey.APIKey = "sk-another-key-of-the-endpoint"
	shared := &Learned{}
	var learned []LearnEvent
	a := newClient(t, cfg, WithLearned(shared), WithLearnObserver(func(e LearnEvent) { learned = append(learned, e) }))
	b := newClient(t, otherKey, WithLearned(shared))
	other := newClient(t, cfg)

	srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 400, Message: "Unrecognized request argument supplied: stream_options"}})
	s, _ := a.Stream(ctxT(t), hello())
	if res, err := s.Result(); err != nil || res.Content == "" {
		t.Fatalf("learn retry failed: %v", err)
	}
	reqs := srv.Requests()
	if n := len(reqs); n != 2 || !bytes.Contains(reqs[0].Body, []byte("stream_options")) || bytes.Contains(reqs[1].Body, []byte("stream_options")) {
		t.Fatalf("want the retry without stream_options; got %d requests", n)
	}
	if !shared.Has(LearnNoStreamOptions) || len(learned) != 1 || learned[0].Flag != LearnNoStreamOptions {
		t.Fatalf("learned = %v, events %v", shared.Flags(), learned)
	}
	s, _ = b.Stream(ctxT(t), hello())
	if _, err := s.Result(); err != nil {
		t.Fatal(err)
	}
	s, _ = other.Stream(ctxT(t), hello())
	if _, err := s.Result(); err != nil {
		t.Fatal(err)
	}
	reqs = srv.Requests()
	if bytes.Contains(reqs[2].Body, []byte("stream_options")) {
		t.Fatal("another key of the endpoint, sharing its state, sent stream_options again")
	}
	if !bytes.Contains(reqs[3].Body, []byte("stream_options")) {
		t.Fatal("a client with state of its own learned from another's")
	}
	// A rejection of a parameter the request did not carry teaches nothing.
	srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 400, Message: "Unsupported parameter: 'temperature' is not supported with this model."}})
	if _, err := a.Chat(ctxT(t), hello()); err == nil {
		t.Fatal("want the 400")
	}
	if shared.Has(LearnNoTemperature) {
		t.Fatal("learned from a parameter that was not sent")
	}
	// With the parameter: learned, retried without it, and never unlearned.
	req := hello()
	req.Temperature = llm.Ptr(0.2)
	srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 400, Message: "Unsupported parameter: 'temperature' is not supported with this model."}})
	if _, err := a.Chat(ctxT(t), req); err != nil {
		t.Fatal(err)
	}
	last := srv.Requests()[len(srv.Requests())-1]
	if bytes.Contains(last.Body, []byte("temperature")) || !shared.Has(LearnNoTemperature) || !shared.Has(LearnNoStreamOptions) {
		t.Fatalf("flags %v; last body %s", shared.Flags(), last.Body)
	}
}

// TestInvariant10_WholeCallBudget: retries and their waits share one budget,
// buffered and streaming; a retry hint beyond the budget ends the call with
// the provider's error at once.
func TestInvariant10_WholeCallBudget(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	cfg := formats(srv)[0]
	budget := 300 * time.Millisecond
	c := newClient(t, cfg, WithTimeout(budget), WithRetryPolicy(RetryPolicy{MaxAttempts: 100, BaseDelay: 50 * time.Millisecond, MaxDelay: 50 * time.Millisecond}))
	for i := 0; i < 50; i++ {
		srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 503}})
	}
	start := time.Now()
	_, err := c.Chat(ctxT(t), hello())
	elapsed := time.Since(start)
	var api *llm.APIError
	if !errors.As(err, &api) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
	if elapsed > budget+time.Second {
		t.Fatalf("call took %v with a %v budget", elapsed, budget)
	}
	srv2 := llmtest.NewServer()
	defer srv2.Close()
	cfg.BaseURL = srv2.OpenAIBaseURL()
	c = newClient(t, cfg, WithTimeout(budget))
	srv2.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 429, RetryAfter: 30 * time.Second}})
	start = time.Now()
	_, err = c.Chat(ctxT(t), hello())
	var rl *llm.RateLimitError
	if !errors.As(err, &rl) || rl.RetryAfter < 29*time.Second || time.Since(start) > budget {
		t.Fatalf("retry-after beyond the budget: %v after %v", err, time.Since(start))
	}
	// A stream that stalls is cut by the budget, not left hanging.
	srv2.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStall, After: 1, Stall: 10 * time.Second, Reply: &llmtest.Reply{Deltas: []string{"a", "b"}}}})
	sc := newClient(t, cfg, WithTimeout(budget), WithIdleTimeout(0))
	start = time.Now()
	s, _ := sc.Stream(ctxT(t), hello())
	_, err = s.Result()
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > budget+time.Second {
		t.Fatalf("stalled stream: %v after %v", err, time.Since(start))
	}
}

func TestIdleTimeout(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	cfg := formats(srv)[1]
	c := newClient(t, cfg, WithIdleTimeout(150*time.Millisecond))
	// A stall before any event is retried.
	srv.Push(
		llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStall, After: 0, Stall: 5 * time.Second, Reply: &llmtest.Reply{Text: "x"}}},
		llmtest.Step{Reply: &llmtest.Reply{Text: "after the stall"}},
	)
	s, _ := c.Stream(ctxT(t), hello())
	if res, err := s.Result(); err != nil || res.Content != "after the stall" {
		t.Fatalf("got %v %v", res, err)
	}
	// A stall after output ends the stream with the partial result.
	srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStall, After: 2, Stall: 5 * time.Second, Reply: &llmtest.Reply{Deltas: []string{"a", "b", "c"}}}})
	s, _ = c.Stream(ctxT(t), hello())
	_, err := s.Result()
	var se *llm.StreamError
	if !errors.Is(err, llm.ErrIdleTimeout) || !errors.As(err, &se) || se.Partial.Content != "ab" {
		t.Fatalf("got %v", err)
	}
}

func TestNonSSE200LearnsBufferedWithoutSecondRequest(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	for _, cfg := range formats(srv) {
		c := newClient(t, cfg)
		before := srv.Count()
		srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultNonSSE200, Reply: &llmtest.Reply{Text: "buffered answer"}}})
		s, _ := c.Stream(ctxT(t), hello())
		evs, err := collect(s)
		res, _ := s.Result()
		if err != nil || textOf(evs) != "buffered answer" || !res.Meta.Buffered || srv.Count()-before != 1 {
			t.Fatalf("%s: %v %q buffered=%v requests=%d", cfg.ID, err, textOf(evs), res.Meta.Buffered, srv.Count()-before)
		}
		if !c.Learned().Has(LearnBuffered) {
			t.Fatalf("%s: did not learn buffered mode", cfg.ID)
		}
		srv.Push(llmtest.Step{Reply: &llmtest.Reply{Text: "next"}})
		s, _ = c.Stream(ctxT(t), hello())
		if res, err := s.Result(); err != nil || res.Content != "next" {
			t.Fatalf("%s: %v", cfg.ID, err)
		}
		if last := srv.Requests()[srv.Count()-1]; last.Stream {
			t.Fatalf("%s: a learned-buffered stream still asked for SSE", cfg.ID)
		}
	}
}

func TestRateLimitLadder(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	var obs attempts
	for _, cfg := range formats(srv) {
		c := newClient(t, cfg, WithAttemptObserver(obs.observe))
		srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 429, RetryAfter: 20 * time.Millisecond}})
		if _, err := c.Chat(ctxT(t), hello()); err != nil {
			t.Fatalf("%s: %v", cfg.ID, err)
		}
		// Exhausted quota is final.
		before := srv.Count()
		srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 429, Code: "insufficient_quota", Type: "insufficient_quota", Message: "You exceeded your current quota, please check your plan and billing details."}})
		_, err := c.Chat(ctxT(t), hello())
		var rl *llm.RateLimitError
		if !errors.As(err, &rl) || !rl.QuotaExhausted || srv.Count()-before != 1 || !errors.Is(err, llm.ErrRateLimited) {
			t.Fatalf("%s quota: %v (requests %d)", cfg.ID, err, srv.Count()-before)
		}
		// Persistent 429s end as a RateLimitError with the attempt count.
		for i := 0; i < fastRetry.MaxAttempts; i++ {
			srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 429, RetryAfter: time.Millisecond}})
		}
		_, err = c.Chat(ctxT(t), hello())
		if !errors.As(err, &rl) || rl.Attempts != fastRetry.MaxAttempts || rl.QuotaExhausted {
			t.Fatalf("%s persistent: %v", cfg.ID, err)
		}
	}
	var sawWait bool
	for _, ev := range obs.all() {
		if ev.ErrClass == "rate_limit" && ev.Status == 429 && ev.Wait >= 20*time.Millisecond && ev.Wait < time.Second {
			sawWait = true
		}
	}
	if !sawWait {
		t.Fatal("attempt observer never saw the retry-after wait")
	}
}

func TestResponseMetaRateLimitHeaders(t *testing.T) {
	srv := llmtest.NewServer(llmtest.WithRateLimit(llmtest.RateLimit{Requests: 100, Tokens: 100000, Window: time.Minute}))
	defer srv.Close()
	for _, cfg := range formats(srv)[:2] {
		c := newClient(t, cfg)
		res, err := c.Chat(ctxT(t), hello())
		if err != nil {
			t.Fatal(err)
		}
		rl := res.Meta.RateLimit
		if !rl.HasRequests || rl.LimitRequests != 100 || rl.RemainingRequests >= 100 || !rl.HasTokens || rl.LimitTokens != 100000 {
			t.Fatalf("%s: %+v", cfg.ID, rl)
		}
	}
}

func TestCrossHostRedirectRefused(t *testing.T) {
	var leaked atomic.Bool
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Authorization")+r.Header.Get("X-Api-Key")+r.Header.Get("X-Goog-Api-Key"), testKey) {
			leaked.Store(true)
		}
	}))
	defer other.Close()
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, strings.Replace(other.URL, "127.0.0.1", "localhost", 1)+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer redirect.Close()
	for _, f := range []Format{FormatOpenAI, FormatAnthropic, FormatGemini} {
		c := newClient(t, Config{ID: "x", Format: f, BaseURL: redirect.URL, APIKey: testKey}, WithRetryPolicy(RetryPolicy{MaxAttempts: 1}))
		_, err := c.Chat(ctxT(t), hello())
		if err == nil || !strings.Contains(err.Error(), "redirect") {
			t.Fatalf("%s: got %v", f, err)
		}
	}
	if leaked.Load() {
		t.Fatal("credentials followed a cross-host redirect")
	}
	c := newClient(t, Config{ID: "x", Format: FormatOpenAI, BaseURL: redirect.URL, APIKey: testKey})
	c.hc.CloseIdleConnections()
}

func TestStreamCloseReleasesEverything(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	for _, cfg := range formats(srv) {
		c := newClient(t, cfg)
		deltas := make([]string, 200)
		for i := range deltas {
			deltas[i] = "tok "
		}
		srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultSlowDrip, Stall: 4 * time.Second, Reply: &llmtest.Reply{Deltas: deltas}}})
		s, _ := c.Stream(ctxT(t), hello())
		n := 0
		for ev, err := range s.All() {
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type == llm.EventText {
				n++
			}
			if n == 3 {
				break // breaking out closes the stream
			}
		}
		if err := s.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: closed stream ended with %v", cfg.ID, err)
		}
	}
	defaultHTTPClient.CloseIdleConnections()
	deadline := time.Now().Add(5 * time.Second)
	for srv.OpenConns() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := srv.OpenConns(); n != 0 {
		t.Fatalf("%d connections left open after Close", n)
	}
}

func TestDecodeFaults(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	for _, cfg := range formats(srv) {
		c := newClient(t, cfg)
		srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultOversizeLine}})
		s, _ := c.Stream(ctxT(t), hello())
		_, err := s.Result()
		var de *llm.DecodeError
		if !errors.As(err, &de) {
			t.Errorf("%s oversize line: %v", cfg.ID, err)
		}
		// A buffered body cut short is never taken for an answer: it is
		// retried, and the next answer serves.
		before := srv.Count()
		srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultTruncatedJSON, Reply: &llmtest.Reply{Text: "abc"}}})
		res, err := c.Chat(ctxT(t), hello())
		if err != nil || res.Content == "abc" || srv.Count()-before != 2 {
			t.Errorf("%s truncated JSON: %v %v after %d requests, want the retried answer", cfg.ID, res, err, srv.Count()-before)
		}
	}
}
