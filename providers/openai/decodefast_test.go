package openai

import (
	"reflect"
	"testing"
)

// decodeSeeds are requests decodeChatFast takes, and near misses it must
// leave to encoding/json (each checked against decodeChatSlow).
var decodeSeeds = []string{
	`{"model":"openai/gpt-4.1-mini","messages":[{"role":"user","content":"Say hi"}],"max_tokens":1024}`,
	`{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Say \"hi\"\n\u00e9"},{"role":"assistant","content":"hi"},{"role":"user","content":"again"}],"max_completion_tokens":64,"temperature":0.2,"top_p":1,"stream":true,"stream_options":{"include_usage":true}}`,
	`{"messages":[{"role":"user","content":"x"}]}`,
	`{"model":"m","messages":[{"role":"user","content":"x"}],"stream":false,"stream_options":{}}`,
	`{"model":"m","messages":[{"content":"x","role":"user"}],"temperature":-0,"top_p":1e-3}`,
	`{"model":"m","messages":[{"role":"user","content":"\ud800"}]}`,
	"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}",
	// left to encoding/json:
	`{"model":"m","Model":"n","messages":[{"role":"user","content":"x"}]}`,
	`{"model":"m","model":"n","messages":[{"role":"user","content":"x"}]}`,
	`{"model":"m","messages":[{"role":"developer","content":"x"},{"role":"user","content":"y"}]}`,
	`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x"}]}]}`,
	`{"model":"m","messages":[{"role":"user","content":null}]}`,
	`{"model":"m","messages":[{"role":"user","content":"x","name":"a"}]}`,
	`{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":1.5}`,
	`{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":-1}`,
	`{"model":"m","messages":[{"role":"user","content":"x"}],"temperature":null}`,
	`{"model":"m","messages":[{"role":"user","content":"x"}],"n":2}`,
	`{"model":"m","messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":true,"x":1}}`,
	`{"model":"m","messages":[]}`,
	`{"model":"","messages":[{"role":"user","content":"x"}]}`,
	`{"model":"m","messages":[{"role":"user","content":"x"}],"temperature":1e999}`,
	`[1]`, `{`, `null`,
}

// decodeFastEqualsSlow requires that whatever decodeChatFast takes,
// decodeChatSlow decodes to the same ServerChat without error.
func decodeFastEqualsSlow(t *testing.T, body []byte) {
	t.Helper()
	for _, requireModel := range []bool{true, false} {
		fast, ok := decodeChatFast(body, requireModel)
		if !ok {
			continue
		}
		slow, err := decodeChatSlow(body, requireModel)
		if err != nil {
			t.Fatalf("requireModel=%v: the fast path took %q, which the slow path refuses: %v", requireModel, body, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("requireModel=%v: %q:\nfast %+v %+v\nslow %+v %+v", requireModel, body, *fast, *fast.Chat, *slow, *slow.Chat)
		}
	}
}

func TestDecodeChatFastEqualsSlow(t *testing.T) {
	for _, s := range decodeSeeds {
		decodeFastEqualsSlow(t, []byte(s))
	}
}

// TestDecodeChatFastTakesCommonRequests holds the fast path to the
// requests it is for (the gateway's and the benchmarks' common request),
// so that a change that sends them to encoding/json is seen.
func TestDecodeChatFastTakesCommonRequests(t *testing.T) {
	for _, s := range decodeSeeds[:7] {
		if _, ok := decodeChatFast([]byte(s), false); !ok {
			t.Errorf("not taken: %s", s)
		}
	}
	for _, s := range decodeSeeds[7:] {
		if out, ok := decodeChatFast([]byte(s), true); ok {
			t.Errorf("taken: %s (%+v)", s, out.Chat)
		}
	}
}

func FuzzDecodeChatFast(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		decodeFastEqualsSlow(t, body)
	})
}
