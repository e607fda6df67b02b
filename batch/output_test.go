package batch

import (
	"context"
	"fmt"
	"testing"

	"github.com/chorusrt/chorus/llm"
)

// TestClassify: error codes of the typed errors.
func TestClassify(t *testing.T) {
	cases := []struct {
		err  error
		code string
	}{
		{&llm.ConfigError{Field: "model", Msg: "x"}, "invalid_request"},
		{&llm.RateLimitError{APIError: llm.APIError{Status: 429}}, "rate_limit_exceeded"},
		{&llm.RateLimitError{APIError: llm.APIError{Status: 429}, QuotaExhausted: true}, "insufficient_quota"},
		{&llm.APIError{Status: 500}, "http_500"},
		{&llm.APIError{Status: 400, Code: "context_length_exceeded"}, "context_length_exceeded"},
		{&llm.TransportError{Provider: "p", Err: fmt.Errorf("reset")}, "transport_error"},
		{fmt.Errorf("wrapped: %w", context.DeadlineExceeded), "timeout"},
		{llm.ErrOverloaded, "overloaded"},
		{fmt.Errorf("other"), "error"},
	}
	for _, c := range cases {
		if code, _ := classify(c.err); code != c.code {
			t.Errorf("%v: code %q, want %q", c.err, code, c.code)
		}
	}
}
