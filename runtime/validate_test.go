package runtime

import (
	"context"
	"errors"
	"testing"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
)

// A request that fails validation is refused before admission, by Chat as
// by Stream: a typed error, and no grant spent on the credential (no
// request counted, nothing sent).
func TestInvalidRequestSpendsNoGrant(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rt := newRT(t, WithProvider(providers.Config{ID: "openai", Format: providers.FormatOpenAI, BaseURL: srv.OpenAIBaseURL(), APIKey: "sk-validate"}))
	bad := &llm.ChatRequest{Model: "openai/m"} // no messages
	_, err := rt.Chat(context.Background(), bad)
	var ve *llm.ConfigError
	if !errors.As(err, &ve) {
		t.Fatalf("Chat: %v (%T), want *llm.ConfigError", err, err)
	}
	if _, err := rt.Stream(context.Background(), bad); !errors.As(err, &ve) {
		t.Fatalf("Stream: %v (%T), want *llm.ConfigError", err, err)
	}
	for _, s := range rt.Stats() {
		if s.Requests != 0 {
			t.Fatalf("credential %s counted %d request(s) for invalid calls, want 0", s.Fingerprint, s.Requests)
		}
	}
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("the server got %d request(s)", n)
	}
}
