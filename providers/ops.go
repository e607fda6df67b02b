package providers

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/anthropic"
	"github.com/chorusrt/chorus/providers/gemini"
	"github.com/chorusrt/chorus/providers/internal/wire"
	"github.com/chorusrt/chorus/providers/openai"
)

// Operations other than chat. Each goes through the same machinery as a
// buffered chat call: the request is validated and built before anything
// is sent (a bad one is a *llm.ConfigError and costs no request), the
// whole call runs under one budget (WithTimeout), every HTTP attempt goes
// through the retry ladder and is reported to the attempt observer with Op
// "embed", "speech", "transcribe", "count_tokens" or "list_models", errors
// are the typed llm errors with the key redacted, and results carry the
// ResponseMeta of the successful attempt.
//
// What each format offers:
//
//	operation     openai (and compatible)        anthropic                  gemini
//	Embed         POST /embeddings               unsupported                :batchEmbedContents
//	Speak         POST /audio/speech             unsupported                generateContent, AUDIO modality
//	Transcribe    POST /audio/transcriptions     unsupported                unsupported
//	CountTokens   unsupported                    /v1/messages/count_tokens  :countTokens
//	ListModels    GET /models                    GET /v1/models             GET /v1beta/models
//
// An operation the format lacks returns a *llm.UnsupportedError (errors.Is
// llm.ErrUnsupported) at once, with no I/O. CountTokens in particular never
// estimates.

// opCall performs one buffered non-chat request through the retry ladder:
// each attempt sends wreq, reads the capped body and hands it to parse. It
// returns the metadata of the successful attempt.
func (c *Client) opCall(ctx context.Context, op, model string, wreq *wire.Request, parse func(resp *http.Response, body []byte) error) (llm.ResponseMeta, error) {
	var meta llm.ResponseMeta
	err := c.ladder(ctx, op, model, func(ctx context.Context, attempt int) attemptResult {
		resp, err := c.send(ctx, wreq, false)
		if err != nil {
			return attemptResult{status: statusOf(err), err: err}
		}
		defer resp.Body.Close()
		body, err := readCapped(resp.Body, MaxResponseBytes)
		if err != nil {
			return attemptResult{status: resp.StatusCode, err: c.readError(ctx, err)}
		}
		if err := parse(resp, body); err != nil {
			return attemptResult{status: resp.StatusCode, err: c.stampError(err, resp)}
		}
		meta = responseMeta(c.cfg.ID, resp, attempt, time.Now())
		return attemptResult{status: resp.StatusCode, requestID: meta.RequestID}
	})
	return meta, err
}

func (c *Client) unsupported(op string) error {
	return &llm.UnsupportedError{Provider: c.cfg.ID, Op: op}
}

// Embed returns one vector per input, in input order. Inputs beyond the
// format's batch size (openai.EmbedBatchSize, 2048; gemini.EmbedBatchSize,
// 100) are sent in consecutive batches under the one call budget; the
// vectors are reassembled in input order and the usage summed, and
// Meta.Attempts counts the attempts of every batch. A failed batch fails the
// call. OpenAI-format requests ask for base64 vectors; plain float arrays
// are accepted too. Anthropic offers no embeddings: *llm.UnsupportedError.
func (c *Client) Embed(ctx context.Context, req *llm.EmbedRequest) (*llm.EmbedResult, error) {
	var build func(*llm.EmbedRequest, wire.BuildOptions) (*wire.Request, error)
	var parse func([]byte) (*llm.EmbedResult, error)
	var batch int
	switch c.cfg.Format {
	case FormatOpenAI:
		build, parse, batch = openai.EmbedRequest, openai.ParseEmbed, openai.EmbedBatchSize
	case FormatGemini:
		build, parse, batch = gemini.EmbedRequest, gemini.ParseEmbed, gemini.EmbedBatchSize
	default:
		return nil, c.unsupported("embed")
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if e := req.Extra; e != nil && len(e.Fields) > 0 && e.Format != string(c.cfg.Format) {
		names := make([]string, len(e.Fields))
		for i, f := range e.Fields {
			names[i] = f.Name
		}
		return nil, &llm.UnsupportedFieldError{Fields: names, Format: string(c.cfg.Format), Target: c.cfg.ID + "/" + req.Model}
	}
	if batch <= 0 {
		batch = len(req.Inputs)
	}
	// Build every batch first: a request that cannot be built costs nothing.
	type job struct {
		n    int
		wreq *wire.Request
	}
	var jobs []job
	for start := 0; start < len(req.Inputs); start += batch {
		sub := *req
		sub.Inputs = req.Inputs[start:min(start+batch, len(req.Inputs))]
		wreq, err := build(&sub, c.buildOpts(false, c.learned.snapshot()))
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, job{n: len(sub.Inputs), wreq: wreq})
	}
	ctx, cancel := c.budget(ctx)
	defer cancel()
	res := &llm.EmbedResult{Vectors: make([][]float32, 0, len(req.Inputs))}
	attempts := 0
	for _, j := range jobs {
		var part *llm.EmbedResult
		meta, err := c.opCall(ctx, "embed", req.Model, j.wreq, func(_ *http.Response, body []byte) error {
			r, err := parse(body)
			if err != nil {
				return err
			}
			if len(r.Vectors) != j.n {
				return &llm.DecodeError{Provider: c.cfg.ID, Err: fmt.Errorf("embeddings: %d vectors for %d inputs", len(r.Vectors), j.n)}
			}
			part = r
			return nil
		})
		if err != nil {
			return nil, err
		}
		res.Vectors = append(res.Vectors, part.Vectors...)
		res.Usage = res.Usage.Add(part.Usage)
		if res.Model == "" {
			res.Model = part.Model
		}
		attempts += meta.Attempts
		res.Meta = meta
	}
	res.Meta.Attempts = attempts
	res.Meta.Model = res.Model
	return res, nil
}

// Speak turns text into audio: OpenAI-format POST /audio/speech, or a
// Gemini generateContent with the AUDIO response modality. The bytes and
// their MIME type are returned exactly as the provider sent them (Gemini:
// raw PCM with its audio/L16 mimeType); nothing is transcoded. Anthropic
// offers no speech: *llm.UnsupportedError.
func (c *Client) Speak(ctx context.Context, req *llm.SpeechRequest) (*llm.SpeechResult, error) {
	var wreq *wire.Request
	var err error
	var parse func(resp *http.Response, body []byte) (*llm.SpeechResult, error)
	switch c.cfg.Format {
	case FormatOpenAI:
		wreq, err = openai.SpeechRequest(req, c.buildOpts(false, c.learned.snapshot()))
		parse = func(resp *http.Response, body []byte) (*llm.SpeechResult, error) {
			return openai.ParseSpeech(body, resp.Header.Get("Content-Type"))
		}
	case FormatGemini:
		wreq, err = gemini.SpeechRequest(req, c.buildOpts(false, c.learned.snapshot()))
		parse = func(_ *http.Response, body []byte) (*llm.SpeechResult, error) { return gemini.ParseSpeech(body) }
	default:
		return nil, c.unsupported("speech")
	}
	if err != nil {
		return nil, err
	}
	ctx, cancel := c.budget(ctx)
	defer cancel()
	var res *llm.SpeechResult
	meta, err := c.opCall(ctx, "speech", req.Model, wreq, func(resp *http.Response, body []byte) error {
		r, err := parse(resp, body)
		res = r
		return err
	})
	if err != nil {
		return nil, err
	}
	model := res.Meta.Model
	res.Meta = meta
	res.Meta.Model = model
	return res, nil
}

// Transcribe turns audio into text through OpenAI-format POST
// /audio/transcriptions (multipart). Audio above llm.MaxTranscriptionBytes
// (25 MB) is a *llm.ConfigError and nothing is sent. Format selects text,
// json (the default) or verbose_json, which adds language, duration and
// segments. Other formats: *llm.UnsupportedError.
func (c *Client) Transcribe(ctx context.Context, req *llm.TranscriptionRequest) (*llm.TranscriptionResult, error) {
	if c.cfg.Format != FormatOpenAI {
		return nil, c.unsupported("transcribe")
	}
	wreq, err := openai.TranscriptionRequest(req, c.buildOpts(false, c.learned.snapshot()))
	if err != nil {
		return nil, err
	}
	format := req.Format
	if format == "" {
		format = llm.TranscriptionJSON
	}
	ctx, cancel := c.budget(ctx)
	defer cancel()
	var res *llm.TranscriptionResult
	meta, err := c.opCall(ctx, "transcribe", req.Model, wreq, func(resp *http.Response, body []byte) error {
		r, err := openai.ParseTranscription(body, format, resp.Header.Get("Content-Type"))
		res = r
		return err
	})
	if err != nil {
		return nil, err
	}
	res.Meta = meta
	return res, nil
}

// CountTokens asks the provider how many input tokens req would use:
// Anthropic POST /v1/messages/count_tokens, Gemini :countTokens, each sent
// the request the chat call would send. The OpenAI format has no counting
// endpoint: a *llm.UnsupportedError, with no I/O and never an estimate.
func (c *Client) CountTokens(ctx context.Context, req *llm.ChatRequest) (*llm.CountTokensResult, error) {
	var build func(*llm.ChatRequest, wire.BuildOptions) (*wire.Request, error)
	var parse func([]byte) (*llm.CountTokensResult, error)
	switch c.cfg.Format {
	case FormatAnthropic:
		build, parse = anthropic.CountTokensRequest, anthropic.ParseCountTokens
	case FormatGemini:
		build, parse = gemini.CountTokensRequest, gemini.ParseCountTokens
	default:
		return nil, c.unsupported("count_tokens")
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	wreq, err := build(req, c.buildOpts(false, c.learned.snapshot()))
	if err != nil {
		return nil, err
	}
	ctx, cancel := c.budget(ctx)
	defer cancel()
	var res *llm.CountTokensResult
	meta, err := c.opCall(ctx, "count_tokens", req.Model, wreq, func(_ *http.Response, body []byte) error {
		r, err := parse(body)
		res = r
		return err
	})
	if err != nil {
		return nil, err
	}
	res.Meta = meta
	return res, nil
}
