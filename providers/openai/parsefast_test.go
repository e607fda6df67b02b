package openai

import (
	"reflect"
	"testing"

	"github.com/chorusrt/chorus/internal/testkit/fixture"
	"github.com/chorusrt/chorus/providers/internal/codectest"
)

// fastEqualsSlow checks that when the fast path takes a body, encoding/json
// reads it the same way.
func fastEqualsSlow(t *testing.T, body []byte) bool {
	t.Helper()
	fast, ok := parseChatFast(body)
	if !ok {
		return false
	}
	slow, err := parseChatSlow(body)
	if err != nil {
		t.Fatalf("fast path took %q, slow path failed: %v", body, err)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("fast and slow differ on %q:\n%+v\n%+v", body, fast, slow)
	}
	return true
}

var fastSeeds = []string{
	`{"id":"chatcmpl-D8Z5oo6uDh67AD85p73ksdT1KxhE0","object":"chat.completion","created":1770933892,"model":"gpt-4.1-nano-2025-04-14","choices":[{"index":0,"message":{"role":"assistant","content":"Paris is the capital of France. It sits on the Seine.","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":11,"completion_tokens":14,"total_tokens":25,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default","system_fingerprint":"fp_de604bd877"}`,
	`{"id":"a","choices":[{"index":0,"message":{"content":"x \"q\" \u00e9","refusal":"no","reasoning_content":"r"},"finish_reason":"length"}]}`,
	`{"id":"a","choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"refusal","refusal":"b"}],"reasoning":true}}]}`,
	`{"id":"a","ID":"b","choices":[]}`,
	`{"id":"a","id":"b"}`,
	`{"id":5}`,
	`{"id":"a","choices":[{"index":1,"message":{"content":"x"}}]}`,
	`{"id":"a","choices":[{"index":0,"message":{"content":"x"}},{"index":1,"message":{"content":"y"}}]}`,
	`{"id":"a","choices":[{"index":0,"message":{"content":"x","tool_calls":null,"images":null,"function_call":null}}]}`,
	`{"id":"a","choices":[{"index":0,"message":{"content":"x","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{}"}}]}}]}`,
	`{"id":"a","choices":[{"index":0,"message":{"reasoning_details":[{"type":"reasoning.text","text":"t"}],"content":"x"}}]}`,
	`{"id":"a","choices":null,"usage":{"prompt_tokens":1,"completion_tokens":2}}`,
	`{"id":"a","error":null,"choices":[{"index":0,"message":{"content":null},"finish_reason":"content_filter"}]}`,
	`{"error":{"message":"m"}}`,
	`{"id":"a","choices":[{"index":0,"message":{"\u0063ontent":"x"}}]}`,
	`{"id":"a","choices":[{"index":0,"message":null}]}`,
	`{"id":"a","usage":{"prompt_tokens":"x"}}`,
	`{"id":"a","choices":[{"index":0,"message":{"content":"x","refusal":12,"reasoning":false}}]} `,
	`{"id":"a" "model":"m"}`,
}

// TestParseChatFastMatchesSlow: on every recorded buffered answer and on
// edge bodies, the fast path either declines or returns what
// encoding/json's path returns; it takes the common answer.
func TestParseChatFastMatchesSlow(t *testing.T) {
	taken := 0
	for _, s := range fastSeeds {
		if fastEqualsSlow(t, []byte(s)) {
			taken++
		}
	}
	if _, ok := parseChatFast([]byte(fastSeeds[0])); !ok {
		t.Fatal("the common answer is not taken by the fast path")
	}
	dir := fixture.Require(t)
	entries, err := fixture.LoadIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	recorded := 0
	for _, e := range entries {
		exs, err := fixture.Load(dir, e)
		if err != nil {
			continue
		}
		for _, ex := range exs {
			if ex.Response.Stream || !fzIsChat(e, ex) {
				continue
			}
			recorded++
			if fastEqualsSlow(t, ex.Response.Body) {
				taken++
			}
		}
	}
	t.Logf("fast path took %d of %d edge and %d recorded bodies", taken, len(fastSeeds), recorded)
	if recorded == 0 || taken < 5 {
		t.Fatalf("%d recorded bodies, %d taken", recorded, taken)
	}
}

func FuzzParseChatFast(f *testing.F) {
	for _, s := range fastSeeds {
		f.Add([]byte(s))
	}
	for _, b := range codectest.Seeds(f, fzChatProvider, func(e fixture.Entry, ex fixture.Exchange) bool {
		return !ex.Response.Stream && fzIsChat(e, ex)
	}) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fastEqualsSlow(t, body)
	})
}
