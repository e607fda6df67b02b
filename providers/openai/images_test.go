package openai

import (
	"bytes"
	"testing"

	"github.com/chorusrt/chorus/llm"
)

// TestAssistantImages: images in an answer (OpenRouter's image output) come
// back in ChatResult.Images, inline when sent as a data URL.
func TestAssistantImages(t *testing.T) {
	body := []byte(`{"id":"c","model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"here",
		"images":[{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}},{"type":"image_url","image_url":{"url":"https://example.com/a.jpg"}}]}}]}`)
	res, err := Codec{}.ParseChat(body)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Images) != 2 {
		t.Fatalf("images = %+v", res.Images)
	}
	if im := res.Images[0]; im.MIMEType != "image/png" || !bytes.Equal(im.Data, []byte("\x89PNG\r\n\x1a\n")) || im.URL != "" {
		t.Errorf("inline image = %+v", im)
	}
	if im := res.Images[1]; im.URL != "https://example.com/a.jpg" || im.Data != nil {
		t.Errorf("URL image = %+v", im)
	}
	if p := imagePart("data:text/plain;base64,aGk="); p.URL == "" {
		t.Errorf("a non-image data URL was decoded as an image: %+v", p)
	}
}

func TestAssistantImagesStreamed(t *testing.T) {
	d := Codec{}.NewStreamDecoder()
	emit := func(llm.Event) bool { return true }
	for _, c := range []string{
		`{"choices":[{"index":0,"delta":{"content":"here"}}]}`,
		`{"choices":[{"index":0,"delta":{"images":[{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]}}]}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
	} {
		if _, err := d.Feed(nil, []byte(c), emit); err != nil {
			t.Fatal(err)
		}
	}
	res := d.Result()
	if len(res.Images) != 1 || res.Images[0].MIMEType != "image/png" || res.Content != "here" {
		t.Fatalf("%+v", res)
	}
}
