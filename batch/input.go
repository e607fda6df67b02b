package batch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/openai"
)

// The endpoints a batch line may name.
const (
	URLChat       = "/v1/chat/completions"
	URLEmbeddings = "/v1/embeddings"
)

// inputLine is one line of an OpenAI Batch input file.
type inputLine struct {
	CustomID string          `json:"custom_id"`
	Method   string          `json:"method"`
	URL      string          `json:"url"`
	Body     json.RawMessage `json:"body"`
	// Cache is the line's response cache mode (on, read_only,
	// write_only, off; cache.Mode), for a Runner with a cache; empty:
	// the cache's default.
	Cache string `json:"cache"`
}

// fieldError is a problem with one field of an input line; Field is its
// JSON path ("body.messages[2].role").
type fieldError struct {
	Field string
	Msg   string
}

func (e *fieldError) Error() string { return e.Field + ": " + e.Msg }

func fieldErr(field, format string, args ...any) error {
	return &fieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// chatFromOpenAI converts an OpenAI chat completion request body through
// the one decoder of the format (providers/openai, which the gateway uses
// too): every field is mapped into llm, passed through for an OpenAI
// upstream, or refused, as openai.ChatFields says. A line may name no
// model (the job's default serves it); stream and stream_options change
// nothing in a batch's answer.
func chatFromOpenAI(body json.RawMessage) (*llm.ChatRequest, error) {
	if t := bytes.TrimSpace(body); len(t) == 0 || t[0] != '{' {
		return nil, fieldErr("body", "want a JSON object")
	}
	sc, err := openai.DecodeChatRequest(body, false)
	if err != nil {
		return nil, bodyErr(err)
	}
	return sc.Chat, nil
}

// embedFromOpenAI converts an OpenAI embeddings request body through the
// format's one decoder (providers/openai); b64 reports encoding_format
// "base64".
func embedFromOpenAI(body json.RawMessage) (req *llm.EmbedRequest, b64 bool, err error) {
	if t := bytes.TrimSpace(body); len(t) == 0 || t[0] != '{' {
		return nil, false, fieldErr("body", "want a JSON object")
	}
	req, b64, err = openai.DecodeEmbedRequest(body, false)
	return req, b64, bodyErr(err)
}

// bodyErr names a decoder's field error by its path in the line.
func bodyErr(err error) error {
	var ce *llm.ConfigError
	if err == nil || !errors.As(err, &ce) {
		return err
	}
	if ce.Field == "body" {
		return fieldErr("body", "%s", ce.Msg)
	}
	return fieldErr("body."+ce.Field, "%s", ce.Msg)
}
