package providers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

// responsesOnly is OpenAI's answer when a responses-only model is called on
// Chat Completions (HTTP 404, type invalid_request_error, param model).
const responsesOnly = "This model is only supported in v1/responses and not in v1/chat/completions."

// responsesConfig is an OpenAI credential that marks model as served by the
// Responses API.
func responsesConfig(srv *llmtest.Server, models ...string) Config {
	cfg := formats(srv)[0]
	cfg.Models = map[string]ModelCaps{}
	for _, m := range models {
		cfg.Models[m] = ModelCaps{Responses: true}
	}
	return cfg
}

func chatReq(model string) *llm.ChatRequest {
	return &llm.ChatRequest{Model: model, Messages: []llm.Message{llm.UserText("hello")}}
}

// paths lists the paths of the server's requests from index from on.
func paths(srv *llmtest.Server, from int) []string {
	var out []string
	for _, r := range srv.Requests()[from:] {
		out = append(out, r.Path)
	}
	return out
}

func TestResponsesRouteByCapability(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	c := newClient(t, responsesConfig(srv, "gpt-pro"))
	calls := []llm.ToolCall{
		{ID: "call_1", Name: "weather", Arguments: `{"city":"Florence"}`},
		{ID: "call_2", Name: "time", Arguments: `{"tz":"Europe/Rome"}`},
	}
	usage := &llm.Usage{PromptTokens: 30, CacheReadTokens: 70, CompletionTokens: 25, ReasoningTokens: 15}

	srv.Push(llmtest.Step{Reply: &llmtest.Reply{Text: "Hello there.", Reasoning: "Greet them.", Signature: "ENC-1", Usage: usage}})
	res, err := c.Chat(ctxT(t), chatReq("gpt-pro"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Content != "Hello there." || res.Reasoning != "Greet them." || res.FinishReason != llm.FinishStop || res.Usage != *usage {
		t.Fatalf("buffered = %+v", res)
	}
	if len(res.ThinkingBlocks) != 1 || res.ThinkingBlocks[0].Data != "ENC-1" || res.ThinkingBlocks[0].Format != "openai-responses" ||
		res.Meta.RequestID == "" || res.Meta.Provider != "openai" {
		t.Fatalf("blocks %+v meta %+v", res.ThinkingBlocks, res.Meta)
	}

	srv.Push(llmtest.Step{Reply: &llmtest.Reply{Text: "Let me check.", Reasoning: "Need tools.", ToolCalls: calls}})
	s, err := c.Stream(ctxT(t), chatReq("gpt-pro"))
	if err != nil {
		t.Fatal(err)
	}
	evs, err := collect(s)
	if err != nil {
		t.Fatal(err)
	}
	res, _ = s.Result()
	checkToolResult(t, res, evs, calls)
	if textOf(evs) != "Let me check." || res.Content != "Let me check." || concat(evs, llm.EventReasoning) != "Need tools." || countType(evs, llm.EventText) < 2 {
		t.Fatalf("stream %+v", res)
	}
	// The reasoning item is recorded with the call it preceded, for replay.
	if len(res.ThinkingBlocks) != 1 || res.ThinkingBlocks[0].Data == "" || res.ThinkingBlocks[0].Signature != "message:msg_llmtest_2" {
		t.Fatalf("blocks %+v", res.ThinkingBlocks)
	}

	// Another model, even one whose name looks like a Responses model, stays
	// on Chat Completions: the route is never chosen by name.
	for _, model := range []string{"gpt-5-pro", "o3-pro", "gpt-pro-2"} {
		if _, err := c.Chat(ctxT(t), chatReq(model)); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"/v1/responses", "/v1/responses", "/v1/chat/completions", "/v1/chat/completions", "/v1/chat/completions"}
	if got := paths(srv, 0); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("paths %v", got)
	}
	// The Responses body is stateless and streamed when asked.
	r := srv.Requests()[1]
	var body map[string]any
	if err := json.Unmarshal(r.Body, &body); err != nil || body["store"] != false || body["stream"] != true || body["input"] == nil || body["messages"] != nil {
		t.Fatalf("body %s", r.Body)
	}

	// A caps-marked model on another format is not diverted.
	cfg := formats(srv)[1]
	cfg.Models = map[string]ModelCaps{"claude": {Responses: true}}
	before := srv.Count()
	if _, err := newClient(t, cfg).Chat(ctxT(t), chatReq("claude")); err != nil {
		t.Fatal(err)
	}
	if got := paths(srv, before); len(got) != 1 || got[0] != "/v1/messages" {
		t.Fatalf("anthropic went to %v", got)
	}
}

func TestResponsesReplayThroughClient(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	c := newClient(t, responsesConfig(srv, "gpt-pro"))
	srv.Push(llmtest.Step{Reply: &llmtest.Reply{Reasoning: "Look it up.", Signature: "ENC-42", ToolCalls: []llm.ToolCall{{ID: "call_7", Name: "lookup", Arguments: `{"q":"x"}`}}}})
	req := chatReq("gpt-pro")
	req.Tools = []llm.Tool{{Name: "lookup"}}
	s, _ := c.Stream(ctxT(t), req)
	res, err := s.Result()
	if err != nil {
		t.Fatal(err)
	}
	req.Messages = append(req.Messages, res.Message(), llm.ToolResult("call_7", "found", false))
	if _, err := c.Chat(ctxT(t), req); err != nil {
		t.Fatal(err)
	}
	var body struct {
		Input []map[string]any `json:"input"`
	}
	if err := json.Unmarshal(srv.Requests()[1].Body, &body); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, it := range body.Input {
		k, _ := it["type"].(string)
		kinds = append(kinds, k)
	}
	if strings.Join(kinds, ",") != ",reasoning,function_call,function_call_output" || body.Input[1]["encrypted_content"] != "ENC-42" || body.Input[2]["call_id"] != "call_7" {
		t.Fatalf("replayed input %s", srv.Requests()[1].Body)
	}
}

func TestResponsesLearnOnce(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	cfg := responsesConfig(srv) // no capability declared
	shared := &Learned{}
	var mu sync.Mutex
	var events []LearnEvent
	a := newClient(t, cfg, WithLearned(shared), WithLearnObserver(func(e LearnEvent) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}))
	b := newClient(t, cfg, WithLearned(shared))
	other := newClient(t, cfg) // another credential

	// Buffered: the 404 teaches the route; the call is retried at once on it.
	srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 404, Message: responsesOnly}},
		llmtest.Step{Reply: &llmtest.Reply{Text: "from responses"}})
	start := time.Now()
	res, err := a.Chat(ctxT(t), chatReq("gpt-pro"))
	if err != nil || res.Content != "from responses" || res.Meta.Attempts != 2 || time.Since(start) > time.Second {
		t.Fatalf("learn retry: %+v %v", res, err)
	}
	if got := strings.Join(paths(srv, 0), " "); got != "/v1/chat/completions /v1/responses" {
		t.Fatalf("paths %s", got)
	}
	if !shared.HasModel(LearnResponsesAPI, "gpt-pro") || !shared.Has(LearnResponsesAPI) || shared.HasModel(LearnResponsesAPI, "gpt-mini") {
		t.Fatalf("learned %v %v", shared.Flags(), shared.Models(LearnResponsesAPI))
	}
	if len(events) != 1 || events[0].Flag != LearnResponsesAPI || events[0].Model != "gpt-pro" || events[0].Reason != responsesOnly {
		t.Fatalf("events %+v", events)
	}

	// Later requests of that model go there directly, streamed too, from
	// every client sharing the state; other models stay put; another
	// credential has to learn for itself.
	n := srv.Count()
	if _, err := a.Chat(ctxT(t), chatReq("gpt-pro")); err != nil {
		t.Fatal(err)
	}
	s, _ := b.Stream(ctxT(t), chatReq("gpt-pro"))
	if res, err := s.Result(); err != nil || res.Content == "" {
		t.Fatalf("stream after learning: %v", err)
	}
	if _, err := b.Chat(ctxT(t), chatReq("gpt-mini")); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Chat(ctxT(t), chatReq("gpt-pro")); err != nil {
		t.Fatal(err)
	}
	want := "/v1/responses /v1/responses /v1/chat/completions /v1/chat/completions"
	if got := strings.Join(paths(srv, n), " "); got != want {
		t.Fatalf("paths %s, want %s", got, want)
	}
	if len(events) != 1 {
		t.Fatalf("learned twice: %+v", events)
	}

	// Streaming, with the 400 wording of a tool-and-reasoning rejection: the
	// stream is retried on /responses before any event reached the caller.
	n = srv.Count()
	srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 400,
		Message: "Function tools with reasoning_effort are not supported for gpt-tools in /v1/chat/completions. Please use /v1/responses instead."}})
	s, _ = a.Stream(ctxT(t), chatReq("gpt-tools"))
	evs, err := collect(s)
	if err != nil || textOf(evs) != "simulated reply" {
		t.Fatalf("stream learn: %v", err)
	}
	if got := strings.Join(paths(srv, n), " "); got != "/v1/chat/completions /v1/responses" || !shared.HasModel(LearnResponsesAPI, "gpt-tools") {
		t.Fatalf("paths %s", got)
	}
	if got := shared.Models(LearnResponsesAPI); strings.Join(got, ",") != "gpt-pro,gpt-tools" {
		t.Fatalf("models %v", got)
	}

	// Unrelated 400s and 404s teach nothing; the old /completions hint is
	// not the Responses API.
	for _, msg := range []string{
		"The model `gpt-nope` does not exist or you do not have access to it.",
		"This is not a chat model and thus not supported in the v1/chat/completions endpoint. Did you mean to use v1/completions?",
	} {
		srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 404, Message: msg}})
		if _, err := a.Chat(ctxT(t), chatReq("gpt-nope")); err == nil {
			t.Fatal("want the 404")
		}
	}
	if shared.HasModel(LearnResponsesAPI, "gpt-nope") {
		t.Fatal("learned from an unrelated error")
	}

	// A caps-routed request that still hears "use /v1/responses" is not
	// looped: it was already there.
	capped := newClient(t, responsesConfig(srv, "gpt-cap"), WithLearned(shared))
	n = srv.Count()
	srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 404, Message: responsesOnly}})
	if _, err := capped.Chat(ctxT(t), chatReq("gpt-cap")); err == nil || srv.Count()-n != 1 {
		t.Fatalf("caps-routed rejection: %v after %d requests", err, srv.Count()-n)
	}
}

func TestResponsesLearnNoEncryptedReasoning(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	c := newClient(t, responsesConfig(srv, "gpt-4o-ish"))
	srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 400, Message: "Encrypted content is not supported with this model."}})
	if _, err := c.Chat(ctxT(t), chatReq("gpt-4o-ish")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Chat(ctxT(t), chatReq("gpt-4o-ish")); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 || !bytes.Contains(reqs[0].Body, []byte("reasoning.encrypted_content")) ||
		bytes.Contains(reqs[1].Body, []byte("reasoning.encrypted_content")) || bytes.Contains(reqs[2].Body, []byte("reasoning.encrypted_content")) {
		t.Fatalf("%d requests", len(reqs))
	}
	if !c.Learned().HasModel(LearnNoEncryptedReasoning, "gpt-4o-ish") || c.Learned().HasModel(LearnNoEncryptedReasoning, "gpt-5") {
		t.Fatal("not learned per model")
	}
	// An encrypted item that could not be verified is another problem.
	srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 400, Code: "invalid_encrypted_content",
		Message: "The encrypted content gAAA could not be verified."}})
	c2 := newClient(t, responsesConfig(srv, "gpt-5"))
	if _, err := c2.Chat(ctxT(t), chatReq("gpt-5")); err == nil || c2.Learned().Has(LearnNoEncryptedReasoning) {
		t.Fatalf("learned from a verification failure: %v", err)
	}
}

// TestResponsesFaults runs the stream invariants (3, 10, 2) on the
// Responses route.
func TestResponsesFaults(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	cfg := responsesConfig(srv, "test-model")
	c := newClient(t, cfg)

	// Before the first event: a 503, a reset and a premature close are retried.
	srv.Push(
		llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 503}},
		llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultResetBeforeHeaders}},
		llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultPrematureClose, After: 0}},
		llmtest.Step{Reply: &llmtest.Reply{Text: "finally here"}},
	)
	s, _ := c.Stream(ctxT(t), hello())
	res, err := s.Result()
	if err != nil || res.Content != "finally here" || res.Meta.Attempts != 4 || srv.Count() != 4 {
		t.Fatalf("retry before first event: %+v %v (requests %d)", res, err, srv.Count())
	}
	for _, r := range srv.Requests() {
		if r.Path != "/v1/responses" {
			t.Fatalf("path %s", r.Path)
		}
	}

	// After the first event: never retried, the partial kept.
	for _, kind := range []llmtest.FaultKind{llmtest.FaultResetMidStream, llmtest.FaultPrematureClose, llmtest.FaultInStreamError, llmtest.FaultMalformedLine, llmtest.FaultTruncatedJSON} {
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
		var de *llm.DecodeError
		if (kind == llmtest.FaultMalformedLine || kind == llmtest.FaultTruncatedJSON) && !errors.As(err, &de) {
			t.Fatalf("fault %v: %v, want a DecodeError", kind, err)
		}
		if n := srv.Count() - before; n != 1 {
			t.Fatalf("fault %v: %d requests, want 1", kind, n)
		}
	}

	// In-stream errors before any event: a server error is retried, an
	// exhausted quota is final and says so.
	before := srv.Count()
	srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultInStreamError, After: 0}}, llmtest.Step{Reply: &llmtest.Reply{Text: "ok"}})
	s, _ = c.Stream(ctxT(t), hello())
	if res, err := s.Result(); err != nil || res.Content != "ok" || srv.Count()-before != 2 {
		t.Fatalf("server_error in stream: %v (%d requests)", err, srv.Count()-before)
	}
	before = srv.Count()
	srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultInStreamError, After: 0, Code: "insufficient_quota"}})
	s, _ = c.Stream(ctxT(t), hello())
	_, err = s.Result()
	var api *llm.APIError
	if !errors.As(err, &api) || api.Retryable || api.Code != "insufficient_quota" || api.Provider != "openai" || srv.Count()-before != 1 {
		t.Fatalf("quota in stream: %#v (%d requests)", err, srv.Count()-before)
	}

	// The decode faults of the buffered route.
	srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultOversizeLine}})
	s, _ = c.Stream(ctxT(t), hello())
	_, err = s.Result()
	var de *llm.DecodeError
	if !errors.As(err, &de) {
		t.Fatalf("oversize line: %v", err)
	}
	before = srv.Count()
	srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultTruncatedJSON, Reply: &llmtest.Reply{Text: "abc"}}})
	if res, err := c.Chat(ctxT(t), hello()); err != nil || res.Content == "abc" || srv.Count()-before != 2 {
		t.Fatalf("truncated JSON: %v %v after %d requests, want the retried answer", res, err, srv.Count()-before)
	}

	// A non-SSE 200 is parsed as the buffered answer and learns buffered mode.
	before = srv.Count()
	srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultNonSSE200, Reply: &llmtest.Reply{Text: "buffered answer"}}})
	s, _ = c.Stream(ctxT(t), hello())
	evs, err := collect(s)
	res, _ = s.Result()
	if err != nil || textOf(evs) != "buffered answer" || !res.Meta.Buffered || srv.Count()-before != 1 || !c.Learned().Has(LearnBuffered) {
		t.Fatalf("non-SSE 200: %v %q", err, textOf(evs))
	}
}

func TestResponsesBudgetAndKeys(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	cfg := responsesConfig(srv, "test-model")
	budget := 300 * time.Millisecond
	c := newClient(t, cfg, WithTimeout(budget), WithRetryPolicy(RetryPolicy{MaxAttempts: 100, BaseDelay: 50 * time.Millisecond, MaxDelay: 50 * time.Millisecond}))
	for i := 0; i < 50; i++ {
		srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 503}})
	}
	start := time.Now()
	_, err := c.Chat(ctxT(t), hello())
	if err == nil || time.Since(start) > budget+time.Second {
		t.Fatalf("budget: %v after %v", err, time.Since(start))
	}
	srv.Close()

	srv2 := llmtest.NewServer()
	defer srv2.Close()
	cfg = responsesConfig(srv2, "test-model")
	c = newClient(t, cfg)
	// A stream that stalls after output is cut by the budget.
	sc := newClient(t, cfg, WithTimeout(budget), WithIdleTimeout(0))
	srv2.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStall, After: 1, Stall: 10 * time.Second, Reply: &llmtest.Reply{Deltas: []string{"a", "b"}}}})
	start = time.Now()
	s, _ := sc.Stream(ctxT(t), hello())
	_, err = s.Result()
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > budget+time.Second {
		t.Fatalf("stalled stream: %v after %v", err, time.Since(start))
	}

	// Keys never reach an error: in a status body, or inside the stream.
	srv2.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 401, Message: "Incorrect API key provided: " + testKey}})
	_, err = c.Chat(ctxT(t), hello())
	srv2.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultInStreamError, After: 1, Code: "invalid_api_key", Message: "bad key " + testKey}})
	s, _ = c.Stream(ctxT(t), hello())
	_, serr := s.Result()
	for _, e := range []error{err, serr} {
		if e == nil || strings.Contains(e.Error(), testKey) {
			t.Fatalf("error leaks the key or is nil: %v", e)
		}
	}
	var api *llm.APIError
	if !errors.As(err, &api) || api.Status != 401 || api.Retryable {
		t.Fatalf("401: %v", err)
	}
}
