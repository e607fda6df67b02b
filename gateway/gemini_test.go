package gateway_test

import (
	"strings"
	"testing"

	"github.com/chorusrt/chorus/gateway"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

type geminiResponse struct {
	Candidates []struct {
		Content struct {
			Role  string `json:"role"`
			Parts []struct {
				Text         *string `json:"text"`
				Thought      bool    `json:"thought"`
				FunctionCall *struct {
					ID   string         `json:"id"`
					Name string         `json:"name"`
					Args map[string]any `json:"args"`
				} `json:"functionCall"`
			} `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	UsageMetadata *struct {
		PromptTokenCount     int `json:"promptTokenCount"`
		CandidatesTokenCount int `json:"candidatesTokenCount"`
		TotalTokenCount      int `json:"totalTokenCount"`
	} `json:"usageMetadata"`
	Error *struct {
		Code   int    `json:"code"`
		Status string `json:"status"`
	} `json:"error"`
}

func TestGeminiGenerateBufferedAndStreamed(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	f.up.Push(llmtest.Respond(llmtest.Reply{Text: "bonjour", Usage: &llm.Usage{PromptTokens: 5, CompletionTokens: 2}}),
		llmtest.Respond(llmtest.Reply{Deltas: []string{"un ", "deux"}, ToolCalls: []llm.ToolCall{{ID: "call_g", Name: "f", Arguments: `{"n":2}`}}}))
	const body = `{"systemInstruction":{"parts":[{"text":"sys"}]},"contents":[{"role":"user","parts":[{"text":"hi"}]}],
	 "tools":[{"functionDeclarations":[{"name":"f","parameters":{"type":"object"}}]}],"generationConfig":{"maxOutputTokens":50}}`
	a := f.do(t, "POST", "/v1beta/models/gemini/gemini-2.5-flash:generateContent", body, "x-goog-api-key", "client")
	var g geminiResponse
	decode(t, a.body, &g)
	if a.status != 200 || len(g.Candidates) != 1 || *g.Candidates[0].Content.Parts[0].Text != "bonjour" || g.Candidates[0].FinishReason != "STOP" ||
		g.UsageMetadata.PromptTokenCount != 5 || g.UsageMetadata.TotalTokenCount != 7 {
		t.Fatalf("buffered: %d %s", a.status, a.body)
	}
	if r := f.up.Requests()[0]; r.Header.Get("x-goog-api-key") != providerKey || !strings.Contains(string(r.Body), `"maxOutputTokens":50`) {
		t.Fatalf("upstream %v %s", r.Header, r.Body)
	}

	// Streamed, cross-format: a Gemini client on an OpenAI-format model.
	a = f.do(t, "POST", "/v1beta/models/openai/gpt-4.1-mini:streamGenerateContent?alt=sse", body)
	var text, call, finish string
	for _, d := range sseData(a.body) {
		var c geminiResponse
		decode(t, []byte(d), &c)
		for _, p := range c.Candidates[0].Content.Parts {
			if p.Text != nil {
				text += *p.Text
			}
			if p.FunctionCall != nil {
				call = p.FunctionCall.ID + " " + p.FunctionCall.Name
				if p.FunctionCall.Args["n"] != float64(2) {
					t.Fatalf("args %v", p.FunctionCall.Args)
				}
			}
		}
		if c.Candidates[0].FinishReason != "" {
			finish = c.Candidates[0].FinishReason
			if c.UsageMetadata == nil {
				t.Fatal("the last chunk has no usageMetadata")
			}
		}
	}
	if a.status != 200 || text != "un deux" || call != "call_g f" || finish != "STOP" {
		t.Fatalf("stream: %d text %q call %q finish %q\n%s", a.status, text, call, finish, a.body)
	}
	if r := f.up.Requests()[1]; !strings.HasSuffix(r.Path, "/chat/completions") {
		t.Fatalf("upstream path %s", r.Path)
	}
}

func TestGeminiEmbedAndErrors(t *testing.T) {
	f := newFixture(t, gatewayKeys(0))
	auth := []string{"x-goog-api-key", "gk-team-a"}
	a := f.do(t, "POST", "/v1beta/models/gemini/gemini-embedding-001:batchEmbedContents",
		`{"requests":[{"model":"models/x","content":{"parts":[{"text":"a"}]}},{"model":"models/x","content":{"parts":[{"text":"b"}]}}]}`, auth...)
	var e struct {
		Embeddings []struct{ Values []float32 } `json:"embeddings"`
	}
	decode(t, a.body, &e)
	if a.status != 200 || len(e.Embeddings) != 2 || len(e.Embeddings[1].Values) == 0 || e.Embeddings[1].Values[0] != llmtest.EmbeddingFor("b", len(e.Embeddings[1].Values))[0] {
		t.Fatalf("batchEmbedContents: %d %s", a.status, a.body)
	}
	a = f.do(t, "POST", "/v1beta/models/gemini/gemini-embedding-001:embedContent?key=gk-team-a", `{"content":{"parts":[{"text":"a"}]}}`)
	if a.status != 200 || !strings.Contains(string(a.body), `"embedding":{"values":[`) {
		t.Fatalf("embedContent: %d %s", a.status, a.body)
	}
	var g geminiResponse
	a = f.do(t, "POST", "/v1beta/models/gemini/x:generateContent", `{"contents":[{"parts":[{"text":"x"}]}]}`)
	decode(t, a.body, &g)
	if a.status != 401 || g.Error == nil || g.Error.Status != "UNAUTHENTICATED" || g.Error.Code != 401 {
		t.Fatalf("no key: %d %s", a.status, a.body)
	}
	a = f.do(t, "POST", "/v1beta/models/gemini/x:streamGenerateContent", `{"contents":[{"parts":[{"text":"x"}]}]}`, auth...)
	if a.status != 400 {
		t.Fatalf("stream without alt=sse: %d %s", a.status, a.body)
	}
	a = f.do(t, "POST", "/v1beta/models/gemini/x:countTokens", `{}`, auth...)
	if a.status != 404 {
		t.Fatalf("unserved method: %d %s", a.status, a.body)
	}
}
