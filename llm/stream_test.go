package llm

import (
	"context"
	"errors"
	"testing"
)

// TestNewStreamWithCancel: the stream holds no context of its own; Close
// cancels the producer's with the cancel it was given, and so does Finish.
func TestNewStreamWithCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s, w := NewStreamWithCancel(ctx, cancel, 1)
	go produce(ctx, w, 1_000_000, nil)
	if ev := <-s.Events(); ev.Type != EventText {
		t.Fatalf("first event %+v", ev)
	}
	s.Close()
	if ctx.Err() == nil {
		t.Fatal("Close did not cancel the producer's context")
	}
	if err := s.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("after Close: %v", err)
	}

	ctx, cancel = context.WithCancel(context.Background())
	s, w = NewStreamWithCancel(ctx, cancel, 4)
	go produce(ctx, w, 3, nil)
	res, err := s.Result()
	if err != nil || res.Content != "xxx" {
		t.Fatalf("Result: %+v, %v", res, err)
	}
	if ctx.Err() == nil {
		t.Fatal("Finish did not cancel the producer's context")
	}
}
