package einosession_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/integrations/einosession"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/session"
)

// TestCompaction: an eino session compacts as a native one: before the
// third turn the session's Model summarizes the first, and the tree's run
// of that turn gets the summary instead of the first turn's messages.
func TestCompaction(t *testing.T) {
	summarizer := llmtest.NewServer()
	defer summarizer.Close()
	summarizer.Push(llmtest.Text("SUMMARY-1: the user asked about alpha"))
	sc, err := providers.New(providers.Config{ID: "openai", Format: providers.FormatOpenAI, BaseURL: summarizer.OpenAIBaseURL(), APIKey: "sk-test"},
		providers.WithRetryPolicy(providers.RetryPolicy{MaxAttempts: 1}), providers.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	model := newScripted(t, llmtest.Text("alpha answer "+strings.Repeat("a", 120)), llmtest.Text("beta answer "+strings.Repeat("b", 120)),
		llmtest.Text("gamma answer"))
	rn := einosession.New()
	h := newHarness(t, rn, chatAgent(t, "support", model), session.Options{Model: sc, ModelName: "summary-model",
		Compaction: &session.CompactionPolicy{ContextWindowTokens: 100, TriggerRatio: 0.5, KeepTurns: 1}})
	h.turn("s", "tell me about alpha")
	h.turn("s", "tell me about beta")
	if r := h.turn("s", "tell me about gamma"); r.Answer != "gamma answer" {
		t.Fatalf("turn 3 %+v", r)
	}
	if n := len(summarizer.Requests()); n != 1 {
		t.Fatalf("%d summary calls", n)
	}
	third := string(model.srv.Requests()[2].Body)
	if !strings.Contains(third, "SUMMARY-1") || strings.Contains(third, "tell me about alpha") || !strings.Contains(third, "tell me about beta") {
		t.Fatalf("the third turn's model request %s", third)
	}
}
