package runtime

import (
	"context"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/telemetry"
)

// op runs a non-streaming operation through the credential actors of model
// (provider/model or an alias), with the same admission, pacing, rotation
// and fallback as chat.
func (rt *Runtime) op(ctx context.Context, name, model string, cost int, call func(ctx context.Context, c *cred, model string) outcome) error {
	targets, err := rt.resolve(model)
	if err != nil {
		return err
	}
	if err := rt.enter(); err != nil {
		return err
	}
	ctx, done := rt.callCtx(ctx)
	defer done()
	ctx, tr := rt.startTrace(ctx, name, model, targets, false)
	err = rt.place(ctx, targets, cost, tr, tr.wrap(call))
	tr.end(nil, err)
	return err
}

// Embed embeds texts with req.Model (provider/model or an alias).
func (rt *Runtime) Embed(ctx context.Context, req *llm.EmbedRequest) (*llm.EmbedResult, error) {
	if req == nil {
		return nil, &llm.ConfigError{Field: "request", Msg: "is nil"}
	}
	cost := 0
	for _, in := range req.Inputs {
		cost += len(in)/4 + 1
	}
	var res *llm.EmbedResult
	err := rt.op(ctx, telemetry.OpEmbeddings, req.Model, cost, func(ctx context.Context, c *cred, model string) outcome {
		r := *req
		r.Model = model
		out, err := c.client.Embed(ctx, &r)
		if err != nil {
			return outcome{err: err}
		}
		res = out
		return outcome{meta: out.Meta, usage: out.Usage}
	})
	return res, err
}

// Speak synthesizes speech with req.Model.
func (rt *Runtime) Speak(ctx context.Context, req *llm.SpeechRequest) (*llm.SpeechResult, error) {
	if req == nil {
		return nil, &llm.ConfigError{Field: "request", Msg: "is nil"}
	}
	var res *llm.SpeechResult
	err := rt.op(ctx, telemetry.OpSpeech, req.Model, len(req.Input)/4+1, func(ctx context.Context, c *cred, model string) outcome {
		r := *req
		r.Model = model
		out, err := c.client.Speak(ctx, &r)
		if err != nil {
			return outcome{err: err}
		}
		res = out
		return outcome{meta: out.Meta}
	})
	return res, err
}

// Transcribe transcribes audio with req.Model.
func (rt *Runtime) Transcribe(ctx context.Context, req *llm.TranscriptionRequest) (*llm.TranscriptionResult, error) {
	if req == nil {
		return nil, &llm.ConfigError{Field: "request", Msg: "is nil"}
	}
	var res *llm.TranscriptionResult
	err := rt.op(ctx, telemetry.OpTranscribe, req.Model, 1, func(ctx context.Context, c *cred, model string) outcome {
		r := *req
		r.Model = model
		out, err := c.client.Transcribe(ctx, &r)
		if err != nil {
			return outcome{err: err}
		}
		res = out
		return outcome{meta: out.Meta}
	})
	return res, err
}

// CountTokens counts a chat request's input tokens where the provider offers
// it (Anthropic, Gemini); elsewhere it is llm.ErrUnsupported, never an
// estimate.
func (rt *Runtime) CountTokens(ctx context.Context, req *llm.ChatRequest) (*llm.CountTokensResult, error) {
	if req == nil {
		return nil, &llm.ConfigError{Field: "request", Msg: "is nil"}
	}
	var res *llm.CountTokensResult
	err := rt.op(ctx, telemetry.OpCount, req.Model, 1, func(ctx context.Context, c *cred, model string) outcome {
		r := *req
		r.Model = model
		out, err := c.client.CountTokens(ctx, &r)
		if err != nil {
			return outcome{err: err}
		}
		res = out
		return outcome{meta: out.Meta}
	})
	return res, err
}

// ListModels lists the models of a provider (by id), through its first
// credential's cache.
func (rt *Runtime) ListModels(ctx context.Context, provider string) ([]llm.ModelInfo, error) {
	g := rt.groups[provider]
	if g == nil {
		return nil, &llm.ConfigError{Field: "provider", Msg: "provider " + provider + " is not registered"}
	}
	var res []llm.ModelInfo
	err := rt.op(ctx, telemetry.OpListModels, provider+"/models", 1, func(ctx context.Context, c *cred, _ string) outcome {
		out, err := c.client.ListModels(ctx)
		if err != nil {
			return outcome{err: err}
		}
		res = out
		return outcome{}
	})
	return res, err
}
