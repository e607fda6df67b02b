package wire_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/anthropic"
	"github.com/chorusrt/chorus/providers/gemini"
	"github.com/chorusrt/chorus/providers/internal/wire"
	"github.com/chorusrt/chorus/providers/openai"
)

// TestMIMETypesLowerCasedOnTheWire: media types are case-insensitive, but
// providers match them exactly. Every format sends a part's MIME type
// trimmed and lower-cased (wire.MIMEType): OpenAI Chat Completions and
// Responses data URLs, Anthropic media_type, Gemini inlineData and
// fileData mimeType; in user turns and in tool results, images and
// documents alike.
func TestMIMETypesLowerCasedOnTheWire(t *testing.T) {
	png := []byte("\x89PNG")
	req := &llm.ChatRequest{
		Model: "m",
		Messages: []llm.Message{
			{Role: llm.RoleUser, Parts: []llm.Part{
				llm.TextPart("look"),
				llm.ImagePart(" IMAGE/PNG ", png),
				{Type: llm.PartDocument, MIMEType: "Application/PDF", Data: []byte("%PDF-1.7")},
			}},
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "shot", Arguments: "{}"}}},
			{Role: llm.RoleTool, ToolCallID: "call_1", ToolName: "shot", Parts: []llm.Part{llm.ImagePart("Image/WebP", png)}},
		},
	}
	codecs := []struct {
		name  string
		codec wire.Codec
		want  []string // what the body must hold
	}{
		{"openai", openai.Codec{}, []string{"data:image/png;base64,", "data:application/pdf;base64,", "data:image/webp;base64,"}},
		{"openai-responses", openai.ResponsesCodec{}, []string{"data:image/png;base64,", "data:application/pdf;base64,", "data:image/webp;base64,"}},
		{"anthropic", anthropic.Codec{}, []string{`"media_type":"image/png"`, `"media_type":"application/pdf"`, `"media_type":"image/webp"`}},
		{"gemini", gemini.Codec{}, []string{`"mimeType":"image/png"`, `"mimeType":"application/pdf"`, `"mimeType":"image/webp"`}},
	}
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			wr, err := c.codec.ChatRequest(req, wire.BuildOptions{Provider: c.name})
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(wr.Body) {
				t.Fatalf("body is not JSON: %s", wr.Body)
			}
			body := string(wr.Body)
			for _, w := range c.want {
				if !strings.Contains(body, w) {
					t.Errorf("body lacks %s:\n%s", w, body)
				}
			}
			for _, bad := range []string{"IMAGE/PNG", " image/png", "Application/PDF", "Image/WebP"} {
				if strings.Contains(body, bad) {
					t.Errorf("body sends %q as given:\n%s", bad, body)
				}
			}
		})
	}
	// Gemini also sends the MIME type of an image by URL (fileData).
	urlReq := &llm.ChatRequest{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{
		{Type: llm.PartImage, MIMEType: "Image/JPEG", URL: "gs://bucket/cat.jpg"},
	}}}}
	wr, err := gemini.Codec{}.ChatRequest(urlReq, wire.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(wr.Body), `"mimeType":"image/jpeg"`) {
		t.Errorf("gemini fileData: %s", wr.Body)
	}
}

func TestWireMIMEType(t *testing.T) {
	for in, want := range map[string]string{
		"image/png": "image/png", "IMAGE/PNG": "image/png", " Image/Jpeg\t": "image/jpeg",
		"application/PDF": "application/pdf", "": "",
	} {
		if got := wire.MIMEType(in); got != want {
			t.Errorf("MIMEType(%q) = %q, want %q", in, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = wire.MIMEType("image/png") }); n != 0 {
		t.Errorf("canonical input allocates %v times", n)
	}
}
