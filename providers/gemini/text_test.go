package gemini

import (
	"strconv"
	"strings"
	"testing"
	"unsafe"

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
		case i == 2100:
			// Longer than a whole block.
			text = strings.Repeat("long ", 5000)
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
	if len(d.text.full) < 3 {
		t.Fatalf("the text took %d full blocks; the test wants it to span several", len(d.text.full))
	}
}

// TestTextBufJoins: a text that fits its first block is its own Content;
// one that spans blocks is joined once and joined again only when more
// text arrived.
func TestTextBufJoins(t *testing.T) {
	var b textBuf
	add := func(s string) {
		b.reserve(len(s))
		b.keep(append(b.cur, s...))
	}
	add("hello")
	if b.String() != "hello" || len(b.full) != 0 {
		t.Fatalf("one block: %q, %d full blocks", b.String(), len(b.full))
	}
	want := "hello"
	for i := range 200 {
		s := strconv.Itoa(i) + strings.Repeat("x", i%7)
		add(s)
		want += s
	}
	s1 := b.String()
	if s1 != want || len(b.full) == 0 {
		t.Fatalf("joined %d bytes over %d full blocks, want %d", len(s1), len(b.full), len(want))
	}
	if s2 := b.String(); unsafe.StringData(s2) != unsafe.StringData(s1) {
		t.Fatal("the text was joined again with nothing new")
	}
	add("!")
	if s3 := b.String(); s3 != want+"!" || s1 != want {
		t.Fatalf("after more text: %q (earlier join now %q)", s3[len(s3)-3:], s1[len(s1)-3:])
	}
}

// TestUsageEventsKeepTheirValues: usage events point into small shared
// arrays (newUsage); each pointer must keep the counts of its own event
// however many events follow.
func TestUsageEventsKeepTheirValues(t *testing.T) {
	d := Codec{}.NewStreamDecoder().(*decoder)
	var got []*llm.Usage
	var want []llm.Usage
	emit := func(ev llm.Event) bool {
		if ev.Type == llm.EventUsage {
			got = append(got, ev.Usage)
			want = append(want, *ev.Usage)
		}
		return true
	}
	for _, c := range benchChunks() {
		if _, err := d.Feed(nil, c, emit); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != benchDeltas {
		t.Fatalf("%d usage events, want %d", len(got), benchDeltas)
	}
	seen := map[*llm.Usage]bool{}
	for i, u := range got {
		if *u != want[i] || u.CompletionTokens != i+1+206 {
			t.Fatalf("usage event %d now reads %+v, emitted as %+v", i, *u, want[i])
		}
		if seen[u] {
			t.Fatalf("usage event %d shares its value with an earlier one", i)
		}
		seen[u] = true
	}
}
