package gemini

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// trickyText holds every byte class the string encoder treats apart:
// quotes, backslashes, HTML characters (left alone), each short escape,
// other control bytes, DEL, non-ASCII text, U+2028 and U+2029, and invalid
// UTF-8.
const trickyText = "q\"b\\s/ <&> \b\f\n\r\t \x00\x01\x1f\x7f é 中 😀 \u2028\u2029 bad:\xff \xc3( \xe2\x82 end"

// checkAppendRequest builds req both ways and wants the same bytes and
// headers; appended says whether the append encoder must take it.
func checkAppendRequest(t *testing.T, req *llm.ChatRequest, o wire.BuildOptions, appended bool) {
	t.Helper()
	path, out, err := buildRequest(req, o)
	if err != nil {
		t.Fatalf("buildRequest: %v", err)
	}
	want, err := wire.PostJSON(path, out, o.Stream, req.Headers)
	if err != nil {
		t.Fatalf("PostJSON: %v", err)
	}
	body, ok := appendRequest(out)
	if ok != appended {
		t.Fatalf("append encoder took the request: %v, want %v", ok, appended)
	}
	got, err := Codec{}.ChatRequest(req, o)
	if err != nil {
		t.Fatalf("ChatRequest: %v", err)
	}
	if ok && !bytes.Equal(body, want.Body) {
		t.Fatalf("append encoder wrote\n%s\nencoding/json\n%s", body, want.Body)
	}
	if !bytes.Equal(got.Body, want.Body) || got.Path != want.Path || got.Method != want.Method || !reflect.DeepEqual(got.Header, want.Header) {
		t.Fatalf("ChatRequest gave %s %s %v\n%s\nwant %s %s %v\n%s", got.Method, got.Path, got.Header, got.Body, want.Method, want.Path, want.Header, want.Body)
	}
}

func TestAppendRequestMatchesEncodingJSON(t *testing.T) {
	seed := int64(-7)
	half := 0.5
	sig := "c2lnbmF0dXJl+/="
	cases := []struct {
		name     string
		req      llm.ChatRequest
		o        wire.BuildOptions
		appended bool
	}{
		{"minimal", llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("hi")}}, wire.BuildOptions{}, true},
		{"stream with max tokens", llm.ChatRequest{Model: "models/gemini-2.5-flash", Messages: []llm.Message{llm.UserText("Write a story.")}, MaxTokens: 1024}, wire.BuildOptions{Stream: true}, true},
		{"tricky strings", llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.SystemText(trickyText), llm.UserText(trickyText), llm.AssistantText(trickyText), llm.UserText("again " + trickyText)},
			Stop: []string{trickyText, "</end>"}, Headers: map[string]string{"X-Trace": trickyText[:6], "x-lower": "v"}}, wire.BuildOptions{Stream: true}, true},
		{"two systems and turns", llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.SystemText("a"), llm.SystemText("b"), llm.UserText("u1"), llm.AssistantText("a1"), llm.UserText("u2")}}, wire.BuildOptions{}, true},
		{"seed, json mime, cache", llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("u")}, Seed: &seed, ResponseFormat: &llm.ResponseFormat{Type: llm.ResponseJSONObject},
			Cache: &llm.PromptCache{CachedContent: "cachedContents/abc\"123"}}, wire.BuildOptions{}, true},
		{"reasoning effort", llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("u")}, Reasoning: &llm.Reasoning{Effort: llm.EffortNone}}, wire.BuildOptions{}, true},
		{"reasoning budget and thoughts", llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("u")}, MaxTokens: 9, Reasoning: &llm.Reasoning{BudgetTokens: 333, IncludeThoughts: true}}, wire.BuildOptions{}, true},
		{"thoughts only", llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("u")}, Reasoning: &llm.Reasoning{IncludeThoughts: true}}, wire.BuildOptions{}, true},
		{"replayed thinking", llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("u"),
			{Role: llm.RoleAssistant, Content: "answer", ThinkingBlocks: []llm.ThinkingBlock{{Format: formatName, Text: "thought " + trickyText, Signature: sig}, {Format: formatName, Signature: sig + "2"}}},
			llm.UserText("next")}}, wire.BuildOptions{}, true},
		{"text parts", llm.ChatRequest{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("one"), llm.TextPart("two")}}}}, wire.BuildOptions{}, true},
		{"temperature", llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("u")}, Temperature: &half}, wire.BuildOptions{}, false},
		{"temperature learned away", llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("u")}, Temperature: &half}, wire.BuildOptions{Learned: wire.Learned{NoTemperature: true}}, true},
		{"top p", llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("u")}, TopP: &half}, wire.BuildOptions{}, false},
		{"schema", llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("u")}, ResponseFormat: &llm.ResponseFormat{Type: llm.ResponseJSONSchema, Schema: []byte(`{"type": "object"}`)}}, wire.BuildOptions{}, false},
		{"tools", llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("u")}, Tools: []llm.Tool{{Name: "f"}}}, wire.BuildOptions{}, false},
		{"tool choice", llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("u")}, ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceNone}}, wire.BuildOptions{}, false},
		{"image", llm.ChatRequest{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("see"), llm.ImagePart("image/png", []byte{1, 2, 3})}}}}, wire.BuildOptions{}, false},
		{"tool call", llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("u"),
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "f", Arguments: `{"a":1}`}}},
			{Role: llm.RoleTool, ToolCallID: "c1", Content: `{"ok":true}`}}}, wire.BuildOptions{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkAppendRequest(t, &tc.req, tc.o, tc.appended)
		})
	}
}

// FuzzAppendRequest: for any texts, the append encoder writes what
// encoding/json writes.
func FuzzAppendRequest(f *testing.F) {
	f.Add("hi", "sys", "stop", "sig", int64(3), 100)
	f.Add(trickyText, "", "\u2028", "", int64(-1), 0)
	f.Add("\xff\xfe", "\x00", "", "+/=", int64(0), 1)
	f.Fuzz(func(t *testing.T, user, system, stop, sig string, seed int64, maxTokens int) {
		if user == "" || maxTokens < 0 || seed < -1<<31 || seed >= 1<<31 {
			return
		}
		req := llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText(user)}, MaxTokens: maxTokens, Seed: &seed}
		if system != "" {
			req.Messages = append([]llm.Message{llm.SystemText(system)}, req.Messages...)
		}
		if stop != "" {
			req.Stop = []string{stop, user}
		}
		if sig != "" {
			req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Content: user, ThinkingBlocks: []llm.ThinkingBlock{{Format: formatName, Text: system, Signature: sig}}}, llm.UserText(stop+"."))
		}
		checkAppendRequest(t, &req, wire.BuildOptions{Stream: maxTokens%2 == 0}, true)
	})
}

// BenchmarkChatRequest builds bench's streamed request (one user message
// and max tokens): the encoding every call pays.
func BenchmarkChatRequest(b *testing.B) {
	req := &llm.ChatRequest{Model: "gemini-2.5-flash", Messages: []llm.Message{llm.UserText("Write a long story about a fox, with \"quotes\" and a newline\n.")}, MaxTokens: 1024}
	o := wire.BuildOptions{Stream: true}
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := (Codec{}).ChatRequest(req, o); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			path, out, err := buildRequest(req, o)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := wire.PostJSON(path, out, o.Stream, req.Headers); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestAppendRequestKnowsEveryField: the append encoder writes the fields it
// knows and refuses the ones it does not write; a field added to these
// structs must be taught to it (or refused), or it would be dropped
// silently. This list is what appendRequest handles.
func TestAppendRequestKnowsEveryField(t *testing.T) {
	known := map[reflect.Type][]string{
		reflect.TypeFor[generateRequest]():  {"SystemInstruction", "Contents", "Tools", "ToolConfig", "GenerationConfig", "CachedContent", "SafetySettings"},
		reflect.TypeFor[content]():          {"Role", "Parts"},
		reflect.TypeFor[part]():             {"Text", "Thought", "InlineData", "FileData", "FunctionCall", "FunctionResponse", "ThoughtSignature"},
		reflect.TypeFor[generationConfig](): {"MaxOutputTokens", "Temperature", "TopP", "StopSequences", "Seed", "ResponseMimeType", "ResponseJSONSchema", "ThinkingConfig", "TopK", "FrequencyPenalty", "PresencePenalty", "ResponseLogprobs", "Logprobs"},
		reflect.TypeFor[thinkingConfig]():   {"ThinkingBudget", "IncludeThoughts"},
	}
	for typ, names := range known {
		var got []string
		for f := range typ.Fields() {
			got = append(got, f.Name)
		}
		if !reflect.DeepEqual(got, names) {
			t.Errorf("%s has fields %v; appendRequest knows %v", typ.Name(), got, names)
		}
	}
}
