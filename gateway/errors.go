package gateway

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/chorusrt/chorus/actors"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/anthropic"
	"github.com/chorusrt/chorus/providers/gemini"
	"github.com/chorusrt/chorus/providers/openai"
	"github.com/chorusrt/chorus/runtime"
)

// Error is a failure the gateway answers with: an HTTP status, a message
// safe to show the client (it never holds a key) and, for 429 and 503, a
// retry hint sent as retry-after.
type Error struct {
	Status     int
	Message    string
	RetryAfter time.Duration
	// Code, when set, is the OpenAI error code (default: the status's).
	Code string
	// NoRetry tells the SDKs not to retry (x-should-retry: false).
	NoRetry bool
}

func (e *Error) Error() string {
	return "gateway: " + strconv.Itoa(e.Status) + " " + e.Message
}

// errorFor maps a runtime error to what the client is told:
//
//	*llm.ConfigError                      400 (404 for a model no provider or alias serves)
//	*llm.UnsupportedError                 400
//	*llm.RateLimitError, credential cooldown 429 with retry-after
//	llm.ErrOverloaded, runtime.ErrClosed  503 with retry-after 1s
//	a provider's 4xx (not 401, 403, 429)  the same status
//	a provider's 401/403, 5xx, transport, decode, premature close, idle timeout  502
//	the call's deadline                   504
func errorFor(err error) *Error {
	var (
		ce  *llm.ConfigError
		ue  *llm.UnsupportedError
		rl  *llm.RateLimitError
		api *llm.APIError
		ge  *Error
		mnf *runtime.ModelNotFoundError
		uf  *llm.UnsupportedFieldError
	)
	msg := err.Error()
	switch {
	case errors.As(err, &ge):
		return ge
	case errors.As(err, &mnf):
		return &Error{Status: http.StatusNotFound, Message: msg, Code: "model_not_found"}
	case errors.As(err, &ce):
		if ce.Field == "model" && (strings.Contains(ce.Msg, "not registered") || strings.Contains(ce.Msg, "not provider/model") || strings.Contains(ce.Msg, "is not served")) {
			return &Error{Status: http.StatusNotFound, Message: msg}
		}
		return &Error{Status: http.StatusBadRequest, Message: msg}
	case errors.As(err, &ue):
		return &Error{Status: http.StatusBadRequest, Message: msg}
	case errors.As(err, &uf):
		return &Error{Status: http.StatusBadRequest, Message: msg + " (the gateway's drop_unsupported sends it without them)", Code: "unsupported_parameter"}
	case errors.As(err, &rl):
		ra := rl.RetryAfter
		if ra <= 0 && !rl.QuotaExhausted {
			ra = time.Second
		}
		return &Error{Status: http.StatusTooManyRequests, Message: msg, RetryAfter: ra}
	case actors.ErrCoolingDown(err):
		return &Error{Status: http.StatusTooManyRequests, Message: "every credential of the model is cooling down past the call's deadline", RetryAfter: time.Second}
	case errors.Is(err, llm.ErrOverloaded), errors.Is(err, runtime.ErrClosed):
		return &Error{Status: http.StatusServiceUnavailable, Message: msg, RetryAfter: time.Second}
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Status: http.StatusGatewayTimeout, Message: "the call's deadline passed"}
	case errors.As(err, &api):
		if api.Status >= 400 && api.Status < 500 && api.Status != http.StatusUnauthorized && api.Status != http.StatusForbidden {
			return &Error{Status: api.Status, Message: msg}
		}
		return &Error{Status: http.StatusBadGateway, Message: msg}
	}
	return &Error{Status: http.StatusBadGateway, Message: msg}
}

// format is the wire format a request was made in, which decides how its
// errors are written.
type format uint8

const (
	formatOpenAI format = iota
	formatAnthropic
	formatGemini
)

func formatOf(r *http.Request) format {
	if strings.HasPrefix(r.URL.Path, "/v1/messages") || (strings.HasPrefix(r.URL.Path, "/v1/models") && anthropicClient(r)) {
		return formatAnthropic
	}
	if strings.HasPrefix(r.URL.Path, "/v1beta/") {
		return formatGemini
	}
	return formatOpenAI
}

// fail writes an error answer in the client's format.
func (h *Handler) fail(w http.ResponseWriter, f format, e *Error) {
	noteRefusal(w, e) // requestlog.go
	hd := w.Header()
	if e.RetryAfter > 0 {
		secs := int((e.RetryAfter + time.Second - 1) / time.Second)
		hd.Set("retry-after", strconv.Itoa(secs))
		hd.Set("retry-after-ms", strconv.FormatInt(e.RetryAfter.Milliseconds(), 10))
	}
	if e.NoRetry {
		hd.Set("x-should-retry", "false")
	}
	hd.Set("Content-Type", "application/json")
	var body []byte
	switch f {
	case formatAnthropic:
		body = anthropic.ServerError(e.Status, e.Message)
	case formatGemini:
		body = gemini.ServerError(e.Status, e.Message)
	default:
		body = openai.ServerErrorCode(e.Status, e.Code, e.Message)
	}
	w.WriteHeader(e.Status)
	_, _ = w.Write(body)
}
