package providers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

// The fault matrix (issue 8): every wire format, buffered and streaming,
// against every fault the fake server can inject. Each cell runs on a fresh
// llmtest server and a fresh HTTP client, and checks that the call
//
//   - ends within its budget (plus scheduling slack) in a success or the
//     documented typed error;
//   - sent exactly the requests the retry rules allow: retries only before
//     the first event, none after it;
//   - kept the partial result (the deltas sent before the fault) after it;
//   - left no connection open at the server once the client closed its idle
//     ones, and no goroutine behind (goleak, per cell);
//   - never shows the API key, nor its last 8 characters, in the error, the
//     log lines, the attempt or learn observers' events, or the events.
//
// runtime/faultmatrix_test.go runs the same matrix through the actors.

const (
	// mxBudget is each cell's whole-call budget (WithTimeout).
	mxBudget = 2 * time.Second
	// mxIdle is the stream idle watchdog.
	mxIdle = 300 * time.Millisecond
	// mxSlack absorbs scheduling under -race on a loaded machine.
	mxSlack = 1500 * time.Millisecond
)

// mxRetry keeps ladders short: three attempts, millisecond backoffs.
var mxRetry = RetryPolicy{MaxAttempts: 3, BaseDelay: 10 * time.Millisecond, MaxDelay: 20 * time.Millisecond}

// mxDeltas is the answer every cell asks for: five deltas, so that a
// mid-stream fault after three of them leaves a known partial text.
var mxDeltas = []string{"one ", "two ", "three ", "four ", "five"}

const mxFull = "one two three four five"

func mxReply() *llmtest.Reply { return &llmtest.Reply{Deltas: mxDeltas} }

// mxFormat is one column of the matrix: a wire format and its credential.
type mxFormat struct {
	name string
	// path every request of the format must go to ("" = not checked).
	path string
	cfg  func(srv *llmtest.Server) Config
}

var mxFormats = []mxFormat{
	{"openai-chat", "/v1/chat/completions", func(s *llmtest.Server) Config {
		return Config{ID: "openai", Format: FormatOpenAI, BaseURL: s.OpenAIBaseURL(), APIKey: testKey}
	}},
	{"openai-responses", "/v1/responses", func(s *llmtest.Server) Config {
		return Config{ID: "openai", Format: FormatOpenAI, BaseURL: s.OpenAIBaseURL(), APIKey: testKey,
			Models: map[string]ModelCaps{"m": {Responses: true}}}
	}},
	{"anthropic", "/v1/messages", func(s *llmtest.Server) Config {
		return Config{ID: "anthropic", Format: FormatAnthropic, BaseURL: s.AnthropicBaseURL(), APIKey: testKey}
	}},
	{"gemini", "", func(s *llmtest.Server) Config {
		return Config{ID: "gemini", Format: FormatGemini, BaseURL: s.GeminiBaseURL(), APIKey: testKey}
	}},
}

// mxWant is a cell's documented outcome.
type mxWant struct {
	// ok: the call succeeds with mxFull.
	ok bool
	// buffered: the success was served from a non-SSE body (Meta.Buffered).
	buffered bool
	// requests is the exact number of requests the server must see.
	requests int
	// partial, for a stream that failed after events: the text kept in the
	// *llm.StreamError (and delivered as events). Empty: no event may reach
	// the caller and the error is not a StreamError.
	partial string
	// err describes how the error (the cause, inside a StreamError) differs
	// from the documented one; "" when it matches.
	err func(error) string
	// echo: the provider's error message echoed the key; the error must
	// show it redacted (proof that the echo reached the client).
	echo bool
	// minElapsed is a lower bound on the call's duration (a honoured
	// retry-after, a stall the buffered call waits out).
	minElapsed time.Duration
}

// mxFault is one row of the matrix: the script of a cell and its outcome,
// per mode.
type mxFault struct {
	name string
	cell func(stream bool) ([]llmtest.Step, mxWant)
}

func stepFault(f llmtest.Fault) llmtest.Step { return llmtest.Step{Fault: &f} }
func stepReply() llmtest.Step                { return llmtest.Step{Reply: mxReply()} }

// Error matchers.
func isAPIStatus(status int) func(error) string {
	return func(err error) string {
		var api *llm.APIError
		var rl *llm.RateLimitError
		if !errors.As(err, &api) || api.Status != status || errors.As(err, &rl) {
			return fmt.Sprintf("want *llm.APIError with status %d, got %T %v", status, err, err)
		}
		return ""
	}
}

func isQuota(err error) string {
	var rl *llm.RateLimitError
	if !errors.As(err, &rl) || !rl.QuotaExhausted || rl.Status != 429 || rl.Retryable || !errors.Is(err, llm.ErrRateLimited) {
		return fmt.Sprintf("want *llm.RateLimitError{QuotaExhausted}, got %T %v", err, err)
	}
	return ""
}

func isType[T error](name string) func(error) string {
	return func(err error) string {
		var target T
		if !errors.As(err, &target) {
			return fmt.Sprintf("want %s, got %T %v", name, err, err)
		}
		return ""
	}
}

func isSentinel(target error) func(error) string {
	return func(err error) string {
		if !errors.Is(err, target) {
			return fmt.Sprintf("want %v, got %T %v", target, err, err)
		}
		return ""
	}
}

// isInStreamError: the error event a provider sends inside a 200 stream,
// typed as the provider's API error (status 0 or the status it names).
func isInStreamError(err error) string {
	var api *llm.APIError
	if !errors.As(err, &api) {
		return fmt.Sprintf("want *llm.APIError from the in-stream error event, got %T %v", err, err)
	}
	return ""
}

// keyEcho is put in every error body a fault sends, so that redaction is
// exercised on every path.
var keyEcho = "Incorrect API key provided: " + string(testKey) + "."

// mxFaults is the list of faults, in its order.
func mxFaults() []mxFault {
	decode := isType[*llm.DecodeError]("*llm.DecodeError")
	transport := isType[*llm.TransportError]("*llm.TransportError")
	midStream := func(kind llmtest.FaultKind, after int, buffered mxWant, bufSteps []llmtest.Step, streamErr func(error) string) func(bool) ([]llmtest.Step, mxWant) {
		return func(stream bool) ([]llmtest.Step, mxWant) {
			if !stream {
				return bufSteps, buffered
			}
			f := llmtest.Fault{Kind: kind, After: after, Message: keyEcho, Reply: mxReply()}
			if kind == llmtest.FaultStall {
				f.Stall = 10 * time.Second
			}
			return []llmtest.Step{stepFault(f)}, mxWant{requests: 1, partial: strings.Join(mxDeltas[:after], ""), err: streamErr,
				echo: kind == llmtest.FaultInStreamError}
		}
	}
	return []mxFault{
		{"429-retry-after", func(bool) ([]llmtest.Step, mxWant) {
			return []llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultStatus, Status: 429, RetryAfter: 150 * time.Millisecond, Message: keyEcho}), stepReply()},
				mxWant{ok: true, requests: 2, minElapsed: 140 * time.Millisecond}
		}},
		{"429-quota-exhausted", func(bool) ([]llmtest.Step, mxWant) {
			return []llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultStatus, Status: 429, Code: "insufficient_quota",
					Message: "You exceeded your current quota, please check your plan and billing details. " + keyEcho}), stepReply()},
				mxWant{requests: 1, err: isQuota, echo: true}
		}},
		{"500-persistent", func(bool) ([]llmtest.Step, mxWant) {
			var steps []llmtest.Step
			for i := 0; i < mxRetry.MaxAttempts; i++ {
				steps = append(steps, stepFault(llmtest.Fault{Kind: llmtest.FaultStatus, Status: 500, Message: keyEcho}))
			}
			return append(steps, stepReply()), mxWant{requests: mxRetry.MaxAttempts, err: isAPIStatus(500), echo: true}
		}},
		{"503-transient", func(bool) ([]llmtest.Step, mxWant) {
			return []llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultStatus, Status: 503, Message: keyEcho}), stepReply()},
				mxWant{ok: true, requests: 2}
		}},
		{"529-overloaded", func(bool) ([]llmtest.Step, mxWant) {
			return []llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultStatus, Status: 529, Message: keyEcho}), stepReply()},
				mxWant{ok: true, requests: 2}
		}},
		{"reset-before-headers", func(bool) ([]llmtest.Step, mxWant) {
			return []llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultResetBeforeHeaders}), stepReply()},
				mxWant{ok: true, requests: 2}
		}},
		// Buffered: half the body, then a reset: a transport failure, retried.
		{"reset-mid-stream", midStream(llmtest.FaultResetMidStream, 3,
			mxWant{ok: true, requests: 2},
			[]llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultResetMidStream, Reply: mxReply()}), stepReply()},
			transport)},
		// Buffered calls have no idle watchdog (only the whole-call budget):
		// a stall shorter than the budget is waited out.
		{"stall-past-idle", midStream(llmtest.FaultStall, 2,
			mxWant{ok: true, requests: 1, minElapsed: 2 * mxIdle},
			[]llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultStall, Stall: 2 * mxIdle, Reply: mxReply()})},
			isSentinel(llm.ErrIdleTimeout))},
		// Buffered: a body that is not JSON is a decode error, final.
		{"malformed-sse-line", midStream(llmtest.FaultMalformedLine, 3,
			mxWant{requests: 1, err: decode},
			[]llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultMalformedLine, Reply: mxReply()}), stepReply()},
			decode)},
		{"truncated-json", midStream(llmtest.FaultTruncatedJSON, 3,
			mxWant{requests: 1, err: decode},
			[]llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultTruncatedJSON, Reply: mxReply()}), stepReply()},
			decode)},
		// Buffered: a body shorter than its Content-Length: a transport
		// failure, retried.
		{"no-terminator", midStream(llmtest.FaultPrematureClose, 3,
			mxWant{ok: true, requests: 2},
			[]llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultPrematureClose, Reply: mxReply()}), stepReply()},
			isSentinel(llm.ErrPrematureClose))},
		// Buffered: the fake sends the plain reply.
		{"oversize-line", midStream(llmtest.FaultOversizeLine, 3,
			mxWant{ok: true, requests: 1},
			[]llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultOversizeLine, Reply: mxReply()})},
			decode)},
		{"non-sse-200", func(stream bool) ([]llmtest.Step, mxWant) {
			return []llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultNonSSE200, Reply: mxReply()})},
				mxWant{ok: true, buffered: stream, requests: 1}
		}},
		{"slow-drip", func(bool) ([]llmtest.Step, mxWant) {
			// 5 deltas over 500ms: every gap is under the idle timeout.
			return []llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultSlowDrip, Stall: 500 * time.Millisecond, Reply: mxReply()})},
				mxWant{ok: true, requests: 1, minElapsed: 400 * time.Millisecond}
		}},
		// Buffered: a 200 whose body is the format's error object.
		{"in-stream-error", midStream(llmtest.FaultInStreamError, 3,
			mxWant{requests: mxRetry.MaxAttempts, err: isInStreamError, echo: true},
			[]llmtest.Step{
				stepFault(llmtest.Fault{Kind: llmtest.FaultInStreamError, Status: 500, Message: keyEcho}),
				stepFault(llmtest.Fault{Kind: llmtest.FaultInStreamError, Status: 500, Message: keyEcho}),
				stepFault(llmtest.Fault{Kind: llmtest.FaultInStreamError, Status: 500, Message: keyEcho}),
				stepReply(),
			},
			isInStreamError)},
		{"wrong-key-401", func(bool) ([]llmtest.Step, mxWant) {
			return []llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultStatus, Status: 401, Message: keyEcho}), stepReply()},
				mxWant{requests: 1, err: isAPIStatus(401), echo: true}
		}},
		{"unknown-model-404", func(bool) ([]llmtest.Step, mxWant) {
			return []llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultStatus, Status: 404, Message: "The model `m` does not exist or you do not have access to it. " + keyEcho}), stepReply()},
				mxWant{requests: 1, err: isAPIStatus(404), echo: true}
		}},
	}
}

// mxRecorder collects everything a cell produced, for the key scan.
type mxRecorder struct {
	mu      sync.Mutex
	logs    bytes.Buffer
	attempt []AttemptEvent
	learned []LearnEvent
}

func (r *mxRecorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.logs.Write(p)
}

func (r *mxRecorder) observe(ev AttemptEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempt = append(r.attempt, ev)
}

func (r *mxRecorder) learn(ev LearnEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.learned = append(r.learned, ev)
}

func (r *mxRecorder) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(r, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// texts is everything recorded, as strings to scan.
func (r *mxRecorder) texts() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := []string{r.logs.String()}
	for _, ev := range r.attempt {
		out = append(out, fmt.Sprintf("%+v", ev))
		if ev.Err != nil {
			out = append(out, ev.Err.Error())
		}
	}
	for _, ev := range r.learned {
		out = append(out, fmt.Sprintf("%+v", ev))
	}
	return out
}

// leaks returns a description of every text holding the key or its tail.
func leaks(key string, texts []string) []string {
	var out []string
	tail := key[len(key)-8:]
	for _, s := range texts {
		if strings.Contains(s, key) || strings.Contains(s, tail) {
			if len(s) > 300 {
				s = s[:300] + "..."
			}
			out = append(out, s)
		}
	}
	return out
}

// waitConnsClosed polls until the server has no open connection.
func waitConnsClosed(srv *llmtest.Server, d time.Duration) int {
	deadline := time.Now().Add(d)
	for srv.OpenConns() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	return srv.OpenConns()
}

// TestFaultMatrix runs every cell through a plain providers.Client.
func TestFaultMatrix(t *testing.T) {
	faults := mxFaults()
	planned := len(mxFormats) * 2 * len(faults)
	ran := 0
	start := time.Now()
	for _, f := range mxFormats {
		for _, stream := range []bool{false, true} {
			mode := "buffered"
			if stream {
				mode = "stream"
			}
			for _, fault := range faults {
				t.Run(f.name+"/"+mode+"/"+fault.name, func(t *testing.T) {
					runProviderCell(t, f, fault, stream)
					ran++ // not reached after a Skip or a Fatal
				})
			}
		}
	}
	t.Logf("fault matrix: %d cells (%d formats x 2 modes x %d faults), %d ran to the end, in %v",
		planned, len(mxFormats), len(faults), ran, time.Since(start).Round(time.Millisecond))
	if ran != planned {
		t.Fatalf("fault matrix: only %d of %d cells ran to the end (skipped or stopped)", ran, planned)
	}
}

func runProviderCell(t *testing.T, f mxFormat, fault mxFault, stream bool) {
	base := goleak.IgnoreCurrent()
	srv := llmtest.NewServer()
	defer srv.Close()
	steps, want := fault.cell(stream)
	srv.Push(steps...)
	var rec mxRecorder
	hc := NewHTTPClient()
	c, err := New(f.cfg(srv), WithHTTPClient(hc), WithRetryPolicy(mxRetry), WithTimeout(mxBudget), WithIdleTimeout(mxIdle),
		WithAttemptObserver(rec.observe), WithLearnObserver(rec.learn), WithLogger(rec.logger()))
	if err != nil {
		t.Fatal(err)
	}
	req := &llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("hello")}}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	begin := time.Now()
	var res *llm.ChatResult
	var evs []llm.Event
	if stream {
		s, serr := c.Stream(ctx, req)
		if serr != nil {
			t.Fatalf("Stream refused the request: %v", serr)
		}
		evs, err = collect(s)
		res, _ = s.Result()
	} else {
		res, err = c.Chat(ctx, req)
	}
	elapsed := time.Since(begin)

	checkCell(t, cellOutcome{res: res, err: err, evs: evs, elapsed: elapsed, stream: stream, want: want,
		requests: srv.Count(), attempts: len(rec.attempt)})
	for _, r := range srv.Requests() {
		if f.path != "" && r.Path != f.path {
			t.Errorf("request went to %s, want %s", r.Path, f.path)
		}
	}

	// The key never shows.
	texts := rec.texts()
	texts = append(texts, c.String(), fmt.Sprintf("%v %+v %#v", c.Config(), c.Config(), c.Config()))
	texts = append(texts, outcomeTexts(res, err, evs)...)
	if l := leaks(string(testKey), texts); len(l) > 0 {
		t.Errorf("the key leaked into %d outputs, e.g. %q", len(l), l[0])
	}

	// No connection left once the client drops its idle ones.
	c.CloseIdleConnections()
	if n := waitConnsClosed(srv, 3*time.Second); n != 0 {
		t.Errorf("%d connections still open at the server", n)
	}
	srv.Close()
	goleak.VerifyNone(t, base)
}

// outcomeTexts renders a call's result, error and events for the key scan.
func outcomeTexts(res *llm.ChatResult, err error, evs []llm.Event) []string {
	var out []string
	if err != nil {
		out = append(out, err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err))
	}
	if res != nil {
		out = append(out, fmt.Sprintf("%+v", *res), fmt.Sprintf("%+v", res.Meta))
	}
	for _, ev := range evs {
		out = append(out, fmt.Sprintf("%+v", ev))
		if ev.Usage != nil {
			out = append(out, fmt.Sprintf("%+v", *ev.Usage))
		}
	}
	return out
}

// cellOutcome is what one cell's call did.
type cellOutcome struct {
	res      *llm.ChatResult
	err      error
	evs      []llm.Event
	elapsed  time.Duration
	stream   bool
	want     mxWant
	requests int
	// attempts is the number of attempt events observed (-1: not checked).
	attempts int
}

// checkCell asserts a cell's outcome against its documented one. It is
// shared with nothing: runtime/faultmatrix_test.go has its own copy.
func checkCell(t *testing.T, o cellOutcome) {
	t.Helper()
	w := o.want
	if o.elapsed > mxBudget+mxSlack {
		t.Errorf("call took %v, budget %v", o.elapsed, mxBudget)
	}
	if o.elapsed < w.minElapsed {
		t.Errorf("call took %v, want at least %v", o.elapsed, w.minElapsed)
	}
	if o.requests != w.requests {
		t.Errorf("server saw %d requests, want %d", o.requests, w.requests)
	}
	if o.attempts >= 0 && o.attempts != o.requests {
		t.Errorf("attempt observer saw %d attempts for %d requests", o.attempts, o.requests)
	}
	if w.echo && (o.err == nil || !strings.Contains(o.err.Error(), "[REDACTED]")) {
		t.Errorf("the provider echoed the key, the error should show it redacted: %v", o.err)
	}
	got := textOf(o.evs)
	switch {
	case w.ok:
		if o.err != nil {
			t.Fatalf("want success, got %T %v", o.err, o.err)
		}
		if o.res == nil || o.res.Content != mxFull || o.res.FinishReason != llm.FinishStop {
			t.Fatalf("result %+v, want %q finished by stop", o.res, mxFull)
		}
		if o.stream && got != mxFull {
			t.Errorf("events carried %q, want %q once (no replay of a failed attempt)", got, mxFull)
		}
		if o.res.Meta.Buffered != w.buffered {
			t.Errorf("Meta.Buffered = %v, want %v", o.res.Meta.Buffered, w.buffered)
		}
		if o.res.Meta.Attempts != w.requests {
			t.Errorf("Meta.Attempts = %d for %d requests", o.res.Meta.Attempts, w.requests)
		}
	case w.partial != "":
		var se *llm.StreamError
		if !errors.As(o.err, &se) {
			t.Fatalf("want *llm.StreamError with the partial result, got %T %v", o.err, o.err)
		}
		if se.Partial == nil || se.Partial.Content != w.partial {
			t.Errorf("partial result %+v, want content %q", se.Partial, w.partial)
		}
		if got != w.partial {
			t.Errorf("events carried %q, want %q", got, w.partial)
		}
		if o.res != se.Partial {
			t.Errorf("Result() = %p, want the partial %p", o.res, se.Partial)
		}
		if msg := w.err(se.Err); msg != "" {
			t.Error(msg)
		}
	default:
		if o.err == nil {
			t.Fatalf("want an error, got success %+v", o.res)
		}
		var se *llm.StreamError
		if errors.As(o.err, &se) {
			t.Errorf("a failure before any event is not a StreamError: %v", o.err)
		}
		if len(o.evs) != 0 {
			t.Errorf("%d events reached the caller before the failure", len(o.evs))
		}
		if msg := w.err(o.err); msg != "" {
			t.Error(msg)
		}
	}
}
