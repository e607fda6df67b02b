package gemini

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

func TestEmbedRequestBody(t *testing.T) {
	wreq, err := EmbedRequest(&llm.EmbedRequest{Model: "models/gemini-embedding-001", Inputs: []string{"a", "b"}, Dimensions: 768,
		Headers: map[string]string{"X-Trace": "t"}}, wire.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"requests":[{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"a"}]},"outputDimensionality":768},` +
		`{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"b"}]},"outputDimensionality":768}]}`
	if wreq.Method != "POST" || wreq.Path != "/v1beta/models/gemini-embedding-001:batchEmbedContents" || string(wreq.Body) != want || wreq.Header.Get("X-Trace") != "t" {
		t.Fatalf("%s %s\nwant %s", wreq.Path, wreq.Body, want)
	}
	wreq, _ = EmbedRequest(&llm.EmbedRequest{Model: "a/b c", Inputs: []string{"x"}}, wire.BuildOptions{})
	if wreq.Path != "/v1beta/models/a%2Fb%20c:batchEmbedContents" || bytes.Contains(wreq.Body, []byte("outputDimensionality")) {
		t.Fatalf("%s %s", wreq.Path, wreq.Body)
	}
	var ce *llm.ConfigError
	if _, err := EmbedRequest(&llm.EmbedRequest{Model: "models/", Inputs: []string{"x"}}, wire.BuildOptions{}); !errors.As(err, &ce) || ce.Field != "model" {
		t.Fatalf("got %v", err)
	}
}

func TestParseEmbed(t *testing.T) {
	res, err := ParseEmbed([]byte(`{"embeddings":[{"values":[0.5,-0.25]},{"values":[1,2]}]}`))
	if err != nil || !reflect.DeepEqual(res.Vectors, [][]float32{{0.5, -0.25}, {1, 2}}) || !res.Usage.IsZero() {
		t.Fatalf("%+v %v", res, err)
	}
	var api *llm.APIError
	if _, err := ParseEmbed([]byte(`{"error":{"code":404,"message":"models/x is not found","status":"NOT_FOUND"}}`)); !errors.As(err, &api) || api.Type != "NOT_FOUND" {
		t.Fatalf("got %v", err)
	}
	var de *llm.DecodeError
	for _, b := range []string{`{"embeddings":[{"values":["x"]}]}`, `{"embeddings":[{}]}`, `{}`, `[`} {
		if _, err := ParseEmbed([]byte(b)); !errors.As(err, &de) {
			t.Errorf("%s: got %v", b, err)
		}
	}
}

func TestSpeechRequestAndParse(t *testing.T) {
	wreq, err := SpeechRequest(&llm.SpeechRequest{Model: "gemini-2.5-flash-preview-tts", Input: "Have a wonderful day!", Voice: "Kore", Instructions: "Say cheerfully"}, wire.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"contents":[{"role":"user","parts":[{"text":"Say cheerfully\n\nHave a wonderful day!"}]}],` +
		`"generationConfig":{"responseModalities":["AUDIO"],"speechConfig":{"voiceConfig":{"prebuiltVoiceConfig":{"voiceName":"Kore"}}}}}`
	if wreq.Path != "/v1beta/models/gemini-2.5-flash-preview-tts:generateContent" || string(wreq.Body) != want {
		t.Fatalf("%s %s\nwant %s", wreq.Path, wreq.Body, want)
	}
	for _, req := range []*llm.SpeechRequest{
		{Model: "m", Input: "x", Format: "mp3"},
		{Model: "m", Input: "x", Speed: 1.5},
	} {
		var ce *llm.ConfigError
		if _, err := SpeechRequest(req, wire.BuildOptions{}); !errors.As(err, &ce) {
			t.Errorf("%+v: got %v", req, err)
		}
	}
	if _, err := SpeechRequest(&llm.SpeechRequest{Model: "m", Input: "x", Format: "PCM"}, wire.BuildOptions{}); err != nil {
		t.Fatal(err)
	}

	pcm := []byte{1, 0, 2, 0, 3, 0}
	body := `{"candidates":[{"content":{"parts":[{"inlineData":{"mimeType":"audio/L16;codec=pcm;rate=24000","data":"` +
		base64.StdEncoding.EncodeToString(pcm[:4]) + `"}},{"inlineData":{"mimeType":"audio/L16;codec=pcm;rate=24000","data":"` +
		base64.StdEncoding.EncodeToString(pcm[4:]) + `"}}],"role":"model"},"finishReason":"STOP"}],"modelVersion":"gemini-2.5-flash-preview-tts"}`
	res, err := ParseSpeech([]byte(body))
	if err != nil || !bytes.Equal(res.Audio, pcm) || res.MIMEType != "audio/L16;codec=pcm;rate=24000" || res.Meta.Model != "gemini-2.5-flash-preview-tts" {
		t.Fatalf("%+v %v", res, err)
	}
	var de *llm.DecodeError
	if _, err := ParseSpeech([]byte(`{"candidates":[{"content":{"parts":[{"text":"no"}]},"finishReason":"OTHER"}]}`)); !errors.As(err, &de) {
		t.Fatalf("text-only answer: %v", err)
	}
	if _, err := ParseSpeech([]byte(`{"promptFeedback":{"blockReason":"SAFETY"}}`)); !errors.As(err, &de) {
		t.Fatalf("blocked prompt: %v", err)
	}
	var api *llm.APIError
	if _, err := ParseSpeech([]byte(`{"error":{"code":400,"message":"bad voice","status":"INVALID_ARGUMENT"}}`)); !errors.As(err, &api) {
		t.Fatalf("got %v", err)
	}
}

func TestCountTokensRequestAndParse(t *testing.T) {
	req := &llm.ChatRequest{Model: "gemini-2.5-flash", Messages: []llm.Message{llm.SystemText("sys"), llm.UserText("The quick brown fox")},
		Tools: []llm.Tool{{Name: "f"}}, MaxTokens: 100}
	wreq, err := CountTokensRequest(req, wire.BuildOptions{Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		G map[string]json.RawMessage `json:"generateContentRequest"`
	}
	if err := json.Unmarshal(wreq.Body, &body); err != nil {
		t.Fatalf("%v: %s", err, wreq.Body)
	}
	if wreq.Path != "/v1beta/models/gemini-2.5-flash:countTokens" || string(body.G["model"]) != `"models/gemini-2.5-flash"` {
		t.Fatalf("%s %s", wreq.Path, wreq.Body)
	}
	for _, k := range []string{"contents", "systemInstruction", "tools", "generationConfig"} {
		if _, ok := body.G[k]; !ok {
			t.Errorf("%s missing: %s", k, wreq.Body)
		}
	}
	res, err := ParseCountTokens([]byte(`{"totalTokens": 12, "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 12}]}`))
	if err != nil || res.InputTokens != 12 {
		t.Fatalf("%+v %v", res, err)
	}
	var api *llm.APIError
	if _, err := ParseCountTokens([]byte(`{"error":{"code":404,"message":"not found","status":"NOT_FOUND"}}`)); !errors.As(err, &api) {
		t.Fatalf("got %v", err)
	}
	var de *llm.DecodeError
	if _, err := ParseCountTokens([]byte(`{"promptTokensDetails":[]}`)); !errors.As(err, &de) {
		t.Fatalf("got %v", err)
	}
}

func TestModelsRequestAndParse(t *testing.T) {
	if r := ModelsRequest("", wire.BuildOptions{}); r.Method != "GET" || r.Path != "/v1beta/models?pageSize=100" {
		t.Fatalf("%+v", r)
	}
	if r := ModelsRequest("Ch9t+/=", wire.BuildOptions{}); r.Path != "/v1beta/models?pageSize=100&pageToken=Ch9t%2B%2F%3D" {
		t.Fatal(r.Path)
	}
	body := `{"models":[
		{"name":"models/gemini-2.5-flash","displayName":"Gemini 2.5 Flash","inputTokenLimit":1048576,"outputTokenLimit":65536,"supportedGenerationMethods":["generateContent","countTokens"]},
		{"name":"models/aqa"}
	],"nextPageToken":"tok"}`
	models, next, err := ParseModels([]byte(body))
	if err != nil || next != "tok" || len(models) != 2 {
		t.Fatalf("%+v %q %v", models, next, err)
	}
	if m := models[0]; m.ID != "gemini-2.5-flash" || m.DisplayName != "Gemini 2.5 Flash" || m.ContextWindow != 1048576 || m.MaxOutputTokens != 65536 ||
		!reflect.DeepEqual(m.Capabilities, []string{"generateContent", "countTokens"}) || !m.Created.IsZero() {
		t.Fatalf("%+v", m)
	}
	if m := models[1]; m.ID != "aqa" || m.ContextWindow != 0 || m.MaxOutputTokens != 0 || m.Capabilities != nil {
		t.Fatalf("unreported data must stay zero: %+v", m)
	}
	if models, next, err := ParseModels([]byte(`{}`)); err != nil || len(models) != 0 || next != "" {
		t.Fatalf("empty page: %+v %q %v", models, next, err)
	}
}

// TestToolResultImagesTravelWithFunctionResponse: a tool result's images are
// inlineData parts in the same user turn as the functionResponse parts.
func TestToolResultImagesTravelWithFunctionResponse(t *testing.T) {
	png := []byte{0x89, 'P', 'N', 'G'}
	req := &llm.ChatRequest{Model: "gemini-2.5-flash", Messages: []llm.Message{
		llm.UserText("look"),
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_0", Name: "shot", Arguments: "{}"}}},
		{Role: llm.RoleTool, ToolCallID: "call_0", Content: `{"ok":true}`, Parts: []llm.Part{llm.ImagePart("image/png", png)}},
	}}
	wreq, err := Codec{}.ChatRequest(req, wire.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Contents []struct {
			Role  string            `json:"role"`
			Parts []json.RawMessage `json:"parts"`
		} `json:"contents"`
	}
	if err := json.Unmarshal(wreq.Body, &body); err != nil {
		t.Fatal(err)
	}
	last := body.Contents[len(body.Contents)-1]
	wantParts := []string{
		`{"functionResponse":{"id":"call_0","name":"shot","response":{"ok":true}}}`,
		`{"inlineData":{"mimeType":"image/png","data":"` + base64.StdEncoding.EncodeToString(png) + `"}}`,
	}
	if last.Role != "user" || len(last.Parts) != 2 || string(last.Parts[0]) != wantParts[0] || string(last.Parts[1]) != wantParts[1] {
		t.Fatalf("got %s", wreq.Body)
	}
}

// TestAssistantImagesParsed: image parts of an answer (image-generation
// models) come back in ChatResult.Images with their bytes and MIME type;
// non-image inline data is not an image.
func TestAssistantImagesParsed(t *testing.T) {
	png := []byte{0x89, 'P', 'N', 'G', 0, 1}
	body := `{"candidates":[{"content":{"role":"model","parts":[{"text":"Here it is"},` +
		`{"inlineData":{"mimeType":"image/png","data":"` + base64.StdEncoding.EncodeToString(png) + `"}},` +
		`{"inlineData":{"mimeType":"audio/L16","data":"AAAA"}}]},"finishReason":"STOP"}]}`
	res, err := Codec{}.ParseChat([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if res.Content != "Here it is" || len(res.Images) != 1 || res.Images[0].Type != llm.PartImage || res.Images[0].MIMEType != "image/png" || !bytes.Equal(res.Images[0].Data, png) {
		t.Fatalf("%+v", res)
	}
}
