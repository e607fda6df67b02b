package providers

import (
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// Support says what this credential's wire format makes of req's optional
// fields (llm.Honours.Check): the ones it must refuse, and the ones it
// leaves out harmlessly, for the codec that would serve req (Chat
// Completions or the Responses API on an OpenAI-format credential). A
// request that sets none of them costs one check.
func (c *Client) Support(req *llm.ChatRequest) llm.Support {
	if !req.Optional() {
		return llm.Support{}
	}
	codec := c.chatCodec(req)
	h := llm.Honours{Format: codec.Format()}
	if hc, ok := codec.(wire.Honourer); ok {
		h = hc.Honours(c.buildOpts(false, wire.Learned{}))
	}
	return h.Check(req)
}
