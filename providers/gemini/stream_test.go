package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// feedAll feeds chunks to a fresh decoder and returns it with the events.
func feedAll(t *testing.T, chunks ...string) (wire.StreamDecoder, []llm.Event, error) {
	t.Helper()
	d := Codec{}.NewStreamDecoder()
	var events []llm.Event
	for _, c := range chunks {
		done, err := d.Feed(nil, []byte(c), collect(&events))
		if done {
			t.Fatal("Feed returned done")
		}
		if err != nil {
			return d, events, err
		}
	}
	return d, events, nil
}

func TestFinishReasonMapping(t *testing.T) {
	cases := []struct {
		raw  string
		want llm.FinishReason
		seen bool
	}{
		{`"STOP"`, llm.FinishStop, true},
		{`"MAX_TOKENS"`, llm.FinishLength, true},
		{`"SAFETY"`, llm.FinishContentFilter, true},
		{`"RECITATION"`, llm.FinishContentFilter, true},
		{`"BLOCKLIST"`, llm.FinishContentFilter, true},
		{`"PROHIBITED_CONTENT"`, llm.FinishContentFilter, true},
		{`"SPII"`, llm.FinishContentFilter, true},
		{`"IMAGE_SAFETY"`, llm.FinishContentFilter, true},
		{`"IMAGE_PROHIBITED_CONTENT"`, llm.FinishContentFilter, true},
		{`"IMAGE_RECITATION"`, llm.FinishContentFilter, true},
		{`"IMAGE_OTHER"`, "", true},
		{`"NO_IMAGE"`, "", true},
		{`"TOO_MANY_TOOL_CALLS"`, "", true},
		{`"OTHER"`, "", true},
		{`"LANGUAGE"`, "", true},
		{`"MALFORMED_FUNCTION_CALL"`, "", true},
		{`"UNEXPECTED_TOOL_CALL"`, "", true},
		{`"SOMETHING_NEW"`, "", true},
		{`"FINISH_REASON_UNSPECIFIED"`, "", false},
		{`""`, "", false},
		{`null`, "", false},
		{``, "", false},
		// Legacy integer encoding (google.ai.generativelanguage.v1beta numbers).
		{`0`, "", false},
		{`1`, llm.FinishStop, true},
		{`2`, llm.FinishLength, true},
		{`3`, llm.FinishContentFilter, true},
		{`4`, llm.FinishContentFilter, true},
		{`5`, "", true},
		{`6`, "", true},
		{`7`, llm.FinishContentFilter, true},
		{`8`, llm.FinishContentFilter, true},
		{`9`, llm.FinishContentFilter, true},
		{`10`, "", true},
		{`11`, llm.FinishContentFilter, true},
		{`99`, "", true},
	}
	for _, c := range cases {
		got, seen := finishFromRaw([]byte(c.raw))
		if got != c.want || seen != c.seen {
			t.Errorf("finishFromRaw(%s) = %q,%v; want %q,%v", c.raw, got, seen, c.want, c.seen)
		}
		// An integer maps like its name.
		if n := strings.Trim(c.raw, `"`); c.raw != "" && c.raw[0] != '"' && c.raw != "null" {
			for i, name := range finishNames {
				if n == strconv.Itoa(i) {
					byName, _ := finishFromRaw([]byte(`"` + name + `"`))
					if byName != got {
						t.Errorf("%d maps to %q but %s to %q", i, got, name, byName)
					}
				}
			}
		}
	}
}

func TestStreamFinishAndToolCalls(t *testing.T) {
	d, events, err := feedAll(t,
		`{"candidates":[{"content":{"parts":[{"text":"Let me check."}],"role":"model"}}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":3},"responseId":"r1","modelVersion":"gemini-x"}`,
		`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"a","args":{ "x" : [1, 2] }},"thoughtSignature":"S0"},{"functionCall":{"name":"b","id":"own-id"}}],"role":"model"},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":9,"thoughtsTokenCount":4}}`,
	)
	if err != nil {
		t.Fatal(err)
	}
	var types []llm.EventType
	for _, ev := range events {
		types = append(types, ev.Type)
	}
	want := []llm.EventType{llm.EventText, llm.EventUsage, llm.EventToolCallStart, llm.EventToolCallStart, llm.EventUsage, llm.EventFinish}
	if len(types) != len(want) {
		t.Fatalf("events %v, want %v", types, want)
	}
	for i := range want {
		if types[i] != want[i] {
			t.Fatalf("events %v, want %v", types, want)
		}
	}
	if e := events[2]; e.ToolIndex != 0 || e.ToolCallID != "call_0" || e.Text != `{"x":[1,2]}` || e.Signature != "S0" {
		t.Errorf("first call event %+v", e)
	}
	if e := events[3]; e.ToolIndex != 1 || e.ToolCallID != "own-id" || e.Text != "{}" {
		t.Errorf("second call event %+v", e)
	}
	if events[5].Finish != llm.FinishToolCalls {
		t.Errorf("finish %q, want tool_calls", events[5].Finish)
	}
	res := d.Result()
	if res.ID != "r1" || res.Model != "gemini-x" || !d.Complete() {
		t.Errorf("result %+v complete %v", res, d.Complete())
	}
	if want := (llm.Usage{PromptTokens: 10, CompletionTokens: 13, ReasoningTokens: 4}); res.Usage != want {
		t.Errorf("usage %+v", res.Usage)
	}
}

func TestStreamUsageCumulative(t *testing.T) {
	d, events, err := feedAll(t,
		`{"candidates":[{"content":{"parts":[{"text":"a"}]}}],"usageMetadata":{"trafficType":"ON_DEMAND"}}`,
		`{"candidates":[{"content":{"parts":[{"text":"b"}]}}],"usageMetadata":{"promptTokenCount":100,"cachedContentTokenCount":60,"candidatesTokenCount":1}}`,
		`{"candidates":[{"content":{"parts":[{"text":"c"}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"d"}]}}],"usageMetadata":{"promptTokenCount":100,"cachedContentTokenCount":60,"candidatesTokenCount":1}}`,
		`{"candidates":[{"content":{"parts":[{"text":"e"}]},"finishReason":"MAX_TOKENS"}],"usageMetadata":{"promptTokenCount":100,"cachedContentTokenCount":60,"candidatesTokenCount":2,"toolUsePromptTokenCount":5}}`,
	)
	if err != nil {
		t.Fatal(err)
	}
	var usages []llm.Usage
	for _, ev := range events {
		if ev.Type == llm.EventUsage {
			usages = append(usages, *ev.Usage)
		}
	}
	want := []llm.Usage{
		{PromptTokens: 40, CacheReadTokens: 60, CompletionTokens: 1},
		{PromptTokens: 45, CacheReadTokens: 60, CompletionTokens: 2},
	}
	if len(usages) != len(want) || usages[0] != want[0] || usages[1] != want[1] {
		t.Errorf("usage events %+v, want %+v (a chunk without counts or with the same counts emits none)", usages, want)
	}
	if res := d.Result(); res.Usage != want[1] || res.FinishReason != llm.FinishLength || res.Content != "abcde" {
		t.Errorf("result %+v", res)
	}
	// Two usage events must not share their Usage.
	for i := range events {
		for j := i + 1; j < len(events); j++ {
			if events[i].Usage != nil && events[i].Usage == events[j].Usage {
				t.Error("usage events share a pointer")
			}
		}
	}
}

func TestStreamIncomplete(t *testing.T) {
	// A recorded stream cut before its finishing chunk.
	x := findExchange(t, "TestGoogleCommon/gemini-3-pro-preview/simple_streaming.yaml", 0)
	body := x.Response.Body
	cut := bytes.LastIndex(body, []byte("data: "))
	run := runSSE(t, body[:cut])
	if run.dec.Complete() {
		t.Error("Complete() true for a stream cut before its finishReason")
	}
	if len(run.events) == 0 || run.dec.Result().Content == "" {
		t.Error("the partial text was lost")
	}
	full := runSSE(t, body)
	if !full.dec.Complete() {
		t.Error("the whole stream is not complete")
	}

	d, _, err := feedAll(t, `{"candidates":[{"content":{"parts":[{"text":"hi"}]}}],"usageMetadata":{"promptTokenCount":1}}`, `{"candidates":[{"finishReason":"FINISH_REASON_UNSPECIFIED"}]}`)
	if err != nil || d.Complete() {
		t.Errorf("Complete() = %v, err %v; an unspecified reason is no finish", d.Complete(), err)
	}
}

func TestStreamPromptBlocked(t *testing.T) {
	for _, reason := range []string{`"SAFETY"`, `"OTHER"`, `2`} {
		d, events, err := feedAll(t, `{"promptFeedback":{"blockReason":`+reason+`,"safetyRatings":[]},"usageMetadata":{"promptTokenCount":8,"totalTokenCount":8}}`)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Complete() || d.Result().FinishReason != llm.FinishContentFilter {
			t.Errorf("blockReason %s: complete %v finish %q", reason, d.Complete(), d.Result().FinishReason)
		}
		if last := events[len(events)-1]; last.Type != llm.EventFinish {
			t.Errorf("last event %v", last.Type)
		}
	}
	d, _, _ := feedAll(t, `{"promptFeedback":{"blockReason":"BLOCK_REASON_UNSPECIFIED"}}`)
	if d.Complete() {
		t.Error("unspecified block reason completed the stream")
	}
	res, err := Codec{}.ParseChat([]byte(`{"promptFeedback":{"blockReason":"PROHIBITED_CONTENT"}}`))
	if err != nil || res.FinishReason != llm.FinishContentFilter {
		t.Errorf("ParseChat blocked prompt: %v %v", res, err)
	}
}

func TestStreamErrorChunk(t *testing.T) {
	cases := []struct {
		chunk     string
		status    string
		retryable bool
	}{
		{`{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}`, "UNAVAILABLE", true},
		{`{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED"}}`, "RESOURCE_EXHAUSTED", true},
		{`{"error":{"code":500,"message":"oops","status":"INTERNAL"}}`, "INTERNAL", true},
		{`{"error":{"code":400,"message":"bad","status":"INVALID_ARGUMENT"}}`, "INVALID_ARGUMENT", false},
		{`{"error":{"code":503,"message":"no status"}}`, "", true},
		{`{"error":"flat message"}`, "", false},
	}
	for _, c := range cases {
		d, events, err := feedAll(t, `{"candidates":[{"content":{"parts":[{"text":"partial"}]}}]}`, c.chunk)
		var ae *llm.APIError
		if !errors.As(err, &ae) {
			t.Fatalf("%s: error %v", c.chunk, err)
		}
		if ae.Type != c.status || ae.Retryable != c.retryable || ae.Message == "" || ae.Provider != "gemini" || ae.Status != 0 {
			t.Errorf("%s: %+v", c.chunk, ae)
		}
		if strings.Contains(c.chunk, "503") && c.status == "" && ae.Code != "503" {
			t.Errorf("numeric code not kept: %+v", ae)
		}
		if len(events) != 1 || d.Result().Content != "partial" || d.Complete() {
			t.Errorf("partial output lost or stream marked complete")
		}
	}
}

func TestStreamAbort(t *testing.T) {
	chunks := []string{
		`{"candidates":[{"content":{"parts":[{"text":"a"}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"x","thought":true}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{}}}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","willContinue":true}}]}}]}`,
		`{"usageMetadata":{"promptTokenCount":3}}`,
		`{"candidates":[{"finishReason":"STOP"}]}`,
	}
	for _, c := range chunks {
		d := Codec{}.NewStreamDecoder()
		_, err := d.Feed(nil, []byte(c), func(llm.Event) bool { return false })
		if !errors.Is(err, wire.ErrAborted) {
			t.Errorf("%s: err %v, want ErrAborted", c, err)
		}
	}
}

func TestStreamThoughtBlocks(t *testing.T) {
	d, _, err := feedAll(t,
		`{"candidates":[{"content":{"parts":[{"text":"think ","thought":true}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"more","thought":true,"thoughtSignature":"T1"}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"again","thought":true}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"Answer"}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"","thoughtSignature":"A1"}]},"finishReason":"STOP"}]}`,
	)
	if err != nil {
		t.Fatal(err)
	}
	res := d.Result()
	want := []llm.ThinkingBlock{
		{Format: "gemini", Text: "think more", Signature: "T1"},
		{Format: "gemini", Text: "again"},
		{Format: "gemini", Signature: "A1"},
	}
	if len(res.ThinkingBlocks) != len(want) {
		t.Fatalf("blocks %+v", res.ThinkingBlocks)
	}
	for i := range want {
		if res.ThinkingBlocks[i] != want[i] {
			t.Errorf("block %d = %+v, want %+v", i, res.ThinkingBlocks[i], want[i])
		}
	}
	if res.Reasoning != "think moreagain" || res.Content != "Answer" {
		t.Errorf("reasoning %q content %q", res.Reasoning, res.Content)
	}

	// A thought still open at the end is in Result, and Result does not
	// change the decoder.
	d2, _, _ := feedAll(t, `{"candidates":[{"content":{"parts":[{"text":"pending","thought":true}]}}]}`)
	for i := 0; i < 2; i++ {
		if b := d2.Result().ThinkingBlocks; len(b) != 1 || b[0].Text != "pending" {
			t.Errorf("call %d: blocks %+v", i, b)
		}
	}
}

func TestStreamInlineImage(t *testing.T) {
	d, _, err := feedAll(t, `{"candidates":[{"content":{"parts":[{"inlineData":{"mimeType":"image/png","data":"iVBORw=="}},{"inlineData":{"mimeType":"audio/wav","data":"AAAA"}}]},"finishReason":"STOP"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	imgs := d.Result().Images
	if len(imgs) != 1 || imgs[0].MIMEType != "image/png" || string(imgs[0].Data) != "\x89PNG" || imgs[0].Type != llm.PartImage {
		t.Errorf("images %+v", imgs)
	}
}

func TestDecodeErrors(t *testing.T) {
	bad := []string{
		`{"candidates":[{"content":{"parts":[{"text":"unterminated}]}}]}`,
		`[1,2]`,
		`"just a string"`,
		`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{"a":}}}]}}]}`,
		`{"usageMetadata":{"promptTokenCount":"many"}}`,
		`{"candidates":[{"content":{"parts":[{"inlineData":{"mimeType":"image/png","data":"!!!"}}]}}]}`,
	}
	for _, c := range bad {
		_, _, err := feedAll(t, c)
		var de *llm.DecodeError
		if !errors.As(err, &de) {
			t.Errorf("%s: error %v, want DecodeError", c, err)
		}
	}
	if _, _, err := feedAll(t, "", "  \n"); err != nil {
		t.Errorf("blank data: %v", err)
	}
	for _, body := range []string{``, `{"candidates":`, `[{"candidates":[]},`} {
		if _, err := (Codec{}).ParseChat([]byte(body)); err == nil {
			t.Errorf("ParseChat(%q) succeeded", body)
		}
	}
}

func TestParseErrorShapes(t *testing.T) {
	cases := []struct {
		body string
		want wire.ErrorInfo
	}{
		{`{"error":{"code":400,"message":"Invalid value","status":"INVALID_ARGUMENT"}}`, wire.ErrorInfo{Type: "INVALID_ARGUMENT", Code: "INVALID_ARGUMENT", Message: "Invalid value"}},
		{`[{"error":{"code":429,"message":"slow down","status":"RESOURCE_EXHAUSTED"}}]`, wire.ErrorInfo{Type: "RESOURCE_EXHAUSTED", Code: "RESOURCE_EXHAUSTED", Message: "slow down"}},
		{`{"message":"not google"}`, wire.ErrorInfo{}},
		{`<html>502</html>`, wire.ErrorInfo{}},
		{``, wire.ErrorInfo{}},
	}
	for _, c := range cases {
		if got := (Codec{}).ParseError(400, []byte(c.body)); got != c.want {
			t.Errorf("ParseError(%s) = %+v, want %+v", c.body, got, c.want)
		}
	}
}

func TestRetryDelay(t *testing.T) {
	env := func(details string) string {
		return `{"error":{"code":429,"message":"m","status":"RESOURCE_EXHAUSTED","details":[` + details + `]}}`
	}
	retry := func(v string) string {
		return `{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":` + v + `}`
	}
	cases := []struct {
		body string
		want time.Duration
	}{
		{env(retry(`"12s"`)), 12 * time.Second},
		{env(retry(`"0.5s"`)), 500 * time.Millisecond},
		{env(retry(`"34.4s"`)), 34400 * time.Millisecond},
		{env(retry(`{"seconds":"3","nanos":250000000}`)), 3250 * time.Millisecond},
		{"[" + env(retry(`"7s"`)) + "]", 7 * time.Second},
		{env(retry(`"soon"`)), 0},
		{env(retry(`"12"`)), 0},
		{env(retry(`"-3s"`)), 0},
		{env(retry(`null`)), 0},
		{env(`{"@type":"type.googleapis.com/google.rpc.Help"}`), 0},
		{`{"error":{"code":429}}`, 0},
		{`not json`, 0},
		{``, 0},
	}
	for _, c := range cases {
		if got := RetryDelay([]byte(c.body)); got != c.want {
			t.Errorf("RetryDelay(%s) = %v, want %v", c.body, got, c.want)
		}
	}
}

func TestPartialArgsWriter(t *testing.T) {
	cases := []struct {
		name  string
		frags []string
		want  string
	}{
		{"flat", []string{`{"jsonPath":"$.a","numberValue":1}`, `{"jsonPath":"$.b","boolValue":true}`, `{"jsonPath":"$.c","nullValue":"NULL_VALUE"}`}, `{"a":1,"b":true,"c":null}`},
		{"string in pieces", []string{`{"jsonPath":"$.s","stringValue":"he","willContinue":true}`, `{"jsonPath":"$.s","stringValue":"llo \"w\"","willContinue":true}`, `{"jsonPath":"$.s","stringValue":""}`}, `{"s":"hello \"w\""}`},
		{"string left open", []string{`{"jsonPath":"$.s","stringValue":"cut","willContinue":true}`}, `{"s":"cut"}`},
		{"string open then other path", []string{`{"jsonPath":"$.s","stringValue":"x","willContinue":true}`, `{"jsonPath":"$.n","numberValue":2}`}, `{"s":"x","n":2}`},
		{"nested objects and arrays", []string{`{"jsonPath":"$.r.items[0].k","stringValue":"a"}`, `{"jsonPath":"$.r.items[0].v","numberValue":1}`, `{"jsonPath":"$.r.items[1].k","stringValue":"b"}`, `{"jsonPath":"$.r.name","stringValue":"n"}`, `{"jsonPath":"$.top","numberValue":-2.5e3}`}, `{"r":{"items":[{"k":"a","v":1},{"k":"b"}],"name":"n"},"top":-2.5e3}`},
		{"array of scalars with a gap", []string{`{"jsonPath":"$.l[0]","stringValue":"a"}`, `{"jsonPath":"$.l[2]","stringValue":"c"}`}, `{"l":["a",null,"c"]}`},
		{"nested arrays", []string{`{"jsonPath":"$.m[0][0]","numberValue":1}`, `{"jsonPath":"$.m[0][1]","numberValue":2}`, `{"jsonPath":"$.m[1][0]","numberValue":3}`}, `{"m":[[1,2],[3]]}`},
		{"bracket names", []string{`{"jsonPath":"$['a b']","stringValue":"x"}`, `{"jsonPath":"$[\"q\\\"k\"].z","numberValue":1}`}, `{"a b":"x","q\"k":{"z":1}}`},
		{"revisit is still valid JSON", []string{`{"jsonPath":"$.a.x","numberValue":1}`, `{"jsonPath":"$.b","numberValue":2}`, `{"jsonPath":"$.a.y","numberValue":3}`}, `{"a":{"x":1},"b":2,"a":{"y":3}}`},
		{"bad path and no value are skipped", []string{`{"jsonPath":"a.b","numberValue":1}`, `{"jsonPath":"$.c"}`, `{"jsonPath":"$.d","numberValue":"NaN"}`}, `{"d":null}`},
		{"no fragments", nil, `{}`},
		{"control bytes are escaped", []string{`{"jsonPath":"$.s","stringValue":"a` + "\x01" + `b\u00e9","willContinue":true}`, `{"jsonPath":"$.s","stringValue":"\n"}`}, `{"s":"a\u0001bé\n"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var w argsWriter
			text := w.start()
			for _, f := range c.frags {
				w.out = w.out[:0]
				if err := w.apply([]byte(f)); err != nil {
					t.Fatalf("apply(%s): %v", f, err)
				}
				text += string(w.out)
			}
			w.out = w.out[:0]
			w.finish()
			text += string(w.out)
			if text != c.want {
				t.Errorf("got  %s\nwant %s", text, c.want)
			}
		})
	}
}

// FuzzStreamDecoder feeds arbitrary chunks: the decoder never panics, and
// whatever it emits keeps ToolIndex within the calls it opened.
func FuzzStreamDecoder(f *testing.F) {
	seeds := []string{
		`{"candidates":[{"content":{"parts":[{"text":"hi","thoughtSignature":"S"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":3}}`,
		`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{"a":[1,{"b":null}]},"id":"x"}}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","willContinue":true}}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"functionCall":{"partialArgs":[{"jsonPath":"$.a[2].b","stringValue":"x","willContinue":true}],"willContinue":true}}]}}]}`,
		`{"promptFeedback":{"blockReason":1}}`,
		`{"error":{"code":503,"status":"UNAVAILABLE","message":"m"}}`,
		`{"candidates":[{"content":{"parts":[{"text":"t","thought":true},{"inlineData":{"mimeType":"image/png","data":"AA=="}}]},"finishReason":7}]}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s), []byte(seeds[3]))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		d := Codec{}.NewStreamDecoder()
		opened := 0
		emit := func(ev llm.Event) bool {
			switch ev.Type {
			case llm.EventToolCallStart:
				if ev.ToolIndex != opened {
					t.Fatalf("start at %d, %d calls open", ev.ToolIndex, opened)
				}
				opened++
			case llm.EventToolCallDelta:
				if ev.ToolIndex < 0 || ev.ToolIndex >= opened {
					t.Fatalf("delta for call %d of %d", ev.ToolIndex, opened)
				}
			case llm.EventFinish:
				if !ev.Finish.Valid() {
					t.Fatalf("finish %q", ev.Finish)
				}
			}
			return true
		}
		for _, c := range [][]byte{a, b, []byte(`{"candidates":[{"finishReason":"STOP"}]}`)} {
			if _, err := d.Feed(nil, c, emit); err != nil {
				return
			}
		}
		res := d.Result()
		if !d.Complete() {
			t.Fatal("a STOP chunk did not complete the stream")
		}
		for i, tc := range res.ToolCalls {
			if !json.Valid([]byte(tc.Arguments)) {
				t.Fatalf("call %d arguments %q", i, tc.Arguments)
			}
		}
	})
}
