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

// Defaults for the client's timing knobs. Tests change them per client with
// the options, never globally.
const (
	// DefaultTimeout is the whole-call budget: queueing, every attempt, every
	// backoff and, for streams, the whole stream.
	DefaultTimeout = 10 * time.Minute
	// DefaultIdleTimeout ends a stream that sends nothing, keepalive
	// comments included, for this long (time to first byte included).
	DefaultIdleTimeout = 90 * time.Second
	// DefaultStreamBuffer is the capacity of a stream's event channel.
	DefaultStreamBuffer = 64
)

// Body caps. They are variables so an application can change them at start-up.
var (
	// MaxResponseBytes caps a buffered answer.
	MaxResponseBytes int64 = 32 << 20
	// MaxErrorBytes caps the part of an error body that is read.
	MaxErrorBytes int64 = 1 << 20
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

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the HTTP client (default NewHTTPClient()).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithRetryPolicy sets the retry ladder.
func WithRetryPolicy(p RetryPolicy) Option { return func(c *Client) { c.retry = p.withDefaults() } }

// WithTimeout sets the whole-call budget; zero or negative means none.
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// WithIdleTimeout sets the stream idle watchdog; zero or negative disables it.
func WithIdleTimeout(d time.Duration) Option { return func(c *Client) { c.idle = d } }

// WithStreamBuffer sets the capacity of each stream's event channel.
func WithStreamBuffer(n int) Option {
	return func(c *Client) {
		if n >= 0 {
			c.buffer = n
		}
	}
}

// WithLearned shares learn-once state between Clients of one credential,
// or keeps it across the Client's replacement (an actor restart).
func WithLearned(l *Learned) Option {
	return func(c *Client) {
		if l != nil {
			c.learned = l
		}
	}
}

// WithAttemptObserver receives every HTTP attempt. Each observer given
// receives every attempt.
func WithAttemptObserver(o AttemptObserver) Option {
	return func(c *Client) {
		if o != nil {
			c.attemptObs = append(c.attemptObs, o)
		}
	}
}

// WithLearnObserver receives every newly learned flag.
func WithLearnObserver(o LearnObserver) Option { return func(c *Client) { c.learnObs = o } }

// WithLogger routes the client's few log lines (learned flags, observer
// panics) to l. The default discards them.
func WithLogger(l *slog.Logger) Option {
	return func(c *Client) {
		if l != nil {
			c.logger = l
		}
	}
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

var defaultHTTPClient = NewHTTPClient()

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

// redact removes the credential's key from provider text.
func (c *Client) redact(s string) string {
	if k := string(c.cfg.APIKey); len(k) >= 4 && strings.Contains(s, k) {
		s = strings.ReplaceAll(s, k, redacted)
	}
	return s
}

// send performs one HTTP request. Non-2xx answers come back as typed errors
// with the body consumed and closed.
func (c *Client) send(ctx context.Context, wreq *wire.Request, stream bool) (*http.Response, error) {
	method := wreq.Method
	if method == "" {
		method = http.MethodPost
	}
	hreq, err := http.NewRequestWithContext(ctx, method, c.cfg.BaseURL+wreq.Path, bytes.NewReader(wreq.Body))
	if err != nil {
		return nil, &llm.ConfigError{Field: "base_url", Msg: c.redact(err.Error())}
	}
	h := hreq.Header
	h.Set("Content-Type", "application/json")
	if stream {
		h.Set("Accept", "text/event-stream")
	} else {
		h.Set("Accept", "application/json")
	}
	h.Set("User-Agent", "chorus/0")
	for k, v := range c.cfg.Headers {
		h.Set(k, v)
	}
	for k, vs := range wreq.Header {
		h[k] = vs
	}
	c.codec.Authorize(h, string(c.cfg.APIKey), c.cfg.Quirks)
	resp, err := c.hc.Do(hreq)
	if err != nil {
		if cerr := ctxErr(ctx); cerr != nil {
			return nil, cerr
		}
		return nil, &llm.TransportError{Provider: c.cfg.ID, Err: errors.New(c.redact(err.Error()))}
	}
	if resp.StatusCode/100 != 2 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, MaxErrorBytes))
		resp.Body.Close()
		return nil, c.statusError(resp, body)
	}
	return resp, nil
}

// ctxErr returns the cause of ctx's end: the idle watchdog's ErrIdleTimeout,
// the budget's DeadlineExceeded, or Canceled.
func ctxErr(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	if cause := context.Cause(ctx); cause != nil {
		return cause
	}
	return ctx.Err()
}

func (c *Client) statusError(resp *http.Response, body []byte) error {
	info := c.codec.ParseError(resp.StatusCode, body)
	msg := info.Message
	if msg == "" {
		msg = strings.TrimSpace(string(body))
		if len(msg) > 512 {
			msg = msg[:512]
		}
	}
	now := time.Now()
	api := llm.APIError{
		Provider:   c.cfg.ID,
		Status:     resp.StatusCode,
		Type:       c.redact(info.Type),
		Code:       c.redact(info.Code),
		Message:    c.redact(msg),
		Retryable:  retryableStatus(resp.StatusCode),
		RequestID:  requestID(resp.Header),
		RetryAfter: parseRetryAfter(resp.Header, now),
	}
	if api.RetryAfter == 0 && c.cfg.Format == FormatGemini {
		api.RetryAfter = gemini.RetryDelay(body)
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == 529 {
		quota := resp.StatusCode == http.StatusTooManyRequests && quotaExhausted(info.Code, info.Type, msg)
		if quota {
			api.Retryable = false
		}
		return &llm.RateLimitError{APIError: api, QuotaExhausted: quota}
	}
	return &api
}

// learnFrom reads a rejection for a parameter this request actually sent
// and records it. It reports whether the request should be sent again at
// once, rebuilt without the parameter. A rejection of the route (the model
// is only served by the Responses API) is read first, by learnRoute.
func (c *Client) learnFrom(err error, req *llm.ChatRequest, sent wire.Learned, stream bool) bool {
	if c.learnRoute(err, req) {
		return true
	}
	var api *llm.APIError
	if !errors.As(err, &api) || (api.Status != 400 && api.Status != 422) {
		return false
	}
	f := classifyRejection(api.Message+" "+api.Code, stream)
	var wasSent bool
	switch f {
	case LearnNoStreamOptions:
		wasSent = stream && c.cfg.Format == FormatOpenAI && !c.cfg.Quirks.NoStreamOptions && !sent.NoStreamOptions
	case LearnBuffered:
		wasSent = stream
	case LearnNoParallelToolCalls:
		wasSent = req.ParallelToolCalls != nil && len(req.Tools) > 0 && !sent.NoParallelToolCalls
	case LearnNoReasoningEffort:
		wasSent = req.Reasoning != nil && c.cfg.Format == FormatOpenAI && !sent.NoReasoningEffort
	case LearnNoTemperature:
		wasSent = req.Temperature != nil && !sent.NoTemperature
	case LearnNoTopP:
		wasSent = req.TopP != nil && !sent.NoTopP
	case LearnNoSeed:
		wasSent = req.Seed != nil && !sent.NoSeed
	}
	if !wasSent {
		return false
	}
	c.learn(f, api.Message)
	return true
}

// Chat performs a buffered chat call.
func (c *Client) Chat(ctx context.Context, req *llm.ChatRequest) (*llm.ChatResult, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := c.budget(ctx)
	defer cancel()
	var res *llm.ChatResult
	err := c.ladder(ctx, "chat", req.Model, func(ctx context.Context, attempt int) attemptResult {
		sent := c.learned.snapshot()
		codec := c.chatCodec(req)
		wreq, err := codec.ChatRequest(req, c.buildOpts(false, sent))
		if err != nil {
			return attemptResult{err: err}
		}
		r, status, err := c.chatAttempt(ctx, codec, wreq, attempt)
		if err != nil {
			return attemptResult{status: status, err: err, relearned: c.learnFrom(err, req, sent, false)}
		}
		res = r
		return attemptResult{status: status, requestID: r.Meta.RequestID}
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// attemptResult is what one attempt tells the ladder.
type attemptResult struct {
	status    int
	requestID string
	err       error
	// relearned: the attempt taught a learn-once flag; try again at once.
	relearned bool
}

// ladder runs attempts of one operation until one succeeds, the error is
// final, the attempts run out, or the budget in ctx cannot hold the next
// wait. Every attempt is reported to the attempt observer. Operations other
// than streaming chat use it as is; streams use it with an attempt that
// marks itself final once an event reached the caller.
func (c *Client) ladder(ctx context.Context, op, model string, fn func(ctx context.Context, attempt int) attemptResult) error {
	for attempt := 1; ; attempt++ {
		start := time.Now()
		r := fn(ctx, attempt)
		ev := AttemptEvent{Provider: c.cfg.ID, Op: op, Model: model, Attempt: attempt, Status: r.status, Duration: time.Since(start), Err: r.err, ErrClass: errClass(r.err), RequestID: r.requestID}
		if r.err == nil {
			c.observeAttempt(ev)
			return nil
		}
		wait, again := c.next(ctx, attempt, r.err, r.relearned)
		if again {
			ev.Wait = wait
		}
		c.observeAttempt(ev)
		if !again {
			return finalError(ctx, r.err, attempt)
		}
		if serr := sleep(ctx, wait); serr != nil {
			return finalError(ctx, r.err, attempt)
		}
	}
}

// next decides whether and when to try again.
func (c *Client) next(ctx context.Context, attempt int, err error, relearned bool) (time.Duration, bool) {
	var final *finalErr
	if ctx.Err() != nil || errors.As(err, &final) {
		return 0, false
	}
	if relearned {
		return 0, attempt < c.retry.MaxAttempts
	}
	return c.retry.nextWait(ctx, attempt, err)
}

// finalError is the error a call returns when the ladder stops: the last
// provider error (a budget that ran out while waiting keeps the provider's
// error, which says more), or the context's error when the call was cut.
func finalError(ctx context.Context, err error, attempts int) error {
	var final *finalErr
	if errors.As(err, &final) {
		err = final.err
	}
	var rl *llm.RateLimitError
	if errors.As(err, &rl) {
		rl.Attempts = attempts
	}
	if err == nil {
		return ctxErr(ctx)
	}
	return err
}

// finalErr marks an attempt's error as the end of the ladder (a stream
// whose events already reached the caller).
type finalErr struct{ err error }

func (e *finalErr) Error() string { return e.err.Error() }
func (e *finalErr) Unwrap() error { return e.err }

func (c *Client) chatAttempt(ctx context.Context, codec wire.Codec, wreq *wire.Request, attempt int) (*llm.ChatResult, int, error) {
	resp, err := c.send(ctx, wreq, false)
	if err != nil {
		return nil, statusOf(err), err
	}
	defer resp.Body.Close()
	body, err := readCapped(resp.Body, MaxResponseBytes)
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
		return nil, resp.StatusCode, c.stampError(err, resp)
	}
	res.Meta = responseMeta(c.cfg.ID, resp, attempt, time.Now())
	res.Meta.Model = res.Model
	return res, resp.StatusCode, nil
}

// stampError fills the provider name and request id into a codec's error.
func (c *Client) stampError(err error, resp *http.Response) error {
	var api *llm.APIError
	if errors.As(err, &api) {
		api.Provider = c.cfg.ID
		api.Message, api.Code, api.Type = c.redact(api.Message), c.redact(api.Code), c.redact(api.Type)
		if api.RequestID == "" && resp != nil {
			api.RequestID = requestID(resp.Header)
		}
		return err
	}
	var de *llm.DecodeError
	if errors.As(err, &de) {
		de.Provider = c.cfg.ID
		return err
	}
	var te *llm.TransportError
	if errors.As(err, &te) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, llm.ErrIdleTimeout) {
		return err // already typed: a broken connection is not a decode error
	}
	return &llm.DecodeError{Provider: c.cfg.ID, Err: err}
}

func statusOf(err error) int {
	var api *llm.APIError
	if errors.As(err, &api) {
		return api.Status
	}
	return 0
}

var errTooLarge = errors.New("providers: response body exceeds its cap")

func readCapped(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w (%d bytes)", errTooLarge, limit)
	}
	return b, nil
}
