package runtime

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
	"github.com/chorusrt/chorus/providers"
)

// The fault matrix (issue 8) through the runtime: the same formats, modes
// and faults as providers/faultmatrix_test.go, each call placed by a
// credential actor. Each cell runs on a fresh llmtest server and a fresh
// Runtime (one credential, its own HTTP client) and checks that the call
//
//   - ends within the caller's budget (plus scheduling slack) in a success
//     or the documented typed error;
//   - sent exactly the requests the rules allow: retries (the client's
//     ladder, or the actor's cooldown for 429/529) only before the first
//     event, none after it;
//   - kept the partial result after the first event;
//   - left no connection open at the server and no goroutine behind once
//     the runtime is closed (goleak, per cell);
//   - never shows the API key, nor its last 8 characters, in the error, the
//     log lines (the runtime's and Proto.Actor's, routed to slog), the
//     attempt or learn observers' events, the events or the stats.
//
// Differences from the plain client, by design: the runtime's clients hand
// 429 and 529 back at once (WithoutRateLimitRetry); the credential cools
// down for the retry-after (one second when none is given) and the call is
// placed again when it ends, within the caller's budget.

const (
	// mxBudget is each cell's budget: the caller's deadline and the
	// client's whole-call timeout.
	mxBudget = 2 * time.Second
	// mxIdle is the stream idle watchdog.
	mxIdle = 300 * time.Millisecond
	// mxSlack absorbs scheduling under -race on a loaded machine.
	mxSlack = 1500 * time.Millisecond
	// mxDefaultCooldown is the actor's cooldown after a 429/529 without a
	// retry hint.
	mxDefaultCooldown = time.Second
)

var mxRetry = providers.RetryPolicy{MaxAttempts: 3, BaseDelay: 10 * time.Millisecond, MaxDelay: 20 * time.Millisecond}

var mxDeltas = []string{"one ", "two ", "three ", "four ", "five"}

const mxFull = "one two three four five"

func mxReply() *llmtest.Reply { return &llmtest.Reply{Deltas: mxDeltas} }

// mxFormat is one column: a wire format and its credential.
type mxFormat struct {
	name string
	path string // every request's path ("" = not checked)
	cfg  func(srv *llmtest.Server) providers.Config
}

var mxFormats = []mxFormat{
	{"openai-chat", "/v1/chat/completions", func(s *llmtest.Server) providers.Config {
		return providers.Config{ID: "openai", Format: providers.FormatOpenAI, BaseURL: s.OpenAIBaseURL(), APIKey: key}
	}},
	{"openai-responses", "/v1/responses", func(s *llmtest.Server) providers.Config {
		return providers.Config{ID: "openai", Format: providers.FormatOpenAI, BaseURL: s.OpenAIBaseURL(), APIKey: key,
			Models: map[string]providers.ModelCaps{"m": {Responses: true}}}
	}},
	{"anthropic", "/v1/messages", func(s *llmtest.Server) providers.Config {
		return providers.Config{ID: "anthropic", Format: providers.FormatAnthropic, BaseURL: s.AnthropicBaseURL(), APIKey: key}
	}},
	{"gemini", "", func(s *llmtest.Server) providers.Config {
		return providers.Config{ID: "gemini", Format: providers.FormatGemini, BaseURL: s.GeminiBaseURL(), APIKey: key}
	}},
}

// mxWant is a cell's documented outcome.
type mxWant struct {
	ok       bool // the call succeeds with mxFull
	buffered bool // served from a non-SSE body (Meta.Buffered)
	requests int  // exact number of requests at the server
	// partial: a stream failed after events, keeping this text; "" means
	// no event reaches the caller and the error is not a StreamError.
	partial string
	// err says how the error (the cause, inside a StreamError) differs from
	// the documented one; "" when it matches.
	err func(error) string
	// echo: the provider echoed the key; the error shows it redacted.
	echo       bool
	minElapsed time.Duration
}

type mxFault struct {
	name string
	cell func(stream bool) ([]llmtest.Step, mxWant)
}

func stepFault(f llmtest.Fault) llmtest.Step { return llmtest.Step{Fault: &f} }
func stepReply() llmtest.Step                { return llmtest.Step{Reply: mxReply()} }

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

var keyEcho = "Incorrect API key provided: " + key + "."

// mxFaults is the list of faults, in its order, with the outcomes
// a call through the runtime documents.
func mxFaults() []mxFault {
	decode := isType[*llm.DecodeError]("*llm.DecodeError")
	transport := isType[*llm.TransportError]("*llm.TransportError")
	apiErr := isType[*llm.APIError]("*llm.APIError")
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
		// The actor cools the credential for the retry-after, then the call
		// is placed again.
		{"429-retry-after", func(bool) ([]llmtest.Step, mxWant) {
			return []llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultStatus, Status: 429, RetryAfter: 150 * time.Millisecond, Message: keyEcho}), stepReply()},
				mxWant{ok: true, requests: 2, minElapsed: 140 * time.Millisecond}
		}},
		{"429-quota-exhausted", func(bool) ([]llmtest.Step, mxWant) {
			return []llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultStatus, Status: 429, Code: "insufficient_quota",
					Message: "You exceeded your current quota, please check your plan and billing details. " + keyEcho}), stepReply()},
				mxWant{requests: 1, err: isQuota, echo: true}
		}},
		// The client's ladder spends its attempts; the runtime has no other
		// target to fall back to.
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
		// 529 without a hint: the actor's default cooldown, then success.
		{"529-overloaded", func(bool) ([]llmtest.Step, mxWant) {
			return []llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultStatus, Status: 529, Message: keyEcho}), stepReply()},
				mxWant{ok: true, requests: 2, minElapsed: mxDefaultCooldown - 50*time.Millisecond}
		}},
		{"reset-before-headers", func(bool) ([]llmtest.Step, mxWant) {
			return []llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultResetBeforeHeaders}), stepReply()},
				mxWant{ok: true, requests: 2}
		}},
		{"reset-mid-stream", midStream(llmtest.FaultResetMidStream, 3,
			mxWant{ok: true, requests: 2},
			[]llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultResetMidStream, Reply: mxReply()}), stepReply()},
			transport)},
		{"stall-past-idle", midStream(llmtest.FaultStall, 2,
			mxWant{ok: true, requests: 1, minElapsed: 2 * mxIdle},
			[]llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultStall, Stall: 2 * mxIdle, Reply: mxReply()})},
			isSentinel(llm.ErrIdleTimeout))},
		{"malformed-sse-line", midStream(llmtest.FaultMalformedLine, 3,
			mxWant{requests: 1, err: decode},
			[]llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultMalformedLine, Reply: mxReply()}), stepReply()},
			decode)},
		{"truncated-json", midStream(llmtest.FaultTruncatedJSON, 3,
			mxWant{requests: 1, err: decode},
			[]llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultTruncatedJSON, Reply: mxReply()}), stepReply()},
			decode)},
		{"no-terminator", midStream(llmtest.FaultPrematureClose, 3,
			mxWant{ok: true, requests: 2},
			[]llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultPrematureClose, Reply: mxReply()}), stepReply()},
			isSentinel(llm.ErrPrematureClose))},
		{"oversize-line", midStream(llmtest.FaultOversizeLine, 3,
			mxWant{ok: true, requests: 1},
			[]llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultOversizeLine, Reply: mxReply()})},
			decode)},
		{"non-sse-200", func(stream bool) ([]llmtest.Step, mxWant) {
			return []llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultNonSSE200, Reply: mxReply()})},
				mxWant{ok: true, buffered: stream, requests: 1}
		}},
		{"slow-drip", func(bool) ([]llmtest.Step, mxWant) {
			return []llmtest.Step{stepFault(llmtest.Fault{Kind: llmtest.FaultSlowDrip, Stall: 500 * time.Millisecond, Reply: mxReply()})},
				mxWant{ok: true, requests: 1, minElapsed: 400 * time.Millisecond}
		}},
		{"in-stream-error", midStream(llmtest.FaultInStreamError, 3,
			mxWant{requests: mxRetry.MaxAttempts, err: apiErr, echo: true},
			[]llmtest.Step{
				stepFault(llmtest.Fault{Kind: llmtest.FaultInStreamError, Status: 500, Message: keyEcho}),
				stepFault(llmtest.Fault{Kind: llmtest.FaultInStreamError, Status: 500, Message: keyEcho}),
				stepFault(llmtest.Fault{Kind: llmtest.FaultInStreamError, Status: 500, Message: keyEcho}),
				stepReply(),
			},
			apiErr)},
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

// mxRecorder collects the cell's log lines and observer events.
type mxRecorder struct {
	mu      sync.Mutex
	logs    bytes.Buffer
	attempt []providers.AttemptEvent
	learned []providers.LearnEvent
}

func (r *mxRecorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.logs.Write(p)
}

func (r *mxRecorder) observe(ev providers.AttemptEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempt = append(r.attempt, ev)
}

func (r *mxRecorder) learn(ev providers.LearnEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.learned = append(r.learned, ev)
}

func (r *mxRecorder) attempts() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.attempt)
}

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

func leaks(k string, texts []string) []string {
	var out []string
	tail := k[len(k)-8:]
	for _, s := range texts {
		if strings.Contains(s, k) || strings.Contains(s, tail) {
			if len(s) > 300 {
				s = s[:300] + "..."
			}
			out = append(out, s)
		}
	}
	return out
}

// TestFaultMatrix runs every cell through a Runtime.
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
					runRuntimeCell(t, f, fault, stream)
					ran++ // not reached after a Skip or a Fatal
				})
			}
		}
	}
	t.Logf("fault matrix: %d cells (%d formats x 2 modes x %d faults) through the runtime, %d ran to the end, in %v",
		planned, len(mxFormats), len(faults), ran, time.Since(start).Round(time.Millisecond))
	if ran != planned {
		t.Fatalf("fault matrix: only %d of %d cells ran to the end (skipped or stopped)", ran, planned)
	}
}

func runRuntimeCell(t *testing.T, f mxFormat, fault mxFault, stream bool) {
	base := goleak.IgnoreCurrent()
	srv := llmtest.NewServer()
	defer srv.Close()
	steps, want := fault.cell(stream)
	srv.Push(steps...)
	var rec mxRecorder
	logger := slog.New(slog.NewJSONHandler(&rec, &slog.HandlerOptions{Level: slog.LevelDebug}))
	hc := providers.NewHTTPClient()
	cfg := f.cfg(srv)
	rt, err := New(WithProvider(cfg), WithLogger(logger), WithClientOptions(
		providers.WithHTTPClient(hc), providers.WithRetryPolicy(mxRetry), providers.WithTimeout(mxBudget),
		providers.WithIdleTimeout(mxIdle), providers.WithAttemptObserver(rec.observe), providers.WithLearnObserver(rec.learn)))
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			rt.Close(context.Background())
		}
	}()
	req := &llm.ChatRequest{Model: cfg.ID + "/m", Messages: []llm.Message{llm.UserText("hello")}}

	ctx, cancel := context.WithTimeout(context.Background(), mxBudget)
	defer cancel()
	begin := time.Now()
	var res *llm.ChatResult
	var evs []llm.Event
	if stream {
		s, serr := rt.Stream(ctx, req)
		if serr != nil {
			t.Fatalf("Stream refused the request: %v", serr)
		}
		for ev, e := range s.All() {
			if e != nil {
				err = e
				break
			}
			evs = append(evs, ev)
		}
		res, _ = s.Result()
	} else {
		res, err = rt.Chat(ctx, req)
	}
	elapsed := time.Since(begin)

	checkCell(t, cellOutcome{res: res, err: err, evs: evs, elapsed: elapsed, stream: stream, want: want,
		requests: srv.Count(), attempts: rec.attempts()})
	for _, r := range srv.Requests() {
		if f.path != "" && r.Path != f.path {
			t.Errorf("request went to %s, want %s", r.Path, f.path)
		}
	}
	// The actor's books agree with the server: one admitted request per
	// placement, every HTTP attempt counted.
	st := rt.Stats()
	if len(st) != 1 || st[0].Attempts != int64(want.requests) {
		t.Errorf("stats %+v, want %d attempts", st, want.requests)
	}

	// Printing the runtime itself, as a program would log it.
	slog.New(slog.NewTextHandler(&rec, nil)).Info("runtime", "rt", rt, "err", err)
	logger.Info("runtime", "rt", rt, "err", err)
	texts := rec.texts()
	texts = append(texts, fmt.Sprintf("%+v", st), fmt.Sprintf("%v %+v %#v", cfg, cfg, cfg), fmt.Sprintf("%v|%+v|%#v", rt, rt, rt))
	texts = append(texts, outcomeTexts(res, err, evs)...)
	if l := leaks(key, texts); len(l) > 0 {
		t.Errorf("the key leaked into %d outputs, e.g. %q", len(l), l[0])
	}

	if cerr := rt.Close(context.Background()); cerr != nil {
		t.Errorf("Close: %v", cerr)
	}
	closed = true
	hc.CloseIdleConnections()
	deadline := time.Now().Add(3 * time.Second)
	for srv.OpenConns() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := srv.OpenConns(); n != 0 {
		t.Errorf("%d connections still open at the server after Close", n)
	}
	srv.Close()
	goleak.VerifyNone(t, base)
}

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

type cellOutcome struct {
	res      *llm.ChatResult
	err      error
	evs      []llm.Event
	elapsed  time.Duration
	stream   bool
	want     mxWant
	requests int
	attempts int
}

func textOf(evs []llm.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.Type == llm.EventText {
			b.WriteString(ev.Text)
		}
	}
	return b.String()
}

// checkCell asserts a cell's outcome against its documented one.
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
	if o.attempts != o.requests {
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
