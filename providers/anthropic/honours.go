package anthropic

import (
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// serviceTiers are the service tiers the Messages API takes.
var serviceTiers = []string{"auto", "standard_only"}

// Honours says which optional fields the Messages format sends: top_k,
// the end user's id (metadata.user_id), its service tiers, and cache
// breakpoints as cache_control. It keeps nothing (store: false is its
// only behaviour), has no logprobs, penalties, logit bias, verbosity or
// safety settings, and reads no cached-content handle.
func (Codec) Honours(wire.BuildOptions) llm.Honours {
	return llm.Honours{Format: formatName, TopK: true, User: true, CacheMarks: true, ServiceTiers: serviceTiers}
}
