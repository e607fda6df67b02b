package openai

import (
	"strings"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/jsonscan"
)

// rawUsage is a usage object as the provider sent it, before normalisation.
type rawUsage struct {
	prompt, completion, total, reasoning int

	cached, cacheWriteDetail   int // prompt_tokens_details.{cached_tokens,cache_write_tokens}
	hasCached, hasCacheWrite   bool
	hit                        int // DeepSeek prompt_cache_hit_tokens
	hasHit                     bool
	topCached                  int // Kimi/Moonshot top-level cached_tokens
	hasTopCached               bool
	cacheRead, cacheCreation   int // gateway Anthropic-named fields
	hasCacheRead, hasCacheCrea bool
}

// parseUsage reads a usage object with jsonscan (it runs on the stream's
// finish chunk as well as on buffered answers) and normalises it. ok is
// false when usage is absent, null or not an object. Numbers that do not
// parse stay zero: usage never fails a response.
func parseUsage(v []byte) (u llm.Usage, ok bool, err error) {
	if jsonscan.IsNull(v) {
		return llm.Usage{}, false, nil
	}
	if !isObject(v) {
		return llm.Usage{}, false, nil
	}
	var r rawUsage
	o := jsonscan.NewObject(v)
	for o.Next() {
		val := o.Value()
		switch string(o.Key()) {
		case "prompt_tokens":
			r.prompt = intOr0(val)
		case "completion_tokens":
			r.completion = intOr0(val)
		case "total_tokens":
			r.total = intOr0(val)
		case "prompt_tokens_details":
			if !isObject(val) {
				continue
			}
			d := jsonscan.NewObject(val)
			for d.Next() {
				switch string(d.Key()) {
				case "cached_tokens":
					r.cached, r.hasCached = intOr0(d.Value()), !jsonscan.IsNull(d.Value())
				case "cache_write_tokens":
					r.cacheWriteDetail, r.hasCacheWrite = intOr0(d.Value()), !jsonscan.IsNull(d.Value())
				}
			}
			if d.Err() != nil {
				return llm.Usage{}, false, d.Err()
			}
		case "completion_tokens_details":
			if !isObject(val) {
				continue
			}
			d := jsonscan.NewObject(val)
			for d.Next() {
				if d.KeyIs("reasoning_tokens") {
					r.reasoning = intOr0(d.Value())
				}
			}
			if d.Err() != nil {
				return llm.Usage{}, false, d.Err()
			}
		case "prompt_cache_hit_tokens":
			r.hit, r.hasHit = intOr0(val), !jsonscan.IsNull(val)
		case "cached_tokens":
			r.topCached, r.hasTopCached = intOr0(val), !jsonscan.IsNull(val)
		case "cache_read_input_tokens":
			r.cacheRead, r.hasCacheRead = intOr0(val), !jsonscan.IsNull(val)
		case "cache_creation_input_tokens":
			r.cacheCreation, r.hasCacheCrea = intOr0(val), !jsonscan.IsNull(val)
		}
	}
	if o.Err() != nil {
		return llm.Usage{}, false, o.Err()
	}
	return r.normalise(), true, nil
}

func intOr0(v []byte) int {
	n, err := jsonscan.Int(v)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// normalise applies invariant 9 (provider-wire-notes §3.5): PromptTokens is
// uncached input only, cache reads and writes have their own fields, and
// CompletionTokens include reasoning.
func (r *rawUsage) normalise() llm.Usage {
	u := llm.Usage{CompletionTokens: r.completion, ReasoningTokens: r.reasoning}
	// Some servers (xAI) count reasoning outside completion_tokens; their
	// own total says so: total = prompt + completion + reasoning.
	if r.reasoning > 0 && r.total > 0 && r.total == r.prompt+r.completion+r.reasoning {
		u.CompletionTokens = r.completion + r.reasoning
	}
	prompt := r.prompt
	switch {
	case r.hasCacheRead || r.hasCacheCrea:
		// Anthropic-named fields from a gateway: prompt_tokens is already
		// exclusive, unless OpenAI's cached_tokens is reported too, which
		// is then subtracted once.
		u.CacheReadTokens = r.cacheRead
		u.CacheWriteTokens = r.cacheCreation
		if r.hasCached {
			prompt -= r.cached
			if r.cacheRead == 0 {
				u.CacheReadTokens = r.cached
			}
		}
	case r.hasHit:
		// DeepSeek: hit + miss = prompt; the miss stays as input. Its
		// prompt_tokens_details.cached_tokens repeats the hit and is not
		// subtracted again.
		u.CacheReadTokens = r.hit
		prompt -= r.hit
	case r.hasCached || r.hasCacheWrite:
		// OpenAI: cached_tokens is part of prompt_tokens. OpenRouter adds
		// cache_write_tokens, also part of prompt_tokens.
		u.CacheReadTokens = r.cached
		u.CacheWriteTokens = r.cacheWriteDetail
		prompt -= r.cached + r.cacheWriteDetail
	case r.hasTopCached:
		// Kimi/Moonshot: top-level cached_tokens, part of prompt_tokens.
		u.CacheReadTokens = r.topCached
		prompt -= r.topCached
	}
	if prompt < 0 {
		prompt = 0
	}
	u.PromptTokens = prompt
	return u
}

// foldReasoningDetails joins the text (or summary) of OpenRouter-style
// reasoning_details entries with "\n". Encrypted entries are skipped, and
// values that are not strings are ignored.
func foldReasoningDetails(v []byte) (string, error) {
	if !isArray(v) {
		return "", nil // null, absent, or a shape nobody documented
	}
	a := jsonscan.NewArray(v)
	var first string
	var sb *strings.Builder
	for a.Next() {
		el := a.Value()
		if !isObject(el) {
			continue
		}
		var text, summary []byte
		encrypted := false
		o := jsonscan.NewObject(el)
		for o.Next() {
			switch string(o.Key()) {
			case "type":
				encrypted = jsonscan.StringIs(o.Value(), "reasoning.encrypted")
			case "text":
				text = o.Value()
			case "summary":
				summary = o.Value()
			}
		}
		if o.Err() != nil {
			return "", o.Err()
		}
		if encrypted {
			continue
		}
		raw := text
		if !jsonscan.IsString(raw) || isEmptyString(raw) {
			raw = summary
		}
		if !jsonscan.IsString(raw) {
			continue
		}
		s, err := jsonscan.String(raw)
		if err != nil {
			return "", err
		}
		if s == "" {
			continue
		}
		switch {
		case sb != nil:
			sb.WriteString("\n")
			sb.WriteString(s)
		case first != "":
			sb = &strings.Builder{}
			sb.WriteString(first)
			sb.WriteString("\n")
			sb.WriteString(s)
		default:
			first = s
		}
	}
	if a.Err() != nil {
		return "", a.Err()
	}
	if sb != nil {
		return sb.String(), nil
	}
	return first, nil
}

func isObject(v []byte) bool { return firstByte(v) == '{' }

func isArray(v []byte) bool { return firstByte(v) == '[' }

// firstByte returns the first non-space byte of v, 0 when there is none.
func firstByte(v []byte) byte {
	for _, c := range v {
		switch c {
		case ' ', '\n', '\r', '\t':
			continue
		}
		return c
	}
	return 0
}

func isEmptyString(v []byte) bool {
	raw, ok := jsonscan.RawString(v)
	return ok && len(raw) == 0
}

// mapFinish maps a raw finish_reason value to the canonical set.
func mapFinish(v []byte) llm.FinishReason {
	raw, _ := jsonscan.RawString(v)
	switch string(raw) {
	case "stop":
		return llm.FinishStop
	case "length":
		return llm.FinishLength
	case "tool_calls", "function_call":
		return llm.FinishToolCalls
	case "content_filter":
		return llm.FinishContentFilter
	}
	return llm.FinishUnknown
}

// hasFinish reports whether a finish_reason value is set (not null, not "").
func hasFinish(v []byte) bool {
	if jsonscan.IsNull(v) {
		return false
	}
	raw, ok := jsonscan.RawString(v)
	return !ok || len(raw) > 0
}
