package openai

import (
	"reflect"
	"testing"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/codectest"
)

// feedAll decodes chunks and returns the events, the errors and the result;
// with fresh set, the decoder forgets the previous chunk's prefix before
// each chunk (every chunk walked from its first byte).
func feedAll(chunks [][]byte, fresh bool) ([]string, []string, *llm.ChatResult) {
	d := Codec{}.NewStreamDecoder().(*streamDecoder)
	var forget func()
	if fresh {
		forget = func() { d.prefix, d.before, d.after = d.prefix[:0], d.before[:0], d.after[:0] }
	}
	return codectest.FeedEach(d, chunks, forget)
}

// TestPrefixSkipChangesNothing: skipping the members a chunk repeats from
// the previous one gives the same events, errors and result as walking
// every chunk whole, including chunks whose bytes only start like the
// prefix (a number that goes on, a missing comma, usage or an error before
// choices).
func TestPrefixSkipChangesNothing(t *testing.T) {
	head := `{"id":"c1","object":"chat.completion.chunk","created":17,"model":"m1",`
	cases := map[string][][]byte{
		"bench": benchStream(),
		"edges": {
			[]byte(head + `"choices":[{"index":0,"delta":{"content":"a"}}]}`),
			[]byte(head + `"choices":[{"index":0,"delta":{"content":"b"}}]}`),
			[]byte(`{"id":"c1","object":"chat.completion.chunk","created":175,"model":"m1","choices":[{"index":0,"delta":{"content":"c"}}]}`),
			[]byte(head + `"choices":[{"index":0,"delta":{"content":"d"}}]}`),
			[]byte(`{"id":"c1","object":"chat.completion.chunk","created":17 "model":"m1","choices":[]}`),
			[]byte(head + `"usage":{"prompt_tokens":3,"completion_tokens":4},"choices":[{"index":0,"delta":{"content":"e"}}]}`),
			[]byte(head + `"usage":{"prompt_tokens":3,"completion_tokens":5},"choices":[{"index":0,"delta":{"content":"f"}}]}`),
			[]byte(head + `"choices":[{"index":0,"delta":{"content":"g"}}]`),
			[]byte(head + `"choices":[{"index":0,"delta":{"content":"h"},"finish_reason":"stop"}]}`),
			[]byte(head[:len(head)-1] + `}`),
			[]byte(head + `"error":{"message":"boom"},"choices":[]}`),
			[]byte(head + `"choices":[{"index":0,"delta":{"content":"i"},"finish_reason":null}],"obfuscation":"ab"}`),
			[]byte(head + `"choices":[{"index":0,"delta":{"content":"j \"q\" \u00e9"},"finish_reason":null}],"obfuscation":"abc"}`),
			[]byte(head + `"choices":[{"index":0,"delta":{"content":"k"},"finish_reason":null}],"usage":{"prompt_tokens":3,"completion_tokens":9}}`),
			[]byte(head + `"choices":[{"index":0,"delta":{"content":"l"},"finish_reason":null}],"choices":[{"index":0,"delta":{"content":"dup"}}]}`),
			[]byte(head + `"choices":[{"index":0,"delta":{"content":"m"},"finish_reason":null}],"error":{"message":"late"}}`),
			[]byte(head + `"choices":[{"index":0,"delta":{"content":"n"},"finish_reason":null}]`),
			[]byte(head + `"choices":[{"index":0,"delta":{"content":"bad \q"},"finish_reason":null}]}`),
			[]byte(head + `"choices":[{"index":0,"delta":{"content":null},"finish_reason":null}]}`),
			[]byte(head + `"choices":[{"index":0,"delta":{"content":"o"},"finish_reason":null}]}`),
			[]byte(head + `"choices":[{"index":0,"delta":{"content":""},"finish_reason":null}]}`),
			[]byte(head + `"choices":[{"index":0,"delta":{"content":"p","refusal":null},"finish_reason":null}]}`),
			[]byte(head + `"choices":[{"index":0,"delta":{"content":"q","refusal":null},"finish_reason":null}]}`),
			[]byte(head + `"choices":[{"index":0,"delta":{"content":"r","tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":""}}]},"finish_reason":null}]}`),
			[]byte(head + `"choices":[{"index":0,"delta":{"content":"s","tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":""}}]},"finish_reason":null}]}`),
			[]byte(head + `"choices":[{"index":0,"delta":{"content":"t"},"finish_reason":null},{"index":1,"delta":{"content":"t1"}}]}`),
			[]byte(head + `"choices":[{"index":0,"delta":{"content":"u"},"finish_reason":null},{"index":1,"delta":{"content":"u1"}}]}`),
			[]byte(head + `"choices":[{"index":0,"delta":{"content":"v"},"finish_reason":"stop"}]}`),
			[]byte(head + `"choices":[{"index":0,"delta":{"content":"w"},"finish_reason":"stop"}]}`),
			[]byte(`[DONE]`),
		},
	}
	for name, chunks := range cases {
		t.Run(name, func(t *testing.T) {
			ev1, err1, r1 := feedAll(chunks, false)
			ev2, err2, r2 := feedAll(chunks, true)
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
	// The prefix is really skipped on the recorded shape.
	d := Codec{}.NewStreamDecoder().(*streamDecoder)
	chunks := benchStream()
	for _, c := range chunks[:3] {
		if _, err := d.Feed(nil, c, func(llm.Event) bool { return true }); err != nil {
			t.Fatal(err)
		}
	}
	if _, resumed := d.resume(chunks[3]); !resumed || len(d.prefix) < 150 {
		t.Fatalf("prefix of %d bytes not resumed", len(d.prefix))
	}
	// A content chunk like the last one is decoded from the bytes around
	// its text.
	if _, ok := d.template(chunks[3]); !ok || len(d.pending) != 1 || d.pending[0].Type != llm.EventText {
		t.Fatalf("content chunk not decoded from the template (%d events queued)", len(d.pending))
	}
}
