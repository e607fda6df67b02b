package anthropic

import (
	"errors"
	"testing"

	"github.com/chorusrt/chorus/llm"
)

// TestToolUseWithoutIDOrName: a tool_use block without its id or name is
// malformed, buffered or streamed: a typed decode error and no empty call
// in the result (found by FuzzFeed).
func TestToolUseWithoutIDOrName(t *testing.T) {
	for _, blk := range []string{`{"type":"tool_use"}`, `{"type":"tool_use","id":"t"}`, `{"type":"tool_use","name":"n"}`, `{"type":"tool_use","id":"","name":"n"}`} {
		body := `{"id":"m","type":"message","role":"assistant","model":"c","content":[` + blk + `],"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":1}}`
		_, err := Codec{}.ParseChat([]byte(body))
		var de *llm.DecodeError
		if !errors.As(err, &de) {
			t.Errorf("buffered %s: want *llm.DecodeError, got %v", blk, err)
		}
		d := Codec{}.NewStreamDecoder()
		_, err = d.Feed(nil, []byte(`{"type":"content_block_start","index":0,"content_block":`+blk[:len(blk)-1]+`,"input":{}}}`), func(llm.Event) bool { return true })
		if !errors.As(err, &de) {
			t.Errorf("streamed %s: want *llm.DecodeError, got %v", blk, err)
		}
		if n := len(d.Result().ToolCalls); n != 0 {
			t.Errorf("streamed %s: %d tool calls in the result, want 0", blk, n)
		}
	}
}
