package llmtest_test

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/internal/testkit/fixture"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

func responsesURL(s *llmtest.Server) string { return s.OpenAIBaseURL() + "/responses" }

func responsesBody(stream bool) string {
	if stream {
		return `{"model":"` + model + `","stream":true,"store":false,"input":[{"role":"user","content":"hi"}]}`
	}
	return `{"model":"` + model + `","store":false,"input":[{"role":"user","content":"hi"}]}`
}

func TestResponsesBuffered(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	c := newClient(t)
	srv.Push(llmtest.Respond(llmtest.Reply{
		Reasoning: "Think.", Signature: "ENC", Text: "Sunny.",
		ToolCalls: []llm.ToolCall{{Name: "weather", Arguments: `{"city":"Paris"}`}},
		Usage:     &llm.Usage{PromptTokens: 10, CacheReadTokens: 5, CompletionTokens: 7, ReasoningTokens: 3},
	}))
	r := post(t, c, responsesURL(srv), responsesBody(false))
	if r.resp.StatusCode != 200 || !strings.HasPrefix(r.resp.Header.Get("Content-Type"), "application/json") || r.resp.Header.Get("x-request-id") != "req_llmtest_1" {
		t.Fatalf("%d %v", r.resp.StatusCode, r.resp.Header)
	}
	m := obj(t, string(r.body))
	if str(m["object"]) != "response" || str(m["id"]) != "resp_llmtest_1" || str(m["status"]) != "completed" || str(m["model"]) != model || m["store"] != false {
		t.Fatalf("%s", r.body)
	}
	out := get(m, "output").([]any)
	if len(out) != 3 {
		t.Fatalf("output %v", out)
	}
	if str(get(out[0], "type")) != "reasoning" || str(get(out[0], "encrypted_content")) != "ENC" || str(get(out[0], "summary", 0, "text")) != "Think." || str(get(out[0], "id")) != "rs_llmtest_1_0" {
		t.Errorf("reasoning %v", out[0])
	}
	if str(get(out[1], "type")) != "message" || str(get(out[1], "role")) != "assistant" || str(get(out[1], "content", 0, "type")) != "output_text" || str(get(out[1], "content", 0, "text")) != "Sunny." {
		t.Errorf("message %v", out[1])
	}
	if str(get(out[2], "type")) != "function_call" || str(get(out[2], "call_id")) != "call_llmtest_0" || str(get(out[2], "name")) != "weather" || str(get(out[2], "arguments")) != `{"city":"Paris"}` {
		t.Errorf("call %v", out[2])
	}
	if num(get(m, "usage", "input_tokens")) != 15 || num(get(m, "usage", "input_tokens_details", "cached_tokens")) != 5 ||
		num(get(m, "usage", "output_tokens")) != 7 || num(get(m, "usage", "output_tokens_details", "reasoning_tokens")) != 3 || num(get(m, "usage", "total_tokens")) != 22 {
		t.Errorf("usage %v", m["usage"])
	}
	rec := srv.Requests()[0]
	if rec.Format != llmtest.FormatOpenAI || rec.Path != "/v1/responses" || rec.Model != model || rec.Stream {
		t.Errorf("recorded %+v", rec)
	}

	// Finish reasons become status and incomplete_details; without a
	// signature the encrypted content is a deterministic placeholder.
	for _, tc := range []struct {
		reply          llmtest.Reply
		status, reason string
	}{
		{llmtest.Reply{Text: "x"}, "completed", ""},
		{llmtest.Reply{Text: "x", Finish: llm.FinishLength}, "incomplete", "max_output_tokens"},
		{llmtest.Reply{Refusal: "no"}, "incomplete", "content_filter"},
		{llmtest.Reply{Text: "x", RawFinish: "something_new"}, "incomplete", "something_new"},
	} {
		srv.Push(llmtest.Respond(tc.reply))
		m := obj(t, string(post(t, c, responsesURL(srv), responsesBody(false)).body))
		if str(m["status"]) != tc.status || str(get(m, "incomplete_details", "reason")) != tc.reason {
			t.Errorf("%+v: status %v details %v", tc.reply, m["status"], m["incomplete_details"])
		}
	}
	srv.Push(llmtest.Respond(llmtest.Reply{Reasoning: "r"}))
	m = obj(t, string(post(t, c, responsesURL(srv), responsesBody(false)).body))
	if str(get(m, "output", 0, "encrypted_content")) != "llmtest-encrypted-6-0" {
		t.Errorf("placeholder %v", get(m, "output", 0))
	}
}

func TestResponsesStream(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	c := newClient(t)
	srv.Push(llmtest.Respond(llmtest.Reply{
		Reasoning: "Let me think.", Text: "It is sunny.",
		ToolCalls: []llm.ToolCall{{ID: "call_x", Name: "weather", Arguments: `{"city":"Paris"}`}},
	}))
	r := post(t, c, responsesURL(srv), responsesBody(true))
	if ct := r.resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("content type %q", ct)
	}
	events, complete := parseSSE(r.body)
	if !complete || len(events) < 10 {
		t.Fatalf("%d events, complete %v", len(events), complete)
	}
	var types []string
	var text, reasoning, args strings.Builder
	seq := -1
	for _, ev := range events {
		m := obj(t, ev.Data)
		typ := str(m["type"])
		if ev.Name != typ {
			t.Fatalf("event name %q, data type %q", ev.Name, typ)
		}
		if n := num(m["sequence_number"]); n != seq+1 {
			t.Fatalf("sequence_number %d after %d", n, seq)
		} else {
			seq = n
		}
		types = append(types, typ)
		switch typ {
		case "response.output_text.delta":
			text.WriteString(str(m["delta"]))
		case "response.reasoning_summary_text.delta":
			reasoning.WriteString(str(m["delta"]))
		case "response.function_call_arguments.delta":
			args.WriteString(str(m["delta"]))
			if num(m["output_index"]) != 2 {
				t.Errorf("arguments for output_index %v", m["output_index"])
			}
		}
	}
	if text.String() != "It is sunny." || reasoning.String() != "Let me think." || args.String() != `{"city":"Paris"}` {
		t.Fatalf("text %q reasoning %q args %q", text.String(), reasoning.String(), args.String())
	}
	if types[0] != "response.created" || types[1] != "response.in_progress" || types[len(types)-1] != "response.completed" {
		t.Fatalf("order %v", types)
	}
	final := obj(t, events[len(events)-1].Data)
	if str(get(final, "response", "status")) != "completed" || len(get(final, "response", "output").([]any)) != 3 ||
		num(get(final, "response", "usage", "output_tokens")) == 0 || str(get(final, "response", "output", 2, "call_id")) != "call_x" {
		t.Fatalf("final %s", events[len(events)-1].Data)
	}
	if rec := srv.Requests()[0]; !rec.Stream || rec.Path != "/v1/responses" {
		t.Fatalf("recorded %+v", rec)
	}

	// A length finish ends with response.incomplete.
	srv.Push(llmtest.Respond(llmtest.Reply{Text: "cut", Finish: llm.FinishLength}))
	events, _ = parseSSE(post(t, c, responsesURL(srv), responsesBody(true)).body)
	last := obj(t, events[len(events)-1].Data)
	if str(last["type"]) != "response.incomplete" || str(get(last, "response", "incomplete_details", "reason")) != "max_output_tokens" {
		t.Fatalf("last %v", last)
	}
}

func TestResponsesFaults(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	c := newClient(t)
	deltas := llmtest.Reply{Deltas: []string{"one ", "two ", "three ", "four"}}

	// An in-stream error: the error event, then response.failed.
	srv.Push(llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultInStreamError, After: 2, Code: "insufficient_quota", Reply: &deltas}))
	events, _ := parseSSE(post(t, c, responsesURL(srv), responsesBody(true)).body)
	n := len(events)
	if n < 2 || events[n-2].Name != "error" || events[n-1].Name != "response.failed" {
		t.Fatalf("tail %v", events[max(n-2, 0):])
	}
	e, f := obj(t, events[n-2].Data), obj(t, events[n-1].Data)
	if str(get(e, "error", "code")) != "insufficient_quota" || !strings.Contains(str(get(e, "error", "message")), "quota") ||
		str(get(f, "response", "status")) != "failed" || str(get(f, "response", "error", "code")) != "insufficient_quota" {
		t.Fatalf("error %v failed %v", e, f)
	}
	var text string
	for _, ev := range events {
		if ev.Name == "response.output_text.delta" {
			text += str(obj(t, ev.Data)["delta"])
		}
	}
	if text != "one two " {
		t.Fatalf("text before the error %q", text)
	}

	// A premature close ends without a terminal event.
	srv.Push(llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultPrematureClose, After: 1, Reply: &deltas}))
	events, _ = parseSSE(post(t, c, responsesURL(srv), responsesBody(true)).body)
	for _, ev := range events {
		if ev.Name == "response.completed" || ev.Name == "response.incomplete" {
			t.Fatal("premature close sent its terminal event")
		}
	}

	// A status fault has OpenAI's error body and retry headers.
	srv.Push(llmtest.Status(429, 2*time.Second))
	r := post(t, c, responsesURL(srv), responsesBody(true))
	if r.resp.StatusCode != http.StatusTooManyRequests || r.resp.Header.Get("retry-after") != "2" || str(get(obj(t, string(r.body)), "error", "code")) != "rate_limit_exceeded" {
		t.Fatalf("%d %v %s", r.resp.StatusCode, r.resp.Header, r.body)
	}

	// A buffered answer to a stream request.
	srv.Push(llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultNonSSE200, Reply: &llmtest.Reply{Text: "whole"}}))
	r = post(t, c, responsesURL(srv), responsesBody(true))
	if !strings.HasPrefix(r.resp.Header.Get("Content-Type"), "application/json") || str(get(obj(t, string(r.body)), "output", 0, "content", 0, "text")) != "whole" {
		t.Fatalf("%s", r.body)
	}
}

func TestResponsesRateLimitHeaders(t *testing.T) {
	srv := llmtest.NewServer(llmtest.WithRateLimit(llmtest.RateLimit{Requests: 2, Window: time.Minute}))
	defer srv.Close()
	c := newClient(t)
	for i := 0; i < 2; i++ {
		r := post(t, c, responsesURL(srv), responsesBody(false))
		if r.resp.Header.Get("x-ratelimit-limit-requests") != "2" {
			t.Fatalf("headers %v", r.resp.Header)
		}
	}
	r := post(t, c, responsesURL(srv), responsesBody(false))
	if r.resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(str(get(obj(t, string(r.body)), "error", "message")), "Rate limit reached for "+model) {
		t.Fatalf("%d %s", r.resp.StatusCode, r.body)
	}
}

// TestResponsesShapesMatchRecordings: every key of every event the fake
// streams (and of its buffered answer) appears at the same place in the
// real recorded Responses traffic of the corpus, and the keys clients read
// are all there.
func TestResponsesShapesMatchRecordings(t *testing.T) {
	dir := fixture.Require(t)
	idx, err := fixture.LoadIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[string]map[string]bool{} // event type ("" for a buffered body) -> key paths
	add := func(typ string, m map[string]any) {
		if recorded[typ] == nil {
			recorded[typ] = map[string]bool{}
		}
		keyPaths(m, "", recorded[typ])
	}
	for _, e := range idx {
		if e.Synthetic() || !strings.HasPrefix(e.File, "openai/") || !(strings.Contains(strings.Join(e.Endpoints, " "), "/v1/responses") || strings.Contains(e.File, "/responses/__fixtures__/")) {
			continue
		}
		exs, err := fixture.Load(dir, e)
		if err != nil {
			t.Fatal(err)
		}
		for _, ex := range exs {
			if ex.Response.Status != 200 || strings.Contains(ex.Request.URL, "chat/completions") || strings.Contains(ex.Request.URL, "input_tokens") {
				continue
			}
			if !ex.Response.Stream {
				var m map[string]any
				if json.Unmarshal(ex.Response.Body, &m) == nil && m["object"] == "response" {
					add("", m)
				}
				continue
			}
			evs, _ := parseSSE(ex.Response.Body)
			for _, ev := range evs {
				var m map[string]any
				if json.Unmarshal([]byte(ev.Data), &m) == nil {
					add(str(m["type"]), m)
				}
			}
		}
	}
	if len(recorded) < 10 {
		t.Fatalf("only %d recorded event types", len(recorded))
	}

	srv := llmtest.NewServer()
	defer srv.Close()
	c := newClient(t)
	reply := llmtest.Reply{Reasoning: "Let me think.", Text: "It is sunny.", ToolCalls: []llm.ToolCall{{Name: "weather", Arguments: `{"city":"Paris"}`}}}
	ours := map[string]map[string]bool{}
	collect := func(typ string, data []byte) {
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("not JSON: %s", data)
		}
		if typ == "" {
			typ = str(m["type"])
		}
		if ours[typ] == nil {
			ours[typ] = map[string]bool{}
		}
		keyPaths(m, "", ours[typ])
	}
	srv.Push(llmtest.Respond(reply))
	for _, ev := range func() []sseEvent { e, _ := parseSSE(post(t, c, responsesURL(srv), responsesBody(true)).body); return e }() {
		collect("", []byte(ev.Data))
	}
	srv.Push(llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultInStreamError, After: 1, Code: "insufficient_quota", Reply: &reply}))
	for _, ev := range func() []sseEvent { e, _ := parseSSE(post(t, c, responsesURL(srv), responsesBody(true)).body); return e }() {
		collect("", []byte(ev.Data))
	}
	srv.Push(llmtest.Respond(reply))
	var buffered map[string]any
	body := post(t, c, responsesURL(srv), responsesBody(false)).body
	if err := json.Unmarshal(body, &buffered); err != nil {
		t.Fatal(err)
	}
	ours["(buffered)"] = map[string]bool{}
	keyPaths(buffered, "", ours["(buffered)"])
	recorded["(buffered)"] = recorded[""]

	var extra []string
	for typ, paths := range ours {
		if recorded[typ] == nil {
			t.Errorf("event type %q never appears in the recordings", typ)
			continue
		}
		for p := range paths {
			if !recorded[typ][p] {
				extra = append(extra, typ+"/"+p)
			}
		}
	}
	sort.Strings(extra)
	if len(extra) > 0 {
		t.Errorf("keys not seen in real recordings: %v", extra)
	}
	for _, req := range []string{
		"response.created/response.id", "response.created/response.model",
		"response.output_item.added/item.type", "response.output_item.added/item.call_id", "response.output_item.added/item.name",
		"response.output_item.done/item.encrypted_content", "response.output_item.done/item.summary[].text",
		"response.reasoning_summary_text.delta/delta", "response.reasoning_summary_text.delta/summary_index",
		"response.output_text.delta/delta", "response.output_text.delta/output_index",
		"response.function_call_arguments.delta/delta", "response.function_call_arguments.delta/item_id",
		"response.completed/response.status", "response.completed/response.usage.input_tokens",
		"response.completed/response.usage.input_tokens_details.cached_tokens", "response.completed/response.usage.output_tokens_details.reasoning_tokens",
		"error/error.code", "error/error.message", "response.failed/response.error.code",
		"(buffered)/output[].encrypted_content", "(buffered)/output[].call_id", "(buffered)/output[].content[].text", "(buffered)/usage.output_tokens",
	} {
		typ, p, _ := strings.Cut(req, "/")
		if !ours[typ][p] {
			t.Errorf("required key %s missing", req)
		}
	}
}
