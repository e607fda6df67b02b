package providers

import (
	"errors"
	"strings"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
	"github.com/chorusrt/chorus/providers/openai"
)

// ModelCaps are the capabilities a caller declares for one model in
// Config.Models. Chorus never infers them from a model's name.
type ModelCaps struct {
	// Responses sends the model's chat requests to the OpenAI Responses API
	// (POST {base}/responses, stateless, encrypted reasoning replayed)
	// instead of Chat Completions. Only OpenAI-format credentials have that
	// route; on other formats it is ignored.
	Responses bool
}

// chatCodec chooses the codec that serves a chat request. An OpenAI-format
// credential sends a model to the Responses API when Config.Models marks
// it, or once the provider answered that the model is only served there
// (learned per model, see learnRoute); every other request goes to the
// credential's format codec. The route is never chosen by model name.
func (c *Client) chatCodec(req *llm.ChatRequest) wire.Codec {
	if c.cfg.Format != FormatOpenAI || !(c.usesResponses(req.Model) || (req.PreferResponses && c.cfg.ID == "openai")) {
		return c.codec
	}
	return openai.ResponsesCodec{NoEncryptedReasoning: c.learned.HasModel(LearnNoEncryptedReasoning, req.Model)}
}

// usesResponses reports whether model is served by the Responses API.
func (c *Client) usesResponses(model string) bool {
	return c.cfg.Models[model].Responses || c.learned.HasModel(LearnResponsesAPI, model)
}

// learnRoute reads a rejection that is about the route rather than a
// parameter: a Chat Completions answer saying the model is only served by
// /v1/responses (OpenAI answers 404 "This model is only supported in
// v1/responses and not in v1/chat/completions."), or a Responses answer
// saying the model takes no encrypted reasoning ("Encrypted content is not
// supported with this model."). It records the fact for the model and
// reports whether the request should be sent again at once; the next
// attempt is built by chatCodec from the new state.
//
// A fact another caller learned a moment ago still asks for a retry, so
// that concurrent first calls of a model all move to the new route; the
// retry ladder's attempt count bounds a server that keeps repeating itself.
func (c *Client) learnRoute(err error, req *llm.ChatRequest) bool {
	if c.cfg.Format != FormatOpenAI {
		return false
	}
	var api *llm.APIError
	if !errors.As(err, &api) {
		return false
	}
	switch api.Status {
	case 400, 404, 422:
	default:
		return false
	}
	msg := strings.ToLower(api.Message + " " + api.Code)
	switch {
	case responsesRequired(msg):
		if c.cfg.Models[req.Model].Responses {
			return false // it was sent to /responses already
		}
		c.learnModel(LearnResponsesAPI, req.Model, api.Message)
		return true
	case encryptedReasoningRejected(msg):
		if !c.usesResponses(req.Model) {
			return false // Chat Completions never asks for encrypted reasoning
		}
		c.learnModel(LearnNoEncryptedReasoning, req.Model, api.Message)
		return true
	}
	return false
}

// responsesRequired reports a (lower-cased) message that names
// /v1/responses as where the model must be called.
func responsesRequired(m string) bool {
	return strings.Contains(m, "v1/responses") &&
		containsAny(m, "chat/completions", "only supported", "not supported", "please use", "use the responses", "must use", "instead", "did you mean", "requires")
}

// encryptedReasoningRejected reports a (lower-cased) message saying the
// model does not take include:["reasoning.encrypted_content"]. A message
// about encrypted content that could not be verified (a stale or foreign
// reasoning item) is a different problem and does not match.
func encryptedReasoningRejected(m string) bool {
	return (strings.Contains(m, "encrypted content") || strings.Contains(m, "encrypted_content")) &&
		containsAny(m, "not supported", "unsupported", "not allowed")
}
