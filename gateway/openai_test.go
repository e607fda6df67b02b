package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/gateway"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

type chunk struct {
	Object  string `json:"object"`
	Choices []struct {
		Delta struct {
			Content   *string `json:"content"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
		Type    string `json:"type"`
	} `json:"error"`
}

func TestOpenAIChatBuffered(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	f.up.Push(llmtest.Respond(llmtest.Reply{Text: "hello there", Usage: &llm.Usage{PromptTokens: 7, CompletionTokens: 3}}))
	a := f.do(t, "POST", "/v1/chat/completions", `{"model":"openai/gpt-4.1-mini","messages":[{"role":"developer","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hi"}]}]}`,
		"Authorization", "Bearer client-key-not-forwarded")
	if a.status != 200 {
		t.Fatalf("status %d: %s", a.status, a.body)
	}
	var c struct {
		Object  string `json:"object"`
		Model   string `json:"model"`
		Choices []struct {
			Message struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
			TotalTokens      int `json:"total_tokens"`
		} `json:"usage"`
	}
	decode(t, a.body, &c)
	if c.Object != "chat.completion" || c.Model != "openai/gpt-4.1-mini" || len(c.Choices) != 1 ||
		c.Choices[0].Message.Content != "hello there" || c.Choices[0].Message.Role != "assistant" || c.Choices[0].FinishReason != "stop" {
		t.Fatalf("answer %s", a.body)
	}
	if c.Usage.PromptTokens != 7 || c.Usage.CompletionTokens != 3 || c.Usage.TotalTokens != 10 {
		t.Fatalf("usage %+v", c.Usage)
	}
	if got := a.header.Get("x-chorus-model"); got != "openai/gpt-4.1-mini" {
		t.Fatalf("x-chorus-model %q", got)
	}
	reqs := f.up.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d upstream requests", len(reqs))
	}
	if got := reqs[0].Header.Get("Authorization"); got != "Bearer "+providerKey {
		t.Fatalf("upstream Authorization %q: the client's key must never be forwarded", got)
	}
	var up struct {
		Model    string `json:"model"`
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	decode(t, reqs[0].Body, &up)
	if up.Model != "gpt-4.1-mini" || len(up.Messages) != 2 || up.Messages[0].Role != "developer" || up.Messages[1].Content != "hi" {
		t.Fatalf("upstream body %s", reqs[0].Body)
	}
}

func TestOpenAIChatStreamWithUsage(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	f.up.Push(llmtest.Respond(llmtest.Reply{Deltas: []string{"one ", "two ", "three"}, Usage: &llm.Usage{PromptTokens: 5, CompletionTokens: 3}}))
	a := f.do(t, "POST", "/v1/chat/completions", `{"model":"openai/gpt-4.1-mini","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"count"}]}`)
	if a.status != 200 || !strings.HasPrefix(a.header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d %q: %s", a.status, a.header.Get("Content-Type"), a.body)
	}
	data := sseData(a.body)
	if len(data) < 3 || data[len(data)-1] != "[DONE]" {
		t.Fatalf("stream does not end with [DONE]: %q", data)
	}
	var text strings.Builder
	var finish string
	for _, d := range data[:len(data)-2] {
		var c chunk
		decode(t, []byte(d), &c)
		if c.Object != "chat.completion.chunk" || len(c.Choices) != 1 || c.Usage != nil {
			t.Fatalf("chunk %s", d)
		}
		if c.Choices[0].Delta.Content != nil {
			text.WriteString(*c.Choices[0].Delta.Content)
		}
		if c.Choices[0].FinishReason != nil {
			finish = *c.Choices[0].FinishReason
		}
	}
	if text.String() != "one two three" || finish != "stop" {
		t.Fatalf("text %q finish %q", text.String(), finish)
	}
	var last chunk
	decode(t, []byte(data[len(data)-2]), &last)
	if len(last.Choices) != 0 || last.Usage == nil || last.Usage.PromptTokens != 5 || last.Usage.CompletionTokens != 3 || last.Usage.TotalTokens != 8 {
		t.Fatalf("usage chunk %s", data[len(data)-2])
	}
	var up struct {
		Stream bool `json:"stream"`
	}
	decode(t, f.up.Requests()[0].Body, &up)
	if !up.Stream {
		t.Fatal("the upstream call was not streamed")
	}
}

func TestOpenAIToolsChoiceAndResponseFormat(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	call := llm.ToolCall{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}
	f.up.Push(llmtest.ToolCalls(call), llmtest.ToolCalls(call))
	body := `{"model":"openai/gpt-4.1-mini","messages":[{"role":"user","content":"weather?"}],
	 "tools":[{"type":"function","function":{"name":"get_weather","description":"d","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],
	 "tool_choice":{"type":"function","function":{"name":"get_weather"}},
	 "response_format":{"type":"json_schema","json_schema":{"name":"w","schema":{"type":"object"},"strict":true}}STREAM}`
	for _, stream := range []bool{false, true} {
		b := strings.Replace(body, "STREAM", map[bool]string{false: "", true: `,"stream":true`}[stream], 1)
		a := f.do(t, "POST", "/v1/chat/completions", b)
		if a.status != 200 {
			t.Fatalf("stream=%v status %d: %s", stream, a.status, a.body)
		}
		var name, args, id, finish string
		if !stream {
			var c struct {
				Choices []struct {
					Message struct {
						ToolCalls []struct {
							ID       string `json:"id"`
							Type     string `json:"type"`
							Function struct{ Name, Arguments string }
						} `json:"tool_calls"`
					} `json:"message"`
					FinishReason string `json:"finish_reason"`
				} `json:"choices"`
			}
			decode(t, a.body, &c)
			if len(c.Choices[0].Message.ToolCalls) != 1 || c.Choices[0].Message.ToolCalls[0].Type != "function" {
				t.Fatalf("answer %s", a.body)
			}
			tc := c.Choices[0].Message.ToolCalls[0]
			id, name, args, finish = tc.ID, tc.Function.Name, tc.Function.Arguments, c.Choices[0].FinishReason
		} else {
			for _, d := range sseData(a.body) {
				if d == "[DONE]" {
					continue
				}
				var c chunk
				decode(t, []byte(d), &c)
				for _, tc := range c.Choices[0].Delta.ToolCalls {
					if tc.Index != 0 {
						t.Fatalf("tool index %d", tc.Index)
					}
					if tc.ID != "" {
						id, name = tc.ID, tc.Function.Name
					}
					args += tc.Function.Arguments
				}
				if c.Choices[0].FinishReason != nil {
					finish = *c.Choices[0].FinishReason
				}
			}
		}
		if id != "call_1" || name != "get_weather" || args != `{"city":"Paris"}` || finish != "tool_calls" {
			t.Fatalf("stream=%v: call %q %q %q finish %q", stream, id, name, args, finish)
		}
	}
	for _, r := range f.up.Requests() {
		var up struct {
			Tools []struct {
				Function struct{ Name string } `json:"function"`
			} `json:"tools"`
			ToolChoice struct {
				Function struct{ Name string } `json:"function"`
			} `json:"tool_choice"`
			ResponseFormat struct {
				Type       string `json:"type"`
				JSONSchema struct {
					Name   string `json:"name"`
					Strict bool   `json:"strict"`
				} `json:"json_schema"`
			} `json:"response_format"`
		}
		decode(t, r.Body, &up)
		if len(up.Tools) != 1 || up.Tools[0].Function.Name != "get_weather" || up.ToolChoice.Function.Name != "get_weather" ||
			up.ResponseFormat.Type != "json_schema" || up.ResponseFormat.JSONSchema.Name != "w" || !up.ResponseFormat.JSONSchema.Strict {
			t.Fatalf("upstream body %s", r.Body)
		}
	}
}

// A failure after the first streamed byte is an in-band error event, and
// the stream never ends with [DONE] as if it were complete.
func TestOpenAIMidStreamFailureIsInBand(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	f.up.Push(llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultResetMidStream, After: 2, Reply: &llmtest.Reply{Deltas: []string{"a", "b", "c", "d"}}}))
	a := f.do(t, "POST", "/v1/chat/completions", `{"model":"openai/gpt-4.1-mini","stream":true,"messages":[{"role":"user","content":"x"}]}`)
	if a.status != 200 {
		t.Fatalf("status %d", a.status)
	}
	data := sseData(a.body)
	if len(data) < 2 {
		t.Fatalf("data %q", data)
	}
	var text string
	for _, d := range data[:len(data)-1] {
		var c chunk
		decode(t, []byte(d), &c)
		if c.Choices[0].Delta.Content != nil {
			text += *c.Choices[0].Delta.Content
		}
	}
	var last chunk
	decode(t, []byte(data[len(data)-1]), &last)
	if last.Error == nil || last.Error.Message == "" || text != "ab" {
		t.Fatalf("text %q, last event %s", text, data[len(data)-1])
	}
	for _, d := range data {
		if d == "[DONE]" {
			t.Fatal("a failed stream ended with [DONE]")
		}
	}
}

// Before the first byte an upstream failure keeps its status in OpenAI's
// error shape.
func TestOpenAIErrorBeforeFirstByte(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	for _, stream := range []string{"false", "true"} {
		f.up.Push(llmtest.Fail(llmtest.Fault{Status: 400, Message: "bad thing"}))
		a := f.do(t, "POST", "/v1/chat/completions", `{"model":"openai/gpt-4.1-mini","stream":`+stream+`,"messages":[{"role":"user","content":"x"}]}`)
		var e struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
			} `json:"error"`
		}
		decode(t, a.body, &e)
		if a.status != 400 || e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, "bad thing") {
			t.Fatalf("stream=%s: %d %s", stream, a.status, a.body)
		}
	}
	a := f.do(t, "POST", "/v1/chat/completions", `{"model":"nope/x","messages":[{"role":"user","content":"x"}]}`)
	if a.status != 404 {
		t.Fatalf("unknown provider: %d %s", a.status, a.body)
	}
	a = f.do(t, "POST", "/v1/chat/completions", `{"model":"openai/x","messages":[{"role":"wizard","content":"x"}]}`)
	if a.status != 400 {
		t.Fatalf("unknown role: %d %s", a.status, a.body)
	}
}

func gatewayKeys(rpm int) gateway.Options {
	return gateway.Options{Keys: []gateway.Key{
		{Name: "team-a", SHA256: gateway.HashKey("gk-team-a"), RPM: rpm},
		{Name: "team-b", SHA256: gateway.HashKey("gk-team-b"), Models: []string{"anthropic/*"}},
	}}
}

func TestGatewayKeys(t *testing.T) {
	f := newFixture(t, gatewayKeys(0))
	const body = `{"model":"openai/gpt-4.1-mini","messages":[{"role":"user","content":"x"}]}`
	for _, c := range []struct {
		name   string
		header []string
		want   int
	}{
		{"none", nil, 401},
		{"wrong", []string{"Authorization", "Bearer gk-nope"}, 401},
		{"provider key", []string{"Authorization", "Bearer " + providerKey}, 401},
		{"bearer", []string{"Authorization", "Bearer gk-team-a"}, 200},
		{"x-api-key", []string{"x-api-key", "gk-team-a"}, 200},
		{"x-goog-api-key", []string{"x-goog-api-key", "gk-team-a"}, 200},
		{"model not allowed", []string{"Authorization", "Bearer gk-team-b"}, 403},
	} {
		a := f.do(t, "POST", "/v1/chat/completions", body, c.header...)
		if a.status != c.want {
			t.Errorf("%s: status %d, want %d: %s", c.name, a.status, c.want, a.body)
		}
		if c.want == 401 && strings.Contains(string(a.body), "gk-") {
			t.Errorf("%s: the presented key is echoed: %s", c.name, a.body)
		}
	}
	if n := f.up.Count(); n != 3 {
		t.Fatalf("%d upstream calls, want 3 (refused requests must not reach a provider)", n)
	}
}

func TestGatewayKeyRateLimit(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	opts := gatewayKeys(2)
	opts.Now = func() time.Time { return now }
	f := newFixture(t, opts)
	const body = `{"model":"openai/gpt-4.1-mini","messages":[{"role":"user","content":"x"}]}`
	auth := []string{"Authorization", "Bearer gk-team-a"}
	for i, want := range []string{"1", "0"} {
		a := f.do(t, "POST", "/v1/chat/completions", body, auth...)
		if a.status != 200 || a.header.Get("x-ratelimit-limit-requests") != "2" || a.header.Get("x-ratelimit-remaining-requests") != want {
			t.Fatalf("request %d: %d remaining %q", i, a.status, a.header.Get("x-ratelimit-remaining-requests"))
		}
	}
	now = now.Add(15 * time.Second)
	a := f.do(t, "POST", "/v1/chat/completions", body, auth...)
	if a.status != 429 || a.header.Get("retry-after") != "45" || a.header.Get("x-ratelimit-reset-requests") != "45s" {
		t.Fatalf("third request: %d retry-after %q reset %q: %s", a.status, a.header.Get("retry-after"), a.header.Get("x-ratelimit-reset-requests"), a.body)
	}
	if !strings.Contains(string(a.body), `"rate_limit_exceeded"`) {
		t.Fatalf("429 body %s", a.body)
	}
	now = now.Add(45 * time.Second)
	if a := f.do(t, "POST", "/v1/chat/completions", body, auth...); a.status != 200 {
		t.Fatalf("after the window: %d", a.status)
	}
	if n := f.up.Count(); n != 3 {
		t.Fatalf("%d upstream calls, want 3", n)
	}
}

// A client that goes away mid-stream cancels the upstream call: the
// provider's connection is closed while it is still answering.
func TestOpenAIClientDisconnectCancelsUpstream(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	f.up.Push(llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultStall, After: 1, Stall: 5 * time.Minute, Reply: &llmtest.Reply{Deltas: []string{"first", "never"}}}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", f.url+"/v1/chat/completions",
		strings.NewReader(`{"model":"openai/gpt-4.1-mini","stream":true,"messages":[{"role":"user","content":"x"}]}`))
	resp, err := f.gw.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, err := resp.Body.Read(buf)
	if err != nil || !strings.Contains(string(buf[:n]), "first") {
		t.Fatalf("first read %q %v", buf[:n], err)
	}
	if f.up.OpenConns() == 0 {
		t.Fatal("no upstream connection while streaming")
	}
	cancel()
	resp.Body.Close()
	deadline := time.Now().Add(20 * time.Second)
	for f.up.OpenConns() > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the upstream connection outlived the client")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestOpenAIEmbeddingsAndModels(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	a := f.do(t, "POST", "/v1/embeddings", `{"model":"openai/text-embedding-3-small","input":["a","b"]}`)
	if a.status != 200 {
		t.Fatalf("embeddings %d %s", a.status, a.body)
	}
	var e struct {
		Object string `json:"object"`
		Data   []struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	decode(t, a.body, &e)
	if e.Object != "list" || len(e.Data) != 2 || e.Data[1].Index != 1 || len(e.Data[0].Embedding) == 0 {
		t.Fatalf("embeddings %s", a.body)
	}
	want := llmtest.EmbeddingFor("b", len(e.Data[1].Embedding))
	for i := range want {
		if want[i] != e.Data[1].Embedding[i] {
			t.Fatalf("vector of b: %v, want %v", e.Data[1].Embedding, want)
		}
	}
	a = f.do(t, "POST", "/v1/embeddings", `{"model":"openai/text-embedding-3-small","input":"a","encoding_format":"base64"}`)
	if a.status != 200 || !strings.Contains(string(a.body), `"embedding":"`) {
		t.Fatalf("base64 embeddings %d %s", a.status, a.body)
	}

	a = f.do(t, "GET", "/v1/models", "")
	var m struct {
		Object string `json:"object"`
		Data   []struct {
			ID     string `json:"id"`
			Object string `json:"object"`
		} `json:"data"`
	}
	decode(t, a.body, &m)
	ids := map[string]bool{}
	for _, d := range m.Data {
		ids[d.ID] = d.Object == "model"
	}
	if a.status != 200 || m.Object != "list" || !ids["fast"] || len(ids) < 2 {
		t.Fatalf("models %d %s", a.status, a.body)
	}
	for id := range ids {
		if id != "fast" && !strings.HasPrefix(id, "openai/") && !strings.HasPrefix(id, "anthropic/") && !strings.HasPrefix(id, "gemini/") {
			t.Fatalf("model id %q is not provider/model", id)
		}
	}
}

func TestUnknownEndpointAndBodyCap(t *testing.T) {
	f := newFixture(t, gateway.Options{MaxBodyBytes: 64})
	if a := f.do(t, "POST", "/v1/nothing", "{}"); a.status != 404 {
		t.Fatalf("unknown endpoint: %d", a.status)
	}
	a := f.do(t, "POST", "/v1/chat/completions", `{"model":"openai/x","messages":[{"role":"user","content":"`+strings.Repeat("x", 100)+`"}]}`)
	if a.status != 413 {
		t.Fatalf("oversize body: %d %s", a.status, a.body)
	}
}
