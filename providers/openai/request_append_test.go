package openai

import (
	"bytes"
	"math"
	"reflect"
	"testing"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

func ptr[T any](v T) *T { return &v }

// sameAsJSON checks that the append encoder takes req and writes exactly
// what encoding/json writes for it.
func sameAsJSON(t *testing.T, req *llm.ChatRequest, o wire.BuildOptions) {
	t.Helper()
	if !plainChat(req) {
		t.Fatalf("plainChat refused %+v", req)
	}
	got, ok := appendPlainChat(req, o)
	want, err := chatRequestJSON(req, o)
	if err != nil {
		if ok {
			t.Fatalf("append encoder took a request encoding/json refuses (%v): %s", err, got.Body)
		}
		return
	}
	if !ok {
		t.Fatalf("append encoder refused a request encoding/json takes: %s", want.Body)
	}
	if !bytes.Equal(got.Body, want.Body) {
		t.Fatalf("body differs\nappend: %s\n  json: %s", got.Body, want.Body)
	}
	if got.Method != want.Method || got.Path != want.Path || !reflect.DeepEqual(got.Header, want.Header) {
		t.Fatalf("request differs: %s %s %v, want %s %s %v", got.Method, got.Path, got.Header, want.Method, want.Path, want.Header)
	}
}

func TestAppendChatMatchesEncodingJSON(t *testing.T) {
	texts := []string{"", "Say hi", `quote " backslash \ slash /`, "tab\tnew\nline\rcr\bbs\fff", "\x00\x01\x1f\x7f",
		"<html> & 'amp'", "héllo wörld 日本 🎉", "bad \xff\xfe utf8 \xc3", "sep \u2028 and \u2029", "\u2027\u202a"}
	floats := []float64{0, 1, 0.7, -0.5, 1e-7, 1e-6, 123456789, 1e20, 1e21, 2.5e-9, math.SmallestNonzeroFloat64, math.MaxFloat64, -1e-300}
	base := func() *llm.ChatRequest {
		return &llm.ChatRequest{Model: "gpt-4.1-nano", Messages: []llm.Message{llm.UserText("Say hi")}, MaxTokens: 1024}
	}
	for _, s := range texts {
		sameAsJSON(t, &llm.ChatRequest{Model: "m" + s, Messages: []llm.Message{llm.SystemText(s), llm.UserText(s), {Role: llm.RoleAssistant, Content: s, Refusal: s}}, Stop: []string{s, "x"}}, wire.BuildOptions{})
	}
	for _, f := range floats {
		r := base()
		r.Temperature, r.TopP, r.Seed = ptr(f), ptr(-f), ptr(int64(f))
		sameAsJSON(t, r, wire.BuildOptions{})
	}
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		r := base()
		r.TopP = ptr(f)
		sameAsJSON(t, r, wire.BuildOptions{}) // both refuse it
		if _, err := (Codec{}).ChatRequest(r, wire.BuildOptions{}); err == nil {
			t.Fatalf("top_p %v was encoded", f)
		}
	}
	variants := []struct {
		name string
		edit func(*llm.ChatRequest)
		o    wire.BuildOptions
	}{
		{"no max tokens", func(r *llm.ChatRequest) { r.MaxTokens = 0 }, wire.BuildOptions{}},
		{"no messages", func(r *llm.ChatRequest) { r.Messages = nil }, wire.BuildOptions{}},
		{"empty assistant is null", func(r *llm.ChatRequest) {
			r.Messages = append(r.Messages, llm.Message{Role: llm.RoleAssistant}, llm.UserText("again"))
		}, wire.BuildOptions{}},
		{"max_completion_tokens", func(*llm.ChatRequest) {}, wire.BuildOptions{Quirks: wire.Quirks{MaxCompletionTokens: true}}},
		{"stream", func(*llm.ChatRequest) {}, wire.BuildOptions{Stream: true}},
		{"stream without options", func(*llm.ChatRequest) {}, wire.BuildOptions{Stream: true, Quirks: wire.Quirks{NoStreamOptions: true}}},
		{"stream options learned away", func(*llm.ChatRequest) {}, wire.BuildOptions{Stream: true, Learned: wire.Learned{NoStreamOptions: true}}},
		{"sampling learned away", func(r *llm.ChatRequest) { r.Temperature, r.TopP, r.Seed = ptr(0.2), ptr(0.9), ptr(int64(7)) },
			wire.BuildOptions{Learned: wire.Learned{NoTemperature: true, NoSeed: true}}},
		{"text response format", func(r *llm.ChatRequest) { r.ResponseFormat = &llm.ResponseFormat{Type: llm.ResponseText} }, wire.BuildOptions{}},
		{"effort", func(r *llm.ChatRequest) { r.Reasoning = &llm.Reasoning{Effort: llm.EffortMax} }, wire.BuildOptions{Quirks: wire.Quirks{ReasoningEffort: true}}},
		{"thinking object", func(r *llm.ChatRequest) { r.Reasoning = &llm.Reasoning{Effort: llm.EffortLow} },
			wire.BuildOptions{Quirks: wire.Quirks{ThinkingObject: true, ReasoningEffort: true}}},
		{"thinking disabled", func(r *llm.ChatRequest) { r.Reasoning = &llm.Reasoning{Effort: llm.EffortNone} }, wire.BuildOptions{Quirks: wire.Quirks{ThinkingObject: true}}},
		{"include reasoning", func(*llm.ChatRequest) {}, wire.BuildOptions{Quirks: wire.Quirks{IncludeReasoning: true}}},
		{"prompt cache", func(r *llm.ChatRequest) { r.Cache = &llm.PromptCache{Key: "k\"1", Retention: "24h"} }, wire.BuildOptions{Provider: "openai"}},
		{"headers", func(r *llm.ChatRequest) { r.Headers = map[string]string{"x-trace": "1", "Accept": "x/y"} }, wire.BuildOptions{}},
		{"negative max tokens", func(r *llm.ChatRequest) { r.MaxTokens = -1 }, wire.BuildOptions{}},
		{"unknown effort", func(r *llm.ChatRequest) { r.Reasoning = &llm.Reasoning{Effort: "extreme"} }, wire.BuildOptions{}},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			r := base()
			v.edit(r)
			sameAsJSON(t, r, v.o)
			// ChatRequest answers as encoding/json's path does, errors included.
			got, gerr := (Codec{}).ChatRequest(r, v.o)
			want, werr := chatRequestJSON(r, v.o)
			if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
				t.Fatalf("errors differ: %v, want %v", gerr, werr)
			}
			if gerr == nil && !bytes.Equal(got.Body, want.Body) {
				t.Fatalf("ChatRequest body %s, want %s", got.Body, want.Body)
			}
		})
	}
}

// Requests the append encoder must leave to encoding/json.
func TestAppendChatLeavesTheRest(t *testing.T) {
	for _, r := range []llm.ChatRequest{
		{Model: "m", Messages: userHi, Tools: []llm.Tool{weather}},
		{Model: "m", Messages: userHi, ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceNone}},
		{Model: "m", Messages: userHi, ResponseFormat: &llm.ResponseFormat{Type: llm.ResponseJSONObject}},
		{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartText, Text: "a"}}}}},
		{Model: "m", Messages: []llm.Message{{Role: llm.RoleAssistant, Reasoning: "r"}}},
		{Model: "m", Messages: []llm.Message{{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "1", Name: "f"}}}}},
		{Model: "m", Messages: []llm.Message{{Role: llm.RoleTool, ToolCallID: "1", Content: "x"}}},
		{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: "x", Refusal: "no"}}},
		{Model: "m", Messages: []llm.Message{{Role: "robot", Content: "x"}}},
	} {
		if plainChat(&r) {
			t.Errorf("plainChat took %+v", r)
		}
	}
}

func FuzzAppendChat(f *testing.F) {
	f.Add("gpt", "sys", "Say hi", "", "stop", 0.7, int64(42), 1024, false)
	f.Add("m\u2028", "\xff", "a\"b\\c\n", "ref", "", 1e-9, int64(-1), 0, true)
	f.Fuzz(func(t *testing.T, model, system, user, refusal, stop string, temp float64, seed int64, maxTokens int, stream bool) {
		if model == "" || maxTokens < 0 {
			return
		}
		r := &llm.ChatRequest{Model: model, MaxTokens: maxTokens, Temperature: &temp, Seed: &seed,
			Messages: []llm.Message{llm.SystemText(system), llm.UserText(user), {Role: llm.RoleAssistant, Content: user, Refusal: refusal}}}
		if stop != "" {
			r.Stop = []string{stop}
		}
		if !plainChat(r) {
			t.Fatal("plain request refused")
		}
		sameAsJSON(t, r, wire.BuildOptions{Stream: stream})
	})
}
