package providers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/anthropic"
	"github.com/chorusrt/chorus/providers/gemini"
	"github.com/chorusrt/chorus/providers/internal/wire"
	"github.com/chorusrt/chorus/providers/openai"
)

// Client is a plain client for one provider credential: one call in, one
// result or stream out, with the retry ladder, the whole-call budget, typed
// errors, learn-once fallbacks and response metadata. It is safe for
// concurrent use. The runtime wraps one Client per credential in an actor;
// a program that needs no actors can use a Client directly.
type Client struct {
	cfg        Config
	codec      wire.Codec
	hc         *http.Client
	retry      RetryPolicy
	timeout    time.Duration
	idle       time.Duration
	buffer     int
	learned    *Learned
	attemptObs []AttemptObserver
	learnObs   LearnObserver
	logger     *slog.Logger
	// noRateLimitRetry is WithoutRateLimitRetry.
	noRateLimitRetry bool
}

// New returns a Client for one credential.
func New(cfg Config, opts ...Option) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Client{
		cfg:     cfg,
		codec:   codecFor(cfg.Format),
		retry:   DefaultRetryPolicy,
		timeout: DefaultTimeout,
		idle:    DefaultIdleTimeout,
		buffer:  DefaultStreamBuffer,
		learned: &Learned{},
		logger:  slog.New(slog.DiscardHandler),
	}
	c.cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	if cfg.Models != nil {
		c.cfg.Models = make(map[string]ModelCaps, len(cfg.Models))
		for m, caps := range cfg.Models {
			c.cfg.Models[m] = caps
		}
	}
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		c.hc = defaultHTTPClient
	}
	if c.noRateLimitRetry {
		c.retry.NoRateLimitRetry = true
	}
	return c, nil
}

func codecFor(f Format) wire.Codec {
	switch f {
	case FormatAnthropic:
		return anthropic.Codec{}
	case FormatGemini:
		return gemini.Codec{}
	default:
		return openai.Codec{}
	}
}

// Config returns the client's credential configuration.
func (c *Client) Config() Config { return c.cfg }

// Learned returns the client's learn-once state.
func (c *Client) Learned() *Learned { return c.learned }

// String describes the client without its key.
func (c *Client) String() string { return "providers.Client(" + c.cfg.String() + ")" }

// GoString is String, so that %#v never prints the key either.
func (c *Client) GoString() string { return c.String() }

func (c *Client) buildOpts(stream bool, l wire.Learned) wire.BuildOptions {
	return wire.BuildOptions{Provider: c.cfg.ID, Stream: stream, Quirks: c.cfg.Quirks, Learned: l}
}

func (c *Client) budget(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.timeout > 0 {
		return context.WithTimeout(ctx, c.timeout)
	}
	return context.WithCancel(ctx)
}

// withinBudget reports whether ctx already ends no later than the client's
// whole-call budget would: a buffered call then needs no context of its own
// (the runtime's call context carries the same budget, so deriving another
// only cost a timer and four allocations per call). Nothing of a buffered
// call outlives it, so there is nothing for a cancel of its own to stop.
func (c *Client) withinBudget(ctx context.Context) bool {
	if c.timeout <= 0 {
		return false
	}
	dl, ok := ctx.Deadline()
	return ok && !dl.After(time.Now().Add(c.timeout))
}

// Chat performs a buffered chat call.
func (c *Client) Chat(ctx context.Context, req *llm.ChatRequest) (*llm.ChatResult, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	return c.ChatValidated(ctx, req)
}

// ChatValidated is Chat for a request the caller has validated already
// (the runtime validates once, before admission, so a bad request never
// spends a grant).
func (c *Client) ChatValidated(ctx context.Context, req *llm.ChatRequest) (*llm.ChatResult, error) {
	if !c.withinBudget(ctx) {
		var cancel context.CancelFunc
		ctx, cancel = c.budget(ctx)
		defer cancel()
	}
	var res *llm.ChatResult
	err := c.ladder(ctx, "chat", req.Model, func(ctx context.Context, attempt int) attemptResult {
		sent := c.learned.snapshot()
		codec := c.chatCodec(req)
		wreq, err := codec.ChatRequest(req, c.buildOpts(false, sent))
		if err != nil {
			return attemptResult{err: err}
		}
		c.traceApplied(ctx, req, sent, false, attempt) // learntrace.go
		r, status, err := c.chatAttempt(ctx, codec, wreq, attempt)
		if err != nil {
			return attemptResult{status: status, err: err, relearned: c.learnFrom(ctx, err, req, sent, false, attempt)}
		}
		res = r
		return attemptResult{status: status, requestID: r.Meta.RequestID}
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

func (c *Client) chatAttempt(ctx context.Context, codec wire.Codec, wreq *wire.Request, attempt int) (*llm.ChatResult, int, error) {
	resp, err := c.send(ctx, wreq, false)
	if err != nil {
		return nil, statusOf(err), err
	}
	defer resp.Body.Close()
	body, err := readBody(resp, MaxResponseBytes)
	if err != nil {
		if cerr := ctxErr(ctx); cerr != nil {
			return nil, resp.StatusCode, cerr
		}
		if errors.Is(err, errTooLarge) {
			return nil, resp.StatusCode, &llm.DecodeError{Provider: c.cfg.ID, Err: err}
		}
		return nil, resp.StatusCode, &llm.TransportError{Provider: c.cfg.ID, Err: err}
	}
	res, err := codec.ParseChat(body)
	if err != nil {
		if cutShort(body) {
			// Nothing reached the caller: like a reset before the first
			// event, an attempt the ladder may repeat (errors.go).
			err = &llm.DecodeError{Provider: c.cfg.ID, Err: fmt.Errorf("%w: %w", errCutShort, err)}
		}
		return nil, resp.StatusCode, c.stampError(err, resp)
	}
	res.Meta = withWireMeta(responseMeta(c.cfg.ID, resp, attempt, time.Now()), res.Meta)
	res.Meta.Model = res.Model
	return res, resp.StatusCode, nil
}

// readBody reads a buffered answer whole, up to limit bytes, as readCapped
// does. An answer that states its length (as a small one from a server
// that buffers it does) is read into one buffer of that size, where
// io.ReadAll would start at 512 bytes and grow.
func readBody(resp *http.Response, limit int64) ([]byte, error) {
	n := resp.ContentLength
	if n <= 0 || n > limit || n > 1<<20 {
		return readCapped(resp.Body, limit)
	}
	b := make([]byte, n+1)
	got := 0
	for int64(got) <= n {
		m, err := resp.Body.Read(b[got:])
		got += m
		if err == io.EOF {
			return b[:got], nil
		}
		if err != nil {
			return nil, err
		}
	}
	// Longer than it said (a transport that does not hold the body to its
	// Content-Length): the rest as readCapped reads it.
	return readCapped(io.MultiReader(bytes.NewReader(b), resp.Body), limit)
}
