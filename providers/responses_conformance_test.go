package providers

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/internal/testkit/fixture"
	"github.com/chorusrt/chorus/llm"
)

// TestConformanceResponses replays every non-synthetic recorded exchange of
// the OpenAI Responses API through a Client whose configuration marks the
// recorded model as a Responses model, and checks the canonical result
// against facts read independently from the recording: the text equals the
// concatenated deltas, function-call arguments are valid JSON and ToolIndex
// is the call's position, the finish reason is the canonical mapping of the
// recorded status, the token counts add up to the recorded ones, every
// encrypted reasoning item is captured, and rate-limit headers are parsed
// where present. Error answers must come back as an *llm.APIError with the
// recorded status (or, inside a 200, status 0 and the recorded code).
func TestConformanceResponses(t *testing.T) {
	dir := fixture.Require(t)
	entries, err := fixture.LoadIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	var replayed, errorsReplayed, streams int
	skipped := map[string][]string{}
	for _, e := range entries {
		payloadOnly := len(e.Endpoints) == 0 && strings.Contains(e.File, "/src/responses/__fixtures__/")
		hit := payloadOnly
		for _, ep := range e.Endpoints {
			hit = hit || strings.Contains(ep, "/responses")
		}
		if !hit {
			continue
		}
		if e.Synthetic() {
			skipped["synthetic"] = append(skipped["synthetic"], e.File)
			continue
		}
		exs, err := fixture.Load(dir, e)
		if err != nil {
			t.Errorf("%s: %v", e.File, err)
			continue
		}
		for i, ex := range exs {
			name := fmt.Sprintf("%s#%d", e.File, i)
			path := ""
			if u, err := url.Parse(ex.Request.URL); err == nil {
				path = u.Path
			}
			switch {
			case payloadOnly:
			case strings.HasSuffix(path, "/responses/input_tokens"):
				skipped["token counting (/responses/input_tokens, not a chat call)"] = append(skipped["token counting (/responses/input_tokens, not a chat call)"], name)
				continue
			case !strings.HasSuffix(path, "/responses"):
				skipped["not a Responses call (replayed by TestConformance)"] = append(skipped["not a Responses call (replayed by TestConformance)"], name)
				continue
			}
			if ex.Response.Status == 0 || len(ex.Response.Body) == 0 {
				skipped["no recorded response body"] = append(skipped["no recorded response body"], name)
				continue
			}
			t.Run(name, func(t *testing.T) {
				if replayResponses(t, e, ex) {
					errorsReplayed++
				}
			})
			replayed++
			if ex.Response.Stream {
				streams++
			}
		}
	}
	var reasons []string
	for r := range skipped {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	t.Logf("conformance: responses replayed %d (%d streamed, %d error answers)", replayed, streams, errorsReplayed)
	for _, r := range reasons {
		t.Logf("conformance: responses skipped %d: %s", len(skipped[r]), r)
		for _, f := range skipped[r] {
			t.Logf("conformance:   - %s", f)
		}
	}
	if replayed < 50 || streams < 15 {
		t.Fatalf("only %d exchanges (%d streams) replayed; the corpus has about 58 Responses exchanges", replayed, streams)
	}
}

// replayResponses replays one exchange on the Responses route and checks
// it; it reports whether the exchange was an error answer.
func replayResponses(t *testing.T, e fixture.Entry, ex fixture.Exchange) bool {
	var rb struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(ex.Request.Body, &rb)
	model := rb.Model
	if model == "" {
		model = "recorded-model"
	}
	srv := fixture.NewServer([]fixture.Exchange{ex})
	defer srv.Close()
	cfg := Config{ID: e.Provider, Format: FormatOpenAI, BaseURL: srv.URL + "/v1", APIKey: testKey,
		Models: map[string]ModelCaps{model: {Responses: true}}}
	c := newClient(t, cfg, WithRetryPolicy(RetryPolicy{MaxAttempts: 1}))
	defer c.hc.CloseIdleConnections()
	req := &llm.ChatRequest{Model: model, Messages: []llm.Message{llm.UserText("replay")}}

	var res *llm.ChatResult
	var evs []llm.Event
	var err error
	if ex.Response.Stream {
		var s *llm.Stream
		if s, err = c.Stream(ctxT(t), req); err == nil {
			evs, err = collect(s)
			res, _ = s.Result()
		}
	} else {
		res, err = c.Chat(ctxT(t), req)
	}
	if reqs := srv.Requests(); len(reqs) != 1 || reqs[0].Path != "/v1/responses" {
		t.Fatalf("requests %+v, want one POST /v1/responses", reqs)
	}

	rec := recordedResponses(ex.Response.Body)
	if ex.Response.Status/100 != 2 {
		var api *llm.APIError
		if !errors.As(err, &api) || api.Status != ex.Response.Status || api.Message == "" {
			t.Fatalf("recorded %d: got %v, want an APIError with that status and a message", ex.Response.Status, err)
		}
		return true
	}
	if rec.isError {
		var api *llm.APIError
		if !errors.As(err, &api) || api.Status != 0 || api.Code != rec.errCode || api.Provider != e.Provider {
			t.Fatalf("recorded error %q inside a 200: got %#v", rec.errCode, err)
		}
		if rec.errCode == "insufficient_quota" && api.Retryable {
			t.Fatal("an exhausted quota must not be retryable")
		}
		return true
	}
	if err != nil {
		t.Fatalf("replay failed: %v", err)
	}
	if !res.FinishReason.Valid() || res.FinishReason != rec.finish(len(res.ToolCalls)) {
		t.Fatalf("finish %q, recorded status %q/%q maps to %q", res.FinishReason, rec.status, rec.reason, rec.finish(len(res.ToolCalls)))
	}
	if ex.Response.Stream {
		if got := concat(evs, llm.EventText); got != res.Content || got != rec.text {
			t.Fatalf("result text %q, concatenated deltas %q, recorded %q", res.Content, got, rec.text)
		}
		if got := concat(evs, llm.EventReasoning); got != res.Reasoning {
			t.Fatal("result reasoning != concatenated reasoning deltas")
		}
		starts := 0
		for _, ev := range evs {
			switch ev.Type {
			case llm.EventToolCallStart:
				if ev.ToolIndex != starts || ev.ToolIndex >= len(res.ToolCalls) || res.ToolCalls[ev.ToolIndex].ID != ev.ToolCallID {
					t.Fatalf("start #%d has ToolIndex %d for %s", starts, ev.ToolIndex, ev.ToolCallID)
				}
				starts++
			case llm.EventToolCallDelta:
				if ev.ToolIndex >= starts {
					t.Fatalf("delta for ToolIndex %d before its start", ev.ToolIndex)
				}
			}
		}
	} else if res.Content != rec.text {
		t.Fatalf("content %q, recorded %q", res.Content, rec.text)
	}
	if len(res.ToolCalls) != len(rec.calls) {
		t.Fatalf("%d tool calls, recorded %d", len(res.ToolCalls), len(rec.calls))
	}
	for i, tc := range res.ToolCalls {
		if tc.ID != rec.calls[i][0] || tc.Name != rec.calls[i][1] || !json.Valid([]byte(tc.Arguments)) {
			t.Errorf("tool call %d = %+v, recorded %v", i, tc, rec.calls[i])
		}
	}
	if rec.hasUsage {
		u := res.Usage
		if u.InputTokens() != rec.input || u.CompletionTokens != rec.output || u.TotalTokens() != rec.input+rec.output || u.ReasoningTokens > u.CompletionTokens {
			t.Errorf("usage %+v, recorded input %d output %d", u, rec.input, rec.output)
		}
	}
	var encrypted int
	for _, b := range res.ThinkingBlocks {
		if b.Format != "openai-responses" {
			t.Errorf("block format %q", b.Format)
		}
		if b.Data != "" {
			encrypted++
		}
	}
	if encrypted != rec.encrypted || len(res.ThinkingBlocks) != rec.reasoningItems {
		t.Errorf("%d blocks (%d encrypted), recorded %d reasoning items (%d encrypted)", len(res.ThinkingBlocks), encrypted, rec.reasoningItems, rec.encrypted)
	}
	for h := range ex.Response.Header {
		if strings.HasPrefix(strings.ToLower(h), "x-ratelimit-limit") {
			if rl := res.Meta.RateLimit; !rl.HasRequests && !rl.HasTokens {
				t.Errorf("recorded %s but no rate limit parsed", h)
			}
		}
	}
	return false
}

// recordedAnswer is what a recorded Responses answer says, read with
// generic JSON: up to the first terminal event of a stream (a client stops
// there; one vercel-ai file holds several answers back to back).
type recordedAnswer struct {
	text                      string
	calls                     [][2]string // call_id, name
	status, reason            string
	input, output             int
	hasUsage                  bool
	reasoningItems, encrypted int
	isError                   bool
	errCode                   string
}

func (r recordedAnswer) finish(calls int) llm.FinishReason {
	var f llm.FinishReason
	switch {
	case r.status == "completed" && calls > 0:
		f = llm.FinishToolCalls
	case r.status == "completed":
		f = llm.FinishStop
	case r.status == "incomplete" && r.reason == "max_output_tokens":
		f = llm.FinishLength
	case r.status == "incomplete" && r.reason == "content_filter":
		f = llm.FinishContentFilter
	}
	return f
}

func recordedResponses(body []byte) recordedAnswer {
	var r recordedAnswer
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	num := func(m map[string]any, k string) int { v, _ := m[k].(float64); return int(v) }
	final := func(resp map[string]any, withOutput bool) {
		r.status = str(resp, "status")
		if d, ok := resp["incomplete_details"].(map[string]any); ok {
			r.reason = str(d, "reason")
		}
		if u, ok := resp["usage"].(map[string]any); ok {
			r.input, r.output, r.hasUsage = num(u, "input_tokens"), num(u, "output_tokens"), true
		}
		if e, ok := resp["error"].(map[string]any); ok && r.status == "failed" {
			r.isError, r.errCode = true, str(e, "code")
		}
		items, _ := resp["output"].([]any)
		for _, it := range items {
			m, _ := it.(map[string]any)
			switch str(m, "type") {
			case "function_call":
				r.calls = append(r.calls, [2]string{str(m, "call_id"), str(m, "name")})
			case "message":
				if withOutput {
					parts, _ := m["content"].([]any)
					for _, p := range parts {
						if pm, _ := p.(map[string]any); str(pm, "type") == "output_text" {
							r.text += str(pm, "text")
						}
					}
				}
			case "reasoning":
				if withOutput {
					r.reasoningItems++
					if str(m, "encrypted_content") != "" {
						r.encrypted++
					}
				}
			}
		}
	}
	ds := docs(body)
	if len(ds) == 1 && ds[0]["type"] == nil {
		d := ds[0]
		if e, ok := d["error"].(map[string]any); ok && d["object"] != "response" {
			r.isError, r.errCode = true, str(e, "code")
			return r
		}
		final(d, true)
		return r
	}
	for _, d := range ds {
		switch str(d, "type") {
		case "response.output_text.delta":
			r.text += str(d, "delta")
		case "response.output_item.done":
			if it, _ := d["item"].(map[string]any); str(it, "type") == "reasoning" {
				r.reasoningItems++
				if str(it, "encrypted_content") != "" {
					r.encrypted++
				}
			}
		case "response.completed", "response.incomplete":
			resp, _ := d["response"].(map[string]any)
			final(resp, false)
			return r
		case "error":
			r.isError = true
			if e, ok := d["error"].(map[string]any); ok {
				r.errCode = str(e, "code")
			} else {
				r.errCode = str(d, "code")
			}
			return r
		case "response.failed":
			resp, _ := d["response"].(map[string]any)
			final(resp, false)
			return r
		}
	}
	return r
}
