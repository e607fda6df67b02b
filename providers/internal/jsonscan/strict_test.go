package jsonscan

import (
	"encoding/json"
	"strings"
	"testing"
)

var strictCases = []string{
	``, ` `, `{}`, `[]`, `""`, `0`, `-0`, `1.5e+10`, `1E5`, `-`, `01`, `1.`, `.5`, `1e`, `1e+`, `+1`, `0x1`,
	`true`, `false`, `null`, `tru`, `nul`, `truex`, `True`, `"a`, `"\u00e9"`, `"\u00g9"`, `"\x"`, `"\/"`,
	"\"a\tb\"", "\"a\x7fb\"", "\"\xff\xfe\"", `{"a":1,}`, `[1,]`, `[,1]`, `{"a" 1}`, `{a:1}`, `{"a":1 "b":2}`,
	`[1 2]`, `[1true]`, ` {"a" : [ 1 , {"b":null} ] } `, `{"a":1}}`, `{"a":1} x`, "\v1", "1\v", `[[[]]]`,
	`{"id":"chatcmpl-1","choices":[{"index":0,"message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":1}}`,
}

func TestStrictAgreesWithEncodingJSON(t *testing.T) {
	for _, c := range strictCases {
		if got, want := Strict([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("Strict(%q) = %v, encoding/json says %v", c, got, want)
		}
	}
	for _, n := range []int{strictMaxDepth, strictMaxDepth + 1} {
		for _, open := range []string{"[", `{"a":`} {
			close := "]"
			if open != "[" {
				close = "}"
			}
			c := strings.Repeat(open, n) + "1" + strings.Repeat(close, n)
			if got, want := Strict([]byte(c)), json.Valid([]byte(c)); got != want {
				t.Errorf("depth %d of %q: Strict %v, encoding/json %v", n, open, got, want)
			}
		}
	}
}

func FuzzStrict(f *testing.F) {
	for _, c := range strictCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Strict(b), json.Valid(b); got != want {
			t.Fatalf("Strict(%q) = %v, encoding/json says %v", b, got, want)
		}
	})
}

// chatAnswer is a small buffered Chat Completions answer.
const chatAnswer = `{"id":"chatcmpl-D8Z5oo6uDh67AD85p73ksdT1KxhE0","object":"chat.completion","created":1770933892,"model":"gpt-4.1-nano-2025-04-14","choices":[{"index":0,"message":{"role":"assistant","content":"Paris is the capital of France. It sits on the Seine.","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":11,"completion_tokens":14,"total_tokens":25,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default","system_fingerprint":"fp_de604bd877"}`

func BenchmarkStrict(b *testing.B) {
	data := []byte(chatAnswer)
	b.Run("jsonscan", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if !Strict(data) {
				b.Fatal("invalid")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if !json.Valid(data) {
				b.Fatal("invalid")
			}
		}
	})
}
