package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/chorusrt/chorus/internal/testkit/fixture"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/sse"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// This file holds the test side of the fixture corpus: loading the Gemini
// recordings, running them through the codec, and an independent reference
// decoder (encoding/json into plain structs, arguments of streamed calls
// rebuilt as a tree) that says what each recording should decode to.

// exchange is one recorded chat exchange with where it came from.
type exchange struct {
	name string // file#interaction
	file string
	idx  int
	ex   fixture.Exchange
}

var (
	corpusOnce sync.Once
	corpus     []exchange
	corpusErr  error
)

// geminiExchanges returns every exchange of the non-synthetic Gemini
// fixtures, in index order.
func geminiExchanges(t *testing.T) []exchange {
	t.Helper()
	dir := fixture.Require(t)
	corpusOnce.Do(func() {
		idx, err := fixture.LoadIndex(dir)
		if err != nil {
			corpusErr = err
			return
		}
		for _, e := range idx {
			if e.Provider != "gemini" || e.Synthetic() {
				continue
			}
			exs, err := fixture.Load(dir, e)
			if err != nil {
				corpusErr = err
				return
			}
			for i, x := range exs {
				corpus = append(corpus, exchange{name: e.File + "#" + strconv.Itoa(i), file: e.File, idx: i, ex: x})
			}
		}
	})
	if corpusErr != nil {
		t.Fatalf("loading fixtures: %v", corpusErr)
	}
	if len(corpus) == 0 {
		t.Fatal("no Gemini fixtures found")
	}
	return corpus
}

// findExchange returns the exchange of the file whose path ends with suffix.
func findExchange(t *testing.T, suffix string, idx int) fixture.Exchange {
	t.Helper()
	for _, x := range geminiExchanges(t) {
		if strings.HasSuffix(x.file, suffix) && x.idx == idx {
			return x.ex
		}
	}
	t.Fatalf("fixture %s#%d not found", suffix, idx)
	return fixture.Exchange{}
}

// Kinds of chat exchange.
const (
	kindNone = iota
	kindBuffered
	kindArray
	kindSSE
)

// chatKind says how an exchange's response is read, or kindNone when it is
// not a successful generateContent answer.
func chatKind(x fixture.Exchange) int {
	u := x.Request.URL
	isChat := strings.Contains(u, ":generateContent") || strings.Contains(u, ":streamGenerateContent") ||
		(u == "" && bytes.Contains(x.Response.Body, []byte(`"candidates"`)))
	if !isChat || (x.Response.Status != 0 && x.Response.Status != 200) {
		return kindNone
	}
	if x.Response.Stream {
		return kindSSE
	}
	b := bytes.TrimSpace(x.Response.Body)
	switch {
	case len(b) > 0 && b[0] == '[':
		return kindArray
	case len(b) > 0 && b[0] == '{':
		return kindBuffered
	}
	return kindNone
}

// streamRun is what a stream decoder produced.
type streamRun struct {
	events []llm.Event
	dec    wire.StreamDecoder
	chunks [][]byte // each fed chunk, copied, for the reference decoder
}

func collect(events *[]llm.Event) wire.Emit {
	return func(ev llm.Event) bool {
		*events = append(*events, ev)
		return true
	}
}

// runSSE feeds every SSE event of body to a fresh decoder.
func runSSE(t *testing.T, body []byte) streamRun {
	t.Helper()
	var run streamRun
	run.dec = Codec{}.NewStreamDecoder()
	r := sse.NewReader(bytes.NewReader(body), nil)
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("sse: %v", err)
		}
		run.chunks = append(run.chunks, append([]byte(nil), ev.Data...))
		done, err := run.dec.Feed(ev.Name, ev.Data, collect(&run.events))
		if err != nil {
			t.Fatalf("Feed: %v", err)
		}
		if done {
			t.Fatal("Feed returned done; Gemini streams end with the body")
		}
	}
	return run
}

// runArray decodes a JSON-array stream with encoding/json and feeds each
// element.
func runArray(t *testing.T, body []byte) streamRun {
	t.Helper()
	var elems []json.RawMessage
	if err := json.Unmarshal(body, &elems); err != nil {
		t.Fatalf("array body: %v", err)
	}
	var run streamRun
	run.dec = Codec{}.NewStreamDecoder()
	for _, el := range elems {
		run.chunks = append(run.chunks, el)
		if _, err := run.dec.Feed(nil, el, collect(&run.events)); err != nil {
			t.Fatalf("Feed: %v", err)
		}
	}
	return run
}

// ---- reference decoder ----

type refCall struct {
	id, name, sig string
	args          any
}

type refResult struct {
	text, reasoning string
	calls           []refCall
	sigs            []string // signatures of text and thought parts, in order
	usage           llm.Usage
	finish          llm.FinishReason
	finished        bool
	id, model       string
	images          int
}

type refPartialArg struct {
	JSONPath     string   `json:"jsonPath"`
	StringValue  *string  `json:"stringValue"`
	NumberValue  *float64 `json:"numberValue"`
	BoolValue    *bool    `json:"boolValue"`
	NullValue    any      `json:"nullValue"`
	WillContinue bool     `json:"willContinue"`
}

type refPart struct {
	Text             *string `json:"text"`
	Thought          bool    `json:"thought"`
	ThoughtSignature string  `json:"thoughtSignature"`
	FunctionCall     *struct {
		ID           string          `json:"id"`
		Name         string          `json:"name"`
		Args         json.RawMessage `json:"args"`
		PartialArgs  []refPartialArg `json:"partialArgs"`
		WillContinue bool            `json:"willContinue"`
	} `json:"functionCall"`
	InlineData *struct {
		MimeType string `json:"mimeType"`
		Data     string `json:"data"`
	} `json:"inlineData"`
}

type refChunk struct {
	Candidates []struct {
		Content *struct {
			Parts []refPart `json:"parts"`
		} `json:"content"`
		FinishReason json.RawMessage `json:"finishReason"`
	} `json:"candidates"`
	UsageMetadata  map[string]json.RawMessage `json:"usageMetadata"`
	PromptFeedback *struct {
		BlockReason json.RawMessage `json:"blockReason"`
	} `json:"promptFeedback"`
	ResponseID   string `json:"responseId"`
	ModelVersion string `json:"modelVersion"`
}

var refPathStep = regexp.MustCompile(`\.([A-Za-z0-9_]+)|\[(\d+)\]`)

// refSet stores v at path in the tree rooted at root; appendStr appends a
// string continuation instead.
func refSet(t *testing.T, root map[string]any, path string, v any, appendStr bool) {
	t.Helper()
	if !strings.HasPrefix(path, "$") {
		t.Fatalf("reference: path %q", path)
	}
	steps := refPathStep.FindAllStringSubmatch(path[1:], -1)
	var set func(cur any, i int) any
	set = func(cur any, i int) any {
		if i == len(steps) {
			if s, ok := v.(string); ok && appendStr {
				prev, _ := cur.(string)
				return prev + s
			}
			return v
		}
		if steps[i][1] != "" {
			m, _ := cur.(map[string]any)
			if m == nil {
				m = map[string]any{}
			}
			m[steps[i][1]] = set(m[steps[i][1]], i+1)
			return m
		}
		n, _ := strconv.Atoi(steps[i][2])
		a, _ := cur.([]any)
		for len(a) <= n {
			a = append(a, nil)
		}
		a[n] = set(a[n], i+1)
		return a
	}
	set(root, 0)
}

func refFinish(t *testing.T, raw json.RawMessage) (llm.FinishReason, bool) {
	t.Helper()
	if len(raw) == 0 || string(raw) == "null" {
		return "", false
	}
	var name string
	if err := json.Unmarshal(raw, &name); err != nil {
		var n int
		if err := json.Unmarshal(raw, &n); err != nil {
			t.Fatalf("reference: finishReason %s", raw)
		}
		if n != 1 {
			t.Fatalf("reference: integer finishReason %d not expected in the corpus", n)
		}
		name = "STOP"
	}
	switch name {
	case "STOP":
		return llm.FinishStop, true
	case "MAX_TOKENS":
		return llm.FinishLength, true
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY":
		return llm.FinishContentFilter, true
	}
	return "", true
}

// reference decodes chunks with encoding/json.
func reference(t *testing.T, chunks [][]byte) refResult {
	t.Helper()
	var r refResult
	var text, reasoning strings.Builder
	var open *struct {
		pos  int
		tree map[string]any
		str  string // path of the string left open
	}
	closeOpen := func() {
		if open != nil {
			r.calls[open.pos].args = open.tree
			open = nil
		}
	}
	for _, c := range chunks {
		var ch refChunk
		if err := json.Unmarshal(c, &ch); err != nil {
			t.Fatalf("reference: %v in %s", err, c)
		}
		if r.id == "" {
			r.id = ch.ResponseID
		}
		if r.model == "" {
			r.model = ch.ModelVersion
		}
		if len(ch.Candidates) > 0 {
			cand := ch.Candidates[0]
			if cand.Content != nil {
				for _, p := range cand.Content.Parts {
					switch {
					case p.FunctionCall != nil && p.FunctionCall.Name == "":
						if open == nil {
							continue
						}
						for _, pa := range p.FunctionCall.PartialArgs {
							var v any
							switch {
							case pa.StringValue != nil:
								v = *pa.StringValue
							case pa.NumberValue != nil:
								v = *pa.NumberValue
							case pa.BoolValue != nil:
								v = *pa.BoolValue
							}
							refSet(t, open.tree, pa.JSONPath, v, pa.StringValue != nil && open.str == pa.JSONPath)
							open.str = ""
							if pa.StringValue != nil && pa.WillContinue {
								open.str = pa.JSONPath
							}
						}
						if !p.FunctionCall.WillContinue {
							closeOpen()
						}
					case p.FunctionCall != nil:
						closeOpen()
						fc := p.FunctionCall
						id := fc.ID
						if id == "" {
							id = "call_" + strconv.Itoa(len(r.calls))
						}
						call := refCall{id: id, name: fc.Name, sig: p.ThoughtSignature}
						if fc.WillContinue {
							open = &struct {
								pos  int
								tree map[string]any
								str  string
							}{pos: len(r.calls), tree: map[string]any{}}
						} else if len(fc.Args) == 0 || string(fc.Args) == "null" {
							call.args = map[string]any{}
						} else if err := json.Unmarshal(fc.Args, &call.args); err != nil {
							t.Fatalf("reference: args %v", err)
						}
						r.calls = append(r.calls, call)
					case p.Text != nil:
						closeOpen()
						if p.Thought {
							reasoning.WriteString(*p.Text)
						} else {
							text.WriteString(*p.Text)
						}
						if p.ThoughtSignature != "" {
							r.sigs = append(r.sigs, p.ThoughtSignature)
						}
					case p.InlineData != nil:
						closeOpen()
						if strings.HasPrefix(p.InlineData.MimeType, "image/") {
							r.images++
						}
					case p.ThoughtSignature != "":
						closeOpen()
						r.sigs = append(r.sigs, p.ThoughtSignature)
					}
				}
			}
			if f, ok := refFinish(t, cand.FinishReason); ok {
				closeOpen()
				r.finish, r.finished = f, true
			}
		} else if ch.PromptFeedback != nil && len(ch.PromptFeedback.BlockReason) > 0 {
			r.finish, r.finished = llm.FinishContentFilter, true
		}
		if u, ok := refUsage(t, ch.UsageMetadata); ok {
			r.usage = u
		}
	}
	closeOpen()
	r.text, r.reasoning = text.String(), reasoning.String()
	if r.finish == llm.FinishStop && len(r.calls) > 0 {
		r.finish = llm.FinishToolCalls
	}
	return r
}

func refUsage(t *testing.T, m map[string]json.RawMessage) (llm.Usage, bool) {
	t.Helper()
	get := func(k string) (int, bool) {
		v, ok := m[k]
		if !ok {
			return 0, false
		}
		n, err := strconv.Atoi(string(v))
		if err != nil {
			t.Fatalf("reference: usage %s=%s", k, v)
		}
		return n, true
	}
	p, ok1 := get("promptTokenCount")
	c, ok2 := get("cachedContentTokenCount")
	o, ok3 := get("candidatesTokenCount")
	th, ok4 := get("thoughtsTokenCount")
	tu, ok5 := get("toolUsePromptTokenCount")
	if !(ok1 || ok2 || ok3 || ok4 || ok5) {
		return llm.Usage{}, false
	}
	return llm.Usage{PromptTokens: p - c + tu, CacheReadTokens: c, CompletionTokens: o + th, ReasoningTokens: th}, true
}

// jsonEqual reports whether two JSON texts hold the same value.
func jsonEqual(t *testing.T, got string, want any) bool {
	t.Helper()
	var g any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Errorf("arguments %q are not valid JSON: %v", got, err)
		return false
	}
	w, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var wv any
	if err := json.Unmarshal(w, &wv); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(g, wv)
}

// checkResult compares a decoded result with the reference.
func checkResult(t *testing.T, res *llm.ChatResult, ref refResult) {
	t.Helper()
	if res.Content != ref.text {
		t.Errorf("Content = %q, want %q", res.Content, ref.text)
	}
	if res.Reasoning != ref.reasoning {
		t.Errorf("Reasoning = %q, want %q", res.Reasoning, ref.reasoning)
	}
	if len(res.ToolCalls) != len(ref.calls) {
		t.Fatalf("%d tool calls, want %d: %+v", len(res.ToolCalls), len(ref.calls), res.ToolCalls)
	}
	for i, tc := range res.ToolCalls {
		want := ref.calls[i]
		if tc.ID != want.id || tc.Name != want.name || tc.Signature != want.sig {
			t.Errorf("call %d = {%q %q sig %.12q}, want {%q %q sig %.12q}", i, tc.ID, tc.Name, tc.Signature, want.id, want.name, want.sig)
		}
		if !jsonEqual(t, tc.Arguments, want.args) {
			t.Errorf("call %d arguments = %s, want %v", i, tc.Arguments, want.args)
		}
	}
	var sigs []string
	var thought strings.Builder
	for _, tb := range res.ThinkingBlocks {
		if tb.Format != "gemini" {
			t.Errorf("thinking block format %q", tb.Format)
		}
		if tb.Signature != "" {
			sigs = append(sigs, tb.Signature)
		}
		thought.WriteString(tb.Text)
	}
	if !reflect.DeepEqual(sigs, ref.sigs) {
		t.Errorf("part signatures = %d %.20q, want %d %.20q", len(sigs), sigs, len(ref.sigs), ref.sigs)
	}
	if thought.String() != ref.reasoning {
		t.Errorf("thinking blocks hold %q, want the reasoning %q", thought.String(), ref.reasoning)
	}
	if res.Usage != ref.usage {
		t.Errorf("Usage = %+v, want %+v", res.Usage, ref.usage)
	}
	if res.FinishReason != ref.finish {
		t.Errorf("FinishReason = %q, want %q", res.FinishReason, ref.finish)
	}
	if !res.FinishReason.Valid() {
		t.Errorf("FinishReason %q is not canonical", res.FinishReason)
	}
	if res.ID != ref.id || res.Model != ref.model {
		t.Errorf("ID, Model = %q, %q; want %q, %q", res.ID, res.Model, ref.id, ref.model)
	}
	if len(res.Images) != ref.images {
		t.Errorf("%d images, want %d", len(res.Images), ref.images)
	}
}

// checkEvents checks what the events say against the result they built.
func checkEvents(t *testing.T, events []llm.Event, res *llm.ChatResult, complete bool) {
	t.Helper()
	var text, reasoning strings.Builder
	var args []strings.Builder
	var lastUsage *llm.Usage
	finishes := 0
	for _, ev := range events {
		switch ev.Type {
		case llm.EventText:
			if ev.Text == "" {
				t.Error("empty EventText")
			}
			text.WriteString(ev.Text)
		case llm.EventReasoning:
			reasoning.WriteString(ev.Text)
		case llm.EventToolCallStart:
			if ev.ToolIndex != len(args) {
				t.Errorf("EventToolCallStart ToolIndex %d, want its position %d", ev.ToolIndex, len(args))
			}
			args = append(args, strings.Builder{})
			args[len(args)-1].WriteString(ev.Text)
			if ev.ToolIndex < len(res.ToolCalls) {
				tc := res.ToolCalls[ev.ToolIndex]
				if ev.ToolCallID != tc.ID || ev.ToolName != tc.Name {
					t.Errorf("start event %q %q, result call %q %q", ev.ToolCallID, ev.ToolName, tc.ID, tc.Name)
				}
			}
		case llm.EventToolCallDelta:
			if ev.ToolIndex < 0 || ev.ToolIndex >= len(args) {
				t.Fatalf("EventToolCallDelta for unknown call %d", ev.ToolIndex)
			}
			args[ev.ToolIndex].WriteString(ev.Text)
		case llm.EventUsage:
			lastUsage = ev.Usage
		case llm.EventFinish:
			finishes++
			if ev.Finish != res.FinishReason {
				t.Errorf("EventFinish %q, result %q", ev.Finish, res.FinishReason)
			}
		}
	}
	if text.String() != res.Content {
		t.Errorf("EventText concatenation %q != Content %q", text.String(), res.Content)
	}
	if reasoning.String() != res.Reasoning {
		t.Errorf("EventReasoning concatenation != Reasoning")
	}
	if len(args) != len(res.ToolCalls) {
		t.Fatalf("%d tool call starts, %d calls", len(args), len(res.ToolCalls))
	}
	for i := range args {
		if args[i].String() != res.ToolCalls[i].Arguments {
			t.Errorf("call %d: event text %q != Arguments %q", i, args[i].String(), res.ToolCalls[i].Arguments)
		}
		if !json.Valid([]byte(res.ToolCalls[i].Arguments)) {
			t.Errorf("call %d: arguments %q are not valid JSON", i, res.ToolCalls[i].Arguments)
		}
	}
	if lastUsage == nil {
		if !res.Usage.IsZero() {
			t.Errorf("usage %+v without an EventUsage", res.Usage)
		}
	} else if *lastUsage != res.Usage {
		t.Errorf("last EventUsage %+v != Usage %+v", *lastUsage, res.Usage)
	}
	want := 0
	if complete {
		want = 1
	}
	if finishes != want {
		t.Errorf("%d EventFinish, want %d", finishes, want)
	}
}
