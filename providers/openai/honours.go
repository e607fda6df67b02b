package openai

import (
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// What the Chat Completions and Responses formats honour of a request's
// optional fields (llm.Honours). OpenAI's own API (provider "openai")
// takes every field it documents; the other endpoints of the format take
// the ones the OpenAI-compatible servers implement alike (penalties,
// logit bias, logprobs, user), and OpenAI's service fields (service tier,
// store, metadata, verbosity, safety identifier, prompt cache key) only
// reach OpenAI: those endpoints do not document them and may refuse
// unknown fields.

// openAITiers are the service tiers OpenAI takes.
var openAITiers = []string{"auto", "default", "flex", "priority", "scale"}

// Honours says which optional fields Chat Completions sends to o's
// provider.
func (Codec) Honours(o wire.BuildOptions) llm.Honours {
	h := llm.Honours{Format: formatName, FrequencyPenalty: true, PresencePenalty: true, LogitBias: true, Logprobs: true, User: true}
	if o.Provider == "openai" {
		h.ServiceTiers, h.StoreTrue, h.Metadata, h.Verbosity, h.SafetyIdentifier, h.PromptCacheKey = openAITiers, true, true, true, true, true
	}
	return h
}

// Honours says which optional fields the Responses API sends (it is
// OpenAI's own API).
func (ResponsesCodec) Honours(o wire.BuildOptions) llm.Honours {
	return llm.Honours{Format: ResponsesFormat, Logprobs: true, User: true, ServiceTiers: openAITiers, StoreTrue: true, Metadata: true,
		Verbosity: true, SafetyIdentifier: true, PromptCacheKey: true, Include: true, TruncationAuto: true, ReasoningSummary: true}
}

// optionalFields sets the body's optional fields h honours.
func optionalFields(body *chatBody, req *llm.ChatRequest, h llm.Honours) {
	body.FrequencyPenalty, body.PresencePenalty = req.FrequencyPenalty, req.PresencePenalty
	body.LogitBias = req.LogitBias
	if lp := req.Logprobs; lp != nil {
		body.Logprobs = true
		if lp.TopLogprobs > 0 {
			n := lp.TopLogprobs
			body.TopLogprobs = &n
		}
	}
	if h.User {
		body.User = req.User
	}
	for _, t := range h.ServiceTiers {
		if t == req.ServiceTier {
			body.ServiceTier = t
		}
	}
	if h.StoreTrue {
		body.Store = req.Store
	}
	if h.Metadata {
		body.Metadata = req.Metadata
	}
	if h.Verbosity {
		body.Verbosity = req.Verbosity
	}
	if h.SafetyIdentifier {
		body.SafetyIdentifier = req.SafetyIdentifier
	}
}
