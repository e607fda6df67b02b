package gemini

import "github.com/chorusrt/chorus/llm"

// cachedContent is the request's cachedContent: a prefix created
// beforehand through Gemini's cachedContents API. Gemini also caches
// implicitly; message and tool breakpoints (llm.CacheMark) are ignored.
func cachedContent(req *llm.ChatRequest) string {
	if req.Cache == nil {
		return ""
	}
	return req.Cache.CachedContent
}
