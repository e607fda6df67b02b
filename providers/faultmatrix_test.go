package providers

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chorusrt/chorus/internal/testkit/faultmatrix"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

// mxRetry is the fault matrix's retry ladder.
var mxRetry = RetryPolicy{MaxAttempts: faultmatrix.MaxAttempts, BaseDelay: faultmatrix.BaseDelay, MaxDelay: faultmatrix.MaxDelay}

// mxConfig is the credential of a fault-matrix format.
func mxConfig(f faultmatrix.Format, srv *llmtest.Server) Config {
	cfg := Config{ID: f.Provider, Format: Format(f.Provider), BaseURL: f.BaseURL(srv), APIKey: faultmatrix.Key}
	if f.Responses {
		cfg.Models = map[string]ModelCaps{faultmatrix.Model: {Responses: true}}
	}
	return cfg
}

// TestFaultMatrix runs every cell of the fault matrix (see package
// faultmatrix) through a plain providers.Client.
func TestFaultMatrix(t *testing.T) {
	faultmatrix.Run(t, faultmatrix.Client, runProviderCell)
}

func runProviderCell(t *testing.T, cell *faultmatrix.Cell) {
	rec := cell.Rec
	c, err := New(mxConfig(cell.Format, cell.Server), WithHTTPClient(NewHTTPClient()), WithRetryPolicy(mxRetry),
		WithTimeout(faultmatrix.Budget), WithIdleTimeout(faultmatrix.Idle), WithLogger(rec.Logger()),
		WithAttemptObserver(func(ev AttemptEvent) { rec.Attempt(ev, ev.Err) }), WithLearnObserver(func(ev LearnEvent) { rec.Learned(ev) }))
	if err != nil {
		t.Fatal(err)
	}
	req := &llm.ChatRequest{Model: faultmatrix.Model, Messages: []llm.Message{llm.UserText("hello")}}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o := cell.Call(t, func() (*llm.ChatResult, error) { return c.Chat(ctx, req) }, func() (*llm.Stream, error) { return c.Stream(ctx, req) })
	cell.Check(t, o)
	cell.CheckNoLeak(t, o, c.String(), fmt.Sprintf("%v %+v %#v", c.Config(), c.Config(), c.Config()))

	// No connection left once the client drops its idle ones.
	c.CloseIdleConnections()
	cell.CheckConnsClosed(t)
}
