package llm

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// RoleDeveloper is OpenAI's developer message: the application's
// instructions, sent as "developer" to OpenAI's Chat Completions and
// Responses APIs and as a system message to every other format.
const RoleDeveloper Role = "developer"

// IsSystem reports whether r is a system or developer message: the
// instructions every format other than OpenAI's sends as its system
// prompt.
func (r Role) IsSystem() bool { return r == RoleSystem || r == RoleDeveloper }

// Logprobs asks for the log probability of each output token, and of the
// TopLogprobs most likely tokens at each position (0: the chosen token
// only). OpenAI Chat Completions (logprobs, top_logprobs), the Responses
// API (include message.output_text.logprobs, top_logprobs) and Gemini
// (responseLogprobs, logprobs) honour it; Anthropic has none.
type Logprobs struct {
	TopLogprobs int
}

// TokenLogprob is one output token's log probability, with the most
// likely alternatives at its position when they were asked for.
type TokenLogprob struct {
	Token   string
	Logprob float64
	// Bytes are the token's UTF-8 bytes, where the provider sends them.
	Bytes []int
	Top   []TopLogprob
}

// TopLogprob is one alternative at a token's position.
type TopLogprob struct {
	Token   string
	Logprob float64
	Bytes   []int
}

// SafetySetting is one of Gemini's safetySettings: how strictly a
// category of harm is blocked (category "HARM_CATEGORY_HATE_SPEECH",
// threshold "BLOCK_NONE"). Only Gemini honours them.
type SafetySetting struct {
	Category  string
	Threshold string
	// Method is Gemini's optional method ("SEVERITY", "PROBABILITY").
	Method string
}

// Extra holds a request's fields that llm has no name for, exactly as the
// client sent them in its own wire format (Format: "openai",
// "openai-responses", "anthropic", "gemini"). They are sent, unchanged and
// never interpreted, to an upstream of that same format only; any other
// format cannot honour them (see Unsupported).
type Extra struct {
	Format string
	Fields []RawField
}

// RawField is one top-level field of a request body, its value as sent.
type RawField struct {
	Name  string
	Value json.RawMessage
}

// Field returns the value of the named field, or nil.
func (e *Extra) Field(name string) json.RawMessage {
	if e == nil {
		return nil
	}
	for _, f := range e.Fields {
		if f.Name == name {
			return f.Value
		}
	}
	return nil
}

// UnsupportedPolicy says what a call does with a request field its
// target's wire format cannot honour.
type UnsupportedPolicy uint8

const (
	// RefuseUnsupported (the default) fails the call before anything is
	// sent with an *UnsupportedFieldError naming the fields; a fallback
	// target that cannot honour them is skipped.
	RefuseUnsupported UnsupportedPolicy = iota
	// DropUnsupported sends the request without them and names them in
	// ResponseMeta.Dropped.
	DropUnsupported
)

// UnsupportedFieldError is a request a target cannot honour without
// dropping what the caller asked for: Fields name them in llm's terms
// (UnsupportedField's names), Format and Target the wire format and model
// that cannot take them. Nothing was sent.
type UnsupportedFieldError struct {
	Fields []string
	Format string
	Target string
}

func (e *UnsupportedFieldError) Error() string {
	return fmt.Sprintf("%s %s not supported by the %s format (model %s); the request was not sent",
		strings.Join(e.Fields, ", "), plural(len(e.Fields), "is", "are"), e.Format, e.Target)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Support is what one wire format makes of a request: the fields it must
// refuse (dropping them would change what the caller gets) and the fields
// it leaves out harmlessly (prompt-cache marks to a format that caches on
// its own, an end-user id it has no place for), both in llm's field names.
type Support struct {
	// Format is the wire format asked ("openai", "openai-responses", ...).
	Format  string
	Refused []string
	Dropped []string
}

// refuse and drop add a field name once.
func (s *Support) refuse(name string) {
	if !slices.Contains(s.Refused, name) {
		s.Refused = append(s.Refused, name)
	}
}

func (s *Support) drop(name string) {
	if !slices.Contains(s.Dropped, name) {
		s.Dropped = append(s.Dropped, name)
	}
}

// Honours lists the fields a wire format can send. The zero value honours
// none of the optional fields below; each codec sets its own.
type Honours struct {
	Format string
	// Exact request fields.
	TopK, FrequencyPenalty, PresencePenalty, LogitBias, Logprobs bool
	Verbosity, Safety, CachedContent, Metadata, StoreTrue        bool
	User, SafetyIdentifier, PromptCacheKey, CacheMarks           bool
	Include, TruncationAuto, ReasoningSummary                    bool
	// ServiceTiers are the service tiers the format takes (nil: none).
	ServiceTiers []string
}

// Check returns what format h makes of r's optional fields. Fields whose
// loss changes what the caller gets, pays or has kept are refused; the
// others are dropped. Extra fields of another format are refused.
func (h Honours) Check(r *ChatRequest) Support {
	s := Support{Format: h.Format}
	need := func(set, honoured bool, name string) {
		if set && !honoured {
			s.refuse(name)
		}
	}
	soft := func(set, honoured bool, name string) {
		if set && !honoured {
			s.drop(name)
		}
	}
	need(r.TopK != nil, h.TopK, "top_k")
	need(r.FrequencyPenalty != nil, h.FrequencyPenalty, "frequency_penalty")
	need(r.PresencePenalty != nil, h.PresencePenalty, "presence_penalty")
	need(len(r.LogitBias) > 0, h.LogitBias, "logit_bias")
	need(r.Logprobs != nil, h.Logprobs, "logprobs")
	need(r.Verbosity != "", h.Verbosity, "verbosity")
	need(len(r.Safety) > 0, h.Safety, "safety_settings")
	need(r.Store != nil && *r.Store, h.StoreTrue, "store")
	need(r.Truncation == "auto", h.TruncationAuto, "truncation")
	need(r.Reasoning != nil && r.Reasoning.Summary != "", h.ReasoningSummary, "reasoning.summary")
	if r.ServiceTier != "" && !slices.Contains(h.ServiceTiers, r.ServiceTier) {
		if r.ServiceTier == "auto" || r.ServiceTier == "default" {
			s.drop("service_tier") // the provider's own default: nothing lost
		} else {
			s.refuse("service_tier")
		}
	}
	for _, inc := range r.Include {
		if inc != "reasoning.encrypted_content" { // every format replays reasoning its own way
			need(true, h.Include, "include")
		}
	}
	if c := r.Cache; c != nil {
		need(c.CachedContent != "", h.CachedContent, "cached_content")
		soft(c.Key != "" || c.Retention != "", h.PromptCacheKey, "prompt_cache_key")
	}
	soft(len(r.Metadata) > 0, h.Metadata, "metadata")
	soft(r.User != "", h.User, "user")
	soft(r.SafetyIdentifier != "", h.SafetyIdentifier, "safety_identifier")
	if !h.CacheMarks && r.hasCacheMarks() {
		s.drop("cache_control")
	}
	if e := r.Extra; e != nil && e.Format != h.Format {
		for _, f := range e.Fields {
			s.refuse(f.Name)
		}
	}
	return s
}

func (r *ChatRequest) hasCacheMarks() bool {
	for i := range r.Messages {
		if r.Messages[i].Cache != nil {
			return true
		}
	}
	for i := range r.Tools {
		if r.Tools[i].Cache != nil {
			return true
		}
	}
	return false
}

// Optional reports whether r sets any optional field Honours.Check
// looks at: prompt-cache options and marks included.
func (r *ChatRequest) Optional() bool {
	return !r.Plain() || r.Cache != nil || r.hasCacheMarks()
}

// Plain reports whether r sets none of the optional fields Honours
// checks, nor Extra: the common request, which every format takes whole.
func (r *ChatRequest) Plain() bool {
	return r.TopK == nil && r.FrequencyPenalty == nil && r.PresencePenalty == nil && len(r.LogitBias) == 0 &&
		r.Logprobs == nil && r.Verbosity == "" && len(r.Safety) == 0 && r.Store == nil && r.Truncation == "" &&
		r.ServiceTier == "" && len(r.Include) == 0 && len(r.Metadata) == 0 && r.User == "" && r.SafetyIdentifier == "" &&
		r.Extra == nil && (r.Reasoning == nil || r.Reasoning.Summary == "")
}

// FieldClass says what a gateway does with one field of a client's
// request format.
type FieldClass string

const (
	// FieldMapped fields are read into llm and so translated for every
	// upstream format that has an equivalent (Honours).
	FieldMapped FieldClass = "mapped"
	// FieldServed fields are the gateway's own business (stream,
	// stream_options): they shape the answer, not the upstream call.
	FieldServed FieldClass = "served"
	// FieldPassthrough fields have no llm equivalent: kept as Extra and
	// sent unchanged to an upstream of the client's own format only.
	FieldPassthrough FieldClass = "passthrough"
	// FieldRefused fields (or some of their values) are refused with a
	// 400 naming them.
	FieldRefused FieldClass = "refused"
)

// WireField is one request field of a client format and its class.
type WireField struct {
	Name  string
	Class FieldClass
	// Note says how it is mapped, or when it is refused.
	Note string
}
