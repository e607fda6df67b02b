package providers

import (
	"os"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
)

// TestE2EOllama runs chat, streaming, embeddings and the model list against
// a real OpenAI-compatible server: Ollama started by
// any means (OLLAMA_BASE_URL). It asserts what Chorus
// guarantees (the call succeeds, the stream completes, finish reasons are
// canonical, usage is parsed), never what the tiny model says. It skips
// unless OLLAMA_BASE_URL is set: the default test run needs no server.
func TestE2EOllama(t *testing.T) {
	base := os.Getenv("OLLAMA_BASE_URL")
	if base == "" {
		t.Skip("OLLAMA_BASE_URL is not set (the base URL of a running Ollama server)")
	}
	model := os.Getenv("OLLAMA_E2E_MODEL")
	if model == "" {
		model = "tiny"
	}
	cfg, _ := Builtin("ollama")
	cfg.BaseURL = base
	c := newClient(t, cfg, WithTimeout(2*time.Minute), WithIdleTimeout(time.Minute))
	defer c.CloseIdleConnections()
	req := &llm.ChatRequest{Model: model, MaxTokens: 16, Messages: []llm.Message{llm.UserText("Say hello")}}

	res, err := c.Chat(ctxT(t), req)
	if err != nil {
		t.Fatalf("chat: %v", err)
	}
	if !res.FinishReason.Valid() || res.Usage.CompletionTokens == 0 {
		t.Errorf("chat result: finish %q usage %+v", res.FinishReason, res.Usage)
	}
	s, err := c.Stream(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := collect(s)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	sres, _ := s.Result()
	if textOf(evs) != sres.Content || !sres.FinishReason.Valid() {
		t.Errorf("stream: text %q vs %q, finish %q", textOf(evs), sres.Content, sres.FinishReason)
	}
	models, err := c.ListModels(ctxT(t))
	if err != nil || len(models) == 0 {
		t.Errorf("models: %v %v", models, err)
	}
	if _, err := c.Chat(ctxT(t), &llm.ChatRequest{Model: "no-such-model", Messages: req.Messages}); err == nil {
		t.Error("an unknown model succeeded")
	}
}
