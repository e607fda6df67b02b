package anthropic

import (
	"errors"
	"testing"

	"github.com/chorusrt/chorus/llm"
)

// TestStreamBlockEventsNeedIndex: content_block_start, content_block_delta
// and content_block_stop name their block by index. One without it (or
// with null) is malformed: a typed decode error, nothing emitted, and no
// tool call slot left in the result (the fuzz input of issue 14 opened an
// empty call at block 0). A second start of a block still open is
// malformed too.
func TestStreamBlockEventsNeedIndex(t *testing.T) {
	const toolStart = `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"n","input":{}}}`
	cases := []struct {
		name   string
		before []string // fed first, must succeed
		bad    string
	}{
		{"tool_use start without index", nil, `{"type":"content_block_start","content_block":{"type":"tool_use" }}`},
		{"tool_use start with null index", nil, `{"type":"content_block_start","index":null,"content_block":{"type":"tool_use","id":"t","name":"n"}}`},
		{"text start without index", nil, `{"type":"content_block_start","content_block":{"type":"text","text":"hi"}}`},
		{"input_json_delta without index", []string{toolStart}, `{"type":"content_block_delta","delta":{"type":"input_json_delta","partial_json":"{\"a\":1}"}}`},
		{"text_delta without index", nil, `{"type":"content_block_delta","delta":{"text":"x","type":"text_delta"}}`},
		{"thinking_delta without index", nil, `{"type":"content_block_delta","delta":{"type":"thinking_delta","thinking":"x"}}`},
		{"signature_delta without index", nil, `{"type":"content_block_delta","delta":{"type":"signature_delta","signature":"s"}}`},
		{"stop without index", []string{toolStart}, `{"type":"content_block_stop"}`},
		{"second start of an open block", []string{toolStart}, `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"u","name":"m","input":{}}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Codec{}.NewStreamDecoder()
			var evs []llm.Event
			emit := func(ev llm.Event) bool { evs = append(evs, ev); return true }
			for _, data := range tc.before {
				if _, err := d.Feed(nil, []byte(data), emit); err != nil {
					t.Fatalf("Feed(%s) = %v", data, err)
				}
			}
			before, calls := len(evs), d.Result().ToolCalls
			_, err := d.Feed(nil, []byte(tc.bad), emit)
			var de *llm.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("Feed(%s) = %v, want an *llm.DecodeError", tc.bad, err)
			}
			if len(evs) != before {
				t.Errorf("malformed event emitted %v", evs[before:])
			}
			if got := d.Result().ToolCalls; len(got) != len(calls) {
				t.Errorf("tool calls %+v, want %+v", got, calls)
			}
		})
	}
}
