package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/internal/testkit/fixture"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/sse"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// rxFixture is one recorded Responses API exchange.
type rxFixture struct {
	name    string
	status  int
	stream  bool
	body    []byte
	request []byte
}

// isResponsesPath reports whether a recorded URL is POST /responses (not
// /responses/input_tokens, which counts tokens).
func isResponsesPath(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && strings.HasSuffix(u.Path, "/responses")
}

// loadResponsesFixtures returns every non-synthetic recorded exchange of the
// Responses API: the recorded cassettes whose request went to /responses,
// and the payload-only vercel-ai files under src/responses/__fixtures__.
func loadResponsesFixtures(t *testing.T) []rxFixture {
	t.Helper()
	dir := fixture.Require(t)
	idx, err := fixture.LoadIndex(dir)
	if err != nil {
		t.Fatalf("fixtures: %v", err)
	}
	var out []rxFixture
	for _, e := range idx {
		if e.Synthetic() {
			continue
		}
		payloadOnly := len(e.Endpoints) == 0 && strings.Contains(e.File, "/src/responses/__fixtures__/")
		hit := payloadOnly
		for _, ep := range e.Endpoints {
			hit = hit || isResponsesPath(ep)
		}
		if !hit {
			continue
		}
		exs, err := fixture.Load(dir, e)
		if err != nil {
			t.Fatalf("load %s: %v", e.File, err)
		}
		for i, ex := range exs {
			if !payloadOnly && !isResponsesPath(ex.Request.URL) {
				continue
			}
			out = append(out, rxFixture{name: e.File + "#" + strconv.Itoa(i), status: ex.Response.Status,
				stream: ex.Response.Stream, body: ex.Response.Body, request: ex.Request.Body})
		}
	}
	if len(out) < 50 {
		t.Fatalf("fixtures: only %d Responses exchanges; the corpus has about 58", len(out))
	}
	return out
}

// rxOracle is what a recorded answer says, read with encoding/json
// independently of the codec.
type rxOracle struct {
	text      string
	calls     []llm.ToolCall
	reasoning []llm.ThinkingBlock // ID and Data only
	finish    llm.FinishReason
	hasFinish bool
	input     int
	output    int
	reasonTok int
	hasUsage  bool
	errCode   string
	isError   bool
}

type oracleItem struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Encrypted string `json:"encrypted_content"`
	Content   []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

type oracleResponse struct {
	Status            string `json:"status"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Output []oracleItem `json:"output"`
	Usage  *struct {
		Input   int `json:"input_tokens"`
		Output  int `json:"output_tokens"`
		Details struct {
			Reasoning int `json:"reasoning_tokens"`
		} `json:"output_tokens_details"`
	} `json:"usage"`
	Error *struct {
		Code string `json:"code"`
	} `json:"error"`
}

// oracleFrom fills the oracle from a whole response object.
func (o *rxOracle) fromResponse(r *oracleResponse, withText bool) {
	for _, it := range r.Output {
		switch it.Type {
		case "message":
			if withText {
				for _, c := range it.Content {
					if c.Type == "output_text" {
						o.text += c.Text
					}
				}
			}
		case "function_call":
			o.calls = append(o.calls, llm.ToolCall{ID: it.CallID, Name: it.Name, Arguments: it.Arguments})
		case "reasoning":
			o.reasoning = append(o.reasoning, llm.ThinkingBlock{ID: it.ID, Data: it.Encrypted})
		}
	}
	if r.Usage != nil {
		o.input, o.output, o.reasonTok, o.hasUsage = r.Usage.Input, r.Usage.Output, r.Usage.Details.Reasoning, true
	}
	table := map[string]llm.FinishReason{"completed": llm.FinishStop, "failed": "", "cancelled": ""}
	if f, ok := table[r.Status]; ok {
		o.finish, o.hasFinish = f, true
	}
	if r.Status == "incomplete" && r.IncompleteDetails != nil {
		o.finish, o.hasFinish = map[string]llm.FinishReason{"max_output_tokens": llm.FinishLength, "content_filter": llm.FinishContentFilter}[r.IncompleteDetails.Reason], true
	}
	if o.finish == llm.FinishStop && len(o.calls) > 0 {
		o.finish = llm.FinishToolCalls
	}
}

func bufferedOracle(t *testing.T, f rxFixture) rxOracle {
	t.Helper()
	var o rxOracle
	var r struct {
		oracleResponse
		Object   string          `json:"object"`
		TopError json.RawMessage `json:"-"`
	}
	if err := json.Unmarshal(f.body, &r); err != nil {
		t.Fatalf("%s: oracle: %v", f.name, err)
	}
	if r.Object != "response" {
		o.isError = true
		var e struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		_ = json.Unmarshal(f.body, &e)
		o.errCode = e.Error.Code
		return o
	}
	o.fromResponse(&r.oracleResponse, true)
	return o
}

// streamOracle reads the events up to the first terminal one: the text
// deltas, and the terminal response for everything else. (One vercel-ai
// file holds several answers back to back; a client stops at the first.)
func streamOracle(t *testing.T, f rxFixture) rxOracle {
	t.Helper()
	var o rxOracle
	var streamed []llm.ThinkingBlock
	r := sse.NewReader(bytes.NewReader(f.body), nil)
	for {
		ev, err := r.Next()
		if err != nil {
			return o
		}
		var e struct {
			Type     string          `json:"type"`
			Delta    string          `json:"delta"`
			Response *oracleResponse `json:"response"`
			Error    *struct {
				Code string `json:"code"`
			} `json:"error"`
			Code string `json:"code"`
		}
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			t.Fatalf("%s: oracle: %v in %s", f.name, err, ev.Data)
		}
		switch e.Type {
		case "response.output_text.delta":
			o.text += e.Delta
		case "response.output_item.done":
			// The stream's reasoning items are the ones the finished
			// items carry. (The terminal response repeats them encrypted
			// again, with other bytes.)
			var it struct {
				Item oracleItem `json:"item"`
			}
			_ = json.Unmarshal(ev.Data, &it)
			if it.Item.Type == "reasoning" {
				streamed = append(streamed, llm.ThinkingBlock{ID: it.Item.ID, Data: it.Item.Encrypted})
			}
		case "response.completed", "response.incomplete":
			o.fromResponse(e.Response, false)
			o.reasoning = streamed
			return o
		case "error", "response.failed":
			o.isError = true
			switch {
			case e.Error != nil:
				o.errCode = e.Error.Code
			case e.Response != nil && e.Response.Error != nil:
				o.errCode = e.Response.Error.Code
			default:
				o.errCode = e.Code
			}
			return o
		}
	}
}

// rxRun feeds a recorded SSE body to a Responses decoder until it is done.
func rxRun(t *testing.T, body []byte) (evs []llm.Event, d wire.StreamDecoder, err error) {
	t.Helper()
	d = ResponsesCodec{}.NewStreamDecoder()
	r := sse.NewReader(bytes.NewReader(body), nil)
	for {
		ev, rerr := r.Next()
		if rerr == io.EOF {
			return evs, d, nil
		}
		if rerr != nil {
			t.Fatalf("sse: %v", rerr)
		}
		done, ferr := d.Feed(ev.Name, ev.Data, func(e llm.Event) bool {
			evs = append(evs, e)
			return true
		})
		if ferr != nil || done {
			return evs, d, ferr
		}
	}
}

// checkAgainstOracle compares a result with what the recording says.
func checkAgainstOracle(t *testing.T, name string, res *llm.ChatResult, o rxOracle) {
	t.Helper()
	if !res.FinishReason.Valid() {
		t.Errorf("%s: finish %q is not canonical", name, res.FinishReason)
	}
	if o.hasFinish && res.FinishReason != o.finish {
		t.Errorf("%s: finish %q, recording maps to %q", name, res.FinishReason, o.finish)
	}
	if res.Content != o.text {
		t.Errorf("%s: content %q, recorded %q", name, res.Content, o.text)
	}
	if len(res.ToolCalls) != len(o.calls) {
		t.Fatalf("%s: %d tool calls, recorded %d", name, len(res.ToolCalls), len(o.calls))
	}
	for i, tc := range res.ToolCalls {
		w := o.calls[i]
		if tc.ID != w.ID || tc.Name != w.Name || !json.Valid([]byte(tc.Arguments)) {
			t.Errorf("%s: call %d = %+v, recorded %+v", name, i, tc, w)
		}
		if w.Arguments != "" && tc.Arguments != w.Arguments {
			t.Errorf("%s: call %d arguments %q, recorded %q", name, i, tc.Arguments, w.Arguments)
		}
	}
	if len(res.ThinkingBlocks) != len(o.reasoning) {
		t.Fatalf("%s: %d reasoning blocks, recorded %d reasoning items", name, len(res.ThinkingBlocks), len(o.reasoning))
	}
	for i, b := range res.ThinkingBlocks {
		if b.Format != ResponsesFormat || b.ID != o.reasoning[i].ID || b.Data != o.reasoning[i].Data {
			t.Errorf("%s: block %d = {%s %s %d bytes}, recorded {%s %d bytes}", name, i, b.Format, b.ID, len(b.Data), o.reasoning[i].ID, len(o.reasoning[i].Data))
		}
	}
	if o.hasUsage {
		u := res.Usage
		if u.InputTokens() != o.input || u.CompletionTokens != o.output || u.ReasoningTokens != o.reasonTok || u.ReasoningTokens > u.CompletionTokens {
			t.Errorf("%s: usage %+v, recorded input %d output %d reasoning %d", name, u, o.input, o.output, o.reasonTok)
		}
	}
}

func TestResponsesFixtures(t *testing.T) {
	var buffered, streamed, errs, withCalls, withEncrypted, withUsage int
	for _, f := range loadResponsesFixtures(t) {
		if f.status != 200 {
			// The client reads these; the codec only has to read the body.
			info := ResponsesCodec{}.ParseError(f.status, f.body)
			if info.Message == "" {
				t.Errorf("%s: recorded %d body gave no message", f.name, f.status)
			}
			errs++
			continue
		}
		var o rxOracle
		var res *llm.ChatResult
		var err error
		if f.stream {
			streamed++
			o = streamOracle(t, f)
			var evs []llm.Event
			var d wire.StreamDecoder
			evs, d, err = rxRun(t, f.body)
			res = d.Result()
			if err == nil {
				if !d.Complete() {
					t.Errorf("%s: not complete", f.name)
				}
				checkStreamEvents(t, f.name, evs, res)
			}
		} else {
			buffered++
			o = bufferedOracle(t, f)
			res, err = ResponsesCodec{}.ParseChat(f.body)
		}
		if o.isError {
			var api *llm.APIError
			if !errors.As(err, &api) || api.Code != o.errCode || api.Message == "" {
				t.Errorf("%s: recorded error %q, got %#v", f.name, o.errCode, err)
			}
			if o.errCode == "insufficient_quota" && api != nil && api.Retryable {
				t.Errorf("%s: insufficient_quota must not be retryable", f.name)
			}
			errs++
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", f.name, err)
			continue
		}
		checkAgainstOracle(t, f.name, res, o)
		if len(res.ToolCalls) > 0 {
			withCalls++
		}
		for _, b := range res.ThinkingBlocks {
			if b.Data != "" {
				withEncrypted++
				break
			}
		}
		if o.hasUsage {
			withUsage++
		}
	}
	t.Logf("responses fixtures: %d buffered, %d streamed, %d errors; %d with function calls, %d with encrypted reasoning, %d with usage",
		buffered, streamed, errs, withCalls, withEncrypted, withUsage)
	if buffered < 25 || streamed < 15 || errs < 5 || withCalls < 15 || withEncrypted < 10 || withUsage < 35 {
		t.Errorf("coverage dropped")
	}
}

// checkStreamEvents: the accumulated result equals the events, ToolIndex is
// the call's position, and the stream agrees with the buffered parse of its
// own terminal response where that response repeats the output.
func checkStreamEvents(t *testing.T, name string, evs []llm.Event, res *llm.ChatResult) {
	t.Helper()
	var text, reasoning strings.Builder
	starts := 0
	args := map[int]string{}
	for _, ev := range evs {
		switch ev.Type {
		case llm.EventText:
			text.WriteString(ev.Text)
		case llm.EventReasoning:
			reasoning.WriteString(ev.Text)
		case llm.EventToolCallStart:
			if ev.ToolIndex != starts {
				t.Errorf("%s: call start #%d has ToolIndex %d", name, starts, ev.ToolIndex)
			}
			starts++
			args[ev.ToolIndex] += ev.Text
		case llm.EventToolCallDelta:
			if ev.ToolIndex >= starts {
				t.Errorf("%s: delta for ToolIndex %d before its start", name, ev.ToolIndex)
			}
			args[ev.ToolIndex] += ev.Text
		}
	}
	if text.String() != res.Content || reasoning.String() != res.Reasoning {
		t.Errorf("%s: result text/reasoning differ from the concatenated deltas", name)
	}
	if starts != len(res.ToolCalls) {
		t.Errorf("%s: %d starts, %d calls", name, starts, len(res.ToolCalls))
	}
	for i, tc := range res.ToolCalls {
		if args[i] != tc.Arguments {
			t.Errorf("%s: call %d arguments %q, deltas %q", name, i, tc.Arguments, args[i])
		}
	}
	if n := len(evs); n == 0 || evs[n-1].Type != llm.EventFinish {
		t.Errorf("%s: last event is not the finish", name)
	}
}

// TestResponsesStreamMatchesBuffered: for every recorded stream, the
// decoder's result equals ParseChat of the stream's own terminal response
// (which repeats the whole output), reasoning text and signatures included.
func TestResponsesStreamMatchesBuffered(t *testing.T) {
	n := 0
	for _, f := range loadResponsesFixtures(t) {
		if !f.stream || f.status != 200 {
			continue
		}
		_, d, err := rxRun(t, f.body)
		if err != nil {
			continue // error streams are checked in TestResponsesFixtures
		}
		var terminal []byte
		r := sse.NewReader(bytes.NewReader(f.body), nil)
		for terminal == nil {
			ev, err := r.Next()
			if err != nil {
				break
			}
			var e struct {
				Type     string          `json:"type"`
				Response json.RawMessage `json:"response"`
			}
			if json.Unmarshal(ev.Data, &e) == nil && (e.Type == "response.completed" || e.Type == "response.incomplete") {
				terminal = e.Response
			}
		}
		want, err := ResponsesCodec{}.ParseChat(terminal)
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		got := d.Result()
		if len(want.ThinkingBlocks)+len(want.ToolCalls) == 0 && want.Content == "" {
			continue // a terminal response that does not repeat its output
		}
		n++
		if got.Content != want.Content || got.Reasoning != want.Reasoning || got.FinishReason != want.FinishReason || got.Usage != want.Usage {
			t.Errorf("%s: stream %+v\nbuffered %+v", f.name, got, want)
		}
		if len(got.ThinkingBlocks) != len(want.ThinkingBlocks) || len(got.ToolCalls) != len(want.ToolCalls) {
			t.Fatalf("%s: stream has %d blocks %d calls, buffered %d %d", f.name, len(got.ThinkingBlocks), len(got.ToolCalls), len(want.ThinkingBlocks), len(want.ToolCalls))
		}
		for i := range got.ThinkingBlocks {
			// The terminal response carries each reasoning item encrypted
			// anew: same length, other bytes. Both decrypt server-side.
			g, w := got.ThinkingBlocks[i], want.ThinkingBlocks[i]
			if len(g.Data) == len(w.Data) && (g.Data == "") == (w.Data == "") {
				g.Data = w.Data
			}
			if g != w {
				t.Errorf("%s: block %d\nstream   %+v\nbuffered %+v", f.name, i, g, w)
			}
		}
		for i := range got.ToolCalls {
			if got.ToolCalls[i] != want.ToolCalls[i] {
				t.Errorf("%s: call %d stream %+v buffered %+v", f.name, i, got.ToolCalls[i], want.ToolCalls[i])
			}
		}
	}
	if n < 15 {
		t.Errorf("only %d streams compared", n)
	}
}

// fixtureExchanges loads one fixture file's exchanges.
func fixtureExchanges(t *testing.T, file string) []fixture.Exchange {
	t.Helper()
	dir := fixture.Require(t)
	idx, err := fixture.LoadIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range idx {
		if e.File == file {
			exs, err := fixture.Load(dir, e)
			if err != nil {
				t.Fatal(err)
			}
			return exs
		}
	}
	t.Fatalf("fixture %s not in the index", file)
	return nil
}

// TestInvariant07_ResponsesEncryptedReasoningRoundTrip: a recorded answer
// with encrypted reasoning and a function call, parsed buffered and
// streamed, replays on the next turn as the recording's own client did:
// the reasoning item with its encrypted_content right before the
// function_call, then the output, statelessly (store:false, encrypted
// content requested again).
func TestInvariant07_ResponsesEncryptedReasoningRoundTrip(t *testing.T) {
	cases := []struct {
		file   string
		stream bool
	}{
		{"openai/simonw-llm/tests/cassettes/test_openai_responses/test_responses_round_trips_encrypted_reasoning.yaml", false},
		{"openai/fantasy/providertests/testdata/TestOpenAIResponsesWithSummaryThinking/openai-gpt-5/thinking-streaming.yaml", true},
		{"openai/fantasy/providertests/testdata/TestOpenAIResponsesWithSummaryThinking/openai-gpt-5/thinking.yaml", false},
	}
	for _, tc := range cases {
		exs := fixtureExchanges(t, tc.file)
		var res *llm.ChatResult
		if tc.stream {
			_, d, err := rxRun(t, exs[0].Response.Body)
			if err != nil || !d.Complete() {
				t.Fatalf("%s: %v", tc.file, err)
			}
			res = d.Result()
		} else {
			var err error
			if res, err = (ResponsesCodec{}).ParseChat(exs[0].Response.Body); err != nil {
				t.Fatalf("%s: %v", tc.file, err)
			}
		}
		if len(res.ThinkingBlocks) != 1 || res.ThinkingBlocks[0].Data == "" || len(res.ToolCalls) != 1 {
			t.Fatalf("%s: %d blocks, %d calls", tc.file, len(res.ThinkingBlocks), len(res.ToolCalls))
		}
		block, call := res.ThinkingBlocks[0], res.ToolCalls[0]
		if !strings.HasPrefix(block.Data, "gAAAA") || block.Signature != "function_call:"+call.ID {
			t.Fatalf("%s: block %q… signature %q", tc.file, block.Data[:8], block.Signature)
		}

		history := []llm.Message{llm.UserText("question"), res.Message(), llm.ToolResult(call.ID, "42", false)}
		r, err := ResponsesCodec{}.ChatRequest(&llm.ChatRequest{Model: "gpt-5", Messages: history}, wire.BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Store   *bool            `json:"store"`
			Include []string         `json:"include"`
			Input   []map[string]any `json:"input"`
			Prev    *string          `json:"previous_response_id"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatal(err)
		}
		if body.Store == nil || *body.Store || body.Prev != nil || len(body.Include) != 1 || body.Include[0] != "reasoning.encrypted_content" {
			t.Errorf("%s: not stateless: %s", tc.file, r.Body)
		}
		want := "easy:user reasoning:" + block.ID + " function_call:" + call.ID + " function_call_output:" + call.ID
		if got := itemSummary(body.Input); got != want {
			t.Fatalf("%s: input %s, want %s", tc.file, got, want)
		}
		if body.Input[1]["encrypted_content"] != block.Data {
			t.Errorf("%s: encrypted_content not replayed verbatim", tc.file)
		}

		// The recording's next request is what its client sent and OpenAI
		// accepted: same items in the same order, same encrypted content.
		var recorded struct {
			Input []map[string]any `json:"input"`
		}
		if err := json.Unmarshal(exs[1].Request.Body, &recorded); err != nil {
			t.Fatal(err)
		}
		var recTypes, ourTypes []string
		for _, it := range recorded.Input {
			if it["role"] == "developer" || it["role"] == "system" {
				continue
			}
			ty, _ := it["type"].(string)
			recTypes = append(recTypes, ty)
			if ty == "reasoning" && it["encrypted_content"] != block.Data {
				t.Errorf("%s: the recording replayed different encrypted content", tc.file)
			}
		}
		recReplays := strings.Contains(strings.Join(recTypes, ","), "reasoning")
		for _, it := range body.Input {
			ty, _ := it["type"].(string)
			if ty == "reasoning" && !recReplays {
				continue // fantasy does not replay reasoning; the rest must agree
			}
			ourTypes = append(ourTypes, ty)
		}
		if strings.Join(recTypes, ",") != strings.Join(ourTypes, ",") {
			t.Errorf("%s: items %v, recording sent %v", tc.file, ourTypes, recTypes)
		}
	}

	// Reasoning that preceded a message goes back in front of that message,
	// which keeps its recorded id.
	exs := fixtureExchanges(t, "openai/fantasy/providertests/testdata/TestOpenAIResponsesWithSummaryThinking/openai-gpt-5/thinking.yaml")
	res, err := ResponsesCodec{}.ParseChat(exs[1].Response.Body)
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Output []struct {
			ID   string `json:"id"`
			Type string `json:"type"`
		} `json:"output"`
	}
	_ = json.Unmarshal(exs[1].Response.Body, &raw)
	items := replayInput(t, ResponsesCodec{}, []llm.Message{llm.UserText("hi"), res.Message(), llm.UserText("again")})
	want := "easy:user reasoning:" + raw.Output[0].ID + " message:" + raw.Output[1].ID + " easy:user"
	if got := itemSummary(items); got != want || raw.Output[1].Type != "message" {
		t.Errorf("input %s, want %s", got, want)
	}
}
