package gateway_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/gateway"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers/anthropic"
	"github.com/chorusrt/chorus/providers/gemini"
	"github.com/chorusrt/chorus/providers/openai"
)

// A format's field table, the request every case adds one field to, and
// how a field is sent (Gemini's generationConfig members nest).
type tableCase struct {
	name, path, base string
	format           llmtest.Format
	fields           []llm.WireField
	// structural fields every request carries: covered by the base
	// request and the format's own tests.
	structural []string
	// samples are values of mapped fields that arrive under the same name,
	// unchanged, on the same format; renamed lists those that arrive
	// under another name ("max_tokens" as max_completion_tokens).
	samples map[string]string
	renamed map[string][2]string
	// other is a model of another format, to which a passthrough field is
	// refused.
	other string
}

func withField(base, name, value string) string {
	if n, ok := strings.CutPrefix(name, "generationConfig."); ok {
		if strings.Contains(base, `"generationConfig":{`) {
			return strings.Replace(base, `"generationConfig":{`, `"generationConfig":{"`+n+`":`+value+`,`, 1)
		}
		return strings.Replace(base, "{", `{"generationConfig":{"`+n+`":`+value+`},`, 1)
	}
	return strings.Replace(base, "{", `{"`+name+`":`+value+`,`, 1)
}

func arrived(t *testing.T, body map[string]json.RawMessage, name string) json.RawMessage {
	t.Helper()
	if n, ok := strings.CutPrefix(name, "generationConfig."); ok {
		var gc map[string]json.RawMessage
		_ = json.Unmarshal(body["generationConfig"], &gc)
		return gc[n]
	}
	return body[name]
}

// TestEveryTableFieldIsTested: every field of each format's table is sent
// through the gateway to an upstream of the same format: a passthrough
// field arrives byte-equivalent, and to an upstream of another format is
// refused naming it; a mapped field arrives with its value (under its own
// name, or the one the table's note gives); a field with no sample here
// fails the test, so a field added to a table needs one.
func TestEveryTableFieldIsTested(t *testing.T) {
	cases := []tableCase{
		{name: "chat", path: "/v1/chat/completions", base: `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`, format: llmtest.FormatOpenAI,
			fields: openai.ChatFields, other: "anthropic/claude-haiku-4-5",
			structural: []string{"model", "messages", "tools", "tool_choice", "n", "stream", "stream_options", "reasoning_effort", "response_format"},
			samples: map[string]string{"parallel_tool_calls": `true`, "temperature": `0.5`, "top_p": `0.5`, "seed": `3`, "stop": `["x"]`,
				"prompt_cache_key": `"k"`, "prompt_cache_retention": `"24h"`, "frequency_penalty": `0.1`, "presence_penalty": `0.2`, "logit_bias": `{"1":2}`,
				"logprobs": `true`, "service_tier": `"flex"`, "user": `"u"`, "safety_identifier": `"s"`, "metadata": `{"a":"b"}`, "store": `true`, "verbosity": `"high"`},
			// The fixture's openai provider has no MaxCompletionTokens quirk.
			renamed: map[string][2]string{"max_tokens": {"max_tokens", "7"}, "max_completion_tokens": {"max_tokens", "7"}, "top_logprobs": {"top_logprobs", "2"}}},
		{name: "responses", path: "/v1/responses", base: `{"model":"gpt-5","input":"hi"}`, format: llmtest.FormatOpenAI,
			fields: openai.ResponsesFields, other: "anthropic/claude-haiku-4-5",
			structural: []string{"model", "input", "instructions", "tools", "tool_choice", "stream", "stream_options", "previous_response_id", "conversation", "background", "reasoning", "text", "include", "top_logprobs"},
			samples: map[string]string{"parallel_tool_calls": `true`, "max_output_tokens": `9`, "temperature": `0.5`, "top_p": `0.5`, "store": `true`, "truncation": `"auto"`,
				"service_tier": `"priority"`, "prompt_cache_key": `"k"`, "prompt_cache_retention": `"24h"`, "safety_identifier": `"s"`, "metadata": `{"a":"b"}`, "user": `"u"`}},
		{name: "messages", path: "/v1/messages", base: `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, format: llmtest.FormatAnthropic,
			fields: anthropic.MessagesFields, other: "openai/gpt-4o",
			structural: []string{"model", "max_tokens", "messages", "system", "tools", "tool_choice", "thinking", "output_config", "stream", "cache_control"},
			samples:    map[string]string{"temperature": `0.5`, "top_p": `0.5`, "top_k": `4`, "stop_sequences": `["x"]`, "metadata": `{"user_id":"u"}`, "service_tier": `"auto"`}},
		{name: "generateContent", path: "/v1beta/models/gemini-2.5-flash:generateContent", base: `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, format: llmtest.FormatGemini,
			fields: gemini.GenerateFields, other: "openai/gpt-4o",
			structural: []string{"contents", "systemInstruction", "tools", "toolConfig", "generationConfig", "generationConfig.responseSchema", "generationConfig.responseJsonSchema", "generationConfig.thinkingConfig", "generationConfig.candidateCount", "generationConfig.responseMimeType"},
			samples: map[string]string{"safetySettings": `[{"category":"HARM_CATEGORY_HARASSMENT","threshold":"BLOCK_NONE"}]`, "cachedContent": `"cachedContents/x"`,
				"generationConfig.maxOutputTokens": `9`, "generationConfig.temperature": `0.5`, "generationConfig.topP": `0.5`, "generationConfig.topK": `3`,
				"generationConfig.stopSequences": `["x"]`, "generationConfig.seed": `3`, "generationConfig.presencePenalty": `0.1`, "generationConfig.frequencyPenalty": `0.2`,
				"generationConfig.responseLogprobs": `true`, "generationConfig.logprobs": `2`}},
	}
	fx := newFixture(t, gateway.Options{})
	for _, c := range cases {
		for _, f := range c.fields {
			if slicesContains(c.structural, f.Name) {
				continue
			}
			t.Run(c.name+"/"+f.Name, func(t *testing.T) {
				var sent, upName, want string
				switch {
				case f.Class == llm.FieldPassthrough:
					sent, upName, want = `{"chorus_probe":[1,"two"]}`, f.Name, `{"chorus_probe":[1,"two"]}`
				case c.samples[f.Name] != "":
					sent, upName, want = c.samples[f.Name], f.Name, c.samples[f.Name]
				case c.renamed[f.Name][0] != "":
					sent, upName, want = c.renamed[f.Name][1], c.renamed[f.Name][0], c.renamed[f.Name][1]
				default:
					t.Fatalf("%s has no sample in this test: add one", f.Name)
				}
				body := withField(c.base, f.Name, sent)
				switch f.Name { // fields that mean something only beside another
				case "top_logprobs":
					body = withField(body, "logprobs", "true")
				case "generationConfig.logprobs":
					body = withField(body, "generationConfig.responseLogprobs", "true")
				case "parallel_tool_calls": // sent only with tools, as OpenAI requires
					if c.name == "chat" {
						body = withField(body, "tools", `[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]`)
					} else {
						body = withField(body, "tools", `[{"type":"function","name":"f","parameters":{"type":"object"}}]`)
					}
				}
				fx.up.Push(llmtest.Text("ok"))
				a := fx.do(t, "POST", c.path, body)
				if a.status != 200 {
					t.Fatalf("%d %s (sent %s)", a.status, a.body, body)
				}
				if d := a.header.Get("x-chorus-dropped"); d != "" {
					t.Errorf("dropped %q", d)
				}
				got := upstreamBody(t, fx.up)
				if fx.up.Requests()[len(fx.up.Requests())-1].Format != c.format {
					t.Fatalf("went to another format")
				}
				if v := arrived(t, got, upName); !sameJSON(v, []byte(want)) {
					t.Errorf("%s arrived as %s=%s, want %s", f.Name, upName, v, want)
				}
				if f.Class != llm.FieldPassthrough {
					return
				}
				other := body
				switch c.format {
				case llmtest.FormatGemini:
					other = strings.Replace(c.path, "gemini-2.5-flash", c.other, 1)
					a = fx.do(t, "POST", other, body)
				default:
					var m map[string]json.RawMessage
					_ = json.Unmarshal([]byte(body), &m)
					m["model"], _ = json.Marshal(c.other)
					b, _ := json.Marshal(m)
					a = fx.do(t, "POST", c.path, string(b))
				}
				if a.status != 400 || !strings.Contains(string(a.body), f.Name) {
					t.Errorf("to %s: %d %s", c.other, a.status, a.body)
				}
			})
		}
	}
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
