package providers

import (
	"context"
	"errors"
	"testing"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

// TestCutShortBodyIsRetried: a buffered 200 whose JSON is cut in the middle
// reached nobody, so it is an attempt the retry ladder repeats; only when
// every attempt is cut is the decode error reported. A body that is whole
// but not JSON is the provider's malformed answer: final at once.
func TestCutShortBodyIsRetried(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	cl, err := New(Config{ID: "openai", Format: FormatOpenAI, BaseURL: srv.OpenAIBaseURL(), APIKey: "k"}, WithRetryPolicy(RetryPolicy{MaxAttempts: 3, BaseDelay: 1, MaxDelay: 1}))
	if err != nil {
		t.Fatal(err)
	}
	req := &llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("hi")}}
	cut := llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultTruncatedJSON}}

	srv.Push(cut, llmtest.Text("whole"))
	res, err := cl.Chat(context.Background(), req)
	if err != nil || res.Content != "whole" || srv.Count() != 2 {
		t.Fatalf("one cut answer: %v %v after %d requests, want the second answer", res, err, srv.Count())
	}

	srv.Push(cut, cut, cut)
	before := srv.Count()
	_, err = cl.Chat(context.Background(), req)
	var de *llm.DecodeError
	if !errors.As(err, &de) || srv.Count()-before != 3 {
		t.Fatalf("every answer cut: %v after %d requests, want a *llm.DecodeError after 3", err, srv.Count()-before)
	}

	srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultMalformedLine}})
	before = srv.Count()
	if _, err = cl.Chat(context.Background(), req); !errors.As(err, &de) || srv.Count()-before != 1 {
		t.Fatalf("a whole body that is not JSON: %v after %d requests, want a *llm.DecodeError after 1", err, srv.Count()-before)
	}
}
