package wire

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/chorusrt/chorus/llm"
)

// PostJSON builds a POST of body, encoded as JSON without HTML escaping,
// with the Accept header a stream or a buffered answer wants and the
// caller's extra headers. An encoding failure (only reachable through a raw
// JSON value that passed validation but not the encoder) is the request's
// fault: a *llm.ConfigError.
func PostJSON(path string, body any, stream bool, headers map[string]string) (*Request, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(body); err != nil {
		return nil, &llm.ConfigError{Field: "request", Msg: "cannot encode: " + err.Error()}
	}
	h := make(http.Header, len(headers)+2)
	h.Set("Content-Type", "application/json")
	if stream {
		h.Set("Accept", "text/event-stream")
	} else {
		h.Set("Accept", "application/json")
	}
	for k, v := range headers {
		h.Set(k, v)
	}
	return &Request{Method: http.MethodPost, Path: path, Body: bytes.TrimRight(buf.Bytes(), "\n"), Header: h}, nil
}
