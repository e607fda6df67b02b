package openai

import (
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// promptCache is the request's prompt_cache_key and prompt_cache_retention.
// OpenAI caches prompt prefixes on its own: these fields only route and
// keep the cache, and message or tool breakpoints (llm.CacheMark) are
// ignored. They are sent to provider "openai" only: the other endpoints of
// this format do not document them and may refuse unknown fields.
func promptCache(req *llm.ChatRequest, o wire.BuildOptions) (key, retention string) {
	if req.Cache == nil || o.Provider != "openai" {
		return "", ""
	}
	return req.Cache.Key, req.Cache.Retention
}
