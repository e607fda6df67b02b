package anthropic

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/internal/testkit/fixture"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// sseBody frames JSON payloads as an Anthropic SSE body, with the event
// name taken from each payload's type, as the API sends it.
func sseBody(payloads ...string) []byte {
	var b strings.Builder
	for _, p := range payloads {
		var head struct{ Type string }
		_ = json.Unmarshal([]byte(p), &head)
		fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", head.Type, p)
	}
	return []byte(b.String())
}

func feedAll(t *testing.T, payloads ...string) (wire.StreamDecoder, []llm.Event, error) {
	t.Helper()
	d, evs, _, err := decodeStream(t, sseBody(payloads...))
	return d, evs, err
}

const (
	evMessageStart = `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"usage":{"input_tokens":10,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}`
	evMessageStop  = `{"type":"message_stop"}`
)

func TestDeltaToolIndexIsPosition(t *testing.T) {
	// Anthropic streams one block at a time: text at content index 0, then
	// tool_use blocks at content indexes 1 and 2, which are calls 0 and 1.
	testToolIndex(t, false)
}

// TestDeltaToolIndexInterleaved checks the same mapping when deltas of two
// open tool_use blocks interleave (not seen from Anthropic itself, possible
// from proxies).
func TestDeltaToolIndexInterleaved(t *testing.T) {
	testToolIndex(t, true)
}

func testToolIndex(t *testing.T, interleave bool) {
	evs := []string{
		evMessageStart,
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Checking both."}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_A","name":"weather","input":{}}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\":"}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"Rome\"}"}}`,
		`{"type":"content_block_stop","index":1}`,
		`{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_B","name":"time","input":{}}}`,
		`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"tz\":"}}`,
		`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\"CET\"}"}}`,
		`{"type":"content_block_stop","index":2}`,
		`{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":40}}`,
		evMessageStop,
	}
	if interleave {
		// Start both calls, then alternate their deltas.
		evs = []string{evs[0], evs[1], evs[2], evs[3], evs[4], evs[8], evs[9], evs[5], evs[10], evs[6], evs[7], evs[11], evs[12], evs[13]}
	}
	d, out, err := feedAll(t, evs...)
	if err != nil {
		t.Fatal(err)
	}
	type toolEv struct {
		typ   llm.EventType
		index int
		id    string
		text  string
	}
	got := map[int][]toolEv{}
	for _, e := range out {
		if e.Type == llm.EventToolCallStart || e.Type == llm.EventToolCallDelta {
			got[e.ToolIndex] = append(got[e.ToolIndex], toolEv{e.Type, e.ToolIndex, e.ToolCallID, e.Text})
		}
	}
	want := map[int][]toolEv{
		0: {{llm.EventToolCallStart, 0, "toolu_A", ""}, {llm.EventToolCallDelta, 0, "", `{"city":`}, {llm.EventToolCallDelta, 0, "", `"Rome"}`}},
		1: {{llm.EventToolCallStart, 1, "toolu_B", ""}, {llm.EventToolCallDelta, 1, "", `{"tz":`}, {llm.EventToolCallDelta, 1, "", `"CET"}`}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("tool events by index\n got %+v\nwant %+v", got, want)
	}
	res := d.Result()
	wantCalls := []llm.ToolCall{
		{ID: "toolu_A", Name: "weather", Arguments: `{"city":"Rome"}`},
		{ID: "toolu_B", Name: "time", Arguments: `{"tz":"CET"}`},
	}
	if !reflect.DeepEqual(res.ToolCalls, wantCalls) {
		t.Errorf("ToolCalls = %+v, want %+v", res.ToolCalls, wantCalls)
	}
	if res.Content != "Checking both." || res.FinishReason != llm.FinishToolCalls || !d.Complete() {
		t.Errorf("Content %q Finish %q Complete %v", res.Content, res.FinishReason, d.Complete())
	}
}

func TestStreamToolWithoutArgumentsCompletesAsEmptyObject(t *testing.T) {
	d, evs, err := feedAll(t,
		evMessageStart,
		`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"now","input":{}}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":""}}`,
		`{"type":"content_block_stop","index":0}`,
		// A proxy that sends the whole input in the start event and no delta.
		`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_2","name":"get","input":{"q":"x"}}}`,
		`{"type":"content_block_stop","index":1}`,
		`{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":5}}`,
		evMessageStop,
	)
	if err != nil {
		t.Fatal(err)
	}
	res := d.Result()
	if len(res.ToolCalls) != 2 || res.ToolCalls[0].Arguments != "{}" || res.ToolCalls[1].Arguments != `{"q":"x"}` {
		t.Errorf("ToolCalls = %+v", res.ToolCalls)
	}
	var deltas int
	for _, e := range evs {
		if e.Type == llm.EventToolCallDelta {
			deltas++
		}
	}
	if deltas != 2 {
		t.Errorf("%d argument deltas, want 2 (one per call, no empty ones)", deltas)
	}
}

func TestStreamThinkingBlocksKeepTheirOwnSignatures(t *testing.T) {
	d, evs, err := feedAll(t,
		evMessageStart,
		`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}       }`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"step one"}   }`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"SIG-ONE"}}`,
		`{"type":"content_block_stop","index":0    }`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"OPAQUE"}}`,
		`{"type":"content_block_stop","index":1}`,
		`{"type":"content_block_start","index":2,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"Hi"}}`,
		`{"type":"content_block_stop","index":2}`,
		`{"type":"content_block_start","index":3,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
		`{"type":"content_block_delta","index":3,"delta":{"type":"thinking_delta","thinking":"step "}}`,
		`{"type":"content_block_delta","index":3,"delta":{"type":"thinking_delta","thinking":"two"}}`,
		`{"type":"content_block_delta","index":3,"delta":{"type":"signature_delta","signature":"SIG-TWO"}}`,
		`{"type":"content_block_stop","index":3}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":50}}`,
		evMessageStop,
	)
	if err != nil {
		t.Fatal(err)
	}
	res := d.Result()
	want := []llm.ThinkingBlock{
		{Format: "anthropic", Text: "step one", Signature: "SIG-ONE"},
		{Format: "anthropic", Redacted: true, Data: "OPAQUE"},
		{Format: "anthropic", Text: "step two", Signature: "SIG-TWO"},
	}
	if !reflect.DeepEqual(res.ThinkingBlocks, want) {
		t.Errorf("ThinkingBlocks = %+v\nwant %+v", res.ThinkingBlocks, want)
	}
	if res.Reasoning != "step onestep two" || res.Content != "Hi" {
		t.Errorf("Reasoning %q Content %q", res.Reasoning, res.Content)
	}
	// Each signed block's signature_delta is an EventReasoning with empty
	// Text and the signature, once per block (the redacted block has none).
	var reasoning []string
	for _, e := range evs {
		if e.Type == llm.EventReasoning {
			reasoning = append(reasoning, e.Text+"|"+e.Signature)
		}
	}
	if !reflect.DeepEqual(reasoning, []string{"step one|", "|SIG-ONE", "step |", "two|", "|SIG-TWO"}) {
		t.Errorf("reasoning events %q", reasoning)
	}
}

func TestStreamUsageCumulativeWithCache(t *testing.T) {
	d, evs, err := feedAll(t,
		`{"type":"message_start","message":{"id":"msg_c","model":"m","usage":{"input_tokens":12,"cache_creation_input_tokens":300,"cache_read_input_tokens":1500,"output_tokens":1}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"x"}}`,
		`{"type":"content_block_stop","index":0}`,
		// message_delta repeats input_tokens and zeroes the cache fields: zeros do not overwrite.
		`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":12,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":77}}`,
		evMessageStop,
	)
	if err != nil {
		t.Fatal(err)
	}
	want := llm.Usage{PromptTokens: 12, CacheReadTokens: 1500, CacheWriteTokens: 300, CompletionTokens: 77}
	if got := d.Result().Usage; got != want {
		t.Errorf("Usage = %+v, want %+v", got, want)
	}
	var usages []llm.Usage
	for _, e := range evs {
		if e.Type == llm.EventUsage {
			usages = append(usages, *e.Usage)
		}
	}
	if len(usages) != 1 || usages[0] != want {
		t.Errorf("usage events %+v, want exactly [%+v]", usages, want)
	}
	if evs[0].Type != llm.EventText || evs[0].Text != "x" {
		t.Errorf("first event %+v: the text carried by content_block_start must be emitted", evs[0])
	}
}

func TestStreamErrorEvent(t *testing.T) {
	cases := []struct {
		typ       string
		retryable bool
		status    int
	}{
		{"overloaded_error", true, 529},
		{"api_error", true, 0},
		{"invalid_request_error", false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.typ, func(t *testing.T) {
			d, evs, err := feedAll(t,
				evMessageStart,
				`{"type":"error","error":{"details":null,"type":"`+tc.typ+`","message":"Overloaded"}          }`,
			)
			var ae *llm.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v (%T), want *llm.APIError", err, err)
			}
			if ae.Type != tc.typ || ae.Message != "Overloaded" || ae.Retryable != tc.retryable || ae.Status != tc.status || ae.Provider != "anthropic" {
				t.Errorf("APIError = %+v", ae)
			}
			// message_start alone emits nothing, so the call may be retried.
			if len(evs) != 0 || d.Complete() {
				t.Errorf("events %v, Complete %v; want none/false", evs, d.Complete())
			}
			if d.Result().Usage.PromptTokens != 10 || d.Result().ID != "msg_1" {
				t.Errorf("partial result lost message_start: %+v", d.Result())
			}
		})
	}
}

func TestStreamStopReasons(t *testing.T) {
	cases := map[string]llm.FinishReason{
		"end_turn": llm.FinishStop, "stop_sequence": llm.FinishStop, "max_tokens": llm.FinishLength,
		"tool_use": llm.FinishToolCalls, "refusal": llm.FinishContentFilter,
		"pause_turn": "", "model_context_window_exceeded": "", "something_new": "",
	}
	for reason, want := range cases {
		t.Run(reason, func(t *testing.T) {
			d, evs, err := feedAll(t,
				evMessageStart,
				`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":""}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}}`,
				`{"type":"content_block_stop","index":0}`,
				`{"type":"message_delta","delta":{"stop_reason":"`+reason+`"},"usage":{"output_tokens":3}}`,
			)
			if err != nil {
				t.Fatal(err)
			}
			if d.Complete() {
				t.Error("Complete before message_stop")
			}
			var finishes []llm.FinishReason
			var texts int
			for _, e := range evs {
				switch e.Type {
				case llm.EventFinish:
					finishes = append(finishes, e.Finish)
				case llm.EventText:
					texts++
				}
			}
			if len(finishes) != 1 || finishes[0] != want || d.Result().FinishReason != want {
				t.Errorf("finish %q / %q, want %q", finishes, d.Result().FinishReason, want)
			}
			if texts != 1 {
				t.Errorf("%d text events, want 1 (empty deltas are not emitted)", texts)
			}
			done, err := d.Feed(nil, []byte(evMessageStop), func(llm.Event) bool { return true })
			if !done || err != nil || !d.Complete() {
				t.Errorf("message_stop: done=%v err=%v Complete=%v", done, err, d.Complete())
			}
		})
	}
}

func TestStreamAbortAndMalformed(t *testing.T) {
	d := Codec{}.NewStreamDecoder()
	_, err := d.Feed(nil, []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`),
		func(llm.Event) bool { return false })
	if !errors.Is(err, wire.ErrAborted) {
		t.Errorf("err = %v, want wire.ErrAborted", err)
	}
	for _, bad := range []string{
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"unterminated}}`,
		`{"type":"content_block_delta","index":"x","delta":{"type":"thinking_delta","thinking":"a"}}`,
		`{"type":"content_block_start","index":99999999,"content_block":{"type":"text","text":""}}`,
		`[1,2]`,
	} {
		d := Codec{}.NewStreamDecoder()
		_, err := d.Feed(nil, []byte(bad), func(llm.Event) bool { return true })
		var de *llm.DecodeError
		if !errors.As(err, &de) {
			t.Errorf("Feed(%s) = %v, want *llm.DecodeError", bad, err)
		}
	}
	// Pings, unknown events and empty data are ignored.
	d = Codec{}.NewStreamDecoder()
	for _, ok := range []string{`{"type": "ping"}`, `{"type":"brand_new_event","x":[1]}`, ``, `{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","citation":{}}}`} {
		done, err := d.Feed([]byte("ping"), []byte(ok), func(llm.Event) bool { t.Errorf("event from %q", ok); return true })
		if done || err != nil {
			t.Errorf("Feed(%q) = %v, %v", ok, done, err)
		}
	}
	if d.Complete() {
		t.Error("no-op events completed the stream")
	}
}

func TestStreamServerToolUseIsNotAClientCall(t *testing.T) {
	d, evs, err := feedAll(t,
		evMessageStart,
		`{"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"query\":\"x\"}"}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[]}}`,
		`{"type":"content_block_stop","index":1}`,
		`{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"client","input":{}}}`,
		`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{}"}}`,
		`{"type":"content_block_stop","index":2}`,
		`{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":3}}`,
		evMessageStop,
	)
	if err != nil {
		t.Fatal(err)
	}
	res := d.Result()
	if len(res.ToolCalls) != 1 || res.ToolCalls[0].ID != "toolu_1" {
		t.Errorf("ToolCalls = %+v, want only the client call", res.ToolCalls)
	}
	for _, e := range evs {
		if (e.Type == llm.EventToolCallStart || e.Type == llm.EventToolCallDelta) && e.ToolIndex != 0 {
			t.Errorf("tool event %+v: the client call is position 0", e)
		}
	}
}

// TestThinkingRoundTrip parses recorded thinking answers (buffered and
// streamed), builds the next request from result.Message() and checks that
// the assistant turn replays every thinking block first, in order, with its
// own signature, exactly as the recorded follow-up request sent it.
func TestThinkingRoundTrip(t *testing.T) {
	dir := fixture.Require(t)
	idx, err := fixture.LoadIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]bool{
		"anthropic/fantasy/providertests/testdata/TestAnthropicThinking/claude-sonnet-4/thinking.yaml":           false,
		"anthropic/fantasy/providertests/testdata/TestAnthropicThinking/claude-sonnet-4/thinking-streaming.yaml": true,
	}
	seen := 0
	for _, e := range idx {
		stream, ok := files[e.File]
		if !ok {
			continue
		}
		seen++
		t.Run(e.File, func(t *testing.T) {
			exs, err := fixture.Load(dir, e)
			if err != nil || len(exs) < 2 {
				t.Fatalf("load: %v (%d exchanges)", err, len(exs))
			}
			var res *llm.ChatResult
			if stream {
				d, _, _, err := decodeStream(t, exs[0].Response.Body)
				if err != nil || !d.Complete() {
					t.Fatalf("decode: %v complete=%v", err, d.Complete())
				}
				res = d.Result()
			} else {
				if res, err = (Codec{}).ParseChat(exs[0].Response.Body); err != nil {
					t.Fatal(err)
				}
			}
			if len(res.ThinkingBlocks) == 0 || len(res.ToolCalls) == 0 {
				t.Fatalf("recorded answer lost its thinking or tool call: %+v", res)
			}
			var recorded struct {
				Messages []struct {
					Role    string            `json:"role"`
					Content []json.RawMessage `json:"content"`
				} `json:"messages"`
			}
			if err := json.Unmarshal(exs[1].Request.Body, &recorded); err != nil {
				t.Fatal(err)
			}
			next := &llm.ChatRequest{
				Model: "claude-sonnet-4-20250514",
				Messages: []llm.Message{
					llm.UserText("What's the weather in Florence, Italy?"),
					res.Message(),
					llm.ToolResult(res.ToolCalls[0].ID, "40 C", false),
				},
				Reasoning: &llm.Reasoning{BudgetTokens: 4000},
				MaxTokens: 4096,
			}
			r, err := Codec{}.ChatRequest(next, wire.BuildOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var built struct {
				Messages []struct {
					Role    string            `json:"role"`
					Content []json.RawMessage `json:"content"`
				} `json:"messages"`
			}
			if err := json.Unmarshal(r.Body, &built); err != nil {
				t.Fatal(err)
			}
			got, want := built.Messages[1], recorded.Messages[1]
			if got.Role != "assistant" || want.Role != "assistant" {
				t.Fatalf("roles %q / %q", got.Role, want.Role)
			}
			if len(got.Content) != len(want.Content) {
				t.Fatalf("assistant blocks: got %d, recorded %d\n%s", len(got.Content), len(want.Content), r.Body)
			}
			for i := range want.Content {
				if !sameJSON(string(got.Content[i]), string(want.Content[i])) {
					t.Errorf("block %d:\n got %s\nwant %s", i, got.Content[i], want.Content[i])
				}
			}
			// Each thinking block replays with its own signature, first, in order.
			for i, tb := range res.ThinkingBlocks {
				var b struct{ Type, Thinking, Signature string }
				_ = json.Unmarshal(got.Content[i], &b)
				if b.Type != "thinking" || b.Signature != tb.Signature || b.Thinking != tb.Text {
					t.Errorf("block %d = %+v, want thinking with signature %.16q", i, b, tb.Signature)
				}
			}
		})
	}
	if seen != len(files) {
		t.Fatalf("found %d of %d thinking recordings", seen, len(files))
	}

	// Several blocks, redacted included, keep their order and signatures.
	d, _, err := feedAll(t,
		evMessageStart,
		`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"a"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"S1"}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"R2"}}`,
		`{"type":"content_block_stop","index":1}`,
		`{"type":"content_block_start","index":2,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
		`{"type":"content_block_delta","index":2,"delta":{"type":"thinking_delta","thinking":"c"}}`,
		`{"type":"content_block_delta","index":2,"delta":{"type":"signature_delta","signature":"S3"}}`,
		`{"type":"content_block_stop","index":2}`,
		`{"type":"content_block_start","index":3,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"answer"}}`,
		`{"type":"content_block_stop","index":3}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":9}}`,
		evMessageStop,
	)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := buildBody(t, &llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("q"), d.Result().Message(), llm.UserText("more")}}, wire.BuildOptions{})
	gotAssistant, _ := json.Marshal(body["messages"].([]any)[1])
	wantAssistant := `{"role":"assistant","content":[
		{"type":"thinking","thinking":"a","signature":"S1"},
		{"type":"redacted_thinking","data":"R2"},
		{"type":"thinking","thinking":"c","signature":"S3"},
		{"type":"text","text":"answer"}]}`
	if !sameJSON(string(gotAssistant), wantAssistant) {
		t.Errorf("assistant replay\n got %s\nwant %s", gotAssistant, wantAssistant)
	}
}
