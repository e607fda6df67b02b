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

// SpliceExtra adds the fields of e to a JSON object body when e's format is
// format (the client's own fields llm has no name for, sent as they came),
// and returns body unchanged otherwise.
func SpliceExtra(body []byte, e *llm.Extra, format string) []byte {
	if e == nil || e.Format != format || len(e.Fields) == 0 || len(body) < 2 || body[len(body)-1] != '}' {
		return body
	}
	out := make([]byte, 0, len(body)+64*len(e.Fields))
	out = append(out, body[:len(body)-1]...)
	empty := len(bytes.TrimSpace(body[1:len(body)-1])) == 0
	for _, f := range e.Fields {
		if !empty {
			out = append(out, ',')
		}
		empty = false
		name, _ := json.Marshal(f.Name)
		out = append(out, name...)
		out = append(out, ':')
		out = append(out, f.Value...)
	}
	return append(out, '}')
}

// Honourer is a codec that says which of a request's optional fields it
// sends to a provider (llm.Honours). A codec that is not one honours none.
type Honourer interface {
	Honours(o BuildOptions) llm.Honours
}
