package anthropic

import (
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/internal/testkit/fixture"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/sse"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// recorded is one recorded Messages exchange.
type recorded struct {
	name string
	ex   fixture.Exchange
}

// messagesExchanges returns every exchange of the non-synthetic Anthropic
// fixtures that hits POST /v1/messages (payload-only recordings have no
// request and count as Messages answers).
func messagesExchanges(t *testing.T) []recorded {
	t.Helper()
	dir := fixture.Require(t)
	idx, err := fixture.LoadIndex(dir)
	if err != nil {
		t.Fatalf("index: %v", err)
	}
	var out []recorded
	for _, e := range idx {
		if e.Provider != "anthropic" || e.Synthetic() {
			continue
		}
		exs, err := fixture.Load(dir, e)
		if err != nil {
			t.Fatalf("load %s: %v", e.File, err)
		}
		for i, ex := range exs {
			if ex.Request.URL != "" {
				u, err := url.Parse(ex.Request.URL)
				if err != nil || u.Path != "/v1/messages" {
					continue
				}
			}
			out = append(out, recorded{name: e.File + "#" + string(rune('0'+i)), ex: ex})
		}
	}
	if len(out) == 0 {
		t.Fatal("no Anthropic fixtures found")
	}
	return out
}

// oracleBlock is a content block as encoding/json sees it.
type oracleBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	Data      string          `json:"data"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

type oracleUsage struct {
	Input       *int `json:"input_tokens"`
	Output      *int `json:"output_tokens"`
	CacheRead   *int `json:"cache_read_input_tokens"`
	CacheCreate *int `json:"cache_creation_input_tokens"`
}

func (u oracleUsage) foldInto(dst *llm.Usage) {
	set := func(d *int, v *int) {
		if v != nil && *v != 0 {
			*d = *v
		}
	}
	set(&dst.PromptTokens, u.Input)
	set(&dst.CompletionTokens, u.Output)
	set(&dst.CacheReadTokens, u.CacheRead)
	set(&dst.CacheWriteTokens, u.CacheCreate)
}

var canonicalStop = map[string]llm.FinishReason{
	"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls", "refusal": "content_filter",
}

func TestParseChatFixtures(t *testing.T) {
	n := 0
	for _, r := range messagesExchanges(t) {
		if r.ex.Response.Stream {
			continue
		}
		t.Run(r.name, func(t *testing.T) {
			body := r.ex.Response.Body
			if r.ex.Response.Status != 200 {
				info := Codec{}.ParseError(r.ex.Response.Status, body)
				if info.Type == "" || info.Message == "" {
					t.Errorf("ParseError(%d) = %+v from %s", r.ex.Response.Status, info, body)
				}
				_, err := Codec{}.ParseChat(body)
				var ae *llm.APIError
				if !errors.As(err, &ae) || ae.Type != info.Type || ae.RequestID == "" {
					t.Errorf("ParseChat on error body = %v, want *llm.APIError of type %q with request id", err, info.Type)
				}
				return
			}
			n++
			res, err := Codec{}.ParseChat(body)
			if err != nil {
				t.Fatalf("ParseChat: %v", err)
			}
			var want struct {
				ID         string        `json:"id"`
				Model      string        `json:"model"`
				Content    []oracleBlock `json:"content"`
				StopReason string        `json:"stop_reason"`
				Usage      oracleUsage   `json:"usage"`
			}
			if err := json.Unmarshal(body, &want); err != nil {
				t.Fatal(err)
			}
			if res.ID != want.ID || res.ID == "" || res.Model != want.Model {
				t.Errorf("id/model = %q/%q, want %q/%q", res.ID, res.Model, want.ID, want.Model)
			}
			var text, reasoning strings.Builder
			var calls []oracleBlock
			var thinking []oracleBlock
			for _, b := range want.Content {
				switch b.Type {
				case "text":
					text.WriteString(b.Text)
				case "thinking":
					reasoning.WriteString(b.Thinking)
					thinking = append(thinking, b)
				case "redacted_thinking":
					thinking = append(thinking, b)
				case "tool_use":
					calls = append(calls, b)
				}
			}
			if res.Content != text.String() {
				t.Errorf("Content = %q, want %q", res.Content, text.String())
			}
			if res.Reasoning != reasoning.String() {
				t.Errorf("Reasoning = %q, want %q", res.Reasoning, reasoning.String())
			}
			checkThinking(t, res.ThinkingBlocks, thinking)
			if len(res.ToolCalls) != len(calls) {
				t.Fatalf("%d tool calls, want %d", len(res.ToolCalls), len(calls))
			}
			for i, c := range calls {
				got := res.ToolCalls[i]
				if got.ID != c.ID || got.Name != c.Name {
					t.Errorf("call %d = %s/%s, want %s/%s", i, got.ID, got.Name, c.ID, c.Name)
				}
				if !sameJSON(got.Arguments, string(c.Input)) || strings.ContainsAny(got.Arguments, "\n ") && !strings.Contains(string(c.Input), " ") {
					t.Errorf("call %d arguments %s, want %s", i, got.Arguments, c.Input)
				}
			}
			wantFinish := canonicalStop[want.StopReason]
			if res.FinishReason != wantFinish {
				t.Errorf("FinishReason = %q, want %q (stop_reason %q)", res.FinishReason, wantFinish, want.StopReason)
			}
			var wu llm.Usage
			want.Usage.foldInto(&wu)
			if res.Usage != wu || res.Usage.CompletionTokens == 0 {
				t.Errorf("Usage = %+v, want %+v", res.Usage, wu)
			}
		})
	}
	if n < 10 {
		t.Errorf("only %d buffered answers parsed; the corpus has more", n)
	}
}

func checkThinking(t *testing.T, got []llm.ThinkingBlock, want []oracleBlock) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d thinking blocks, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Format != "anthropic" {
			t.Errorf("block %d Format = %q", i, g.Format)
		}
		if w.Type == "redacted_thinking" {
			if !g.Redacted || g.Data != w.Data || g.Data == "" {
				t.Errorf("block %d = %+v, want redacted data %.20q", i, g, w.Data)
			}
			continue
		}
		if g.Redacted || g.Text != w.Thinking || g.Signature != w.Signature || g.Signature == "" {
			t.Errorf("block %d = {%.30q sig %.20q}, want {%.30q sig %.20q}", i, g.Text, g.Signature, w.Thinking, w.Signature)
		}
	}
}

func sameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

// streamOracle is what encoding/json reads from a recorded stream.
type streamOracle struct {
	id, model  string
	text       string
	reasoning  string
	thinking   []oracleBlock
	calls      []oracleBlock // id, name; Input holds the concatenated partial_json
	usage      llm.Usage
	stopReason string
	stopped    bool
}

func oracleFor(t *testing.T, events [][]byte) streamOracle {
	t.Helper()
	var o streamOracle
	kinds := map[int]*oracleBlock{}
	callAt := map[int]int{}
	var text, reasoning strings.Builder
	for _, data := range events {
		var ev struct {
			Type         string          `json:"type"`
			Index        int             `json:"index"`
			Message      json.RawMessage `json:"message"`
			ContentBlock *oracleBlock    `json:"content_block"`
			Delta        struct {
				Type        string  `json:"type"`
				Text        string  `json:"text"`
				Thinking    string  `json:"thinking"`
				Signature   string  `json:"signature"`
				PartialJSON string  `json:"partial_json"`
				StopReason  *string `json:"stop_reason"`
			} `json:"delta"`
			Usage *oracleUsage `json:"usage"`
		}
		if err := json.Unmarshal(data, &ev); err != nil {
			t.Fatalf("oracle: %v in %s", err, data)
		}
		switch ev.Type {
		case "message_start":
			var m struct {
				ID    string      `json:"id"`
				Model string      `json:"model"`
				Usage oracleUsage `json:"usage"`
			}
			if err := json.Unmarshal(ev.Message, &m); err != nil {
				t.Fatal(err)
			}
			o.id, o.model = m.ID, m.Model
			m.Usage.foldInto(&o.usage)
		case "content_block_start":
			b := *ev.ContentBlock
			kinds[ev.Index] = &b
			text.WriteString(b.Text)
			reasoning.WriteString(b.Thinking)
			if b.Type == "tool_use" {
				callAt[ev.Index] = len(o.calls)
				o.calls = append(o.calls, oracleBlock{ID: b.ID, Name: b.Name})
			}
		case "content_block_delta":
			b := kinds[ev.Index]
			switch ev.Delta.Type {
			case "text_delta":
				text.WriteString(ev.Delta.Text)
			case "thinking_delta":
				reasoning.WriteString(ev.Delta.Thinking)
				b.Thinking += ev.Delta.Thinking
			case "signature_delta":
				b.Signature += ev.Delta.Signature
			case "input_json_delta":
				if b.Type == "tool_use" {
					o.calls[callAt[ev.Index]].Input = append(o.calls[callAt[ev.Index]].Input, ev.Delta.PartialJSON...)
				}
			}
		case "content_block_stop":
			if b := kinds[ev.Index]; b.Type == "thinking" || b.Type == "redacted_thinking" {
				o.thinking = append(o.thinking, *b)
			}
		case "message_delta":
			if ev.Delta.StopReason != nil {
				o.stopReason = *ev.Delta.StopReason
			}
			if ev.Usage != nil {
				ev.Usage.foldInto(&o.usage)
			}
		case "message_stop":
			o.stopped = true
		}
	}
	o.text, o.reasoning = text.String(), reasoning.String()
	return o
}

// decodeStream feeds an SSE body to a fresh decoder the way package
// providers does, collecting the emitted events.
func decodeStream(t *testing.T, body []byte) (wire.StreamDecoder, []llm.Event, [][]byte, error) {
	t.Helper()
	d := Codec{}.NewStreamDecoder()
	var evs []llm.Event
	var datas [][]byte
	rd := sse.NewReader(strings.NewReader(string(body)), nil)
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return d, evs, datas, nil
		}
		if err != nil {
			t.Fatalf("sse: %v", err)
		}
		if len(strings.TrimSpace(string(ev.Data))) > 0 {
			datas = append(datas, append([]byte(nil), ev.Data...))
		}
		done, err := d.Feed(ev.Name, ev.Data, func(e llm.Event) bool { evs = append(evs, e); return true })
		if err != nil {
			return d, evs, datas, err
		}
		if done {
			return d, evs, datas, nil
		}
	}
}

func TestStreamDecoderFixtures(t *testing.T) {
	n := 0
	for _, r := range messagesExchanges(t) {
		if !r.ex.Response.Stream || r.ex.Response.Status != 200 {
			continue
		}
		n++
		t.Run(r.name, func(t *testing.T) {
			d, evs, datas, err := decodeStream(t, r.ex.Response.Body)
			if err != nil {
				t.Fatalf("Feed: %v", err)
			}
			want := oracleFor(t, datas)
			if !want.stopped {
				t.Fatal("recording has no message_stop")
			}
			if !d.Complete() || len(evs) == 0 {
				t.Fatalf("Complete=%v with %d events after message_stop", d.Complete(), len(evs))
			}
			res := d.Result()
			var text, reasoning strings.Builder
			var usageEvents int
			var finish []llm.FinishReason
			var sigs []string // streamed thinking signatures, one per signed block
			for i, e := range evs {
				switch e.Type {
				case llm.EventText:
					text.WriteString(e.Text)
				case llm.EventReasoning:
					reasoning.WriteString(e.Text)
				case llm.EventUsage:
					usageEvents++
					if *e.Usage != want.usage && i == len(evs)-1 {
						t.Errorf("last usage event %+v, want %+v", *e.Usage, want.usage)
					}
				case llm.EventFinish:
					finish = append(finish, e.Finish)
				case llm.EventToolCallStart, llm.EventToolCallDelta:
					if e.ToolIndex < 0 || e.ToolIndex >= len(want.calls) {
						t.Fatalf("ToolIndex %d out of %d calls", e.ToolIndex, len(want.calls))
					}
				}
				if (e.Type == llm.EventText || e.Type == llm.EventReasoning) && e.Text == "" && e.Signature == "" {
					t.Errorf("event %d: empty %v", i, e.Type)
				}
				if e.Signature != "" {
					sigs = append(sigs, e.Signature)
				}
			}
			if text.String() != want.text || res.Content != want.text {
				t.Errorf("text events %q / Content %q, want %q", text.String(), res.Content, want.text)
			}
			var wantSigs []string
			for _, b := range res.ThinkingBlocks {
				if b.Signature != "" {
					wantSigs = append(wantSigs, b.Signature)
				}
			}
			if !slices.Equal(sigs, wantSigs) {
				t.Errorf("streamed signatures %q, want the blocks' %q", sigs, wantSigs)
			}
			if reasoning.String() != want.reasoning || res.Reasoning != want.reasoning {
				t.Errorf("reasoning %q / %q, want %q", reasoning.String(), res.Reasoning, want.reasoning)
			}
			if res.ID != want.id || res.Model != want.model || res.ID == "" {
				t.Errorf("id/model %q/%q, want %q/%q", res.ID, res.Model, want.id, want.model)
			}
			if res.Usage != want.usage || res.Usage.PromptTokens == 0 || res.Usage.CompletionTokens == 0 {
				t.Errorf("Usage %+v, want %+v", res.Usage, want.usage)
			}
			if usageEvents == 0 {
				t.Error("no usage event")
			}
			if len(finish) != 1 || finish[0] != canonicalStop[want.stopReason] || !finish[0].Valid() {
				t.Errorf("finish events %q, want [%q] (stop_reason %q)", finish, canonicalStop[want.stopReason], want.stopReason)
			}
			if res.FinishReason != canonicalStop[want.stopReason] {
				t.Errorf("FinishReason %q", res.FinishReason)
			}
			checkThinking(t, res.ThinkingBlocks, want.thinking)
			if len(res.ToolCalls) != len(want.calls) {
				t.Fatalf("%d tool calls, want %d", len(res.ToolCalls), len(want.calls))
			}
			for i, c := range want.calls {
				got := res.ToolCalls[i]
				if got.ID != c.ID || got.Name != c.Name {
					t.Errorf("call %d = %s/%s, want %s/%s", i, got.ID, got.Name, c.ID, c.Name)
				}
				if !json.Valid([]byte(got.Arguments)) {
					t.Errorf("call %d arguments not valid JSON: %q", i, got.Arguments)
				}
				wantArgs := string(c.Input)
				if wantArgs == "" {
					wantArgs = "{}"
				}
				if !sameJSON(got.Arguments, wantArgs) {
					t.Errorf("call %d arguments %s, want %s", i, got.Arguments, wantArgs)
				}
			}
			// Tool events name the call by its position in ToolCalls.
			for _, e := range evs {
				if e.Type == llm.EventToolCallStart && res.ToolCalls[e.ToolIndex].ID != e.ToolCallID {
					t.Errorf("start event index %d names %s, but call %d is %s", e.ToolIndex, e.ToolCallID, e.ToolIndex, res.ToolCalls[e.ToolIndex].ID)
				}
			}
		})
	}
	if n < 15 {
		t.Errorf("only %d recorded streams decoded; the corpus has more", n)
	}
}
