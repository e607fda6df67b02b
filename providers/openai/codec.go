package openai

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// formatName is the wire format's name, also used as the Provider of the
// errors the codec returns (package providers replaces it with the
// credential's provider id).
const formatName = "openai"

// Codec is the OpenAI Chat Completions wire format. It is stateless; the
// zero value is ready to use.
type Codec struct{}

var _ wire.Codec = Codec{}

// Format returns "openai".
func (Codec) Format() string { return formatName }

// Authorize sets "Authorization: Bearer <key>". An empty key sets nothing:
// local servers such as Ollama need no credential.
func (Codec) Authorize(h http.Header, key string, _ wire.Quirks) {
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
}

// errorBody covers the error shapes of OpenAI-compatible servers:
// {"error":{"message","type","code","param"}} (OpenAI, Groq, OpenRouter with
// a numeric code), {"error":"text"} (llama.cpp, some gateways) and a
// top-level {"message","code"} (Kimi, DeepSeek gateways).
type errorBody struct {
	Error   json.RawMessage `json:"error"`
	Message flexString      `json:"message"`
	Type    flexString      `json:"type"`
	Code    flexString      `json:"code"`
}

type errorObject struct {
	Message    flexString `json:"message"`
	Type       flexString `json:"type"`
	Code       flexString `json:"code"`
	StatusCode int        `json:"status_code"`
}

// ParseError reads an error body. Codes may be strings or numbers; a
// number is kept as its decimal text. Unknown shapes give a zero ErrorInfo.
func (Codec) ParseError(_ int, body []byte) wire.ErrorInfo {
	info, _ := parseErrorInfo(body)
	return info
}

// parseErrorInfo also returns the numeric status an error object carried
// (OpenRouter's numeric code, Groq's status_code), 0 when none.
func parseErrorInfo(body []byte) (wire.ErrorInfo, int) {
	var eb errorBody
	if err := json.Unmarshal(body, &eb); err != nil {
		// Some gateways wrap the error in a one-element array.
		var arr []json.RawMessage
		if json.Unmarshal(body, &arr) != nil || len(arr) == 0 {
			return wire.ErrorInfo{}, 0
		}
		if err := json.Unmarshal(arr[0], &eb); err != nil {
			return wire.ErrorInfo{}, 0
		}
	}
	return errorFromBody(&eb)
}

func errorFromBody(eb *errorBody) (wire.ErrorInfo, int) {
	if len(eb.Error) > 0 && string(eb.Error) != "null" {
		var s string
		if json.Unmarshal(eb.Error, &s) == nil {
			return wire.ErrorInfo{Message: s, Code: eb.Code.s, Type: eb.Type.s}, numericCode(eb.Code.s)
		}
		var eo errorObject
		if json.Unmarshal(eb.Error, &eo) == nil {
			info := wire.ErrorInfo{Type: eo.Type.s, Code: eo.Code.s, Message: eo.Message.s}
			status := eo.StatusCode
			if status == 0 {
				status = numericCode(eo.Code.s)
			}
			return info, status
		}
		return wire.ErrorInfo{}, 0
	}
	return wire.ErrorInfo{Type: eb.Type.s, Code: eb.Code.s, Message: eb.Message.s}, numericCode(eb.Code.s)
}

// numericCode returns code as an HTTP-like status when it is one.
func numericCode(code string) int {
	n, err := strconv.Atoi(code)
	if err != nil || n < 100 || n > 599 {
		return 0
	}
	return n
}

// streamErrorRetryable classifies an error reported inside a 200 stream.
// It is retryable unless a 4xx-like status (other than 408 and 429) or a
// code or type that names a request, auth, quota or policy problem says
// that trying again cannot help.
func streamErrorRetryable(info wire.ErrorInfo, status int) bool {
	if status >= 400 && status < 500 && status != 408 && status != 429 {
		return false
	}
	if status == 408 || status == 429 || status >= 500 {
		return true
	}
	s := strings.ToLower(info.Code + " " + info.Type)
	for _, k := range []string{
		"invalid", "context_length", "context_window", "too_long", "not_found",
		"authentication", "unauthorized", "permission", "forbidden",
		"insufficient_quota", "billing", "content_filter", "content_policy",
		"unsupported",
	} {
		if strings.Contains(s, k) {
			return false
		}
	}
	return true
}

// apiError builds the *llm.APIError for an error object found in a 200
// answer (a stream chunk, an event: error, a buffered body).
func apiError(info wire.ErrorInfo, status int) *llm.APIError {
	return &llm.APIError{
		Provider:  formatName,
		Status:    0,
		Type:      info.Type,
		Code:      info.Code,
		Message:   info.Message,
		Retryable: streamErrorRetryable(info, status),
	}
}

// flexString decodes a JSON string, number or boolean as text; anything
// else (null, objects, arrays) as "". Providers disagree on the types of
// codes and reasoning fields, and a type mismatch must not fail a decode.
type flexString struct{ s string }

func (f *flexString) UnmarshalJSON(b []byte) error {
	f.s = ""
	if len(b) == 0 {
		return nil
	}
	switch b[0] {
	case '"':
		return json.Unmarshal(b, &f.s)
	case 't', 'f':
		f.s = string(b)
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		f.s = string(b)
	}
	return nil
}
