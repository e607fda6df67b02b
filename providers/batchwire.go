package providers

import (
	"context"
	"net/http"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
	"github.com/chorusrt/chorus/providers/openai"
)

// This file gives provider batch APIs (package batch) the credential's own
// wire knowledge, so that no second copy of a codec grows elsewhere: the
// body a live call would send, the parse of a buffered answer or an error
// body, and one authorized HTTP call.

// EncodeChat returns the body req's live, non-streamed chat call would
// send from this credential (the codec's own encoding, with the
// credential's quirks and learned fallbacks) and the path it would go to,
// relative to the base URL. Provider batch APIs carry such bodies: OpenAI
// Batch lines, Anthropic Message Batch params, Gemini inlined requests.
// Errors are *llm.ConfigError.
func (c *Client) EncodeChat(req *llm.ChatRequest) (path string, body []byte, err error) {
	if err := req.Validate(); err != nil {
		return "", nil, err
	}
	codec := c.chatCodec(req)
	wreq, err := codec.ChatRequest(req, c.buildOpts(false, c.learned.snapshot()))
	if err != nil {
		return "", nil, err
	}
	return wreq.Path, wreq.Body, nil
}

// DecodeChat parses a buffered chat answer as this credential's live
// endpoint returns it (the body of a batch result), stamping the
// provider id and model into its metadata.
func (c *Client) DecodeChat(body []byte) (*llm.ChatResult, error) {
	res, err := c.codec.ParseChat(body)
	if err != nil {
		return nil, err
	}
	res.Meta.Provider, res.Meta.Model = c.cfg.ID, res.Model
	return res, nil
}

// DecodeError turns an error answer (status and body, as a batch result
// carries it) into the typed error a live call would return
// (*llm.APIError, *llm.RateLimitError, ...). The key never appears in it.
func (c *Client) DecodeError(status int, body []byte) error {
	return c.statusError(&http.Response{StatusCode: status, Header: http.Header{}}, body)
}

// Do sends one authorized request (the credential's base URL, headers and
// key) and returns the response when its status is 2xx; any other status
// is the typed error a live call returns. There is no retry: the caller
// owns its protocol. The caller closes the body.
func (c *Client) Do(ctx context.Context, method, path, contentType string, body []byte) (*http.Response, error) {
	wreq := &wire.Request{Method: method, Path: path, Body: body, Header: http.Header{}}
	if contentType != "" {
		wreq.Header.Set("Content-Type", contentType)
	}
	return c.send(ctx, wreq, false)
}

// EncodeEmbed returns the body req's live embeddings call would send from
// this OpenAI-format credential, and its path: an OpenAI Batch line for
// /v1/embeddings carries it. Requests above one call's inputs
// (openai.EmbedBatchSize) and other formats get *llm.UnsupportedError.
func (c *Client) EncodeEmbed(req *llm.EmbedRequest) (path string, body []byte, err error) {
	if c.cfg.Format != FormatOpenAI {
		return "", nil, c.unsupported("batch embed")
	}
	if err := req.Validate(); err != nil {
		return "", nil, err
	}
	if len(req.Inputs) > openai.EmbedBatchSize {
		return "", nil, c.unsupported("batch embed of more than one call's inputs")
	}
	wreq, err := openai.EmbedRequest(req, c.buildOpts(false, c.learned.snapshot()))
	if err != nil {
		return "", nil, err
	}
	return wreq.Path, wreq.Body, nil
}

// DecodeEmbed parses an OpenAI-format embeddings answer (the body of a
// batch result), stamping the provider id and model into its metadata.
func (c *Client) DecodeEmbed(body []byte) (*llm.EmbedResult, error) {
	if c.cfg.Format != FormatOpenAI {
		return nil, c.unsupported("batch embed")
	}
	res, err := openai.ParseEmbed(body)
	if err != nil {
		return nil, err
	}
	res.Meta.Provider, res.Meta.Model = c.cfg.ID, res.Model
	return res, nil
}
