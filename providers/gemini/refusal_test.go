package gemini

import (
	"strings"
	"testing"

	"github.com/chorusrt/chorus/llm"
)

// TestSafetyFinishBufferedAndStreamed: Gemini signals a refusal only by its
// finish reason. An answer cut by the safety family, with or without the
// text before it and with calls, finishes content_filter streamed and
// buffered (the JSON-array body of the same chunks); a blocked prompt
// (promptFeedback.blockReason, no candidate) too. Gemini sends no refusal
// text, so Refusal stays empty and the partial text stays Content.
func TestSafetyFinishBufferedAndStreamed(t *testing.T) {
	text := `{"candidates":[{"content":{"role":"model","parts":[{"text":"Sure, "}]}}]}`
	call := `{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"f","args":{}}}]}}]}`
	fin := func(r string) string {
		return `{"candidates":[{"content":{"role":"model","parts":[]},"finishReason":"` + r + `"}]}`
	}
	for _, reason := range []string{"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION"} {
		for name, chunks := range map[string][]string{
			"with text":  {text, fin(reason)},
			"with calls": {call, fin(reason)},
			"bare":       {fin(reason)},
		} {
			d, events, err := feedAll(t, chunks...)
			if err != nil {
				t.Fatalf("%s %s: %v", reason, name, err)
			}
			streamed := d.Result()
			buffered, err := Codec{}.ParseChat([]byte("[" + strings.Join(chunks, ",") + "]"))
			if err != nil {
				t.Fatalf("%s %s: ParseChat: %v", reason, name, err)
			}
			for how, res := range map[string]*llm.ChatResult{"streamed": streamed, "buffered": buffered} {
				if res.FinishReason != llm.FinishContentFilter || res.Refusal != "" {
					t.Errorf("%s %s %s: finish %q refusal %q", reason, name, how, res.FinishReason, res.Refusal)
				}
			}
			if last := events[len(events)-1]; last.Type != llm.EventFinish || last.Finish != llm.FinishContentFilter {
				t.Errorf("%s %s: last event %+v", reason, name, last)
			}
		}
	}
	for _, reason := range []string{"SAFETY", "OTHER", "BLOCKLIST", "PROHIBITED_CONTENT", "IMAGE_SAFETY"} {
		body := `{"promptFeedback":{"blockReason":"` + reason + `"},"usageMetadata":{"promptTokenCount":8}}`
		d, _, err := feedAll(t, body)
		if err != nil || d.Result().FinishReason != llm.FinishContentFilter {
			t.Errorf("streamed blockReason %s: %q %v", reason, d.Result().FinishReason, err)
		}
		res, err := Codec{}.ParseChat([]byte(body))
		if err != nil || res.FinishReason != llm.FinishContentFilter {
			t.Errorf("buffered blockReason %s: %v %v", reason, res, err)
		}
	}
}
