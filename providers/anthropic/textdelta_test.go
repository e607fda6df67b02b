package anthropic

import (
	"encoding/json"
	"testing"

	"github.com/chorusrt/chorus/llm"
)

// textDeltaOracle decodes a text delta event with encoding/json.
func textDeltaOracle(data []byte) (string, bool) {
	var ev struct {
		Type  string `json:"type"`
		Delta *struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		} `json:"delta"`
	}
	if err := json.Unmarshal(data, &ev); err != nil || ev.Type != "content_block_delta" || ev.Delta == nil || ev.Delta.Type != "text_delta" || ev.Delta.Text == nil {
		return "", false
	}
	return *ev.Delta.Text, true
}

func TestTextDeltaFastPath(t *testing.T) {
	cases := []struct {
		data string
		fast bool // the fixed shape: taken by the fast path
	}{
		{`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`, true},
		{`{"type":"content_block_delta","index":12,"delta":{"type":"text_delta","text":"padded"}          }`, true},
		{`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"q\"uote"}}`, true},
		{`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"back\\"}}`, true},
		{`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"back\\\"still"}}`, true},
		{`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\u00e9\n\ud83d\ude00 ÷"}}`, true},
		{`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":""}}`, true},
		// Other shapes fall back to the general walk and decode the same.
		{`{"type":"content_block_delta","index":0,"delta":{"text":"p","type":"text_delta"}}`, false},
		{`{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "spaced"}}`, false},
		{`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x","extra":1}}`, false},
		{`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"},"more":true}`, false},
		{`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}}`, false},
		{`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}`, false},
		{`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"unterminated}}`, false},
	}
	for _, tc := range cases {
		text, ok := textDelta([]byte(tc.data))
		if ok != tc.fast {
			t.Errorf("textDelta(%s) fast=%v, want %v", tc.data, ok, tc.fast)
		}
		want, valid := textDeltaOracle([]byte(tc.data))
		if ok && (!valid || text != want) {
			t.Errorf("textDelta(%s) = %q, encoding/json says %q (valid %v)", tc.data, text, want, valid)
		}
		// Whichever path runs, the decoder agrees with encoding/json.
		d := Codec{}.NewStreamDecoder()
		var got string
		_, err := d.Feed(nil, []byte(tc.data), func(e llm.Event) bool { got += e.Text; return true })
		if valid && (err != nil || got != want) {
			t.Errorf("Feed(%s) = %q, %v; want %q", tc.data, got, err, want)
		}
	}
}

func FuzzTextDelta(f *testing.F) {
	f.Add(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}    }`)
	f.Add(`{"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"a\\\"b\u00e9"}}`)
	f.Add(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}}`)
	f.Fuzz(func(t *testing.T, s string) {
		text, ok := textDelta([]byte(s))
		if !ok || !json.Valid([]byte(s)) {
			return
		}
		want, valid := textDeltaOracle([]byte(s))
		if !valid || text != want {
			t.Fatalf("textDelta(%q) = %q, encoding/json says %q (valid %v)", s, text, want, valid)
		}
	})
}

// FuzzFeed checks that no input makes the decoder panic, and that whatever
// it accepts leaves tool indexes inside the result.
func FuzzFeed(f *testing.F) {
	f.Add(evMessageStart)
	f.Add(`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"n","input":{"a":1}}}`)
	f.Add(`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{}"}}`)
	f.Add(`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"s"}}`)
	f.Add(`{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":3}}`)
	f.Add(`{"type":"error","error":{"type":"overloaded_error","message":"x"}}`)
	f.Fuzz(func(t *testing.T, s string) {
		d := Codec{}.NewStreamDecoder()
		start := `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"n","input":{}}}`
		for _, data := range []string{start, s, s, `{"type":"content_block_stop","index":1}`} {
			_, _ = d.Feed(nil, []byte(data), func(e llm.Event) bool {
				if (e.Type == llm.EventToolCallStart || e.Type == llm.EventToolCallDelta) && e.ToolIndex < 0 {
					t.Fatalf("negative tool index from %q", s)
				}
				return true
			})
		}
		res := d.Result()
		for _, tc := range res.ToolCalls {
			if tc.ID == "" && tc.Name == "" && tc.Arguments == "" {
				t.Fatalf("empty tool call slot from %q: %+v", s, res.ToolCalls)
			}
		}
	})
}
