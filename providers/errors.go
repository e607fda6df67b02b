package providers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/gemini"
	"github.com/chorusrt/chorus/providers/internal/sse"
)

// redact removes the credential's key from provider text.
func (c *Client) redact(s string) string {
	if k := string(c.cfg.APIKey); len(k) >= 4 && strings.Contains(s, k) {
		s = strings.ReplaceAll(s, k, redacted)
	}
	return s
}

// ctxErr returns the cause of ctx's end: the idle watchdog's ErrIdleTimeout,
// the budget's DeadlineExceeded, or Canceled.
func ctxErr(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	if cause := context.Cause(ctx); cause != nil {
		return cause
	}
	return ctx.Err()
}

func (c *Client) statusError(resp *http.Response, body []byte) error {
	info := c.codec.ParseError(resp.StatusCode, body)
	msg := info.Message
	if msg == "" {
		msg = strings.TrimSpace(string(body))
		if len(msg) > 512 {
			msg = msg[:512]
		}
	}
	now := time.Now()
	api := llm.APIError{
		Provider:   c.cfg.ID,
		Status:     resp.StatusCode,
		Type:       c.redact(info.Type),
		Code:       c.redact(info.Code),
		Message:    c.redact(msg),
		Retryable:  retryableStatus(resp.StatusCode),
		RequestID:  requestID(resp.Header),
		RetryAfter: parseRetryAfter(resp.Header, now),
	}
	if api.RetryAfter == 0 && c.cfg.Format == FormatGemini {
		api.RetryAfter = gemini.RetryDelay(body)
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == 529 {
		quota := resp.StatusCode == http.StatusTooManyRequests && quotaExhausted(info, msg)
		if quota {
			api.Retryable = false
		}
		rl := &llm.RateLimitError{APIError: api, QuotaExhausted: quota}
		if c.cfg.Format == FormatGemini {
			rl.QuotaID = gemini.QuotaID(body)
		}
		return rl
	}
	return &api
}

// stampError fills the provider name and request id into a codec's error.
func (c *Client) stampError(err error, resp *http.Response) error {
	var api *llm.APIError
	if errors.As(err, &api) {
		api.Provider = c.cfg.ID
		api.Message, api.Code, api.Type = c.redact(api.Message), c.redact(api.Code), c.redact(api.Type)
		if api.RequestID == "" && resp != nil {
			api.RequestID = requestID(resp.Header)
		}
		return err
	}
	var de *llm.DecodeError
	if errors.As(err, &de) {
		de.Provider = c.cfg.ID
		return err
	}
	var te *llm.TransportError
	if errors.As(err, &te) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, llm.ErrIdleTimeout) {
		return err // already typed: a broken connection is not a decode error
	}
	return &llm.DecodeError{Provider: c.cfg.ID, Err: err}
}

func statusOf(err error) int {
	var api *llm.APIError
	if errors.As(err, &api) {
		return api.Status
	}
	return 0
}

// readError types an error met while reading a 200 body.
func (c *Client) readError(ctx context.Context, err error) error {
	var api *llm.APIError
	var de *llm.DecodeError
	switch {
	case errors.As(err, &api), errors.As(err, &de):
		return err
	case ctxErr(ctx) != nil:
		return ctxErr(ctx)
	case errors.Is(err, sse.ErrTooLarge), errors.Is(err, errTooLarge):
		return &llm.DecodeError{Provider: c.cfg.ID, Err: err}
	}
	return &llm.TransportError{Provider: c.cfg.ID, Err: errors.New(c.redact(err.Error()))}
}

// errCutShort marks a 200 body that ended in the middle of its JSON: the
// answer was cut in transit, not malformed by the provider, so the attempt
// is retried within the retry policy and the whole-call budget, and the
// decode error is reported only when the retries are spent.
var errCutShort = errors.New("the answer's JSON was cut short")

// cutShort reports whether body is JSON that ends before its value does
// (or no body at all): a cut, not a malformed answer.
func cutShort(body []byte) bool {
	if len(bytes.TrimSpace(body)) == 0 {
		return true
	}
	if json.Valid(body) {
		return false
	}
	var se *json.SyntaxError
	err := json.Unmarshal(body, new(json.RawMessage))
	return errors.As(err, &se) && se.Offset >= int64(len(bytes.TrimRight(body, " \t\r\n"))) && strings.Contains(se.Error(), "unexpected end")
}
