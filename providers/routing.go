package providers

import (
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// chatCodec chooses the codec that serves a chat request. Every request of
// a credential goes to its format's codec; the OpenAI Responses route hooks
// in here.
func (c *Client) chatCodec(req *llm.ChatRequest, sent wire.Learned) wire.Codec {
	return c.codec
}
