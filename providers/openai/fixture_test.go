package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/internal/testkit/fixture"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/sse"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// chatFixture is one recorded 200 answer from /chat/completions.
type chatFixture struct {
	name string // file#interaction
	file string
	body []byte
}

// chatProviders are the fixture providers that speak Chat Completions.
var chatProviders = map[string]bool{
	"openai": true, "deepseek": true, "zai": true, "kimi": true, "openai-compatible": true,
}

// loadChatFixtures returns every non-synthetic recorded 200 answer of a
// chat completions endpoint, split into streamed and buffered bodies.
// Payload-only files (vercel-ai) carry no URL; those under a chat
// __fixtures__ directory are chat completions too.
func loadChatFixtures(t *testing.T) (streams, buffered []chatFixture) {
	t.Helper()
	dir := fixture.Require(t)
	idx, err := fixture.LoadIndex(dir)
	if err != nil {
		t.Fatalf("fixtures: %v", err)
	}
	for _, e := range idx {
		if !chatProviders[e.Provider] || e.Synthetic() {
			continue
		}
		payloadOnly := len(e.Endpoints) == 0 && strings.Contains(e.File, "/src/chat/__fixtures__/")
		chat := payloadOnly
		for _, ep := range e.Endpoints {
			if strings.HasSuffix(ep, "/chat/completions") {
				chat = true
			}
		}
		if !chat {
			continue
		}
		exs, err := fixture.Load(dir, e)
		if err != nil {
			t.Fatalf("load %s: %v", e.File, err)
		}
		for i, ex := range exs {
			if !payloadOnly && !strings.HasSuffix(strings.SplitN(ex.Request.URL, "?", 2)[0], "/chat/completions") {
				continue
			}
			if ex.Response.Status != 200 {
				continue
			}
			f := chatFixture{name: e.File + "#" + strconv.Itoa(i), file: e.File, body: ex.Response.Body}
			if ex.Response.Stream {
				streams = append(streams, f)
			} else {
				buffered = append(buffered, f)
			}
		}
	}
	if len(streams) == 0 || len(buffered) == 0 {
		t.Fatalf("fixtures: %d streamed and %d buffered chat answers; the corpus is incomplete", len(streams), len(buffered))
	}
	return streams, buffered
}

// oracleUsage is the raw usage object decoded with encoding/json, the
// independent check for the normalised llm.Usage.
type oracleUsage struct {
	PromptTokens     *int `json:"prompt_tokens"`
	CompletionTokens int  `json:"completion_tokens"`
	TotalTokens      int  `json:"total_tokens"`
}

// checkUsage asserts the normalised usage accounts for exactly the
// provider's total: InputTokens (uncached + cache reads + writes) plus
// CompletionTokens (reasoning included) equals total_tokens.
func checkUsage(t *testing.T, name string, got llm.Usage, raw oracleUsage) {
	t.Helper()
	if raw.PromptTokens == nil {
		return
	}
	if got.IsZero() && raw.TotalTokens > 0 {
		t.Errorf("%s: usage not mapped: raw %+v", name, raw)
		return
	}
	if raw.TotalTokens > 0 && got.TotalTokens() != raw.TotalTokens {
		t.Errorf("%s: usage %+v totals %d, provider total_tokens %d", name, got, got.TotalTokens(), raw.TotalTokens)
	}
	if got.InputTokens() != *raw.PromptTokens {
		t.Errorf("%s: usage %+v has input %d, provider prompt_tokens %d", name, got, got.InputTokens(), *raw.PromptTokens)
	}
	if got.CompletionTokens < raw.CompletionTokens || got.ReasoningTokens > got.CompletionTokens {
		t.Errorf("%s: completion %d (reasoning %d) vs raw completion %d", name, got.CompletionTokens, got.ReasoningTokens, raw.CompletionTokens)
	}
}

func checkToolCalls(t *testing.T, name string, calls []llm.ToolCall) {
	t.Helper()
	for i, tc := range calls {
		if tc.ID == "" || tc.Name == "" {
			t.Errorf("%s: tool call %d has id %q name %q", name, i, tc.ID, tc.Name)
		}
		if !json.Valid([]byte(tc.Arguments)) {
			t.Errorf("%s: tool call %d (%s) arguments are not JSON: %q", name, i, tc.Name, tc.Arguments)
		}
	}
}

func TestParseChatFixtures(t *testing.T) {
	_, buffered := loadChatFixtures(t)
	var withUsage, withTools, withReasoning int
	for _, f := range buffered {
		var raw struct {
			Choices []struct {
				Message struct {
					Content   any `json:"content"`
					ToolCalls []struct {
						Function struct {
							Name string `json:"name"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"message"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *oracleUsage    `json:"usage"`
			Error json.RawMessage `json:"error"`
		}
		if !json.Valid(f.body) {
			// A recorded non-JSON 200 (pydantic-ai's echo server): the
			// codec must call it a decode error, not a result.
			_, err := Codec{}.ParseChat(f.body)
			var de *llm.DecodeError
			if !errors.As(err, &de) {
				t.Errorf("%s: non-JSON body gave %v, want *llm.DecodeError", f.name, err)
			}
			continue
		}
		if err := json.Unmarshal(f.body, &raw); err != nil {
			t.Fatalf("%s: oracle decode: %v", f.name, err)
		}
		res, err := Codec{}.ParseChat(f.body)
		if len(raw.Choices) == 0 && len(raw.Error) > 0 {
			// An error body recorded without its status.
			var apiErr *llm.APIError
			if !errors.As(err, &apiErr) || apiErr.Message == "" || apiErr.Retryable {
				t.Errorf("%s: error body gave %#v, want a non-retryable *llm.APIError with a message", f.name, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: ParseChat: %v", f.name, err)
			continue
		}
		if !res.FinishReason.Valid() {
			t.Errorf("%s: finish %q is not canonical", f.name, res.FinishReason)
		}
		if len(raw.Choices) > 0 {
			c := raw.Choices[0]
			if s, ok := c.Message.Content.(string); ok && s != res.Content {
				t.Errorf("%s: content %q, want %q", f.name, res.Content, s)
			}
			if len(res.ToolCalls) < len(c.Message.ToolCalls) {
				t.Errorf("%s: %d tool calls, body has %d", f.name, len(res.ToolCalls), len(c.Message.ToolCalls))
			}
			for i, tc := range c.Message.ToolCalls {
				if i < len(res.ToolCalls) && res.ToolCalls[i].Name != tc.Function.Name {
					t.Errorf("%s: tool call %d name %q, want %q", f.name, i, res.ToolCalls[i].Name, tc.Function.Name)
				}
			}
			if c.FinishReason != nil {
				want := canonicalOracle(*c.FinishReason, len(res.ToolCalls))
				if res.FinishReason != want {
					t.Errorf("%s: finish %q for raw %q, want %q", f.name, res.FinishReason, *c.FinishReason, want)
				}
			}
		}
		checkToolCalls(t, f.name, res.ToolCalls)
		if raw.Usage != nil {
			checkUsage(t, f.name, res.Usage, *raw.Usage)
			withUsage++
		}
		if len(res.ToolCalls) > 0 {
			withTools++
		}
		if res.Reasoning != "" {
			withReasoning++
		}
	}
	t.Logf("%d buffered chat answers parsed: %d with usage, %d with tools, %d with reasoning",
		len(buffered), withUsage, withTools, withReasoning)
	if withUsage < 50 || withTools < 20 || withReasoning < 10 {
		t.Errorf("coverage dropped: usage %d, tools %d, reasoning %d", withUsage, withTools, withReasoning)
	}
}

// canonicalOracle is the finish-reason table written out independently of
// mapFinish.
func canonicalOracle(raw string, calls int) llm.FinishReason {
	m := map[string]llm.FinishReason{
		"stop": "stop", "length": "length", "tool_calls": "tool_calls",
		"function_call": "tool_calls", "content_filter": "content_filter",
	}
	r := m[raw]
	if r == "stop" && calls > 0 {
		r = "tool_calls"
	}
	return r
}

// streamRun is the outcome of feeding a recorded SSE body to a decoder.
type streamRun struct {
	events []llm.Event
	res    *llm.ChatResult
	err    error
	done   bool
	dec    wire.StreamDecoder
}

func runStream(t *testing.T, body []byte) streamRun {
	t.Helper()
	d := Codec{}.NewStreamDecoder()
	var run streamRun
	run.dec = d
	r := sse.NewReader(bytes.NewReader(body), nil)
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("sse: %v", err)
		}
		done, err := d.Feed(ev.Name, ev.Data, func(e llm.Event) bool {
			run.events = append(run.events, e)
			return true
		})
		if err != nil {
			run.err = err
			break
		}
		if done {
			run.done = true
			break
		}
	}
	run.res = d.Result()
	return run
}

// oracleStream decodes every data line with encoding/json: the expected
// text of choice 0 and the last usage object.
func oracleStream(t *testing.T, name string, body []byte) (text string, usage *oracleUsage) {
	t.Helper()
	var sb strings.Builder
	r := sse.NewReader(bytes.NewReader(body), nil)
	for {
		ev, err := r.Next()
		if err != nil {
			break
		}
		if string(ev.Name) == "error" || string(bytes.TrimSpace(ev.Data)) == "[DONE]" || len(bytes.TrimSpace(ev.Data)) == 0 {
			continue
		}
		var c struct {
			Choices []struct {
				Index int `json:"index"`
				Delta struct {
					Content any `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Usage *oracleUsage `json:"usage"`
		}
		if err := json.Unmarshal(ev.Data, &c); err != nil {
			t.Fatalf("%s: oracle: %v in %s", name, err, ev.Data)
		}
		for _, ch := range c.Choices {
			if s, ok := ch.Delta.Content.(string); ok && ch.Index == 0 {
				sb.WriteString(s)
			}
		}
		if c.Usage != nil && c.Usage.PromptTokens != nil {
			usage = c.Usage
		}
	}
	return sb.String(), usage
}

func TestStreamFixtures(t *testing.T) {
	streams, _ := loadChatFixtures(t)
	var withUsage, withTools, withReasoning, withError int
	for _, f := range streams {
		run := runStream(t, f.body)
		hasErrorEvent := bytes.Contains(f.body, []byte("event: error")) || bytes.Contains(f.body, []byte(`"error":{`))
		if run.err != nil {
			var apiErr *llm.APIError
			if !hasErrorEvent || !errors.As(run.err, &apiErr) {
				t.Errorf("%s: Feed: %v", f.name, run.err)
				continue
			}
		} else if !run.dec.Complete() {
			t.Errorf("%s: not complete at the end of the stream", f.name)
		}
		wantText, wantUsage := oracleStream(t, f.name, f.body)
		var text strings.Builder
		starts := 0
		for _, ev := range run.events {
			switch ev.Type {
			case llm.EventText:
				text.WriteString(ev.Text)
			case llm.EventToolCallStart:
				if ev.ToolIndex != starts {
					t.Errorf("%s: tool start #%d has ToolIndex %d", f.name, starts, ev.ToolIndex)
				}
				starts++
			case llm.EventToolCallDelta:
				if ev.ToolIndex < 0 || ev.ToolIndex >= starts {
					t.Errorf("%s: tool delta for unknown position %d (%d calls)", f.name, ev.ToolIndex, starts)
				}
				if ev.Text == "" {
					t.Errorf("%s: empty tool delta emitted", f.name)
				}
			case llm.EventFinish:
				if !ev.Finish.Valid() {
					t.Errorf("%s: finish %q not canonical", f.name, ev.Finish)
				}
			}
			if (ev.Type == llm.EventText || ev.Type == llm.EventReasoning || ev.Type == llm.EventRefusal) && ev.Text == "" {
				t.Errorf("%s: empty %s event", f.name, ev.Type)
			}
		}
		if text.String() != run.res.Content || run.res.Content != wantText {
			t.Errorf("%s: content %q, events %q, oracle %q", f.name, run.res.Content, text.String(), wantText)
		}
		if starts != len(run.res.ToolCalls) {
			t.Errorf("%s: %d tool starts, %d calls", f.name, starts, len(run.res.ToolCalls))
		}
		checkToolCalls(t, f.name, run.res.ToolCalls)
		if len(run.res.ToolCalls) > 0 && run.res.FinishReason == llm.FinishStop {
			t.Errorf("%s: a tool turn finished stop", f.name)
		}
		if wantUsage != nil && run.err == nil {
			checkUsage(t, f.name, run.res.Usage, *wantUsage)
			withUsage++
		}
		if len(run.res.ToolCalls) > 0 {
			withTools++
		}
		if run.res.Reasoning != "" {
			withReasoning++
		}
		if run.err != nil {
			withError++
		}
	}
	t.Logf("%d streamed chat answers decoded: %d with usage, %d with tools, %d with reasoning, %d with an error",
		len(streams), withUsage, withTools, withReasoning, withError)
	// Guard against a corpus or loader change that would make this test
	// vacuous.
	if withUsage < 20 || withTools < 15 || withReasoning < 10 || withError < 2 {
		t.Errorf("coverage dropped: usage %d, tools %d, reasoning %d, errors %d", withUsage, withTools, withReasoning, withError)
	}
}

// fixtureBodies returns the response bodies of one fixture file.
func fixtureBodies(t *testing.T, file string) [][]byte {
	t.Helper()
	dir := fixture.Require(t)
	idx, err := fixture.LoadIndex(dir)
	if err != nil {
		t.Fatalf("fixtures: %v", err)
	}
	for _, e := range idx {
		if e.File != file {
			continue
		}
		if e.Synthetic() {
			t.Fatalf("%s is synthetic", file)
		}
		exs, err := fixture.Load(dir, e)
		if err != nil {
			t.Fatalf("load %s: %v", file, err)
		}
		var out [][]byte
		for _, ex := range exs {
			out = append(out, ex.Response.Body)
		}
		return out
	}
	t.Fatalf("fixture %s is not in INDEX.tsv", file)
	return nil
}

func countEvents(evs []llm.Event, typ llm.EventType) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// Kimi-K2 through gateways repeats the call's id and name in every chunk,
// uses ids like "0" and "llm_version:0", and sends arguments as "", null,
// missing, or "{}" whole. Each variant must give exactly one call with
// arguments "{}".
func TestFixtureKimiRepeatedIDs(t *testing.T) {
	for _, v := range []struct{ file, id string }{
		{"a", "0"}, {"b", "0"}, {"c", "llm_version:0"}, {"d", "0"},
	} {
		file := "openai/simonw-llm/tests/cassettes/test_tools_streaming/test_tools_streaming_variant_" + v.file + ".yaml"
		bodies := fixtureBodies(t, file)
		run := runStream(t, bodies[0])
		if run.err != nil || !run.done || !run.dec.Complete() {
			t.Fatalf("variant %s: err=%v done=%v complete=%v", v.file, run.err, run.done, run.dec.Complete())
		}
		if n := countEvents(run.events, llm.EventToolCallStart); n != 1 {
			t.Errorf("variant %s: %d tool starts, want 1", v.file, n)
		}
		calls := run.res.ToolCalls
		if len(calls) != 1 || calls[0].ID != v.id || calls[0].Name != "llm_version" || calls[0].Arguments != "{}" {
			t.Errorf("variant %s: calls %+v, want one llm_version call %q with {}", v.file, calls, v.id)
		}
		// The second exchange answers with text after the tool result.
		run2 := runStream(t, bodies[1])
		if run2.err != nil || len(run2.res.ToolCalls) != 0 || !strings.Contains(run2.res.Content, "0.fixed-version") {
			t.Errorf("variant %s second turn: err=%v calls=%v content=%q", v.file, run2.err, run2.res.ToolCalls, run2.res.Content)
		}
	}
}

// Z.ai repeats role in every delta, omits null keys, and sends
// finish_reason and usage in the same final chunk.
func TestFixtureZaiUsageInFinalChunk(t *testing.T) {
	bodies := fixtureBodies(t, "zai/fantasy/providertests/testdata/TestOpenAICompatibleCommon/zai-glm-4-7-flash/tool_streaming.yaml")
	run := runStream(t, bodies[0])
	if run.err != nil || !run.dec.Complete() {
		t.Fatalf("err=%v complete=%v", run.err, run.dec.Complete())
	}
	res := run.res
	if !strings.HasPrefix(res.Reasoning, "The user is asking for the weather in Florence") {
		t.Errorf("reasoning = %q", res.Reasoning)
	}
	if len(res.ToolCalls) != 1 || res.ToolCalls[0].Name != "weather" || res.ToolCalls[0].Arguments != `{"location":"Florence,Italy"}` ||
		res.ToolCalls[0].ID != "call_3532c842716b4c72a7dd7498" {
		t.Errorf("tool calls = %+v", res.ToolCalls)
	}
	if res.FinishReason != llm.FinishToolCalls {
		t.Errorf("finish = %q", res.FinishReason)
	}
	want := llm.Usage{PromptTokens: 1, CacheReadTokens: 172, CompletionTokens: 93, ReasoningTokens: 65}
	if res.Usage != want {
		t.Errorf("usage = %+v, want %+v", res.Usage, want)
	}
	// Usage and finish come from the same chunk: they are the last two events.
	n := len(run.events)
	if n < 2 || run.events[n-2].Type != llm.EventUsage || run.events[n-1].Type != llm.EventFinish {
		t.Errorf("last events = %v", run.events[max(0, n-2):])
	}
	if res.ID != "20260313050307df155ecf3e9f4961" || res.Model != "glm-4.7-flash" {
		t.Errorf("meta = %q %q", res.ID, res.Model)
	}
}

// DeepSeek streams reasoning_content and reports cache hits and misses.
func TestFixtureDeepSeekReasoningAndCache(t *testing.T) {
	bodies := fixtureBodies(t, "deepseek/vercel-ai/packages/deepseek/src/chat/__fixtures__/deepseek-tool-call.chunks.txt")
	run := runStream(t, bodies[0])
	if run.err != nil || !run.dec.Complete() {
		t.Fatalf("err=%v complete=%v", run.err, run.dec.Complete())
	}
	res := run.res
	if res.Reasoning == "" || countEvents(run.events, llm.EventReasoning) < 2 {
		t.Errorf("reasoning %q from %d events", res.Reasoning, countEvents(run.events, llm.EventReasoning))
	}
	want := llm.Usage{PromptTokens: 19, CacheReadTokens: 320, CompletionTokens: 83, ReasoningTokens: 39}
	if res.Usage != want {
		t.Errorf("usage = %+v, want %+v", res.Usage, want)
	}
	if len(res.ToolCalls) != 1 || !strings.Contains(res.ToolCalls[0].Arguments, "San Francisco") || res.FinishReason != llm.FinishToolCalls {
		t.Errorf("calls %+v finish %q", res.ToolCalls, res.FinishReason)
	}
	// The reasoning round-trips: the assistant message echoes it.
	if m := res.Message(); m.Reasoning != res.Reasoning {
		t.Errorf("Message().Reasoning lost")
	}

	run = runStream(t, fixtureBodies(t, "deepseek/vercel-ai/packages/deepseek/src/chat/__fixtures__/deepseek-reasoning.chunks.txt")[0])
	if !strings.HasPrefix(run.res.Reasoning, "We need") || run.res.Content == "" {
		t.Errorf("reasoning %q content %q", run.res.Reasoning, run.res.Content)
	}
	want = llm.Usage{PromptTokens: 18, CompletionTokens: 219, ReasoningTokens: 205}
	if run.res.Usage != want {
		t.Errorf("usage = %+v, want %+v", run.res.Usage, want)
	}
}

// OpenRouter sends ": OPENROUTER PROCESSING" comments and reports a
// failure as an error object inside a 200 stream.
func TestFixtureOpenRouterErrorChunk(t *testing.T) {
	bodies := fixtureBodies(t, "openai-compatible/pydantic-ai/tests/models/cassettes/test_openrouter/test_openrouter_stream_error.yaml")
	if !bytes.Contains(bodies[0], []byte(": OPENROUTER PROCESSING")) {
		t.Fatal("fixture lost its comment lines")
	}
	run := runStream(t, bodies[0])
	var apiErr *llm.APIError
	if !errors.As(run.err, &apiErr) {
		t.Fatalf("err = %v, want *llm.APIError", run.err)
	}
	if apiErr.Status != 0 || apiErr.Code != "400" || apiErr.Message != "Token limit reached" || apiErr.Retryable {
		t.Errorf("APIError = %+v", *apiErr)
	}
	// The partial result keeps what arrived: reasoning (from "reasoning",
	// not doubled by reasoning_details), the finish and the usage.
	if run.res.Reasoning != "We need to respond to a greeting. The user" {
		t.Errorf("reasoning = %q", run.res.Reasoning)
	}
	if run.res.FinishReason != llm.FinishLength || countEvents(run.events, llm.EventFinish) != 1 {
		t.Errorf("finish %q in %d events", run.res.FinishReason, countEvents(run.events, llm.EventFinish))
	}
	// The error chunk carries usage too. Its reasoning_tokens (11) exceed
	// completion_tokens (10) while total = prompt + completion: the
	// provider's numbers are inconsistent and are kept as sent.
	want := llm.Usage{PromptTokens: 43, CompletionTokens: 10, ReasoningTokens: 11}
	if run.res.Usage != want {
		t.Errorf("usage = %+v, want %+v", run.res.Usage, want)
	}
}

// Groq reports a failed tool generation as `event: error` in the stream.
func TestFixtureGroqErrorEvent(t *testing.T) {
	bodies := fixtureBodies(t, "openai-compatible/pydantic-ai/tests/models/cassettes/test_groq/test_tool_use_failed_error_streaming.yaml")
	run := runStream(t, bodies[0])
	var apiErr *llm.APIError
	if !errors.As(run.err, &apiErr) {
		t.Fatalf("err = %v, want *llm.APIError", run.err)
	}
	if apiErr.Status != 0 || apiErr.Code != "tool_use_failed" || apiErr.Type != "invalid_request_error" ||
		!strings.HasPrefix(apiErr.Message, "Tool call validation failed") || apiErr.Retryable {
		t.Errorf("APIError = %+v", *apiErr)
	}
	if run.res.Reasoning == "" || len(run.events) == 0 {
		t.Errorf("partial reasoning lost: %q", run.res.Reasoning)
	}
}
