package gateway_test

import (
	"strings"
	"testing"

	"github.com/chorusrt/chorus/gateway"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

// TestOpenAIResponses: POST /v1/responses, buffered and streamed, on an
// OpenAI-format model and, translated, on an Anthropic-format one; a
// stateful request is a 400 in OpenAI's error shape.
func TestOpenAIResponses(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	call := llm.ToolCall{ID: "call_w", Name: "get_weather", Arguments: `{"city":"Paris"}`}
	f.up.Push(
		llmtest.Respond(llmtest.Reply{Text: "hello", Usage: &llm.Usage{PromptTokens: 4, CompletionTokens: 2}}),
		llmtest.Respond(llmtest.Reply{Deltas: []string{"one ", "two"}, Usage: &llm.Usage{PromptTokens: 4, CompletionTokens: 2}}),
		llmtest.ToolCalls(call),
	)
	a := f.do(t, "POST", "/v1/responses", `{"model":"openai/gpt-4.1-mini","instructions":"be brief","input":"hi"}`)
	var r struct {
		ID     string `json:"id"`
		Object string `json:"object"`
		Status string `json:"status"`
		Output []struct {
			Type    string `json:"type"`
			Role    string `json:"role"`
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
	}
	if a.status != 200 {
		t.Fatalf("status %d: %s", a.status, a.body)
	}
	decode(t, a.body, &r)
	if !strings.HasPrefix(r.ID, "resp_") || r.Object != "response" || r.Status != "completed" || len(r.Output) != 1 ||
		r.Output[0].Type != "message" || r.Output[0].Content[0].Type != "output_text" || r.Output[0].Content[0].Text != "hello" {
		t.Fatalf("response %s", a.body)
	}
	// A Responses client reaches OpenAI's Responses API.
	var up struct {
		Instructions string `json:"instructions"`
		Input        []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"input"`
	}
	decode(t, f.up.Requests()[0].Body, &up)
	if f.up.Requests()[0].Path != "/v1/responses" || up.Instructions != "be brief" || len(up.Input) != 1 || up.Input[0].Content != "hi" {
		t.Fatalf("upstream %s %s", f.up.Requests()[0].Path, f.up.Requests()[0].Body)
	}

	// Streamed: the events in OpenAI's order, ending with response.completed.
	a = f.do(t, "POST", "/v1/responses", `{"model":"openai/gpt-4.1-mini","input":"count","stream":true}`)
	evs := sseEvents(a.body)
	var names []string
	var text strings.Builder
	for _, e := range evs {
		names = append(names, e[0])
		if e[0] == "response.output_text.delta" {
			var d struct {
				Delta string `json:"delta"`
			}
			decode(t, []byte(e[1]), &d)
			text.WriteString(d.Delta)
		}
	}
	want := "response.created response.in_progress response.output_item.added response.content_part.added response.output_text.delta response.output_text.delta " +
		"response.output_text.done response.content_part.done response.output_item.done response.completed"
	if strings.Join(names, " ") != want || text.String() != "one two" {
		t.Fatalf("events %v text %q\n%s", names, text.String(), a.body)
	}

	// Streamed from an Anthropic-format model: a function call item.
	a = f.do(t, "POST", "/v1/responses", `{"model":"anthropic/claude-haiku-4-5","input":"weather?","stream":true,"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}]}`)
	body := string(a.body)
	if !strings.Contains(body, `"type":"function_call"`) || !strings.Contains(body, `"call_id":"call_w"`) ||
		!strings.Contains(body, "event: response.function_call_arguments.done") || !strings.Contains(body, `"arguments":"{\"city\":\"Paris\"}"`) {
		t.Fatalf("tool stream %s", body)
	}
	if p := f.up.Requests()[2].Path; !strings.HasSuffix(p, "/messages") {
		t.Fatalf("the Anthropic-format model was called at %s", p)
	}

	// Stateless: previous_response_id is refused with OpenAI's error shape.
	a = f.do(t, "POST", "/v1/responses", `{"model":"openai/gpt-4.1-mini","input":"hi","previous_response_id":"resp_1"}`)
	if a.status != 400 || !strings.Contains(string(a.body), `"type":"invalid_request_error"`) || !strings.Contains(string(a.body), "previous_response_id") {
		t.Fatalf("stateful request: %d %s", a.status, a.body)
	}
}
