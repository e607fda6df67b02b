package openai

import (
	"encoding/base64"
	"strings"

	"github.com/chorusrt/chorus/llm"
)

// imagePart turns an image URL from an answer into a Part: a base64 data URL
// with an image type becomes inline bytes, anything else stays a URL.
func imagePart(u string) llm.Part {
	if rest, ok := strings.CutPrefix(u, "data:"); ok {
		if meta, data, ok := strings.Cut(rest, ","); ok {
			if mime, ok := strings.CutSuffix(meta, ";base64"); ok && strings.HasPrefix(mime, "image/") {
				if b, err := base64.StdEncoding.DecodeString(data); err == nil {
					return llm.Part{Type: llm.PartImage, MIMEType: mime, Data: b}
				}
			}
		}
	}
	return llm.Part{Type: llm.PartImage, URL: u}
}
