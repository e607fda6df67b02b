package providers

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

// TestInvariant01_UnknownFinishReasonIsEmpty: a provider's own finish string
// with no canonical meaning becomes "", on every format.
func TestInvariant01_UnknownFinishReasonIsEmpty(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	raw := map[string]string{"openai": "insufficient_system_resource", "anthropic": "pause_turn", "gemini": "MALFORMED_FUNCTION_CALL"}
	for _, cfg := range formats(srv) {
		c := newClient(t, cfg)
		srv.Push(llmtest.Step{Reply: &llmtest.Reply{Text: "x", RawFinish: raw[cfg.ID]}})
		res, err := c.Chat(ctxT(t), hello())
		if err != nil || res.FinishReason != "" {
			t.Errorf("%s buffered %q: %v %v", cfg.ID, raw[cfg.ID], res, err)
		}
		srv.Push(llmtest.Step{Reply: &llmtest.Reply{Text: "x", RawFinish: raw[cfg.ID]}})
		s, _ := c.Stream(ctxT(t), hello())
		res, err = s.Result()
		if err != nil || res.FinishReason != "" {
			t.Errorf("%s stream %q: %+v %v (an unmapped reason still completes the stream)", cfg.ID, raw[cfg.ID], res, err)
		}
	}
}

// TestInvariant05_UnknownDataStaysZero: a provider that reports no usage, no
// rate limits and no request id yields zeros, not guesses.
func TestInvariant05_UnknownDataStaysZero(t *testing.T) {
	bodies := map[Format]string{
		FormatOpenAI:    `{"id":"c","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`,
		FormatAnthropic: `{"id":"m1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn"}`,
		FormatGemini:    `{"candidates":[{"content":{"role":"model","parts":[{"text":"hi"}]},"finishReason":"STOP"}]}`,
	}
	for f, body := range bodies {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(body))
		}))
		c := newClient(t, Config{ID: string(f), Format: f, BaseURL: srv.URL, APIKey: testKey})
		res, err := c.Chat(ctxT(t), hello())
		srv.Close()
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !res.Usage.IsZero() || !res.Meta.RateLimit.IsZero() || res.Meta.RequestID != "" || res.Content != "hi" {
			t.Errorf("%s: invented data: usage %+v rate %+v request %q", f, res.Usage, res.Meta.RateLimit, res.Meta.RequestID)
		}
		if f == FormatGemini && (res.ID != "" || res.Model != "") {
			t.Errorf("gemini: invented id %q or model %q", res.ID, res.Model)
		}
		c.hc.CloseIdleConnections()
	}
}

// TestInvariant07_ReasoningRoundTrips: signed reasoning comes back on the
// next request exactly as received: Anthropic thinking blocks with their own
// signatures, in order and first; Gemini thought signatures on their parts;
// DeepSeek reasoning_content with tools.
func TestInvariant07_ReasoningRoundTrips(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	call := llm.ToolCall{ID: "call_1", Name: "weather", Arguments: `{"city":"Rome"}`, Signature: "gem-sig-call"}
	tools := []llm.Tool{{Name: "weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}}

	next := func(res *llm.ChatResult) *llm.ChatRequest {
		return &llm.ChatRequest{Model: "m", Tools: tools, Messages: []llm.Message{
			llm.UserText("weather in Rome?"), res.Message(), llm.ToolResult(res.ToolCalls[0].ID, `{"c":21}`, false),
		}}
	}
	lastBody := func() map[string]any {
		reqs := srv.Requests()
		var m map[string]any
		if err := json.Unmarshal(reqs[len(reqs)-1].Body, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}

	// Anthropic: two thinking blocks, each with its own signature.
	ant := newClient(t, formats(srv)[1])
	srv.Push(llmtest.Step{Reply: &llmtest.Reply{
		Thinking:  []llm.ThinkingBlock{{Text: "first thought", Signature: "sig-A"}, {Text: "second thought", Signature: "sig-B"}},
		ToolCalls: []llm.ToolCall{{ID: "toolu_1", Name: "weather", Arguments: `{"city":"Rome"}`}},
	}})
	s, _ := ant.Stream(ctxT(t), &llm.ChatRequest{Model: "m", Tools: tools, Messages: []llm.Message{llm.UserText("weather in Rome?")}})
	res, err := s.Result()
	if err != nil || len(res.ThinkingBlocks) != 2 || res.ThinkingBlocks[0].Signature != "sig-A" || res.ThinkingBlocks[1].Signature != "sig-B" {
		t.Fatalf("anthropic thinking blocks = %+v, %v", res.ThinkingBlocks, err)
	}
	if _, err := ant.Chat(ctxT(t), next(res)); err != nil {
		t.Fatal(err)
	}
	msgs := lastBody()["messages"].([]any)
	content := msgs[1].(map[string]any)["content"].([]any)
	var kinds, sigs []string
	for _, b := range content {
		bm := b.(map[string]any)
		kinds = append(kinds, bm["type"].(string))
		if s, ok := bm["signature"].(string); ok {
			sigs = append(sigs, s)
		}
	}
	if len(kinds) < 3 || kinds[0] != "thinking" || kinds[1] != "thinking" || len(sigs) != 2 || sigs[0] != "sig-A" || sigs[1] != "sig-B" {
		t.Fatalf("anthropic replay: kinds %v signatures %v", kinds, sigs)
	}

	// Gemini: the function call's thought signature returns on that part.
	gem := newClient(t, formats(srv)[2])
	srv.Push(llmtest.Step{Reply: &llmtest.Reply{ToolCalls: []llm.ToolCall{call}}})
	s, _ = gem.Stream(ctxT(t), &llm.ChatRequest{Model: "m", Tools: tools, Messages: []llm.Message{llm.UserText("weather in Rome?")}})
	res, err = s.Result()
	if err != nil || len(res.ToolCalls) != 1 || res.ToolCalls[0].Signature != "gem-sig-call" {
		t.Fatalf("gemini call = %+v, %v", res.ToolCalls, err)
	}
	if _, err := gem.Chat(ctxT(t), next(res)); err != nil {
		t.Fatal(err)
	}
	contents := lastBody()["contents"].([]any)
	parts := contents[1].(map[string]any)["parts"].([]any)
	var found bool
	for _, p := range parts {
		pm := p.(map[string]any)
		if _, ok := pm["functionCall"]; ok && pm["thoughtSignature"] == "gem-sig-call" {
			found = true
		}
	}
	if !found {
		t.Fatalf("gemini replay lost the signature: %v", parts)
	}

	// DeepSeek: reasoning_content echoed on the assistant turn with tools.
	ds, _ := Builtin("deepseek")
	ds.BaseURL, ds.APIKey = srv.OpenAIBaseURL(), testKey
	dsc := newClient(t, ds)
	srv.Push(llmtest.Step{Reply: &llmtest.Reply{Reasoning: "thinking in deepseek", ToolCalls: []llm.ToolCall{{ID: "call_9", Name: "weather", Arguments: `{"city":"Rome"}`}}}})
	res, err = dsc.Chat(ctxT(t), &llm.ChatRequest{Model: "deepseek-reasoner", Tools: tools, Messages: []llm.Message{llm.UserText("weather in Rome?")}})
	if err != nil || res.Reasoning != "thinking in deepseek" {
		t.Fatalf("deepseek reasoning = %q, %v", res.Reasoning, err)
	}
	if _, err := dsc.Chat(ctxT(t), next(res)); err != nil {
		t.Fatal(err)
	}
	am := lastBody()["messages"].([]any)[1].(map[string]any)
	if am["reasoning_content"] != "thinking in deepseek" {
		t.Fatalf("deepseek replay: %v", am)
	}
}

// TestInvariant08_ToolIndexIsPosition: parallel calls on every format,
// streamed; ToolIndex of every tool event is the call's position.
func TestInvariant08_ToolIndexIsPosition(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	calls := []llm.ToolCall{
		{Name: "a", Arguments: `{"n":1,"long":"` + string(bytes.Repeat([]byte("x"), 40)) + `"}`},
		{Name: "b", Arguments: `{"n":2}`},
		{Name: "c", Arguments: `{}`},
	}
	for _, cfg := range formats(srv) {
		c := newClient(t, cfg)
		srv.Push(llmtest.Step{Reply: &llmtest.Reply{Text: "calling three tools", ToolCalls: calls}})
		s, _ := c.Stream(ctxT(t), hello())
		evs, err := collect(s)
		if err != nil {
			t.Fatal(err)
		}
		res, _ := s.Result()
		checkToolResult(t, res, evs, calls)
		starts := 0
		for _, ev := range evs {
			if ev.Type == llm.EventToolCallStart {
				if ev.ToolIndex != starts {
					t.Fatalf("%s: start %d has ToolIndex %d", cfg.ID, starts, ev.ToolIndex)
				}
				starts++
			}
		}
		if starts != 3 {
			t.Fatalf("%s: %d starts", cfg.ID, starts)
		}
	}
}

// TestInvariant09_UsageOneMeaning: the same usage, encoded in each format's
// own fields by the fake server, decodes to the same canonical Usage.
func TestInvariant09_UsageOneMeaning(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	want := llm.Usage{PromptTokens: 100, CacheReadTokens: 40, CacheWriteTokens: 10, CompletionTokens: 30, ReasoningTokens: 12}
	for _, cfg := range formats(srv) {
		c := newClient(t, cfg)
		w := want
		if cfg.Format != FormatAnthropic {
			w.CacheWriteTokens = 0 // only Anthropic reports cache writes
		}
		if cfg.Format == FormatAnthropic {
			w.ReasoningTokens = 0 // Anthropic does not split reasoning out of output_tokens
		}
		srv.Push(llmtest.Step{Reply: &llmtest.Reply{Text: "counted", Usage: &w}})
		res, err := c.Chat(ctxT(t), hello())
		if err != nil || res.Usage != w {
			t.Errorf("%s buffered usage = %+v, want %+v (%v)", cfg.ID, res.Usage, w, err)
		}
		srv.Push(llmtest.Step{Reply: &llmtest.Reply{Text: "counted", Usage: &w}})
		s, _ := c.Stream(ctxT(t), hello())
		res, err = s.Result()
		if err != nil || res.Usage != w {
			t.Errorf("%s stream usage = %+v, want %+v (%v)", cfg.ID, res.Usage, w, err)
		}
	}
}
