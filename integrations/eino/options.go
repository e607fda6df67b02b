package eino

import (
	"github.com/cloudwego/eino/components/model"

	"github.com/chorusrt/chorus/llm"
)

// options holds Chorus's own per-call settings, carried through eino's
// implementation-specific options (model.WrapImplSpecificOptFn).
type options struct {
	edits []func(*llm.ChatRequest)
}

func edit(f func(*llm.ChatRequest)) model.Option {
	return model.WrapImplSpecificOptFn(func(o *options) { o.edits = append(o.edits, f) })
}

// WithReasoning asks for model thinking on this call (effort or budget),
// replacing Config.Reasoning.
func WithReasoning(r llm.Reasoning) model.Option {
	return edit(func(req *llm.ChatRequest) { req.Reasoning = &r })
}

// WithResponseFormat asks for structured output (JSON object or JSON
// Schema), mapped natively per wire format.
func WithResponseFormat(f llm.ResponseFormat) model.Option {
	return edit(func(req *llm.ChatRequest) { req.ResponseFormat = &f })
}

// WithParallelToolCalls allows or forbids several tool calls in one answer.
func WithParallelToolCalls(on bool) model.Option {
	return edit(func(req *llm.ChatRequest) { req.ParallelToolCalls = &on })
}

// WithSeed asks for deterministic sampling where the provider supports it.
func WithSeed(seed int64) model.Option {
	return edit(func(req *llm.ChatRequest) { req.Seed = &seed })
}

// WithHeaders adds HTTP headers to this call (authentication and framing
// headers are refused by the request's validation).
func WithHeaders(h map[string]string) model.Option {
	return edit(func(req *llm.ChatRequest) {
		if req.Headers == nil {
			req.Headers = make(map[string]string, len(h))
		}
		for k, v := range h {
			req.Headers[k] = v
		}
	})
}

// WithPromptCache sets the prompt-caching options of this call.
func WithPromptCache(c llm.PromptCache) model.Option {
	return edit(func(req *llm.ChatRequest) { req.Cache = &c })
}

// WithRequest edits the Chorus request last, after every other option, for
// anything the options above do not name.
func WithRequest(f func(*llm.ChatRequest)) model.Option { return edit(f) }
