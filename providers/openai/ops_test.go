package openai

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"mime"
	"mime/multipart"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

func b64Floats(fs ...float32) string {
	b := make([]byte, 4*len(fs))
	for i, f := range fs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return base64.StdEncoding.EncodeToString(b)
}

func TestEmbedRequestBody(t *testing.T) {
	wreq, err := EmbedRequest(&llm.EmbedRequest{Model: "text-embedding-3-small", Inputs: []string{"a", "b<c>"}, Dimensions: 256,
		Headers: map[string]string{"X-Trace": "1"}}, wire.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if wreq.Method != "POST" || wreq.Path != "/embeddings" || wreq.Header.Get("X-Trace") != "1" {
		t.Fatalf("%+v", wreq)
	}
	want := `{"model":"text-embedding-3-small","input":["a","b<c>"],"encoding_format":"base64","dimensions":256}`
	if string(wreq.Body) != want {
		t.Fatalf("body %s\nwant %s", wreq.Body, want)
	}
	wreq, _ = EmbedRequest(&llm.EmbedRequest{Model: "m", Inputs: []string{"a"}}, wire.BuildOptions{})
	if bytes.Contains(wreq.Body, []byte("dimensions")) {
		t.Fatalf("zero dimensions sent: %s", wreq.Body)
	}
	var ce *llm.ConfigError
	if _, err := EmbedRequest(&llm.EmbedRequest{Model: "m", Inputs: []string{""}}, wire.BuildOptions{}); !errors.As(err, &ce) || ce.Field != "inputs[0]" {
		t.Fatalf("got %v", err)
	}
}

func TestParseEmbed(t *testing.T) {
	cases := []struct {
		name   string
		body   string
		want   [][]float32
		tokens int
	}{
		{"base64 little-endian float32", `{"object":"list","data":[{"object":"embedding","index":0,"embedding":"` + b64Floats(1.5, -2.25, 0.125) + `"}],"model":"m1","usage":{"prompt_tokens":4,"total_tokens":4}}`,
			[][]float32{{1.5, -2.25, 0.125}}, 4},
		{"float arrays", `{"data":[{"index":0,"embedding":[0.5,-1,3e-2]},{"index":1,"embedding":[2]}],"model":"m1"}`,
			[][]float32{{0.5, -1, 0.03}, {2}}, 0},
		{"indices out of order", `{"data":[{"index":1,"embedding":"` + b64Floats(2) + `"},{"index":0,"embedding":"` + b64Floats(1) + `"}]}`,
			[][]float32{{1}, {2}}, 0},
		{"no index keeps position", `{"data":[{"embedding":[1]},{"embedding":[2]}]}`, [][]float32{{1}, {2}}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := ParseEmbed([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Vectors) != len(tc.want) || res.Usage.PromptTokens != tc.tokens {
				t.Fatalf("%+v", res)
			}
			for i := range tc.want {
				if len(res.Vectors[i]) != len(tc.want[i]) {
					t.Fatalf("vector %d: %v want %v", i, res.Vectors[i], tc.want[i])
				}
				for j := range tc.want[i] {
					if res.Vectors[i][j] != tc.want[i][j] {
						t.Fatalf("vector %d: %v want %v", i, res.Vectors[i], tc.want[i])
					}
				}
			}
		})
	}
	for name, body := range map[string]string{
		"not json":         `{"data":`,
		"bad base64":       `{"data":[{"index":0,"embedding":"!!!"}]}`,
		"ragged float32":   `{"data":[{"index":0,"embedding":"` + base64.StdEncoding.EncodeToString([]byte{1, 2, 3}) + `"}]}`,
		"index range":      `{"data":[{"index":3,"embedding":[1]}]}`,
		"index repeated":   `{"data":[{"index":0,"embedding":[1]},{"index":0,"embedding":[2]}]}`,
		"null embedding":   `{"data":[{"index":0,"embedding":null}]}`,
		"strings in array": `{"data":[{"index":0,"embedding":["a"]}]}`,
	} {
		var de *llm.DecodeError
		if _, err := ParseEmbed([]byte(body)); !errors.As(err, &de) {
			t.Errorf("%s: got %v, want a DecodeError", name, err)
		}
	}
	var api *llm.APIError
	if _, err := ParseEmbed([]byte(`{"error":{"message":"bad model","type":"invalid_request_error","code":"model_not_found"}}`)); !errors.As(err, &api) || api.Code != "model_not_found" || api.Retryable {
		t.Fatalf("got %v", err)
	}
}

func TestSpeechRequestAndParse(t *testing.T) {
	wreq, err := SpeechRequest(&llm.SpeechRequest{Model: "gpt-4o-mini-tts", Input: "Hello", Voice: "alloy", Format: "wav", Instructions: "calm", Speed: 1.25}, wire.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(wreq.Body, &body); err != nil {
		t.Fatal(err)
	}
	if wreq.Path != "/audio/speech" || body["model"] != "gpt-4o-mini-tts" || body["input"] != "Hello" || body["voice"] != "alloy" ||
		body["response_format"] != "wav" || body["instructions"] != "calm" || body["speed"] != 1.25 {
		t.Fatalf("%s %s", wreq.Path, wreq.Body)
	}
	wreq, _ = SpeechRequest(&llm.SpeechRequest{Model: "m", Input: "x"}, wire.BuildOptions{})
	if string(wreq.Body) != `{"model":"m","input":"x"}` {
		t.Fatalf("defaults sent: %s", wreq.Body)
	}
	audio := []byte{0xff, 0xf3, 0x44, 0xc4, 0x00}
	res, err := ParseSpeech(audio, "audio/mpeg")
	if err != nil || !bytes.Equal(res.Audio, audio) || res.MIMEType != "audio/mpeg" {
		t.Fatalf("%+v %v", res, err)
	}
	if res, err := ParseSpeech(audio, ""); err != nil || res.MIMEType != "" {
		t.Fatalf("missing content type guessed: %+v %v", res, err)
	}
	if res, err := ParseSpeech(audio, "audio/L16; rate=24000"); err != nil || res.MIMEType != "audio/L16; rate=24000" {
		t.Fatalf("content type not kept as sent: %+v %v", res, err)
	}
	var api *llm.APIError
	if _, err := ParseSpeech([]byte(`{"error":{"message":"nope","code":"invalid_voice"}}`), "application/json"); !errors.As(err, &api) || api.Code != "invalid_voice" {
		t.Fatalf("got %v", err)
	}
	var de *llm.DecodeError
	if _, err := ParseSpeech(nil, "audio/mpeg"); !errors.As(err, &de) {
		t.Fatalf("got %v", err)
	}
}

func TestTranscriptionRequestMultipart(t *testing.T) {
	audio := bytes.Repeat([]byte{0, 1, 2, 3}, 1000)
	wreq, err := TranscriptionRequest(&llm.TranscriptionRequest{Model: "whisper-1", Audio: audio, MIMEType: "audio/mpeg",
		Language: "en", Prompt: "Chorus, Gemini", Format: llm.TranscriptionVerboseJSON, Temperature: llm.Ptr(0.2)}, wire.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mt, params, err := mime.ParseMediaType(wreq.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || wreq.Path != "/audio/transcriptions" {
		t.Fatalf("%s %v", wreq.Header.Get("Content-Type"), err)
	}
	mr := multipart.NewReader(bytes.NewReader(wreq.Body), params["boundary"])
	fields := map[string]string{}
	var file []byte
	var fileName, fileType string
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(p)
		if p.FormName() == "file" {
			file, fileName, fileType = b, p.FileName(), p.Header.Get("Content-Type")
			continue
		}
		fields[p.FormName()] = string(b)
	}
	if !bytes.Equal(file, audio) || fileName != "audio.mp3" || fileType != "audio/mpeg" {
		t.Fatalf("file %d bytes %q %q", len(file), fileName, fileType)
	}
	want := map[string]string{"model": "whisper-1", "response_format": "verbose_json", "language": "en", "prompt": "Chorus, Gemini", "temperature": "0.2"}
	for k, v := range want {
		if fields[k] != v {
			t.Errorf("%s = %q, want %q", k, fields[k], v)
		}
	}
	if len(fields) != len(want) {
		t.Errorf("fields %v", fields)
	}
	// Defaults: json, the caller's file name, no optional fields.
	wreq, _ = TranscriptionRequest(&llm.TranscriptionRequest{Model: "m", Audio: audio, Filename: "take 1.wav"}, wire.BuildOptions{})
	if !bytes.Contains(wreq.Body, []byte(`filename="take 1.wav"`)) || !bytes.Contains(wreq.Body, []byte("\r\n\r\njson\r\n")) ||
		bytes.Contains(wreq.Body, []byte(`name="language"`)) || bytes.Contains(wreq.Body, []byte(`name="temperature"`)) {
		t.Fatalf("%s", wreq.Body[len(wreq.Body)-400:])
	}
	// The cap is a ConfigError before anything is built.
	old := llm.MaxTranscriptionBytes
	t.Cleanup(func() { llm.MaxTranscriptionBytes = old })
	llm.MaxTranscriptionBytes = len(audio) - 1
	var ce *llm.ConfigError
	if _, err := TranscriptionRequest(&llm.TranscriptionRequest{Model: "m", Audio: audio}, wire.BuildOptions{}); !errors.As(err, &ce) || ce.Field != "audio" {
		t.Fatalf("got %v", err)
	}
}

func TestParseTranscription(t *testing.T) {
	res, err := ParseTranscription([]byte("Hello there.\n"), llm.TranscriptionText, "text/plain; charset=utf-8")
	if err != nil || res.Text != "Hello there." || res.Language != "" || res.Duration != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	res, err = ParseTranscription([]byte(`{"text":"Hi","usage":{"type":"duration","seconds":3}}`), llm.TranscriptionJSON, "application/json")
	if err != nil || res.Text != "Hi" || res.Language != "" || res.Duration != 0 || res.Segments != nil {
		t.Fatalf("plain json must leave the rest zero: %+v %v", res, err)
	}
	verbose := `{"task":"transcribe","language":"english","duration":36.709999084472656,"text":"A B","segments":[
		{"id":0,"start":0,"end":1.5,"text":" A"},{"id":1,"start":1.5,"end":2.25,"text":" B"}]}`
	res, err = ParseTranscription([]byte(verbose), llm.TranscriptionVerboseJSON, "application/json")
	if err != nil || res.Text != "A B" || res.Language != "english" || res.Duration != 36709999*time.Microsecond || len(res.Segments) != 2 ||
		res.Segments[1] != (llm.Segment{Start: 1500 * time.Millisecond, End: 2250 * time.Millisecond, Text: " B"}) {
		t.Fatalf("%+v %v", res, err)
	}
	var api *llm.APIError
	if _, err := ParseTranscription([]byte(`{"error":{"message":"bad audio","type":"invalid_request_error"}}`), llm.TranscriptionText, "application/json"); !errors.As(err, &api) {
		t.Fatalf("got %v", err)
	}
	var de *llm.DecodeError
	if _, err := ParseTranscription([]byte(`{"text":`), llm.TranscriptionJSON, "application/json"); !errors.As(err, &de) {
		t.Fatalf("got %v", err)
	}
	if _, err := ParseTranscription([]byte(`{"duration":1}`), llm.TranscriptionJSON, "application/json"); !errors.As(err, &de) {
		t.Fatalf("an answer without text must not pass: %v", err)
	}
}

func TestModelsRequestAndParse(t *testing.T) {
	if r := ModelsRequest("", wire.BuildOptions{}); r.Method != "GET" || r.Path != "/models" || len(r.Body) != 0 {
		t.Fatalf("%+v", r)
	}
	if r := ModelsRequest("gpt 4/o", wire.BuildOptions{}); r.Path != "/models?after=gpt+4%2Fo" {
		t.Fatal(r.Path)
	}
	body := `{"object":"list","data":[
		{"id":"gpt-4.1","object":"model","created":1744316542,"owned_by":"system"},
		{"id":"llama","created":0,"context_length":131072,"max_completion_tokens":8192},
		{"id":"or/model","name":"OR Model","max_input_tokens":"200000","top_provider":{"max_completion_tokens":64000}},
		{"id":"local","max_context":4096.0,"created":-5},
		{"object":"model"}
	]}`
	models, next, err := ParseModels([]byte(body))
	if err != nil || next != "" || len(models) != 4 {
		t.Fatalf("%+v %q %v", models, next, err)
	}
	want := []llm.ModelInfo{
		{ID: "gpt-4.1", Created: time.Unix(1744316542, 0).UTC()},
		{ID: "llama", ContextWindow: 131072, MaxOutputTokens: 8192},
		{ID: "or/model", DisplayName: "OR Model", ContextWindow: 200000, MaxOutputTokens: 64000},
		{ID: "local", ContextWindow: 4096},
	}
	for i := range want {
		if !modelEqual(models[i], want[i]) {
			t.Errorf("model %d = %+v, want %+v", i, models[i], want[i])
		}
	}
	models, next, err = ParseModels([]byte(`{"models":[{"id":"a"},{"id":"b"}],"has_more":true}`))
	if err != nil || len(models) != 2 || next != "b" {
		t.Fatalf("%+v %q %v", models, next, err)
	}
	if _, next, _ = ParseModels([]byte(`{"data":[{"id":"a"}],"has_more":true,"last_id":"z"}`)); next != "z" {
		t.Fatalf("next %q", next)
	}
	var de *llm.DecodeError
	if _, _, err := ParseModels([]byte(`[]`)); !errors.As(err, &de) {
		t.Fatalf("got %v", err)
	}
	var api *llm.APIError
	if _, _, err := ParseModels([]byte(`{"error":{"message":"no","code":"unauthorized"}}`)); !errors.As(err, &api) {
		t.Fatalf("got %v", err)
	}
}

func modelEqual(a, b llm.ModelInfo) bool {
	return a.ID == b.ID && a.DisplayName == b.DisplayName && a.Created.Equal(b.Created) && a.ContextWindow == b.ContextWindow &&
		a.MaxOutputTokens == b.MaxOutputTokens && strings.Join(a.Capabilities, ",") == strings.Join(b.Capabilities, ",")
}

// TestToolResultImagesRequest: a tool result's images travel as OpenAI
// content parts (image_url data URLs) in a user message right after the run
// of tool messages, since a tool message carries text only.
func TestToolResultImagesRequest(t *testing.T) {
	png := []byte{0x89, 'P', 'N', 'G'}
	req := &llm.ChatRequest{Model: "gpt-4.1", Messages: []llm.Message{
		llm.UserText("look"),
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "shot", Arguments: "{}"}, {ID: "c2", Name: "shot", Arguments: "{}"}}},
		{Role: llm.RoleTool, ToolCallID: "c1", Content: "took it", Parts: []llm.Part{llm.ImagePart("image/png", png)}},
		{Role: llm.RoleTool, ToolCallID: "c2", Parts: []llm.Part{llm.ImageURLPart("https://x.test/a.jpg")}},
	}}
	wreq, err := Codec{}.ChatRequest(req, wire.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Messages []struct {
			Role       string          `json:"role"`
			ToolCallID string          `json:"tool_call_id"`
			Content    json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(wreq.Body, &body); err != nil {
		t.Fatal(err)
	}
	if len(body.Messages) != 5 || body.Messages[2].Role != "tool" || body.Messages[3].Role != "tool" || body.Messages[4].Role != "user" {
		t.Fatalf("%s", wreq.Body)
	}
	if string(body.Messages[2].Content) != `"took it"` || string(body.Messages[3].Content) != `"(image result attached below)"` {
		t.Fatalf("tool texts: %s / %s", body.Messages[2].Content, body.Messages[3].Content)
	}
	want := `[{"type":"text","text":"Images returned by tool call c1:"},{"type":"image_url","image_url":{"url":"data:image/png;base64,` +
		base64.StdEncoding.EncodeToString(png) + `"}},{"type":"text","text":"Images returned by tool call c2:"},{"type":"image_url","image_url":{"url":"https://x.test/a.jpg"}}]`
	if string(body.Messages[4].Content) != want {
		t.Fatalf("media message\n got %s\nwant %s", body.Messages[4].Content, want)
	}
}
