package gemini

import (
	"reflect"
	"testing"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/codectest"
)

// feedTail decodes chunks and returns the events, errors and result; with
// fresh set, the decoder forgets the previous chunk's tail before each one
// (every chunk walked whole).
func feedTail(chunks [][]byte, fresh bool) ([]string, []string, *llm.ChatResult) {
	d := Codec{}.NewStreamDecoder().(*decoder)
	var forget func()
	if fresh {
		forget = func() { d.tail, d.before, d.after = d.tail[:0], d.before[:0], d.after[:0] }
	}
	return codectest.FeedEach(d, chunks, forget)
}

// TestTailSkipChangesNothing: not walking the bytes a chunk repeats after
// its candidates gives the same events, errors and result as walking every
// chunk whole, including chunks that only look alike (truncated, changed
// usage, an error, candidates not first, bytes after the object).
func TestTailSkipChangesNothing(t *testing.T) {
	tail := `,"usageMetadata": {"promptTokenCount": 11,"totalTokenCount": 11},"modelVersion": "gemini-2.5-flash","responseId": "r1"}`
	cand := func(s string) string {
		return `{"candidates": [{"content": {"parts": [{"text": "` + s + `"}],"role": "model"},"index": 0}]`
	}
	cases := map[string][][]byte{
		"bench": benchChunks(),
		"edges": {
			[]byte(cand("a") + tail),
			[]byte(cand("b") + tail),
			[]byte(cand("c") + tail[:len(tail)-3]),
			[]byte(cand("d") + tail),
			[]byte(cand("e") + tail + ` x`),
			[]byte(cand("f") + `,"usageMetadata": {"promptTokenCount": 11,"candidatesTokenCount": 4,"totalTokenCount": 15},"modelVersion": "gemini-2.5-flash","responseId": "r1"}`),
			[]byte(cand("g") + tail),
			[]byte(`{"modelVersion": "gemini-2.5-flash","candidates": [{"content": {"parts": [{"text": "h"}]}}]` + tail),
			[]byte(cand("i") + `,"error": {"code": 500, "message": "boom"}}`),
			[]byte(cand("j") + tail),
			[]byte(cand(`bad \q escape`) + tail),
			[]byte(cand(`l`) + tail),
			[]byte(cand(`m \"q\" \u00e9\n`) + tail),
			[]byte(cand(`n`) + tail),
			[]byte(`{"candidates": [{"content": {"parts": [{"text": null}],"role": "model"},"index": 0}]` + tail),
			[]byte(`{"candidates": [{"content": {"parts": [{"text": 5}],"role": "model"},"index": 0}]` + tail),
			[]byte(cand(`o`) + tail),
			[]byte(cand(`p`) + tail[:40]),
			[]byte(cand(`q`) + tail),
			[]byte(`{"candidates": [{"content": {"parts": [{"text": "r"}],"role": "model"},"index": 0}]` + tail + tail),
			[]byte(`{"candidates": [{"content": {"parts": [{"text": "s", "thought": true}],"role": "model"},"index": 0}]` + tail),
			[]byte(`{"candidates": [{"content": {"parts": [{"text": "t", "thought": true}],"role": "model"},"index": 0}]` + tail),
			[]byte(cand(`u`) + tail),
			[]byte(`{"candidates": [{"content": {"parts": [{"text": "k"}]},"finishReason": "STOP","index": 0}]` + tail),
			// After the finish, whose tail and usage are not kept.
			[]byte(`{"candidates": [{"content": {"parts": [{"text": "w"}]},"finishReason": "STOP","index": 0}]` + tail),
			[]byte(cand("x") + tail),
			[]byte(cand("y") + `,"usageMetadata": {"promptTokenCount": 11,"candidatesTokenCount": 9,"totalTokenCount": 20}}`),
			[]byte(cand("z") + `,"usageMetadata": {"promptTokenCount": 11,"candidatesTokenCount": 9,"totalTokenCount": 20}}`),
		},
	}
	for name, chunks := range cases {
		t.Run(name, func(t *testing.T) {
			ev1, err1, r1 := feedTail(chunks, false)
			ev2, err2, r2 := feedTail(chunks, true)
			if !reflect.DeepEqual(ev1, ev2) {
				t.Fatalf("events differ:\n%v\n%v", ev1, ev2)
			}
			if !reflect.DeepEqual(err1, err2) {
				t.Fatalf("errors differ:\n%v\n%v", err1, err2)
			}
			if !reflect.DeepEqual(r1, r2) {
				t.Fatalf("results differ:\n%+v\n%+v", r1, r2)
			}
			if len(ev1) < 3 {
				t.Fatalf("only %d events", len(ev1))
			}
		})
	}
	// A truncated chunk emits nothing, and the tail is really skipped on
	// the recorded shape; a text chunk like the last one is decoded from
	// the bytes around its text.
	d := Codec{}.NewStreamDecoder().(*decoder)
	n := 0
	emit := func(llm.Event) bool { n++; return true }
	c := []byte(cand("a") + tail)
	if _, err := d.Feed(nil, c[:len(c)-2], emit); err == nil || n != 0 {
		t.Fatalf("truncated chunk: err %v, %d events", err, n)
	}
	if _, err := d.Feed(nil, c, emit); err != nil || len(d.tail) != len(tail) || len(d.after) != len(tail)+len(`}],"role": "model"},"index": 0}]`) {
		t.Fatalf("whole chunk: err %v, tail of %d bytes, after of %d", err, len(d.tail), len(d.after))
	}
	if ok, err := d.textOnly([]byte(cand(`z`)+tail), emit); !ok || err != nil || d.Result().Content != "az" {
		t.Fatalf("text-only chunk: ok %v, err %v, content %q", ok, err, d.Result().Content)
	}
}
