package anthropic

import (
	"bytes"
	"encoding/json"

	"github.com/chorusrt/chorus/llm"
)

// maxBreakpoints is how many cache_control marks Anthropic accepts in one
// request.
const maxBreakpoints = 4

// cacheControl is Anthropic's prompt-cache breakpoint.
type cacheControl struct {
	Type string `json:"type"`
	TTL  string `json:"ttl,omitempty"`
}

func cacheControlOf(m *llm.CacheMark) *cacheControl {
	if m == nil {
		return nil
	}
	return &cacheControl{Type: "ephemeral", TTL: string(m.TTL)}
}

// withCacheControl appends "cache_control" to a block's JSON object.
func withCacheControl(data []byte, m *llm.CacheMark) ([]byte, error) {
	cc, err := json.Marshal(cacheControlOf(m))
	if err != nil {
		return nil, err
	}
	data = bytes.TrimRight(data, " \n")
	out := make([]byte, 0, len(data)+len(cc)+20)
	out = append(out, data[:len(data)-1]...)
	out = append(out, `,"cache_control":`...)
	out = append(out, cc...)
	return append(out, '}'), nil
}

// markLastBlock puts m's cache mark on the last block the message added:
// the last system block for a system message, else the last block of the
// last message (tool results merge into one user message: the mark goes
// on this result).
func markLastBlock(out *messagesRequest, m *llm.Message) {
	if m.Cache == nil {
		return
	}
	blocks := out.System
	if !m.Role.IsSystem() {
		if len(out.Messages) == 0 {
			return
		}
		blocks = out.Messages[len(out.Messages)-1].Content
	}
	if len(blocks) > 0 {
		blocks[len(blocks)-1].Cache = m.Cache
	}
}

// checkBreakpoints refuses more marks than Anthropic accepts.
func checkBreakpoints(req *llm.ChatRequest) error {
	n := 0
	for i := range req.Messages {
		if req.Messages[i].Cache != nil {
			n++
		}
	}
	for i := range req.Tools {
		if req.Tools[i].Cache != nil {
			n++
		}
	}
	if n > maxBreakpoints {
		return &llm.ConfigError{Field: "cache", Msg: "Anthropic accepts at most 4 cache breakpoints per request"}
	}
	return nil
}
