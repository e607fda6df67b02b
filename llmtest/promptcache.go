package llmtest

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"sync"

	"github.com/chorusrt/chorus/llm"
)

// WithPromptCache makes the server keep a prompt cache the way Anthropic's
// works, for requests in the Anthropic format: the prefix of a request up
// to its last cache_control mark (system, tools and messages in the order
// the API caches them: tools, system, messages) is written to the cache
// the first time it is seen (reported as cache_creation_input_tokens) and
// read every later time (cache_read_input_tokens); what follows the mark is
// uncached input. A request without a mark is not cached. Token counts
// are a quarter of the bytes, as for uncached input. Replies with a Usage
// of their own are reported as they are.
func WithPromptCache() Option {
	return func(c *config) { c.cache = &promptCache{seen: map[[32]byte]bool{}} }
}

type promptCache struct {
	mu   sync.Mutex
	seen map[[32]byte]bool
}

// usage is the cached and uncached input of an Anthropic request body,
// and whether it carries a mark at all.
func (c *promptCache) usage(body []byte) (u llm.Usage, ok bool) {
	var req struct {
		Tools    []json.RawMessage `json:"tools"`
		System   json.RawMessage   `json:"system"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil {
		return u, false
	}
	// The cacheable units in the API's order; the prefix ends after the
	// last unit holding a mark.
	var units []json.RawMessage
	units = append(units, req.Tools...)
	var sys []json.RawMessage
	if json.Unmarshal(req.System, &sys) == nil {
		units = append(units, sys...)
	} else if len(req.System) > 0 {
		units = append(units, req.System)
	}
	for _, m := range req.Messages {
		units = append(units, append([]byte(m.Role+":"), m.Content...))
	}
	end := -1
	for i, u := range units {
		if bytes.Contains(u, []byte(`"cache_control"`)) {
			end = i
		}
	}
	if end < 0 {
		return u, false
	}
	h := sha256.New()
	n := 0
	for _, u := range units[:end+1] {
		h.Write(u)
		n += len(u)
	}
	var key [32]byte
	h.Sum(key[:0])
	cached := n / 4
	rest := len(body)/4 - cached
	c.mu.Lock()
	hit := c.seen[key]
	c.seen[key] = true
	c.mu.Unlock()
	u.PromptTokens = max(rest, 1)
	if hit {
		u.CacheReadTokens = cached
	} else {
		u.CacheWriteTokens = cached
	}
	return u, true
}
