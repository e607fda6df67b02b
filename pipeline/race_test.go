package pipeline_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/pipeline"
)

func TestRace(t *testing.T) {
	boom := errors.New("boom")
	specs := map[string]spec{
		"fast":    {deltas: []string{"fast"}, first: 5 * time.Millisecond},
		"medium":  {deltas: []string{"medium"}, first: 40 * time.Millisecond},
		"slow":    {deltas: []string{"slow"}, first: 10 * time.Second},
		"fails":   {openErr: boom},
		"failing": {deltas: []string{"x"}, first: time.Millisecond, failErr: boom},
	}
	tests := []struct {
		name          string
		models        []string
		winner        string
		wantCancelled int64
		wantErr       error
	}{
		{"first complete answer wins", []string{"slow", "fast", "medium"}, "fast", 2, nil},
		{"failures do not end the race", []string{"fails", "failing", "slow", "medium"}, "medium", 1, nil},
		{"every model fails", []string{"fails", "failing"}, "", 0, boom},
		{"no models", nil, "", 0, &llm.ConfigError{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			c := newFake(specs)
			start := time.Now()
			res, model, err := pipeline.Race(context.Background(), c, userReq("hi"), tt.models...)
			if time.Since(start) > 5*time.Second {
				t.Fatal("Race waited for a slow loser")
			}
			if tt.wantErr != nil {
				var ce *llm.ConfigError
				if !errors.Is(err, tt.wantErr) && !(errors.As(tt.wantErr, &ce) && errors.As(err, &ce)) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				var me *pipeline.ModelError
				if tt.models != nil && !errors.As(err, &me) {
					t.Errorf("err %v holds no ModelError", err)
				}
				return
			}
			if err != nil || model != tt.winner || res.Content != tt.winner || res.Model != tt.winner {
				t.Fatalf("Race = %+v, %q, %v; want %s", res, model, err, tt.winner)
			}
			// Race returns only once every loser returned, cancelled.
			if got := c.cancelled.Load(); got != tt.wantCancelled {
				t.Errorf("%d losers cancelled, want %d", got, tt.wantCancelled)
			}
		})
	}
}

func TestRaceCancelled(t *testing.T) {
	defer goleak.VerifyNone(t)
	c := newFake(map[string]spec{"a": {hang: true}, "b": {hang: true}})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	_, _, err := pipeline.Race(ctx, c, userReq("hi"), "a", "b")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if c.cancelled.Load() != 2 {
		t.Fatalf("%d calls saw the cancellation, want 2", c.cancelled.Load())
	}
}

func TestFallback(t *testing.T) {
	boom := errors.New("boom")
	specs := map[string]spec{
		"refuses":   {openErr: &llm.APIError{Provider: "fake", Status: 503}},
		"dies":      {deltas: words("d", 5), failAt: 0, failErr: boom}, // fails before its first event
		"good":      {deltas: words("g", 5)},
		"good2":     {deltas: words("h", 5)},
		"mid-fails": {deltas: words("m", 5), failAt: 2, failErr: boom},
	}
	tests := []struct {
		name       string
		models     []string
		wantText   string
		wantCalled []string
		wantPart   string // with a StreamError: the partial text
		wantAllErr bool
	}{
		{"first model serves", []string{"good", "good2"}, strings.Join(words("g", 5), ""), []string{"good"}, "", false},
		{"falls back before the first event", []string{"refuses", "dies", "good", "good2"}, strings.Join(words("g", 5), ""), []string{"refuses", "dies", "good"}, "", false},
		{"never after the first event", []string{"mid-fails", "good"}, "m0 m1 ", []string{"mid-fails"}, "m0 m1 ", false},
		{"every model fails", []string{"refuses", "dies"}, "", []string{"refuses", "dies"}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			c := newFake(specs)
			s, err := pipeline.Fallback(context.Background(), c, userReq("hi"), tt.models...)
			if err != nil {
				t.Fatal(err)
			}
			var got strings.Builder
			var streamErr error
			for ev, err := range s.All() {
				if err != nil {
					streamErr = err
					break
				}
				got.WriteString(ev.Text)
			}
			if got.String() != tt.wantText {
				t.Errorf("text %q, want %q", got.String(), tt.wantText)
			}
			if called := c.calledModels(); strings.Join(called, ",") != strings.Join(tt.wantCalled, ",") {
				t.Errorf("called %v, want %v", called, tt.wantCalled)
			}
			res, err := s.Result()
			switch {
			case tt.wantPart != "":
				var se *llm.StreamError
				if !errors.As(streamErr, &se) || !errors.Is(err, boom) || se.Partial.Content != tt.wantPart {
					t.Errorf("err = %v, want a StreamError with partial %q", err, tt.wantPart)
				}
			case tt.wantAllErr:
				var me *pipeline.ModelError
				if !errors.As(err, &me) || !errors.Is(err, boom) {
					t.Errorf("err = %v, want every failure joined", err)
				}
			default:
				if err != nil || res.Content != tt.wantText || res.Model != tt.wantCalled[len(tt.wantCalled)-1] {
					t.Errorf("Result = %+v, %v", res, err)
				}
			}
		})
	}
	if _, err := pipeline.Fallback(context.Background(), newFake(specs), userReq("hi")); err == nil {
		t.Error("Fallback with no model succeeded")
	}
}

func TestFallbackCancelled(t *testing.T) {
	for _, how := range []string{"cancel", "close"} {
		t.Run(how, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			c := newFake(map[string]spec{"hangs": {deltas: words("x", 2), hang: true}, "good": {deltas: words("g", 2)}})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s, err := pipeline.Fallback(ctx, c, userReq("hi"), "hangs", "good")
			if err != nil {
				t.Fatal(err)
			}
			<-s.Events()
			if how == "cancel" {
				cancel()
			} else {
				s.Close()
			}
			_, err = s.Result()
			if !errors.Is(err, context.Canceled) {
				t.Errorf("err = %v, want context.Canceled", err)
			}
			if called := c.calledModels(); len(called) != 1 {
				t.Errorf("called %v after cancellation", called)
			}
		})
	}
}
