package gemini

import (
	"strconv"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/llm"
)

// TestTextEventsOutliveTheBuffer: text events' strings are views of the
// decoder's append-only text buffer (no allocation per delta). Each one
// kept by the caller, and a result taken mid-stream, must read the same
// after the buffer has grown and moved many times, through both the
// template path (textOnly) and the whole walk (escapes, a thought part,
// usage changes, a rejected chunk in between).
func TestTextEventsOutliveTheBuffer(t *testing.T) {
	d := Codec{}.NewStreamDecoder().(*decoder)
	var kept []string
	emit := func(ev llm.Event) bool {
		if ev.Type == llm.EventText {
			kept = append(kept, ev.Text)
		}
		return true
	}
	var want []string
	var mid *llm.ChatResult
	midContent := ""
	for i := range 3000 {
		text, raw := "tok "+strconv.Itoa(i)+" ", ""
		usage := `{"promptTokenCount": 11,"totalTokenCount": 11}`
		switch {
		case i%97 == 5:
			text, raw = "é\"q\"\n"+strconv.Itoa(i), `\u00e9\"q\"\n`+strconv.Itoa(i)
		case i%89 == 7:
			usage = `{"promptTokenCount": 11,"candidatesTokenCount": ` + strconv.Itoa(i) + `}`
		case i%83 == 3:
			chunk := `{"candidates": [{"content": {"parts": [{"text": "thinking", "thought": true}],"role": "model"},"index": 0}],"usageMetadata": ` + usage + `}`
			if _, err := d.Feed(nil, []byte(chunk), emit); err != nil {
				t.Fatal(err)
			}
		case i%79 == 11:
			bad := `{"candidates": [{"content": {"parts": [{"text": "lost \q"}],"role": "model"},"index": 0}],"usageMetadata": ` + usage + `}`
			if _, err := d.Feed(nil, []byte(bad), emit); err == nil {
				t.Fatalf("chunk %d: a bad escape decoded", i)
			}
		}
		if raw == "" {
			raw = text
		}
		chunk := `{"candidates": [{"content": {"parts": [{"text": "` + raw + `"}],"role": "model"},"index": 0}],"usageMetadata": ` + usage + `,"modelVersion": "m","responseId": "r"}`
		if _, err := d.Feed(nil, []byte(chunk), emit); err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
		want = append(want, text)
		if i == 1500 {
			mid = d.Result()
			midContent = strings.Clone(mid.Content)
		}
	}
	if len(kept) != len(want) {
		t.Fatalf("%d text events, want %d", len(kept), len(want))
	}
	for i := range want {
		if kept[i] != want[i] {
			t.Fatalf("text event %d reads %q after the stream, want %q", i, kept[i], want[i])
		}
	}
	if got := d.Result().Content; got != strings.Join(want, "") {
		t.Fatalf("content of %d bytes differs from the %d events' text", len(got), len(want))
	}
	if mid.Content != midContent || mid.Content != strings.Join(want[:1501], "") {
		t.Fatal("a result taken mid-stream changed as the stream went on")
	}
}
