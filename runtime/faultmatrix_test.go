package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/chorusrt/chorus/internal/testkit/faultmatrix"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
)

// TestFaultMatrix runs every cell of the fault matrix (see package
// faultmatrix) through a Runtime: one credential, its own HTTP client, each
// call placed by the credential's actor; the caller's deadline is the
// matrix's budget, as is the client's whole-call timeout.
func TestFaultMatrix(t *testing.T) {
	faultmatrix.Run(t, faultmatrix.Runtime, runRuntimeCell)
}

func runRuntimeCell(t *testing.T, cell *faultmatrix.Cell) {
	f, rec := cell.Format, cell.Rec
	logger := rec.Logger()
	hc := providers.NewHTTPClient()
	cfg := providers.Config{ID: f.Provider, Format: providers.Format(f.Provider), BaseURL: f.BaseURL(cell.Server), APIKey: faultmatrix.Key}
	if f.Responses {
		cfg.Models = map[string]providers.ModelCaps{faultmatrix.Model: {Responses: true}}
	}
	retry := providers.RetryPolicy{MaxAttempts: faultmatrix.MaxAttempts, BaseDelay: faultmatrix.BaseDelay, MaxDelay: faultmatrix.MaxDelay}
	rt, err := New(WithProvider(cfg), WithLogger(logger), WithClientOptions(
		providers.WithHTTPClient(hc), providers.WithRetryPolicy(retry), providers.WithTimeout(faultmatrix.Budget),
		providers.WithIdleTimeout(faultmatrix.Idle),
		providers.WithAttemptObserver(func(ev providers.AttemptEvent) { rec.Attempt(ev, ev.Err) }),
		providers.WithLearnObserver(func(ev providers.LearnEvent) { rec.Learned(ev) })))
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			rt.Close(context.Background())
		}
	}()
	req := &llm.ChatRequest{Model: cfg.ID + "/" + faultmatrix.Model, Messages: []llm.Message{llm.UserText("hello")}}

	ctx, cancel := context.WithTimeout(context.Background(), faultmatrix.Budget)
	defer cancel()
	o := cell.Call(t, func() (*llm.ChatResult, error) { return rt.Chat(ctx, req) }, func() (*llm.Stream, error) { return rt.Stream(ctx, req) })
	cell.Check(t, o)
	// The actor's books agree with the server: one admitted request per
	// placement, every HTTP attempt counted.
	st := rt.Stats()
	if len(st) != 1 || st[0].Attempts != int64(cell.Want.Requests) {
		t.Errorf("stats %+v, want %d attempts", st, cell.Want.Requests)
	}

	// The key never shows, the runtime itself printed as a program would
	// log it included.
	slog.New(slog.NewTextHandler(rec, nil)).Info("runtime", "rt", rt, "err", o.Err)
	logger.Info("runtime", "rt", rt, "err", o.Err)
	cell.CheckNoLeak(t, o, fmt.Sprintf("%+v", st), fmt.Sprintf("%v %+v %#v", cfg, cfg, cfg), fmt.Sprintf("%v|%+v|%#v", rt, rt, rt))

	// No connection left once the runtime is closed.
	if cerr := rt.Close(context.Background()); cerr != nil {
		t.Errorf("Close: %v", cerr)
	}
	closed = true
	hc.CloseIdleConnections()
	cell.CheckConnsClosed(t)
}

// TestStreamRefusesBadRequestBeforeAdmission: the one fault the matrix
// cannot script, a malformed request, is refused by Stream itself with the
// typed error (validated once, before admission): no stream, no request.
func TestStreamRefusesBadRequestBeforeAdmission(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rt := newRT(t, WithProvider(openaiCfg(srv, key)))
	bad := &llm.ChatRequest{Model: "openai/m", Messages: []llm.Message{{Role: "wizard", Content: "hello"}}}
	s, err := rt.Stream(ctxT(t, 5*time.Second), bad)
	var ce *llm.ConfigError
	if s != nil || !errors.As(err, &ce) || ce.Field != "messages[0].role" {
		t.Fatalf("Stream = %v, %v; want no stream and a *llm.ConfigError on messages[0].role", s, err)
	}
	if srv.Count() != 0 {
		t.Fatalf("a bad request reached the server")
	}
}
