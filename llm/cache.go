package llm

import "fmt"

// CacheTTL is how long a provider keeps a cached prompt prefix.
type CacheTTL string

// Cache TTLs. The zero value is the provider's default (Anthropic: 5
// minutes).
const (
	CacheTTLDefault CacheTTL = ""
	CacheTTL5m      CacheTTL = "5m"
	CacheTTL1h      CacheTTL = "1h"
)

// CacheMark is a prompt-cache breakpoint: the prompt up to and including
// the marked element (a message, a tool definition) is cached. Only
// formats with explicit breakpoints use it: Anthropic sends it as
// cache_control {"type": "ephemeral", "ttl": ...} on the element's last
// content block (at most 4 per request). OpenAI and Gemini cache prompt
// prefixes on their own and ignore marks.
type CacheMark struct {
	TTL CacheTTL
}

// PromptCache holds a request's prompt-caching options for formats that
// cache without breakpoints. Each format uses its own fields and ignores
// the others.
type PromptCache struct {
	// Key is OpenAI's prompt_cache_key: requests that share a long prefix
	// and a key are routed to the same cache (sent to provider "openai"
	// only; other OpenAI-compatible endpoints do not document it).
	Key string
	// Retention is OpenAI's prompt_cache_retention ("in_memory", "24h").
	Retention string
	// CachedContent is a Gemini cached content the request reads its
	// prefix from ("cachedContents/abc123"), created beforehand through
	// Gemini's cachedContents API; the request then sends only what
	// follows the cached prefix.
	CachedContent string
}

// validateCache checks the request's cache marks.
func (r *ChatRequest) validateCache() error {
	check := func(m *CacheMark, field string) error {
		if m == nil {
			return nil
		}
		switch m.TTL {
		case CacheTTLDefault, CacheTTL5m, CacheTTL1h:
			return nil
		}
		return &ConfigError{Field: field + ".cache.ttl", Msg: fmt.Sprintf("unknown TTL %q (5m, 1h)", m.TTL)}
	}
	for i := range r.Messages {
		if err := check(r.Messages[i].Cache, fmt.Sprintf("messages[%d]", i)); err != nil {
			return err
		}
	}
	for i := range r.Tools {
		if err := check(r.Tools[i].Cache, fmt.Sprintf("tools[%d]", i)); err != nil {
			return err
		}
	}
	if c := r.Cache; c != nil {
		switch c.Retention {
		case "", "in_memory", "24h":
		default:
			return &ConfigError{Field: "cache.retention", Msg: fmt.Sprintf("unknown retention %q (in_memory, 24h)", c.Retention)}
		}
	}
	return nil
}
